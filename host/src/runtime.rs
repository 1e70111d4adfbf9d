//! The runtime: a config turned into loaded components, tools and a hook chain, and the
//! entry point for tool calls.
//!
//! What a config makes of components, tools, chains and upstream servers is one value
//! ([`Served`]) that a reload ([`Runtime::reload`]) replaces whole while the server runs:
//! a call keeps the one it began with to its end, so calls in flight finish on the old
//! config and new calls run on the new one. A reload keeps whatever the new config leaves
//! unchanged — a hook's kept instances, an upstream's process, the sandboxes of `bash` —
//! and what the old config had alone is let go when its last call ends (an upstream no
//! longer listed is stopped then). The sessions, the tracer and the metrics outlive
//! reloads; what only a restart changes is [`Fixed`].

use crate::abi::v0_2::{describe_hook, described::DescribedHookPre};
use crate::abi::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::chain::{self, HookChain, HookLayer};
use crate::component::{ComponentLoader, ComponentRef, EngineOptions, LoadError, SettingType};
use crate::config::{
    self, BashPlan, ComponentPlan, ConfigError, HookPlan, Plan, UpstreamConfig, UpstreamScope,
};
use crate::failure::Failure;
use crate::ids::TenantId;
use crate::metrics::Scraped;
use crate::mounts::CommitAt;
use crate::mounts::{MountError, MountTable};
use crate::sandbox::{self, Sandbox};
use crate::secret::{Secret, TokenDigest};
use crate::sessions::{
    MountDirs, QuotaCall, RateRefusal, Session, SessionError, SessionHolder, Sessions,
    StoreBackend, Tenant, Tenants,
};
use crate::stores::StoreComponent;
use crate::tools::bash::{BashTool, Readiness, Unavailable};
use crate::tools::guest::GuestTool;
use crate::tools::upstream;
use crate::tools::{Callee, Extras, Tool, ToolRegistry};
use crate::trace::{CallTrace, TraceSettings, Tracer};
use arc_swap::ArcSwap;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use tracing::Instrument;

/// The compiled-code cache's directory, in the data directory.
pub const CACHE_DIR: &str = "cache";

/// The call id prefix and tool name under which a commit outside a call is traced.
pub const COMMIT_CALL: &str = "hookhost/commit";

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
}

/// Refuses the settings a 0.2.0 hook that describes itself does not declare, or of
/// another type than it declares, naming the line of `source` (the config) that gives it.
/// What it declares is asked once per component and remembered in the compiled-code
/// cache: an instance made to ask costs a one-shot start about a millisecond.
async fn check_declared_settings(
    source: &str,
    hook: &ComponentPlan,
    describe: &DescribedHookPre<crate::sandbox::StoreState>,
    loader: &ComponentLoader,
    sandbox: &Sandbox,
) -> Result<(), StartError> {
    let declared = match loader.remembered_settings(&hook.component) {
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
            loader.remember_settings(&hook.component, &declared);
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

/// The tool components of `specs`, loaded and asked to describe themselves, with the plan
/// each was loaded from; one whose plan is among `kept`'s, and whose file is unchanged, is
/// taken from there.
async fn load_tools(
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
        let tool = GuestTool::new(
            pre,
            &spec.name,
            sandbox.clone(),
            spec.grants.clone(),
            spec.settings.clone(),
            spec.limits,
        )
        .await
        .map_err(|source| StartError::Describe {
            tool: spec.name.clone(),
            source,
        })?;
        tools.push((spec.clone(), Arc::new(tool) as Arc<dyn Tool>));
    }
    Ok(tools)
}

/// The store components of `mounts`' persistent directories, by virtual path.
fn load_stores(
    mounts: &MountTable,
    loader: &ComponentLoader,
    sandbox: &Arc<Sandbox>,
) -> Result<BTreeMap<String, Arc<StoreComponent>>, StartError> {
    let mut stores = BTreeMap::new();
    for (path, spec) in mounts.iter() {
        let Some(store) = spec.persistent.as_ref().and_then(|p| p.store.as_deref()) else {
            continue;
        };
        let component = ComponentRef::parse(store);
        let pre = loader
            .store(&component)
            .map_err(|source| StartError::Load {
                owner: format!("persistent.{path:?}.store"),
                source,
            })?;
        let store = StoreComponent::new(pre, component, sandbox.clone());
        stores.insert(path.to_string(), Arc::new(store));
    }
    Ok(stores)
}

/// What the upstream servers tell every MCP client: the tools changed (an upstream came
/// back with others, or a reload), and their resources and prompts changed.
pub struct Signals {
    /// Ticks when the tools served change.
    tools_changed: tokio::sync::watch::Sender<u64>,
    /// Resource updates and list changes, as they come.
    notices: tokio::sync::broadcast::Sender<upstream::Notice>,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            tools_changed: tokio::sync::watch::channel(0).0,
            notices: tokio::sync::broadcast::channel(crate::limits::UPSTREAM_NOTICE_QUEUE).0,
        }
    }
}

/// An upstream server as a config lists it: `None` when it did not start (its tools stay
/// unlisted; the rest of the host serves on).
type UpstreamEntry = (String, UpstreamConfig, Option<Arc<upstream::Running>>);

/// The upstream servers of `specs`, started (or connected to); one running in `kept` with
/// the same settings is kept running as it is. `tools_changed` ticks when any upstream's
/// tools change.
async fn connect_upstreams(
    specs: &[(String, UpstreamConfig)],
    kept: &[UpstreamEntry],
    signals: &Signals,
) -> Vec<UpstreamEntry> {
    let mut upstreams = Vec::new();
    for (name, spec) in specs {
        let running = kept.iter().find_map(|(kept_name, kept_spec, running)| {
            running
                .as_ref()
                .filter(|_| kept_name == name && kept_spec == spec)
        });
        if let Some(running) = running {
            upstreams.push((name.clone(), spec.clone(), Some(running.clone())));
            continue;
        }
        match upstream::connect(name, spec, &signals.notices).await {
            Ok(server) => {
                // One signal for all upstreams: any change of their tools.
                let mut changes = server.changes();
                let all = signals.tools_changed.clone();
                tokio::spawn(async move {
                    while changes.changed().await.is_ok() {
                        all.send_modify(|n| *n += 1);
                    }
                });
                upstreams.push((name.clone(), spec.clone(), Some(Arc::new(server))));
            }
            // Its tools stay unlisted; the rest of the host serves on.
            Err(e) => {
                tracing::error!(error = %e, "upstream unavailable");
                upstreams.push((name.clone(), spec.clone(), None));
            }
        }
    }
    upstreams
}

/// The hook components of `hooks`, loaded, and the settings of those that describe
/// themselves checked against their description: the chain's layers, outermost first,
/// with the plan each was loaded from. One whose plan is among `kept`'s, and whose file is
/// unchanged, is taken from there, with the instances it keeps.
async fn load_hooks(
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
            on_failure: hook.on_failure,
            tools: hook.tools,
            instance: hook.instance,
            kept: Default::default(),
        });
        layers.push((plan, layer));
    }
    Ok(layers)
}

/// Why a call was not made. (A call that was made and failed is a [`ToolResult`] with
/// `is_error`.)
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool {name:?} (tools: {known})")]
    UnknownTool { name: String, known: String },
    #[error(
        "unknown tool {name:?}: {file} defines no tools (no [tools.NAME], `[bash] enabled = true` or [upstreams.NAME]); `hookhost config show` prints the built-in config to start from"
    )]
    NoTools { name: String, file: String },
    #[error("tool {tool:?}: {why}")]
    BadArguments { tool: String, why: String },
    #[error(transparent)]
    RateLimited(#[from] RateRefusal),
    /// Its session's tenant is no longer declared (a reload removed it).
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// The parts of a config only a restart puts in effect: the sessions' mounts and store,
/// and how calls are traced. A reload that changes one is refused (see [`Fixed::changed_by`]).
#[derive(Debug, Clone, PartialEq)]
struct Fixed {
    mounts: MountTable,
    session_store: Option<Secret>,
    trace: TraceSettings,
    otlp_endpoint: Option<String>,
}

impl Fixed {
    fn of(plan: &Plan) -> Fixed {
        Fixed {
            mounts: plan.mounts.clone(),
            session_store: plan.session_store.clone(),
            trace: plan.trace.clone(),
            otlp_endpoint: plan.otlp_endpoint.clone(),
        }
    }

    /// The tables of `plan` that differ from these: each needs a restart.
    fn changed_by(&self, plan: &Plan) -> Vec<&'static str> {
        let new = Fixed::of(plan);
        [
            ("[mounts]", self.mounts != new.mounts),
            ("session_store", self.session_store != new.session_store),
            ("[trace]", self.trace != new.trace),
            ("[telemetry]", self.otlp_endpoint != new.otlp_endpoint),
        ]
        .into_iter()
        .filter_map(|(table, changed)| changed.then_some(table))
        .collect()
    }
}

/// What one config makes: its engine, components, tools, chains and upstream servers,
/// each with the plan it was made from, so that a reload can keep what did not change.
#[derive(Clone)]
struct Served {
    engine: EngineOptions,
    loader: Arc<ComponentLoader>,
    sandbox: Arc<Sandbox>,
    /// The layers, outermost first.
    hooks: Vec<(HookPlan, Arc<HookLayer>)>,
    /// The chain of tenants that declare none of their own.
    chain: Arc<HookChain>,
    /// The chains of tenants that declare their own (`[tenants.ID] hooks`).
    tenant_chains: BTreeMap<TenantId, Arc<HookChain>>,
    /// The configured tool components.
    guest_tools: Vec<(ComponentPlan, Arc<dyn Tool>)>,
    /// The `bash` tool, when enabled.
    bash: Option<(BashPlan, Arc<BashTool>)>,
    /// Every tool but the upstream servers': the components, `bash` and the embedder's.
    tools: ToolRegistry,
    /// Upstream MCP servers, by name, with their tools' state.
    upstreams: Vec<UpstreamEntry>,
    /// The upstream servers with an instance per tenant or per session.
    pools: Vec<Arc<upstream::Pool>>,
    /// The store components of persistent directories, by virtual path.
    stores: BTreeMap<String, Arc<StoreComponent>>,
    /// The file the config was read from.
    config_file: String,
    /// The admin page's token (see [`Runtime::admin_token`]).
    admin_token: Option<TokenDigest>,
}

impl Served {
    /// Makes what `plan` describes for `tenants` (whose chains it builds), with the
    /// embedder's tools beside its own. What `kept` (the config in effect, on a reload)
    /// has with the same settings is taken from it: a component is kept only with the same
    /// engine. Returns it with the session holders it made anew, to register.
    async fn build(
        plan: Plan,
        tenants: &Tenants,
        dirs: &Arc<MountDirs>,
        embedded: &[Arc<dyn Tool>],
        kept: Option<&Served>,
        signals: &Signals,
    ) -> Result<(Served, Vec<Weak<dyn SessionHolder>>), StartError> {
        let engine = EngineOptions {
            fuel: plan.fuel,
            pool_instances: plan.engine.pooling.then_some(plan.engine.pool_instances),
            max_memory_bytes: plan.max_memory_bytes,
            keep_resident_bytes: plan.engine.keep_resident_bytes,
            cache_dir: plan.engine.cache.then(|| dirs.data_root().join(CACHE_DIR)),
        };
        let same_engine = kept.filter(|k| k.engine == engine);
        let (loader, sandbox) = match same_engine {
            Some(k) => (k.loader.clone(), k.sandbox.clone()),
            None => {
                let loader = ComponentLoader::new(&engine).map_err(StartError::Engine)?;
                let sandbox = Sandbox::new(loader.engine().clone(), dirs.clone(), plan.fuel);
                (Arc::new(loader), Arc::new(sandbox))
            }
        };
        let kept_tools = same_engine.map_or(&[][..], |k| &k.guest_tools);
        let guest_tools = load_tools(&plan.tools, kept_tools, &loader, &sandbox).await?;
        let bash = plan.bash.map(|wanted| {
            let same = same_engine
                .and_then(|k| k.bash.as_ref())
                .filter(|(plan, _)| *plan == wanted);
            match same {
                Some((_, bash)) => (wanted, bash.clone()),
                None => {
                    let bash = Arc::new(BashTool::new(sandbox.clone(), &wanted));
                    (wanted, bash)
                }
            }
        });
        let kept_hooks = same_engine.map_or(&[][..], |k| &k.hooks);
        let hooks = load_hooks(&plan.source, plan.hooks, kept_hooks, &loader, &sandbox).await?;

        let mut tools = ToolRegistry::default();
        let every_tool = guest_tools
            .iter()
            .map(|(_, tool)| tool.clone())
            .chain(bash.iter().map(|(_, bash)| bash.clone() as Arc<dyn Tool>))
            .chain(embedded.iter().cloned());
        for tool in every_tool {
            let name = tool.descriptor().name.clone();
            if !tools.insert(tool) {
                return Err(StartError::DuplicateTool { tool: name });
            }
        }
        let layers: Vec<Arc<HookLayer>> = hooks.iter().map(|(_, l)| l.clone()).collect();
        let tenant_chains = tenants
            .iter()
            .filter_map(|(id, tenant)| {
                let picked = tenant
                    .hooks
                    .as_ref()?
                    .iter()
                    .filter_map(|n| layers.iter().find(|l| &l.name == n).cloned())
                    .collect();
                Some((
                    id.clone(),
                    Arc::new(HookChain::new(picked, sandbox.clone())),
                ))
            })
            .collect();

        let (shared, scoped): (Vec<_>, Vec<_>) = plan
            .upstreams
            .iter()
            .cloned()
            .partition(|(_, spec)| spec.scope == UpstreamScope::Shared);
        let pools = scoped
            .iter()
            .map(|(name, spec)| {
                kept.and_then(|k| {
                    k.pools
                        .iter()
                        .find(|p| p.name() == name && p.spec() == spec)
                        .cloned()
                })
                .unwrap_or_else(|| {
                    Arc::new(upstream::Pool::new(
                        name,
                        spec,
                        dirs.data_root().to_path_buf(),
                        signals.notices.clone(),
                    ))
                })
            })
            .collect();
        let upstreams =
            connect_upstreams(&shared, kept.map_or(&[][..], |k| &k.upstreams), signals).await;
        let stores = load_stores(&plan.mounts, &loader, &sandbox)?;
        let served = Served {
            stores,
            engine,
            chain: Arc::new(HookChain::new(layers, sandbox.clone())),
            loader,
            sandbox,
            hooks,
            tenant_chains,
            guest_tools,
            bash,
            tools,
            upstreams,
            pools,
            config_file: plan.source,
            admin_token: plan.admin_token,
        };
        if let Some((name, first, second)) = served.clashes().into_iter().next() {
            return Err(StartError::ToolClash {
                name,
                first,
                second,
            });
        }
        // What holds session state and was made now: the rest is registered already.
        let kept_holders = kept.map(Served::holders).unwrap_or_default();
        let fresh = served
            .holders()
            .into_iter()
            .filter(|h| !kept_holders.iter().any(|k| Arc::ptr_eq(k, h)))
            .map(|h| Arc::downgrade(&h))
            .collect();
        Ok((served, fresh))
    }

    /// What holds session state in it: its layers (every chain's are among them) and its
    /// tools.
    fn holders(&self) -> Vec<Arc<dyn SessionHolder>> {
        let layers = self
            .hooks
            .iter()
            .map(|(_, layer)| layer.clone() as Arc<dyn SessionHolder>);
        let tools = self.tools.iter().map(|tool| {
            let holder: Arc<dyn SessionHolder> = tool.clone();
            holder
        });
        let pools = self
            .pools
            .iter()
            .map(|pool| pool.clone() as Arc<dyn SessionHolder>);
        layers.chain(tools).chain(pools).collect()
    }

    /// Its store components, as the session table calls them.
    fn store_backends(&self) -> crate::sessions::StoreBackends {
        self.stores
            .iter()
            .map(|(path, store)| (path.clone(), store.clone() as Arc<dyn StoreBackend>))
            .collect()
    }

    /// The hook chain of `tenant`'s sessions.
    fn chain(&self, tenant: &TenantId) -> &Arc<HookChain> {
        self.tenant_chains.get(tenant).unwrap_or(&self.chain)
    }

    /// Every upstream server's name and settings, shared or scoped.
    fn upstream_specs(&self) -> impl Iterator<Item = (&str, &UpstreamConfig)> {
        let shared = self.upstreams.iter().map(|(n, spec, _)| (n.as_str(), spec));
        let scoped = self.pools.iter().map(|p| (p.name(), p.spec()));
        shared.chain(scoped)
    }

    /// The instances of the scoped upstream servers `session` uses, started when they
    /// are not running yet; one that cannot start is logged and left out.
    async fn session_upstreams(&self, session: &Session) -> Vec<Arc<upstream::Running>> {
        self.session_instances(session).await.0
    }

    /// As [`Served::session_upstreams`], with why those left out could not start.
    async fn session_instances(
        &self,
        session: &Session,
    ) -> (Vec<Arc<upstream::Running>>, Vec<upstream::UpstreamError>) {
        let mut running = Vec::new();
        let mut failed = Vec::new();
        for pool in &self.pools {
            match pool.instance(session).await {
                Ok(instance) => running.push(instance),
                Err(e) => {
                    tracing::error!(error = %e, session = %session.id, "upstream instance unavailable");
                    failed.push(e);
                }
            }
        }
        (running, failed)
    }

    /// The upstream servers that started, by name.
    fn running_upstreams(&self) -> impl Iterator<Item = &Arc<upstream::Running>> {
        self.upstreams
            .iter()
            .filter_map(|(_, _, running)| running.as_ref())
    }

    /// The tools of the upstream servers, as last listed: a name a host tool or an
    /// upstream before in the config serves is left out (see [`Served::clashes`]).
    fn upstream_listing(&self) -> Vec<rmcp::model::Tool> {
        let mut seen: HashSet<String> = self
            .tools
            .iter()
            .map(|t| t.descriptor().name.clone())
            .collect();
        let mut listed = Vec::new();
        for server in self.running_upstreams() {
            for tool in server.listing() {
                if seen.insert(tool.name.to_string()) {
                    listed.push(tool);
                } else {
                    tracing::error!(upstream = server.name(), tool = %tool.name, "a tool another serves under the same name is not served");
                }
            }
        }
        listed
    }

    /// The names two of the tools served would share: `(name, first, second)`, the first
    /// being the one that serves it.
    fn clashes(&self) -> Vec<(String, String, String)> {
        let mut owners: HashMap<String, String> = self
            .tools
            .iter()
            .map(|t| {
                (
                    t.descriptor().name.clone(),
                    format!("tools.{}", t.descriptor().name),
                )
            })
            .collect();
        let mut clashes = Vec::new();
        for server in self.running_upstreams() {
            for tool in server.listing() {
                let owner = format!("upstreams.{}", server.name());
                match owners.get(tool.name.as_ref()) {
                    Some(first) => clashes.push((tool.name.to_string(), first.clone(), owner)),
                    None => {
                        owners.insert(tool.name.to_string(), owner);
                    }
                }
            }
        }
        clashes
    }

    /// The tool called `name`: a configured one, or the first upstream server's that
    /// lists it.
    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(tool) = self.tools.get(name) {
            return Some(tool.clone());
        }
        self.running_upstreams()
            .find_map(|server| server.tool(name))
            .map(|tool| Arc::new(tool) as Arc<dyn Tool>)
    }
}

/// Why a reload was refused; the config in effect stays.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0} changed: only a restart puts that in effect")]
    NeedsRestart(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Bash(#[from] Unavailable),
}

/// What changed of one kind of thing (hooks, tools, upstream servers, tenants), by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl Changes {
    /// Between `old` and `new`, each a list of (name, settings).
    fn between<'a, T: PartialEq + 'a>(
        old: impl IntoIterator<Item = (&'a str, T)>,
        new: impl IntoIterator<Item = (&'a str, T)>,
    ) -> Changes {
        let old: BTreeMap<&str, T> = old.into_iter().collect();
        let new: BTreeMap<&str, T> = new.into_iter().collect();
        let names = |names: Vec<&&str>| names.into_iter().map(|n| n.to_string()).collect();
        Changes {
            added: names(new.keys().filter(|n| !old.contains_key(*n)).collect()),
            removed: names(old.keys().filter(|n| !new.contains_key(*n)).collect()),
            changed: names(
                new.iter()
                    .filter(|(n, v)| old.get(*n).is_some_and(|o| o != *v))
                    .map(|(n, _)| n)
                    .collect(),
            ),
        }
    }

    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

impl std::fmt::Display for Changes {
    /// `+added -removed ~changed`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let marked = [
            ("+", &self.added),
            ("-", &self.removed),
            ("~", &self.changed),
        ];
        let words: Vec<String> = marked
            .iter()
            .flat_map(|(mark, names)| names.iter().map(move |n| format!("{mark}{n}")))
            .collect();
        f.write_str(&words.join(" "))
    }
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reloaded {
    /// The file the config was read from.
    pub file: String,
    pub hooks: Changes,
    /// Components, `bash` and the embedder's tools (not the upstream servers').
    pub tools: Changes,
    pub upstreams: Changes,
    pub tenants: Changes,
}

impl Reloaded {
    fn between(old: &Served, old_tenants: &Tenants, new: &Served, new_tenants: &Tenants) -> Self {
        // A layer loaded anew (its component rebuilt, or another engine) changed too.
        let hooks = |s: &Served| -> Vec<(String, (HookPlan, usize))> {
            s.hooks
                .iter()
                .map(|(plan, layer)| {
                    let loaded = Arc::as_ptr(layer) as usize;
                    (layer.name.clone(), (plan.clone(), loaded))
                })
                .collect()
        };
        let (old_hooks, new_hooks) = (hooks(old), hooks(new));
        type ToolState = (Option<ComponentPlan>, Option<BashPlan>, usize);
        let tools = |s: &Served| -> Vec<(String, ToolState)> {
            s.tools
                .iter()
                .map(|tool| {
                    let name = tool.descriptor().name.clone();
                    let component = s.guest_tools.iter().find(|(p, _)| p.name == name);
                    let bash = s.bash.as_ref().filter(|(_, b)| b.descriptor().name == name);
                    let loaded = Arc::as_ptr(tool) as *const () as usize;
                    let state = (
                        component.map(|c| c.0.clone()),
                        bash.map(|b| b.0.clone()),
                        loaded,
                    );
                    (name, state)
                })
                .collect()
        };
        let (old_tools, new_tools) = (tools(old), tools(new));
        let tenants = |t: &Tenants| -> Vec<(String, Tenant)> {
            t.iter()
                .map(|(id, t)| (id.to_string(), t.clone()))
                .collect()
        };
        let (old_tenants, new_tenants) = (tenants(old_tenants), tenants(new_tenants));
        Reloaded {
            file: new.config_file.clone(),
            hooks: Changes::between(
                old_hooks.iter().map(|(n, p)| (n.as_str(), p)),
                new_hooks.iter().map(|(n, p)| (n.as_str(), p)),
            ),
            tools: Changes::between(
                old_tools.iter().map(|(n, state)| (n.as_str(), state)),
                new_tools.iter().map(|(n, state)| (n.as_str(), state)),
            ),
            upstreams: Changes::between(old.upstream_specs(), new.upstream_specs()),
            tenants: Changes::between(
                old_tenants.iter().map(|(n, t)| (n.as_str(), t)),
                new_tenants.iter().map(|(n, t)| (n.as_str(), t)),
            ),
        }
    }
}

impl std::fmt::Display for Reloaded {
    /// `hooks: +audit; tenants: ~alpha`, or `nothing changed`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = [
            ("hooks", &self.hooks),
            ("tools", &self.tools),
            ("upstreams", &self.upstreams),
            ("tenants", &self.tenants),
        ]
        .iter()
        .filter(|(_, changes)| !changes.is_empty())
        .map(|(what, changes)| format!("{what}: {changes}"))
        .collect();
        match parts.is_empty() {
            true => f.write_str("nothing changed"),
            false => f.write_str(&parts.join("; ")),
        }
    }
}

/// A configured hookhost: its [`Sessions`], and what its config makes of components,
/// tools, chains and upstream servers (replaced whole by a reload).
pub struct Runtime {
    /// What the config in effect makes; each call keeps the one it began with.
    served: ArcSwap<Served>,
    /// What only a restart changes, as the config in effect has it.
    fixed: Fixed,
    /// Tools the embedder registered ([`Runtime::register_tool`]): kept across reloads.
    embedded: Vec<Arc<dyn Tool>>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// What the upstream servers tell every MCP client.
    signals: Signals,
    sessions: Sessions,
    data_root: PathBuf,
    /// Traces, metrics and spans of every call.
    tracer: Arc<Tracer>,
}

impl Runtime {
    /// Opens the sessions under `data_root` (`{data}`; see [`Sessions::at`], which also
    /// sets the umask), loads every component of `plan` and builds the chains.
    ///
    /// # Errors
    ///
    /// A [`StartError`] naming the part of the config that failed.
    pub async fn new(mut plan: Plan, data_root: &Path) -> Result<Runtime, StartError> {
        let fixed = Fixed::of(&plan);
        let tenants = Tenants::new(std::mem::take(&mut plan.tenants), plan.serve_workdir.take());
        let sessions = Sessions::at(
            data_root,
            plan.session_store.as_ref(),
            plan.mounts.clone(),
            tenants,
        )
        .await?;
        let dirs = sessions.dirs().clone();
        let signals = Signals::default();
        let (served, holders) =
            Served::build(plan, &sessions.tenants(), &dirs, &[], None, &signals).await?;
        sessions.set_stores(served.store_backends());
        sessions.measure_quotas().await?;
        for holder in holders {
            sessions.hold(holder);
        }
        let trace = TraceSettings {
            fleet: sessions.is_shared(),
            ..fixed.trace.clone()
        };
        let tracer = Arc::new(Tracer::new(trace, served.sandbox.clone()));
        sessions.hold(Arc::downgrade(&tracer) as Weak<dyn SessionHolder>);
        Ok(Runtime {
            served: ArcSwap::from_pointee(served),
            fixed,
            embedded: Vec::new(),
            reloading: tokio::sync::Mutex::new(()),
            signals,
            data_root: dirs.data_root().to_path_buf(),
            sessions,
            tracer,
        })
    }

    /// Puts `plan` in effect for the calls that begin from now on; calls running finish on
    /// the config they began with, and sessions stay open. Hooks, tools and upstream
    /// servers whose settings are unchanged are kept as they are (with their kept
    /// instances and processes); an upstream no longer listed is stopped once the last
    /// call that may use it ends. Clients are told the tools may have changed.
    ///
    /// # Errors
    ///
    /// [`ReloadError`] when `plan` changes what only a restart changes, or a component of
    /// it cannot be loaded, or its `bash` cannot run: then nothing changed.
    pub async fn reload(&self, mut plan: Plan) -> Result<Reloaded, ReloadError> {
        let _one_at_a_time = self.reloading.lock().await;
        let restart = self.fixed.changed_by(&plan);
        if !restart.is_empty() {
            return Err(ReloadError::NeedsRestart(restart.join(", ")));
        }
        let tenants = Tenants::new(std::mem::take(&mut plan.tenants), plan.serve_workdir.take());
        let kept = self.served.load_full();
        let (served, holders) = Served::build(
            plan,
            &tenants,
            self.sessions.dirs(),
            &self.embedded,
            Some(&kept),
            &self.signals,
        )
        .await?;
        if let Some((_, bash)) = &served.bash
            && !kept
                .bash
                .as_ref()
                .is_some_and(|(_, old)| Arc::ptr_eq(old, bash))
        {
            bash.readiness().await?;
        }
        let reloaded = Reloaded::between(&kept, &self.sessions.tenants(), &served, &tenants);
        for holder in holders {
            self.sessions.hold(holder);
        }
        self.sessions.set_tenants(tenants);
        self.sessions.set_stores(served.store_backends());
        self.served.store(Arc::new(served));
        // A tenant given a quota is measured now; the others keep their measure.
        if let Err(e) = self.sessions.measure_quotas().await {
            tracing::warn!(error = %e, "measuring tenants' disk use after a reload failed");
        }
        self.signals.tools_changed.send_modify(|n| *n += 1);
        let _ = self
            .signals
            .notices
            .send(upstream::Notice::ResourcesChanged);
        let _ = self.signals.notices.send(upstream::Notice::PromptsChanged);
        Ok(reloaded)
    }

    /// Whether `bash` can run commands as configured (see [`BashTool::readiness`]); `None`
    /// when bash is off.
    ///
    /// # Errors
    ///
    /// [`Unavailable`] when it cannot.
    pub async fn bash_readiness(&self) -> Option<Result<Option<Readiness>, Unavailable>> {
        let bash = self.served.load().bash.as_ref()?.1.clone();
        Some(bash.readiness().await.map(Option::<&Readiness>::cloned))
    }

    /// What observes its calls: traces, metrics, spans.
    pub fn tracer(&self) -> &Tracer {
        &self.tracer
    }

    /// Readies `session`'s persistent directories for a call: the checkouts its store
    /// components keep loaded (see [`Sessions::load_stores`]), the others brought up to
    /// what other sessions committed since (see [`Sessions::refresh`]).
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming a store-kept directory that could not be loaded.
    pub async fn prepare(&self, session: &Session) -> Result<(), SessionError> {
        self.sessions.load_stores(session).await?;
        self.sessions.refresh(session).await;
        Ok(())
    }

    /// The store component of the persistent directory `virtual_path`, if it has one.
    pub fn store(&self, virtual_path: &str) -> Option<Arc<StoreComponent>> {
        self.served.load().stores.get(virtual_path).cloned()
    }

    /// The checkouts of `session`'s persistent directories that a call's hooks or tool
    /// loaded, in its `trace`.
    pub fn trace_loads(&self, session: &Session, trace: &mut CallTrace<'_>) {
        for (mount, loaded) in self.sessions.dirs().take_loads(session.mounts()) {
            trace.persistent_loaded(&mount, &loaded);
        }
    }

    /// After a call of `session`: its loads traced ([`Self::trace_loads`]), and its
    /// persistent directories committed after every call published, in its `trace`.
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming the mount that could not be published.
    pub async fn after_call(
        &self,
        session: &Session,
        trace: &mut CallTrace<'_>,
    ) -> Result<(), SessionError> {
        self.trace_loads(session, trace);
        let committed = self.sessions.commit(session, Some(CommitAt::Call)).await;
        trace.commits(&committed);
        committed.map(drop)
    }

    /// Publishes `session`'s persistent directories whose boundary is `at` (every one for
    /// `None`) outside a call — at an agent's turn end, on `hookhost/commit` — as
    /// [`Sessions::commit`] does, traced in the session's trace as [`COMMIT_CALL`]`-ID`.
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming the mount that could not be published.
    pub async fn commit(
        &self,
        session: &Session,
        at: Option<CommitAt>,
    ) -> Result<Vec<(String, crate::persistent::CommitReport)>, SessionError> {
        // Most turn ends have nothing to publish: no trace is begun for them.
        if !self.sessions.has_due(session, at) {
            return Ok(Vec::new());
        }
        let id = format!("{COMMIT_CALL}-{}", uuid::Uuid::new_v4().simple());
        let mut trace = self.tracer.begin(session, &id, COMMIT_CALL);
        let committed = self.sessions.commit(session, at).await;
        trace.commits(&committed);
        trace.end();
        committed
    }

    /// Its metrics as OpenMetrics text (what `/metrics` serves), with the session counts,
    /// kept instances, disk use and upstream states read now.
    pub async fn metrics_text(&self) -> String {
        let mut sessions: BTreeMap<String, i64> = BTreeMap::new();
        match self.sessions.list(None).await {
            Ok(records) => {
                for record in records {
                    *sessions.entry(record.tenant.to_string()).or_default() += 1;
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot count sessions for metrics"),
        }
        let instances = self
            .served
            .load()
            .hooks
            .iter()
            .map(|(_, l)| l.held().len())
            .sum::<usize>();
        let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.tracer.metrics().encode(Scraped {
            sessions: sessions.into_iter().collect(),
            instances: i64::try_from(instances).unwrap_or(i64::MAX),
            disk: self
                .sessions
                .kept_disk_use()
                .into_iter()
                .filter_map(|(tenant, used, quota)| {
                    Some((tenant.to_string(), to_i64(used?), quota.map(to_i64)))
                })
                .collect(),
            upstreams: self.upstream_states(),
        })
    }

    /// The sessions this runtime serves.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// The sessions, to set who makes them (see [`Sessions::set_owner`]).
    pub fn sessions_mut(&mut self) -> &mut Sessions {
        &mut self.sessions
    }

    /// Adds a tool of the embedder's (a host-native tool) beside the configured ones; it
    /// stays through reloads.
    ///
    /// # Errors
    ///
    /// [`StartError::DuplicateTool`] when a tool of that name exists.
    pub fn register_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), StartError> {
        let mut served = Served::clone(&self.served.load());
        let name = tool.descriptor().name.clone();
        if !served.tools.insert(tool.clone()) {
            return Err(StartError::DuplicateTool { tool: name });
        }
        self.sessions.hold(holder_of(&tool));
        self.served.store(Arc::new(served));
        self.embedded.push(tool);
        Ok(())
    }

    /// The engine and linker the components of the config in effect were loaded with.
    pub fn loader(&self) -> Arc<ComponentLoader> {
        self.served.load().loader.clone()
    }

    /// The sandbox the components of the config in effect run in.
    pub fn sandbox(&self) -> Arc<Sandbox> {
        self.served.load().sandbox.clone()
    }

    /// The data directory, `{data}` in mount templates.
    pub fn data_root(&self) -> &Path {
        &self.data_root
    }

    /// The SHA-256 of the admin page's token in the config in effect; no admin page when
    /// `None`.
    pub fn admin_token(&self) -> Option<TokenDigest> {
        self.served.load().admin_token
    }

    /// The file the config in effect was read from.
    pub fn config_file(&self) -> String {
        self.served.load().config_file.clone()
    }

    /// Every tool: the configured ones and the upstream servers' (as last listed).
    pub fn tools(&self) -> Vec<ToolDescriptor> {
        let served = self.served.load();
        served
            .tools
            .descriptors()
            .cloned()
            .chain(served.upstream_listing().iter().map(upstream::descriptor))
            .collect()
    }

    /// The tools `tenant` may call (its `tools` allow-list, else every tool), as MCP lists
    /// them.
    pub fn mcp_tools(&self, tenant: &TenantId) -> Vec<rmcp::model::Tool> {
        let served = self.served.load();
        let tenants = self.sessions.tenants();
        let configured = served.tools.iter().map(|tool| {
            let d = tool.descriptor();
            let schema: rmcp::model::JsonObject =
                serde_json::from_str(&d.input_schema).unwrap_or_default();
            rmcp::model::Tool::new(d.name.clone(), d.description.clone(), Arc::new(schema))
        });
        configured
            .chain(served.upstream_listing())
            .filter(|t| tenants.may_call(tenant, &t.name))
            .collect()
    }

    /// The upstream server that serves the tool `name`, and its own name for it.
    pub fn upstream_of(&self, name: &str) -> Option<(String, String)> {
        let served = self.served.load();
        if served.tools.get(name).is_some() {
            return None;
        }
        served.running_upstreams().find_map(|server| {
            let remote = name.strip_prefix(&server.prefix())?;
            server
                .listing()
                .iter()
                .any(|t| t.name == name)
                .then(|| (server.name().to_string(), remote.to_string()))
        })
    }

    /// Whether a tool of that name is served.
    pub fn has_tool(&self, name: &str) -> bool {
        self.served.load().tool(name).is_some()
    }

    /// Ticks when the tools served change (an upstream came back with other tools, or a
    /// reload).
    pub fn tools_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.signals.tools_changed.subscribe()
    }

    /// What the upstream servers tell every client from now on: resource updates and
    /// changes of their resources and prompts.
    pub fn upstream_notices(&self) -> tokio::sync::broadcast::Receiver<upstream::Notice> {
        self.signals.notices.subscribe()
    }

    /// The shared upstream servers that started.
    pub fn shared_upstreams(&self) -> Vec<Arc<upstream::Running>> {
        self.served.load().running_upstreams().cloned().collect()
    }

    /// The upstream servers `session` uses, as the config in effect has them: the shared
    /// ones that started, and its instances of the others (started now if need be).
    pub async fn upstreams_for(&self, session: &Session) -> Vec<Arc<upstream::Running>> {
        let served = self.served.load_full();
        let mut upstreams: Vec<_> = served.running_upstreams().cloned().collect();
        upstreams.extend(served.session_upstreams(session).await);
        upstreams
    }

    /// The tools `session` may call, as MCP lists them: [`Runtime::mcp_tools`] and its
    /// instances' of the upstream servers with one per tenant or session (a name served
    /// already is left out).
    pub async fn session_tools(&self, session: &Session) -> Vec<rmcp::model::Tool> {
        let served = self.served.load_full();
        let mut tools = self.mcp_tools(&session.tenant);
        // A name served already, listed or hidden from the tenant (then its instance's
        // is hidden too: the same name), is not listed again.
        let mut seen: HashSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
        let tenants = self.sessions.tenants();
        for instance in served.session_upstreams(session).await {
            for tool in instance.listing() {
                if tenants.may_call(&session.tenant, &tool.name)
                    && seen.insert(tool.name.to_string())
                {
                    tools.push(tool);
                }
            }
        }
        tools
    }

    /// Each upstream server by name: `up`, `down` (it died; its tools answer with an
    /// error) or `unavailable` (it did not start).
    pub fn upstream_states(&self) -> Vec<(String, &'static str)> {
        self.served
            .load()
            .upstreams
            .iter()
            .map(|(name, _, server)| {
                let state = match server {
                    Some(s) if s.is_up() => "up",
                    Some(_) => "down",
                    None => "unavailable",
                };
                (name.clone(), state)
            })
            .collect()
    }

    /// The upstream servers that are not up, with their state (`down`, `unavailable`).
    pub fn upstreams_down(&self) -> Vec<(String, &'static str)> {
        let mut states = self.upstream_states();
        states.retain(|(_, state)| *state != "up");
        states
    }

    /// Whether `tenant`'s chain offloads large outputs (the built-in offload hook is in it).
    pub fn offloads(&self, tenant: &TenantId) -> bool {
        let offload = ComponentRef::Builtin("offload".into());
        self.chain(tenant)
            .layers()
            .iter()
            .any(|l| l.component == offload)
    }

    /// The hook chain of `tenant`'s sessions, in the config in effect.
    pub fn chain(&self, tenant: &TenantId) -> Arc<HookChain> {
        self.served.load().chain(tenant).clone()
    }

    /// Calls `tool` with `arguments` (a JSON object's text) in `session`, through the chain.
    ///
    /// # Errors
    ///
    /// [`CallError`] when the tool is unknown or the arguments are not a JSON object. A
    /// call that ran and failed is an `Ok` result with `is_error` set.
    pub async fn call(
        &self,
        session: &Session,
        tool: &str,
        arguments: &str,
    ) -> Result<ToolResult, CallError> {
        self.call_with_extras(session, tool, arguments)
            .await
            .map(|(result, _)| result)
    }

    /// As [`Runtime::call`], with what the tool returned beside its text (see [`Extras`]).
    ///
    /// # Errors
    ///
    /// As [`Runtime::call`].
    pub async fn call_with_extras(
        &self,
        session: &Session,
        tool: &str,
        arguments: &str,
    ) -> Result<(ToolResult, Option<Extras>), CallError> {
        // The config in effect now serves this call to its end, whatever a reload does.
        let served = self.served.load_full();
        let redeclared = self.sessions.redeclared(session)?;
        let session = redeclared.as_ref().unwrap_or(session);
        let target = match served.tool(tool) {
            Some(found) => Some(found),
            None => {
                let (instances, failed) = served.session_instances(session).await;
                let found = instances.iter().find_map(|instance| instance.tool(tool));
                // The tool may be one an instance that could not start would serve.
                if found.is_none() && !failed.is_empty() {
                    let why: Vec<String> = failed.iter().map(ToString::to_string).collect();
                    return Ok((ToolResult::error(why.join("; ")), None));
                }
                found.map(|found| Arc::new(found) as Arc<dyn Tool>)
            }
        };
        let target = target
            .filter(|_| session.declared().is_none_or(|t| t.may_call(tool)))
            .ok_or_else(|| {
                let name = tool.to_string();
                if served.tools.iter().next().is_none()
                    && served.upstreams.is_empty()
                    && served.pools.is_empty()
                {
                    return CallError::NoTools {
                        name,
                        file: served.config_file.clone(),
                    };
                }
                let known = self.mcp_tools(&session.tenant);
                CallError::UnknownTool {
                    name,
                    known: known
                        .iter()
                        .map(|t| t.name.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            })?;
        self.run_call(&served, session, tool, arguments, target.as_ref())
            .await
    }

    /// Runs `target` as the call `tool` of `session` through the chain, as
    /// [`Runtime::call_with_extras`] does: an upstream's resource read or prompt served
    /// as a call (`resources.read`, `prompts.get`), so that hooks see it too.
    ///
    /// # Errors
    ///
    /// As [`Runtime::call`].
    pub async fn call_as(
        &self,
        session: &Session,
        tool: &str,
        arguments: &str,
        target: &dyn Tool,
    ) -> Result<(ToolResult, Option<Extras>), CallError> {
        let served = self.served.load_full();
        let redeclared = self.sessions.redeclared(session)?;
        let session = redeclared.as_ref().unwrap_or(session);
        self.run_call(&served, session, tool, arguments, target)
            .await
    }

    async fn run_call(
        &self,
        served: &Served,
        session: &Session,
        tool: &str,
        arguments: &str,
        target: &dyn Tool,
    ) -> Result<(ToolResult, Option<Extras>), CallError> {
        chain::validate_arguments(arguments).map_err(|why| CallError::BadArguments {
            tool: tool.to_string(),
            why,
        })?;
        let _admitted = self.admit(session, tool, Rate::Counted).await?;
        // Its persistent directories loaded, and brought up to what other sessions
        // committed since; a call that cannot have them fails.
        let prepared = self.prepare(session).await;
        let started = std::time::Instant::now();
        let ctx = CallContext {
            session_id: session.id.to_string(),
            tenant_id: session.tenant.to_string(),
            values: Vec::new(),
        };
        let call = ToolCall {
            id: uuid::Uuid::new_v4().to_string(),
            name: tool.to_string(),
            arguments: arguments.to_string(),
        };
        let call_id = call.id.clone();
        let span = tracing::info_span!(
            "call",
            otel.name = %format_args!("call {tool}"),
            tool,
            call_id = %call.id,
            tenant = %session.tenant,
            session = %session.id,
            outcome = tracing::field::Empty,
        );
        let chain = served.chain(&session.tenant);
        let mut trace = self.tracer.begin(session, &call_id, tool);
        // Only a tenant with a quota pays for measuring around its calls, and only the
        // mounts this call's hooks and tool may write in are measured.
        let quota = if session.declared().is_some_and(|t| t.quota.is_set()) {
            let writable: BTreeSet<&str> = chain
                .layers()
                .iter()
                .filter(|layer| layer.tools.matches(tool))
                .flat_map(|layer| sandbox::writable(&layer.grants))
                .chain(target.writable_mounts())
                .collect();
            self.sessions.admit(session, &writable).await
        } else {
            Ok(None)
        };
        // A call the quota refused, stopped or withheld the output of failed.
        let (result, outcome) = match (prepared, quota) {
            (Err(e), _) => (ToolResult::error(e.to_string()), "failed"),
            (_, Err(refused)) => (ToolResult::error(refused), "failed"),
            (_, Ok(None)) => {
                chain
                    .run(session, ctx, call, target, &mut trace)
                    .instrument(span.clone())
                    .await
            }
            (_, Ok(Some(quota))) => {
                let bounded = WithinQuota {
                    tool: target,
                    quota: &quota,
                };
                let run = chain
                    .run(session, ctx, call, &bounded, &mut trace)
                    .instrument(span.clone());
                quota
                    .run(run)
                    .await
                    .unwrap_or_else(|message| (ToolResult::error(message), "failed"))
            }
        };
        // Persistent directories committed after every call publish this one's changes;
        // when they cannot be (a conflict), the model is told, and the changes stay in the
        // session's checkout.
        let mut result = result;
        if let Err(e) = self.after_call(session, &mut trace).await {
            result
                .output
                .push_str(&format!("\n[hookhost: not published: {e}]"));
        }
        span.record("outcome", outcome);
        trace.finish(outcome, result.output.len(), started.elapsed());
        self.sessions.mark_active(session).await;
        tracing::info!(
            tool,
            tenant = %session.tenant,
            session = %session.id,
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            outcome,
            output_bytes = result.output.len(),
            "call"
        );
        Ok((result, target.take_extras(&call_id)))
    }
}

/// Whether a call admitted by [`Runtime::admit`] counts against its tenant's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// A new call: it takes a place in the tenant's rate and among its calls at once.
    Counted,
    /// The second half of a call admitted before (an agent's post-tool event after its
    /// pre-tool event): it runs whatever the rate, since the tool ran already.
    Admitted,
}

/// A call let in by [`Runtime::admit`]: its place among the tenant's calls at once and
/// its session's running calls, held until dropped.
pub struct Admission<'a> {
    _rate: Option<crate::sessions::rate::Admitted>,
    _running: crate::sessions::InFlight<'a>,
}

impl Runtime {
    /// Admits a call of `tool` in `session`, the one gate every call passes, from MCP,
    /// `hookhost call` or an agent's hook alike: the tenant's rate and calls at once
    /// (unless `rate` says the call was admitted already), then the session marked active
    /// and counted as running, so it is not idle while the call runs.
    ///
    /// # Errors
    ///
    /// [`RateRefusal`], logged and counted in the metrics.
    pub async fn admit(
        &self,
        session: &Session,
        tool: &str,
        rate: Rate,
    ) -> Result<Admission<'_>, RateRefusal> {
        let rate = match rate {
            Rate::Admitted => None,
            Rate::Counted => Some(self.sessions.admit_rate(session).inspect_err(|refused| {
                tracing::info!(tenant = %session.tenant, session = %session.id, tool, %refused, "call refused");
                self.tracer
                    .metrics()
                    .rate_limited(session.tenant.as_str(), refused.reason());
            })?),
        };
        self.sessions.mark_active(session).await;
        Ok(Admission {
            _rate: rate,
            _running: self.sessions.enter(session),
        })
    }
}

/// A tool run within its tenant's disk quota (see [`QuotaCall::tool`]).
struct WithinQuota<'a> {
    tool: &'a dyn Callee,
    quota: &'a QuotaCall<'a>,
}

#[async_trait::async_trait]
impl Callee for WithinQuota<'_> {
    fn descriptor(&self) -> &ToolDescriptor {
        self.tool.descriptor()
    }

    async fn execute(
        &self,
        session: &Session,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        self.quota.tool(self.tool.execute(session, ctx, call)).await
    }

    fn writable_mounts(&self) -> Vec<&str> {
        self.tool.writable_mounts()
    }
}

/// `tool` as what holds session state, weakly (see [`Sessions::hold`]).
fn holder_of(tool: &Arc<dyn Tool>) -> Weak<dyn SessionHolder> {
    let holder: Arc<dyn SessionHolder> = tool.clone();
    Arc::downgrade(&holder)
}
