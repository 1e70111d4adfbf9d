//! The runtime: a config turned into loaded components, tools and a hook chain, and the
//! entry point for tool calls.

use crate::abi::v0_2::{describe_hook, described::DescribedHookPre};
use crate::abi::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::chain::{self, HookChain, HookLayer};
use crate::component::{ComponentLoader, ComponentRef, EngineOptions, LoadError, SettingType};
use crate::config::{self, ComponentPlan, ConfigError, HookPlan, Plan, UpstreamConfig};
use crate::failure::Failure;
use crate::ids::TenantId;
use crate::metrics::Scraped;
use crate::mounts::MountError;
use crate::sandbox::{self, Sandbox};
use crate::sessions::{
    QuotaCall, RateRefusal, Session, SessionError, SessionHolder, Sessions, Tenants,
};
use crate::tools::bash::{BashTool, Readiness, Unavailable};
use crate::tools::guest::GuestTool;
use crate::tools::upstream;
use crate::tools::{Callee, Extras, Tool, ToolRegistry};
use crate::trace::{TraceSettings, Tracer};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use tracing::Instrument;

/// The compiled-code cache's directory, in the data directory.
pub const CACHE_DIR: &str = "cache";

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

/// The tool components of `specs`, loaded and asked to describe themselves.
async fn load_tools(
    specs: &[ComponentPlan],
    loader: &ComponentLoader,
    sandbox: &Arc<Sandbox>,
) -> Result<ToolRegistry, StartError> {
    let mut tools = ToolRegistry::default();
    for spec in specs {
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
        if !tools.insert(Arc::new(tool)) {
            return Err(StartError::DuplicateTool {
                tool: spec.name.clone(),
            });
        }
    }
    Ok(tools)
}

/// The upstream servers of `specs`, started (or connected to): one that does not start is
/// kept as `None` — its tools stay unlisted, the rest of the host serves on. The receiver
/// side of the returned sender ticks when any upstream's tools change.
async fn connect_upstreams(
    specs: &[(String, UpstreamConfig)],
) -> (
    Vec<(String, Option<Arc<upstream::Upstream>>)>,
    tokio::sync::watch::Sender<u64>,
) {
    let mut upstreams = Vec::new();
    let (tools_changed, _) = tokio::sync::watch::channel(0u64);
    for (name, spec) in specs {
        match upstream::connect(name, spec).await {
            Ok(server) => {
                // One signal for all upstreams: any change of their tools.
                let mut changes = server.changes();
                let all = tools_changed.clone();
                tokio::spawn(async move {
                    while changes.changed().await.is_ok() {
                        all.send_modify(|n| *n += 1);
                    }
                });
                upstreams.push((name.clone(), Some(server)));
            }
            // Its tools stay unlisted; the rest of the host serves on.
            Err(e) => {
                tracing::error!(error = %e, "upstream unavailable");
                upstreams.push((name.clone(), None));
            }
        }
    }

    (upstreams, tools_changed)
}

/// The hook components of `hooks`, loaded, and the settings of those that describe
/// themselves checked against their description: the chain's layers, outermost first.
async fn load_hooks(
    source: &str,
    hooks: Vec<HookPlan>,
    loader: &ComponentLoader,
    sandbox: &Arc<Sandbox>,
) -> Result<Vec<Arc<HookLayer>>, StartError> {
    let mut layers = Vec::with_capacity(hooks.len());
    for hook in hooks {
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
        layers.push(Arc::new(HookLayer {
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
        }));
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
}

/// A configured hookhost: components loaded, tools registered, chains built, and its
/// [`Sessions`].
pub struct Runtime {
    /// The chain of tenants that declare none of their own.
    chain: HookChain,
    /// The chains of tenants that declare their own (`[tenants.ID] hooks`).
    tenant_chains: BTreeMap<TenantId, HookChain>,
    tools: ToolRegistry,
    /// Upstream MCP servers, by name, with their tools' state.
    upstreams: Vec<(String, Option<Arc<upstream::Upstream>>)>,
    /// Ticks when the tools of an upstream change (it was restarted with others).
    tools_changed: tokio::sync::watch::Sender<u64>,
    sessions: Sessions,
    sandbox: Arc<Sandbox>,
    data_root: PathBuf,
    loader: ComponentLoader,
    /// Traces, metrics and spans of every call.
    tracer: Arc<Tracer>,
    /// The `bash` tool, when enabled (also among `tools`).
    bash: Option<Arc<BashTool>>,
    /// The file its config was read from.
    config_file: String,
}

impl Runtime {
    /// Opens the sessions under `data_root` (`{data}`; see [`Sessions::at`], which also
    /// sets the umask), loads every component of `plan` and builds the chains.
    ///
    /// # Errors
    ///
    /// A [`StartError`] naming the part of the config that failed.
    pub async fn new(plan: Plan, data_root: &Path) -> Result<Runtime, StartError> {
        let plan_source = plan.source.clone();
        let sessions = Sessions::at(
            data_root,
            plan.session_store.as_ref(),
            plan.mounts,
            Tenants::new(plan.tenants, plan.serve_workdir),
        )
        .await?;
        let dirs = sessions.dirs().clone();
        let data_root = dirs.data_root().to_path_buf();
        let loader = ComponentLoader::new(&EngineOptions {
            fuel: plan.fuel,
            pool_instances: plan.engine.pooling.then_some(plan.engine.pool_instances),
            max_memory_bytes: plan.max_memory_bytes,
            keep_resident_bytes: plan.engine.keep_resident_bytes,
            cache_dir: plan.engine.cache.then(|| data_root.join(CACHE_DIR)),
        })
        .map_err(StartError::Engine)?;
        let sandbox = Arc::new(Sandbox::new(
            loader.engine().clone(),
            dirs.clone(),
            plan.fuel,
        ));

        let mut tools = load_tools(&plan.tools, &loader, &sandbox).await?;
        let bash = plan
            .bash
            .as_ref()
            .map(|bash| Arc::new(BashTool::new(sandbox.clone(), bash)));
        if let Some(bash) = &bash
            && !tools.insert(bash.clone())
        {
            return Err(StartError::DuplicateTool {
                tool: "bash".into(),
            });
        }

        let (upstreams, tools_changed) = connect_upstreams(&plan.upstreams).await;
        let layers = load_hooks(&plan.source, plan.hooks, &loader, &sandbox).await?;
        let tenant_chains = sessions
            .tenants()
            .iter()
            .filter_map(|(id, tenant)| {
                let picked = tenant
                    .hooks
                    .as_ref()?
                    .iter()
                    .filter_map(|n| layers.iter().find(|l| &l.name == n).cloned())
                    .collect();
                Some((id.clone(), HookChain::new(picked, sandbox.clone())))
            })
            .collect();
        sessions.measure_quotas().await?;
        // Every chain's layers are among these (tenant chains share them).
        for layer in &layers {
            sessions.hold(Arc::downgrade(layer) as Weak<dyn SessionHolder>);
        }
        let trace = TraceSettings {
            fleet: sessions.is_shared(),
            ..plan.trace
        };
        let tracer = Arc::new(Tracer::new(trace, sandbox.clone()));
        sessions.hold(Arc::downgrade(&tracer) as Weak<dyn SessionHolder>);
        let runtime = Runtime {
            tracer,
            chain: HookChain::new(layers, sandbox.clone()),
            sandbox,
            tenant_chains,
            tools: ToolRegistry::default(),
            upstreams,
            tools_changed,
            sessions,
            data_root,
            loader,
            bash,
            config_file: plan_source,
        };
        for tool in tools.iter() {
            runtime.sessions.hold(holder_of(tool));
        }
        Ok(Runtime { tools, ..runtime })
    }

    /// Whether `bash` can run commands as configured (see [`BashTool::readiness`]); `None`
    /// when bash is off.
    pub async fn bash_readiness(&self) -> Option<Result<Option<&Readiness>, Unavailable>> {
        match &self.bash {
            Some(bash) => Some(bash.readiness().await),
            None => None,
        }
    }

    /// What observes its calls: traces, metrics, spans.
    pub fn tracer(&self) -> &Tracer {
        &self.tracer
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
        // Every tenant chain's layers are among the default chain's (see `from_plan`).
        let instances = self
            .chain
            .layers()
            .iter()
            .map(|l| l.held().len())
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

    /// Adds a tool of the embedder's (a host-native tool) beside the configured ones.
    ///
    /// # Errors
    ///
    /// [`StartError::DuplicateTool`] when a tool of that name exists.
    pub fn register_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), StartError> {
        let name = tool.descriptor().name.clone();
        self.sessions.hold(holder_of(&tool));
        if self.tools.insert(tool) {
            Ok(())
        } else {
            Err(StartError::DuplicateTool { tool: name })
        }
    }

    /// The data directory, `{data}` in mount templates.
    /// The engine and linker the components were loaded with.
    pub fn loader(&self) -> &ComponentLoader {
        &self.loader
    }

    /// The sandbox the components run in.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    pub fn data_root(&self) -> &Path {
        &self.data_root
    }

    /// Every tool: the configured ones and the upstream servers' (as last listed).
    pub fn tools(&self) -> impl Iterator<Item = ToolDescriptor> + '_ {
        self.tools
            .descriptors()
            .cloned()
            .chain(self.upstream_listing().map(|t| upstream::descriptor(&t)))
    }

    /// The tools `tenant` may call (its `tools` allow-list, else every tool), as MCP lists
    /// them.
    pub fn mcp_tools(&self, tenant: &TenantId) -> Vec<rmcp::model::Tool> {
        let configured = self.tools.iter().map(|tool| {
            let d = tool.descriptor();
            let schema: rmcp::model::JsonObject =
                serde_json::from_str(&d.input_schema).unwrap_or_default();
            rmcp::model::Tool::new(d.name.clone(), d.description.clone(), Arc::new(schema))
        });
        configured
            .chain(self.upstream_listing())
            .filter(|t| self.sessions.tenants().may_call(tenant, &t.name))
            .collect()
    }

    fn upstream_listing(&self) -> impl Iterator<Item = rmcp::model::Tool> + '_ {
        self.upstreams
            .iter()
            .filter_map(|(_, server)| server.as_ref())
            .flat_map(|server| server.listing())
    }

    /// The tool called `name`: a configured one, or an upstream server's.
    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(tool) = self.tools.get(name) {
            return Some(tool.clone());
        }
        let (server, _) = name.split_once(upstream::SEPARATOR)?;
        let (_, upstream) = self.upstreams.iter().find(|(n, _)| n == server)?;
        Some(Arc::new(upstream.as_ref()?.tool(name)?))
    }

    /// Whether a tool of that name is served.
    pub fn has_tool(&self, name: &str) -> bool {
        self.tool(name).is_some()
    }

    /// Ticks when the tools served change (an upstream came back with other tools).
    pub fn tools_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tools_changed.subscribe()
    }

    /// Each upstream server by name: `up`, `down` (it died; its tools answer with an
    /// error) or `unavailable` (it did not start).
    pub fn upstream_states(&self) -> Vec<(String, &'static str)> {
        self.upstreams
            .iter()
            .map(|(name, server)| {
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

    /// The hook chain of `tenant`'s sessions.
    pub fn chain(&self, tenant: &TenantId) -> &HookChain {
        self.tenant_chains.get(tenant).unwrap_or(&self.chain)
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
        let target = self
            .tool(tool)
            .filter(|_| self.sessions.tenants().may_call(&session.tenant, tool))
            .ok_or_else(|| {
                let name = tool.to_string();
                if self.tools.iter().next().is_none() && self.upstreams.is_empty() {
                    return CallError::NoTools {
                        name,
                        file: self.config_file.clone(),
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
        chain::validate_arguments(arguments).map_err(|why| CallError::BadArguments {
            tool: tool.to_string(),
            why,
        })?;
        let _admitted = self.sessions.admit_rate(session).inspect_err(|refused| {
            tracing::info!(tenant = %session.tenant, session = %session.id, tool, %refused, "call refused");
            self.tracer
                .metrics()
                .rate_limited(session.tenant.as_str(), refused.reason());
        })?;
        self.sessions.mark_active(session).await;
        let _running = self.sessions.enter(session);
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
        let chain = self.chain(&session.tenant);
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
        let (result, outcome) = match quota {
            Err(refused) => (ToolResult::error(refused), "failed"),
            Ok(None) => {
                chain
                    .run(session, ctx, call, target.as_ref(), &mut trace)
                    .instrument(span.clone())
                    .await
            }
            Ok(Some(quota)) => {
                let bounded = WithinQuota {
                    tool: target.as_ref(),
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
