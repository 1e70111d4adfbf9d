//! Loading what a config names: hook, tool and store components (their settings checked
//! against what they declare), upstream servers; and why a runtime could not start.

use crate::abi::ToolDescriptor;
use crate::abi::v0_2::{describe_hook, described::DescribedHookPre};
use crate::chain::HookLayer;
use crate::component::{ComponentLoader, ComponentRef, LoadError, SettingType};
use crate::config::{self, ComponentPlan, ConfigError, HookPlan, UpstreamConfig};
use crate::failure::Failure;
use crate::mounts::{MountError, MountTable};
use crate::sandbox::Sandbox;
use crate::sessions::SessionError;
use crate::stores::StoreComponent;
use crate::tools::Tool;
use crate::tools::guest::GuestTool;
use crate::tools::upstream;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("mounts: {0}")]
    Mounts(#[from] MountError),
    #[error("cannot make the WebAssembly engine")]
    Engine(#[source] wasmtime::Error),
    #[error("{owner}: {source}")]
    Load { owner: String, source: LoadError },
    #[error("tools.{tool}: `describe` failed: {source}")]
    Describe { tool: String, source: Failure },
    #[error("hooks.{hook}: `describe` failed: {source}")]
    DescribeHook { hook: String, source: Failure },
    #[error("{0}")]
    Settings(String),
    #[error("network: {0}")]
    Network(String),
    #[error("tools.{tool}: the name is taken by another tool")]
    DuplicateTool { tool: String },
    #[error(
        "{second}: serves a tool named {name:?}, as {first} does (give one a `prefix`, or leave it out for `NAME__`)"
    )]
    ToolClash {
        name: String,
        first: String,
        second: String,
    },
    #[error("{0}")]
    Sessions(#[from] SessionError),
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Registry(#[from] crate::registry::RegistryError),
}

/// Refuses the settings a 0.2.0 hook that describes itself does not declare, or of
/// another type than it declares, naming the line of `source` (the config) that gives it.
/// What it declares is asked once per component and remembered in the compiled-code
/// cache: an instance made to ask costs a one-shot start about a millisecond.
pub(super) async fn check_declared_settings(
    source: &str,
    hook: &ComponentPlan,
    describe: &DescribedHookPre<crate::sandbox::StoreState>,
    loader: &ComponentLoader,
    sandbox: &Sandbox,
) -> Result<(), StartError> {
    let declared = match loader.remembered(&hook.component, "settings") {
        Some(declared) => declared,
        None => {
            let description = describe_hook(describe, sandbox, &hook.settings, &hook.limits)
                .await
                .map_err(|source| StartError::DescribeHook {
                    hook: hook.name.clone(),
                    source,
                })?;
            let declared: Vec<(String, SettingType)> = description
                .settings
                .into_iter()
                .map(|s| (s.name.clone(), s.setting_type()))
                .collect();
            loader.remember(&hook.component, "settings", &declared);
            declared
        }
    };
    let component = hook.component.to_string();
    for (key, written) in &hook.setting_values {
        let Some(problem) = config::setting_problem(&component, &declared, key, &written.value)
        else {
            continue;
        };
        let what = format!("hooks.{}.settings{problem}", hook.name);
        return Err(match written.line {
            Some(line) => StartError::Config(ConfigError::Invalid {
                file: source.to_string(),
                line,
                what,
            }),
            None => StartError::Settings(what),
        });
    }
    Ok(())
}

/// Pulls the registry components (`oci://…`) of `plan`'s tools, hooks and stores into the
/// cache of `data` (see [`crate::registry::fetch`]) and gives `loader` their files.
pub(super) async fn pull_components(
    plan: &crate::config::Plan,
    loader: &ComponentLoader,
    data: &std::path::Path,
) -> Result<(), StartError> {
    let stores = plan
        .mounts
        .iter()
        .filter_map(|(_, spec)| spec.persistent.as_ref()?.store.as_deref())
        .map(ComponentRef::parse);
    let components: std::collections::BTreeSet<String> = plan
        .tools
        .iter()
        .map(|t| t.component.clone())
        .chain(plan.hooks.iter().map(|h| h.component.component.clone()))
        .chain(stores)
        .filter_map(|c| match c {
            ComponentRef::Oci(reference) => Some(reference),
            _ => None,
        })
        .collect();
    // Every one pulled and verified before the loader takes any: a reload refused here
    // (a moved tag, a missing signature) leaves the components in effect as they were.
    let mut pulled = Vec::with_capacity(components.len());
    for written in components {
        let reference = crate::registry::OciRef::parse(&written)?;
        let signers = crate::registry::read_signers(&plan.signers_of(&written))?;
        let fetched = crate::registry::fetch(&reference, data, &plan.registries, &signers).await?;
        pulled.push((written, fetched));
    }
    for (written, fetched) in pulled {
        loader.pulled(&written, fetched);
    }
    Ok(())
}

/// The tool components of `specs`, loaded and asked to describe themselves, with the plan
/// each was loaded from; one whose plan is among `kept`'s, and whose file is unchanged, is
/// taken from there.
pub(super) async fn load_tools(
    specs: &[ComponentPlan],
    kept: &[(ComponentPlan, Arc<dyn Tool>)],
    loader: &ComponentLoader,
    sandbox: &Arc<Sandbox>,
) -> Result<Vec<(ComponentPlan, Arc<dyn Tool>)>, StartError> {
    let mut tools = Vec::with_capacity(specs.len());
    for spec in specs {
        if let Some(same) = kept.iter().find(|(plan, _)| plan == spec)
            && loader.unchanged(&spec.component)
        {
            tools.push(same.clone());
            continue;
        }
        let pre = loader
            .tool(&spec.component, spec.allow_unknown_imports)
            .map_err(|source| StartError::Load {
                owner: format!("tools.{}", spec.name),
                source,
            })?;
        // What a tool says of itself depends on its bytes and its settings: remembered
        // under both, so a start makes no instance to ask again.
        let settings = serde_json::to_vec(&spec.settings).expect("settings serialize");
        let what = format!("tool-{}", crate::ids::hex(&Sha256::digest(&settings)));
        let descriptor = match loader.remembered::<(String, String, String)>(&spec.component, &what)
        {
            Some((name, description, input_schema)) => ToolDescriptor {
                name,
                description,
                input_schema,
            },
            None => {
                let described = GuestTool::describe(&pre, sandbox, &spec.settings, &spec.limits)
                    .await
                    .map_err(|source| StartError::Describe {
                        tool: spec.name.clone(),
                        source,
                    })?;
                let said = (
                    &described.name,
                    &described.description,
                    &described.input_schema,
                );
                loader.remember(&spec.component, &what, &said);
                described
            }
        };
        let tool = GuestTool::new(pre, spec, descriptor, sandbox.clone());
        tools.push((spec.clone(), Arc::new(tool) as Arc<dyn Tool>));
    }
    Ok(tools)
}

/// The store components of `mounts`' persistent directories, by virtual path.
pub(super) fn compile_stores(
    mounts: &MountTable,
    loader: &ComponentLoader,
    sandbox: &Arc<Sandbox>,
) -> Result<BTreeMap<String, Arc<StoreComponent>>, StartError> {
    let mut stores = BTreeMap::new();
    for (path, spec) in mounts.iter() {
        let Some(persistent) = spec.persistent.as_ref() else {
            continue;
        };
        let Some(store) = persistent.store.as_deref() else {
            continue;
        };
        let owner = || format!("persistent.{path:?}");
        // Read when the config was validated: an entry refused here was not.
        let network = persistent
            .network
            .as_ref()
            .map(|grant| crate::network::Allow::parse(&grant.allow).map(Arc::new))
            .transpose()
            .map_err(|why| StartError::Network(format!("{}.network.allow: {why}", owner())))?;
        let component = ComponentRef::parse(store);
        let pre = loader
            .store(&component)
            .map_err(|source| StartError::Load {
                owner: format!("{}.store", owner()),
                source,
            })?;
        let store = StoreComponent::new(pre, component, sandbox.clone(), persistent, network);
        stores.insert(path.to_string(), Arc::new(store));
    }
    Ok(stores)
}

/// What the upstream servers tell every MCP client: the tools changed (an upstream came
/// back with others, or a reload), and their resources and prompts changed.
pub struct Signals {
    /// Ticks when the tools served change.
    pub(super) tools_changed: tokio::sync::watch::Sender<u64>,
    /// Resource updates and list changes, as they come.
    pub(super) notices: tokio::sync::broadcast::Sender<upstream::Notice>,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            tools_changed: tokio::sync::watch::channel(0).0,
            notices: tokio::sync::broadcast::channel(crate::limits::UPSTREAM_NOTICE_QUEUE).0,
        }
    }
}

/// An upstream server as a config lists it, kept running (or tried again until it starts;
/// meanwhile its tools stay unlisted and the rest of the host serves on).
pub(super) type UpstreamEntry = (String, UpstreamConfig, Arc<upstream::Running>);

/// The upstream servers of `specs`, started (or connected to); one running in `kept` with
/// the same settings is kept running as it is (one still being tried, too). `tools_changed`
/// ticks when any upstream's tools change.
pub(super) async fn connect_upstreams(
    specs: &[(String, UpstreamConfig)],
    kept: &[UpstreamEntry],
    signals: &Signals,
) -> Vec<UpstreamEntry> {
    let mut upstreams = Vec::new();
    for (name, spec) in specs {
        let running = kept
            .iter()
            .find(|(kept_name, kept_spec, _)| kept_name == name && kept_spec == spec)
            .map(|(_, _, running)| running.clone());
        let running = match running {
            Some(running) => running,
            None => {
                let server = upstream::keep(name, spec, &signals.notices).await;
                // One signal for all upstreams: any change of their tools (one that was
                // unavailable coming up included).
                let mut changes = server.changes();
                let all = signals.tools_changed.clone();
                tokio::spawn(async move {
                    while changes.changed().await.is_ok() {
                        all.send_modify(|n| *n += 1);
                    }
                });
                Arc::new(server)
            }
        };
        upstreams.push((name.clone(), spec.clone(), running));
    }
    upstreams
}

/// The hook components of `hooks`, loaded, and the settings of those that describe
/// themselves checked against their description: the chain's layers, outermost first,
/// with the plan each was loaded from. One whose plan is among `kept`'s, and whose file is
/// unchanged, is taken from there, with the instances it keeps.
pub(super) async fn load_hooks(
    source: &str,
    hooks: Vec<HookPlan>,
    kept: &[(HookPlan, Arc<HookLayer>)],
    loader: &ComponentLoader,
    sandbox: &Arc<Sandbox>,
) -> Result<Vec<(HookPlan, Arc<HookLayer>)>, StartError> {
    let mut layers = Vec::with_capacity(hooks.len());
    for hook in hooks {
        if let Some(same) = kept.iter().find(|(plan, _)| *plan == hook)
            && loader.unchanged(&hook.component.component)
        {
            layers.push(same.clone());
            continue;
        }
        let plan = hook.clone();
        let spec = &hook.component;
        let pre = loader
            .hook(&spec.component, spec.allow_unknown_imports)
            .map_err(|source| StartError::Load {
                owner: format!("hooks.{}", spec.name),
                source,
            })?;
        // A hook given no settings has none to refuse: no instance is made to ask.
        if let Some(describe) = pre.describer()
            && !spec.setting_values.is_empty()
        {
            check_declared_settings(source, spec, describe, loader, sandbox).await?;
        }
        let spec = hook.component;
        let layer = Arc::new(HookLayer {
            name: spec.name,
            component: spec.component,
            pre,
            grants: spec.grants,
            settings: spec.settings,
            limits: spec.limits,
            network: spec.network,
            on_failure: hook.on_failure,
            tools: hook.tools,
            instance: hook.instance,
            kept: Default::default(),
        });
        layers.push((plan, layer));
    }
    Ok(layers)
}
