//! The runtime: a config turned into loaded components, tools and a hook chain, and the
//! entry point for tool calls.

use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::chain::{self, HookChain, HookLayer, ToolMatch};
use crate::component::{ComponentLoader, ComponentRef, EngineOptions, HookPres, LoadError};
use crate::config::{self, Config, Secret, WorkdirTemplate};
use crate::ids::{SessionId, TenantId};
use crate::limits::{LimitOverrides, Limits, STALE_PARTIAL_AGE};
use crate::mounts::{MountError, MountTable, ResolvedMount, Scope, SessionVars};
use crate::quota::{self, QUOTA_CHECK_INTERVAL, Quota, QuotaBook, Usage};
use crate::sandbox::{Failure, Sandbox};
use crate::session::{Session, SessionKey};
use crate::session_store::{self, Owner, SessionError, SessionRecord, SessionStore};
use crate::tools::bash::BashTool;
use crate::tools::guest::GuestTool;
use crate::tools::upstream;
use crate::tools::{Extras, Tool, ToolRegistry};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tracing::Instrument;

/// The compiled-code cache's directory, in the data directory.
pub const CACHE_DIR: &str = "cache";

/// Why a runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mounts: {0}")]
    Mounts(#[from] MountError),
    #[error("cannot make the WebAssembly engine: {0}")]
    Engine(String),
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
    #[error("tenants: {0}")]
    Tenant(crate::ids::IdError),
}

/// Refuses the settings a 0.2.0 hook that describes itself does not declare, or of
/// another type than it declares, as the config refuses them for a built-in.
async fn check_declared_settings(
    spec: &config::HookConfig,
    describe: &crate::bindings::v0_2_0::described::DescribedHookPre<crate::sandbox::StoreState>,
    sandbox: &Sandbox,
) -> Result<(), StartError> {
    let hook = spec.name.get_ref();
    let description = crate::chain::describe_hook(
        describe,
        sandbox,
        &config::settings(&spec.settings),
        &spec.limits,
    )
    .await
    .map_err(|source| StartError::DescribeHook {
        hook: hook.clone(),
        source,
    })?;
    let declared: Vec<(String, crate::component::SettingType)> = description
        .settings
        .into_iter()
        .map(|s| (s.name, s.type_.into()))
        .collect();
    for (key, value) in &spec.settings {
        if let Some(problem) =
            config::setting_problem(spec.component.get_ref(), &declared, key.get_ref(), value)
        {
            return Err(StartError::Settings(format!(
                "hooks.{hook}.settings{problem}"
            )));
        }
    }
    Ok(())
}

/// Why a call was not made. (A call that was made and failed is a [`ToolResult`] with
/// `is_error`.)
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool {name:?} (tools: {known})")]
    UnknownTool { name: String, known: String },
    #[error("tool {tool:?}: {why}")]
    BadArguments { tool: String, why: String },
}

/// A configured hookhost: components loaded, tools registered, chains built.
pub struct Runtime {
    /// The chain of tenants that declare none of their own.
    chain: HookChain,
    tenants: BTreeMap<TenantId, Tenant>,
    /// Whether only declared tenants may have sessions (some are declared).
    closed_tenancy: bool,
    tools: ToolRegistry,
    mounts: MountTable,
    /// `[serve] workdir`: where sessions made by `serve` work, unless their tenant says.
    serve_workdir: Option<WorkdirTemplate>,
    /// Upstream MCP servers, by name, with their tools' state.
    upstreams: Vec<(String, Option<Arc<upstream::Upstream>>)>,
    /// Ticks when the tools of an upstream change (it was restarted with others).
    tools_changed: tokio::sync::watch::Sender<u64>,
    /// Who this process is, recorded on the sessions it makes.
    owner: Owner,
    /// Tenants' disk use, kept.
    usage: QuotaBook,
    /// Calls running per session: a session with one is in use and never idle.
    in_flight: Mutex<HashMap<SessionKey, usize>>,
    store: SessionStore,
    sandbox: Arc<Sandbox>,
    data_root: PathBuf,
    loader: ComponentLoader,
}

/// A declared tenant: its chain and its bounds.
struct Tenant {
    chain: Option<HookChain>,
    token: Option<Secret>,
    max_sessions: Option<usize>,
    quota: Quota,
    limits: LimitOverrides,
    workdir: Option<WorkdirTemplate>,
    /// The tools it may call; every tool when `None`.
    tools: Option<ToolMatch>,
}

/// How much disk a session and its tenant use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    /// What the session's own (session-scoped) directories hold.
    pub session: Usage,
    /// What all the tenant's session and tenant directories hold: what the quota counts.
    pub tenant: Usage,
    /// The tenant's quota.
    pub quota: Quota,
}

/// What [`Runtime::gc`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GcReport {
    /// Idle sessions deleted.
    pub sessions: usize,
    /// Session directories without a session, removed.
    pub orphans: usize,
    /// Stale temporary files removed.
    pub partials: usize,
}

impl Runtime {
    /// Loads every component of `config` and builds the chain, with `data_root` as
    /// `{data}`.
    ///
    /// Security: sets the process umask to 077, so that every file and directory a guest
    /// creates is private to the host's user (0600 / 0700): WASI has no way for a guest to
    /// choose modes, so the umask decides them.
    ///
    /// # Errors
    ///
    /// A [`StartError`] naming the part of the config that failed.
    pub async fn new(config: &Config, data_root: &Path) -> Result<Runtime, StartError> {
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_root)
            .map_err(|source| StartError::DataDir {
                path: data_root.to_path_buf(),
                source,
            })?;
        let data_root = data_root
            .canonicalize()
            .map_err(|source| StartError::DataDir {
                path: data_root.to_path_buf(),
                source,
            })?;
        let mounts = MountTable::new(config.mounts())?;
        let store = SessionStore::open(&data_root)?;
        let loader = ComponentLoader::new(&EngineOptions {
            fuel: config.uses_fuel(),
            pool_instances: config
                .engine
                .pooling
                .then_some(config.engine.pool_instances),
            max_memory_bytes: config.max_memory_bytes(),
            keep_resident_bytes: config.engine.keep_resident_bytes,
            cache_dir: config.engine.cache.then(|| data_root.join(CACHE_DIR)),
        })
        .map_err(|e| StartError::Engine(format!("{e:#}")))?;
        let sandbox = Arc::new(Sandbox::new(
            loader.engine().clone(),
            data_root.clone(),
            config.uses_fuel(),
        ));

        let mut tools = ToolRegistry::default();
        for (name, spec) in &config.tools {
            let name = name.get_ref();
            let owner = format!("tools.{name}");
            let pre = loader
                .tool(
                    &ComponentRef::parse(spec.component.get_ref()),
                    spec.allow_unknown_imports,
                )
                .map_err(|source| StartError::Load { owner, source })?;
            let tool = GuestTool::new(
                pre,
                name,
                sandbox.clone(),
                config::grants(&spec.grants),
                config::settings(&spec.settings),
                spec.limits,
            )
            .await
            .map_err(|source| StartError::Describe {
                tool: name.clone(),
                source,
            })?;
            if !tools.insert(Arc::new(tool)) {
                return Err(StartError::DuplicateTool { tool: name.clone() });
            }
        }
        if config.bash.enabled {
            let bash = BashTool::new(
                sandbox.clone(),
                config.bash_mount().to_string(),
                config.bash.timeout_secs.map(Duration::from_secs),
                Limits::default().max_output_bytes,
            );
            if !tools.insert(Arc::new(bash)) {
                return Err(StartError::DuplicateTool {
                    tool: "bash".into(),
                });
            }
        }

        let mut upstreams = Vec::new();
        let (tools_changed, _) = tokio::sync::watch::channel(0u64);
        for (name, spec) in &config.upstreams {
            match upstream::connect(name.get_ref(), spec).await {
                Ok(server) => {
                    // One signal for all upstreams: any change of their tools.
                    let mut changes = server.changes();
                    let all = tools_changed.clone();
                    tokio::spawn(async move {
                        while changes.changed().await.is_ok() {
                            all.send_modify(|n| *n += 1);
                        }
                    });
                    upstreams.push((name.get_ref().clone(), Some(server)));
                }
                // Its tools stay unlisted; the rest of the host serves on.
                Err(e) => {
                    tracing::error!(error = %e, "upstream unavailable");
                    upstreams.push((name.get_ref().clone(), None));
                }
            }
        }

        let mut layers = Vec::with_capacity(config.hooks.len());
        for spec in &config.hooks {
            let pre = loader
                .hook(
                    &ComponentRef::parse(spec.component.get_ref()),
                    spec.allow_unknown_imports,
                )
                .map_err(|source| StartError::Load {
                    owner: format!("hooks.{}", spec.name.get_ref()),
                    source,
                })?;
            if let HookPres::V0_2 {
                describe: Some(describe),
                ..
            } = &pre
            {
                check_declared_settings(spec, describe, &sandbox).await?;
            }
            layers.push(Arc::new(HookLayer {
                name: spec.name.get_ref().clone(),
                component: ComponentRef::parse(spec.component.get_ref()),
                pre,
                grants: config::grants(&spec.grants),
                settings: config::settings(&spec.settings),
                limits: spec.limits,
                on_failure: spec.on_failure,
                tools: spec
                    .tools
                    .as_deref()
                    .map(ToolMatch::new)
                    .unwrap_or_else(ToolMatch::all),
                instance: spec.instance,
                kept: Default::default(),
            }));
        }
        let mut tenants = BTreeMap::new();
        for (id, spec) in &config.tenants {
            let chain = spec.hooks.as_ref().map(|names| {
                let picked = names
                    .iter()
                    .filter_map(|n| layers.iter().find(|l| &l.name == n.get_ref()).cloned())
                    .collect();
                HookChain::new(picked, sandbox.clone())
            });
            let id = TenantId::new(id.get_ref().as_str()).map_err(StartError::Tenant)?;
            tenants.insert(
                id,
                Tenant {
                    chain,
                    token: spec.token.clone(),
                    max_sessions: spec.max_sessions,
                    quota: Quota {
                        bytes: spec.disk_quota_bytes,
                        entries: spec.disk_quota_files,
                    },
                    limits: spec.limits,
                    workdir: spec.workdir.as_ref().map(workdir_template),
                    tools: spec.tools.as_deref().map(ToolMatch::new),
                },
            );
        }

        Ok(Runtime {
            chain: HookChain::new(layers, sandbox.clone()),
            sandbox,
            closed_tenancy: !tenants.is_empty(),
            tenants,
            tools,
            mounts,
            serve_workdir: config.serve.workdir.as_ref().map(workdir_template),
            upstreams,
            tools_changed,
            in_flight: Default::default(),
            owner: Owner::Cli,
            usage: QuotaBook::default(),
            store,
            data_root,
            loader,
        })
    }

    /// Records `owner` on the sessions made from now on: a server says so, so that idle
    /// sweeps leave its live sessions alone.
    pub fn set_owner(&mut self, owner: Owner) {
        self.owner = owner;
    }

    /// Adds a tool of the embedder's (a host-native tool) beside the configured ones.
    ///
    /// # Errors
    ///
    /// [`StartError::DuplicateTool`] when a tool of that name exists.
    pub fn register_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), StartError> {
        let name = tool.descriptor().name.clone();
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
            .filter(|t| self.may_call(tenant, &t.name))
            .collect()
    }

    fn upstream_listing(&self) -> impl Iterator<Item = rmcp::model::Tool> + '_ {
        self.upstreams
            .iter()
            .filter_map(|(_, server)| server.as_ref())
            .flat_map(|server| server.listing())
    }

    /// Whether `tenant`'s allow-list lets it call `tool`.
    fn may_call(&self, tenant: &TenantId, tool: &str) -> bool {
        self.tenants
            .get(tenant)
            .and_then(|t| t.tools.as_ref())
            .is_none_or(|m| m.matches(tool))
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

    /// Whether `tenant`'s chain offloads large outputs (the built-in offload hook is in it).
    pub fn offloads(&self, tenant: &TenantId) -> bool {
        let offload = ComponentRef::Builtin("offload".into());
        self.chain(tenant)
            .layers()
            .iter()
            .any(|l| l.component == offload)
    }

    /// The tenants' bearer tokens, for the HTTP front end.
    pub fn tenant_tokens(&self) -> Vec<(Vec<u8>, TenantId)> {
        self.tenants
            .iter()
            .filter_map(|(id, t)| {
                Some((t.token.as_ref()?.expose().as_bytes().to_vec(), id.clone()))
            })
            .collect()
    }

    /// Whether tenants are declared (then only they may have sessions).
    pub fn has_tenants(&self) -> bool {
        self.closed_tenancy
    }

    /// The hook chain of `tenant`'s sessions.
    pub fn chain(&self, tenant: &TenantId) -> &HookChain {
        self.tenants
            .get(tenant)
            .and_then(|t| t.chain.as_ref())
            .unwrap_or(&self.chain)
    }

    /// `tenant`'s declaration; an error when tenants are declared and it is not one.
    fn tenant(&self, tenant: &TenantId) -> Result<Option<&Tenant>, SessionError> {
        match self.tenants.get(tenant) {
            None if self.closed_tenancy => Err(SessionError::UnknownTenant {
                tenant: tenant.to_string(),
            }),
            found => Ok(found),
        }
    }

    /// The working directory of a session `serve` makes for `tenant`: its tenant's
    /// `workdir`, else `[serve] workdir`, else none. (`serve --workdir` is the caller's.)
    ///
    /// # Errors
    ///
    /// [`SessionError::Workdir`] when the directory cannot be found or made.
    pub fn serve_workdir(&self, tenant: &TenantId) -> Result<Option<PathBuf>, SessionError> {
        let template = self
            .tenants
            .get(tenant)
            .and_then(|t| t.workdir.as_ref())
            .or(self.serve_workdir.as_ref());
        template
            .map(|t| {
                t.resolve(tenant).map_err(|source| SessionError::Workdir {
                    path: PathBuf::from(t.as_str()),
                    source,
                })
            })
            .transpose()
    }

    /// Creates a session of `tenant`: with `id`, or a new UUID; `workdir` is `{workdir}`
    /// in mount templates. Directories are made when a component first uses them.
    ///
    /// # Errors
    ///
    /// [`SessionError`]: the id is taken, the workdir is not a directory, a mount cannot
    /// be resolved, or the database fails.
    pub fn create_session(
        &self,
        tenant: TenantId,
        id: Option<SessionId>,
        workdir: Option<&Path>,
    ) -> Result<Session, SessionError> {
        let workdir = workdir
            .map(|w| {
                w.canonicalize()
                    .and_then(|w| {
                        if w.is_dir() {
                            Ok(w)
                        } else {
                            Err(std::io::Error::other("not a directory"))
                        }
                    })
                    .map_err(|source| SessionError::Workdir {
                        path: w.to_path_buf(),
                        source,
                    })
            })
            .transpose()?;
        if let Some(max) = self.tenant(&tenant)?.and_then(|t| t.max_sessions)
            && self.store.list(Some(&tenant))?.len() >= max
        {
            return Err(SessionError::TooManySessions {
                tenant: tenant.to_string(),
                max,
            });
        }
        let id = id.unwrap_or_else(SessionId::generate);
        let record = self
            .store
            .create(&tenant, &id, workdir.as_deref(), self.owner)?;
        self.session_of(&record)
    }

    /// The session `id` of `tenant`, marked active.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when `tenant` has no such session — whether or not
    /// another tenant has one of that id.
    pub fn open_session(&self, tenant: &TenantId, id: &SessionId) -> Result<Session, SessionError> {
        let record = self.record(tenant, id)?;
        self.store.touch(tenant, id)?;
        self.session_of(&record)
    }

    /// Marks `tenant`'s session `id` active, as a request of it does.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when the session does not exist (any more).
    pub fn touch_session(&self, tenant: &TenantId, id: &SessionId) -> Result<(), SessionError> {
        self.record(tenant, id)?;
        self.store.touch(tenant, id)
    }

    /// Whether `tenant`'s session `id` has been idle since `cutoff`: no call running, none
    /// made (and no request touching it) since. A session that is gone counts as idle.
    pub fn is_idle(&self, tenant: &TenantId, id: &SessionId, cutoff: SystemTime) -> bool {
        let key = (tenant.clone(), id.clone());
        if self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&key)
        {
            return false;
        }
        match self.record(tenant, id) {
            Ok(record) => record.last_active < cutoff,
            Err(SessionError::NotFound { .. }) => true,
            Err(e) => {
                tracing::warn!(%tenant, session = %id, error = %e, "reading a session failed");
                false
            }
        }
    }

    /// The table row of a session.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when `tenant` has no such session.
    pub fn record(&self, tenant: &TenantId, id: &SessionId) -> Result<SessionRecord, SessionError> {
        self.store
            .get(tenant, id)?
            .ok_or_else(|| SessionError::NotFound {
                tenant: tenant.to_string(),
                id: id.to_string(),
            })
    }

    /// Sessions, oldest first: `tenant`'s, or every tenant's.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a database failure.
    pub fn sessions(&self, tenant: Option<&TenantId>) -> Result<Vec<SessionRecord>, SessionError> {
        self.store.list(tenant)
    }

    /// Deletes `tenant`'s session `id` and every session-scoped directory of it, for every
    /// hook and tool; tenant and persistent mounts are kept.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when `tenant` has no such session; [`SessionError::Remove`]
    /// when a directory cannot be removed (the row is gone: `gc` retries the directories).
    pub fn delete_session(&self, tenant: &TenantId, id: &SessionId) -> Result<(), SessionError> {
        let session = self.session_of(&self.record(tenant, id)?)?;
        // Row first: a crash after this leaves orphaned directories, which gc removes.
        self.store.delete(tenant, id)?;
        let key = session.key();
        for tool in self.tools.iter() {
            tool.end_session(&key);
        }
        for layer in self.chain.layers() {
            layer.forget(&key);
        }
        self.sandbox.forget_dirs();
        session_store::remove_session_dirs(&self.data_root, &self.mounts, session.mounts())?;
        self.usage.forget(tenant);
        tracing::info!(tenant = %tenant, session = %id, "session deleted");
        Ok(())
    }

    /// Deletes the sessions last active before `idle_before` (none when `None`) — but not
    /// those of a server still running, which sweeps its own — then removes session
    /// directories that have no session, and temporary files (`*.partial`) older than
    /// [`STALE_PARTIAL_AGE`] that a stopped hook left.
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the database or a removal.
    pub fn gc(&self, idle_before: Option<SystemTime>) -> Result<GcReport, SessionError> {
        let mut report = GcReport::default();
        if let Some(cutoff) = idle_before {
            for record in self.store.idle_since(cutoff)? {
                if let Some(pid) = record.owner.live_server() {
                    tracing::debug!(session = %record.id, pid, "idle, but its server is running: left to it");
                    continue;
                }
                match self.delete_session(&record.tenant, &record.id) {
                    Ok(()) => report.sessions += 1,
                    // Deleted meanwhile by someone else.
                    Err(SessionError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        report.orphans = session_store::remove_orphans(&self.data_root, &self.mounts, &self.store)?;
        // Temporaries in every mount of the data directory (never in a user's workdir).
        let dirs = self.mount_dirs(None, |m| !m.in_workdir())?;
        report.partials = session_store::remove_stale_partials(
            &self.data_root,
            dirs.iter().map(PathBuf::as_path),
            STALE_PARTIAL_AGE,
        );
        self.sandbox.forget_dirs();
        self.usage.clear();
        Ok(report)
    }

    /// Disk used by `session` and by its tenant, against the tenant's quota, measured now
    /// (without following symlinks).
    ///
    /// # Errors
    ///
    /// [`SessionError`] when the tenant's sessions cannot be listed or resolved.
    pub fn disk_usage(&self, session: &Session) -> Result<DiskUsage, SessionError> {
        let own = session
            .mounts()
            .iter()
            .filter(|m| m.scope == Scope::Session)
            .map(|m| m.host.as_path());
        let tenant_dirs = self.quota_dirs(&session.tenant)?;
        Ok(DiskUsage {
            session: quota::measure(own),
            tenant: quota::measure(tenant_dirs.iter().map(PathBuf::as_path)),
            quota: self.quota_of(&session.tenant),
        })
    }

    /// All of `tenant`'s session and tenant directories: what its quota counts.
    fn quota_dirs(&self, tenant: &TenantId) -> Result<Vec<PathBuf>, SessionError> {
        self.mount_dirs(Some(tenant), |m| m.scope != Scope::Persistent)
    }

    /// The host directories of the mounts that `keep` accepts, of every session of
    /// `tenant` (of every tenant when `None`), each once.
    fn mount_dirs(
        &self,
        tenant: Option<&TenantId>,
        keep: impl Fn(&ResolvedMount) -> bool,
    ) -> Result<Vec<PathBuf>, SessionError> {
        let mut dirs = BTreeSet::new();
        for record in self.store.list(tenant)? {
            for mount in self.session_of(&record)?.mounts {
                if keep(&mount) {
                    dirs.insert(mount.host);
                }
            }
        }
        Ok(dirs.into_iter().collect())
    }

    fn quota_of(&self, tenant: &TenantId) -> Quota {
        self.tenants
            .get(tenant)
            .map(|t| t.quota)
            .unwrap_or_default()
    }

    /// `tenant`'s use as kept, measured (off the executor) when not known yet.
    async fn tenant_usage(&self, tenant: &TenantId) -> Result<Usage, SessionError> {
        if let Some(usage) = self.usage.get(tenant) {
            return Ok(usage);
        }
        let usage = quota::measure_async(self.quota_dirs(tenant)?).await;
        self.usage.set(tenant, usage);
        Ok(usage)
    }

    /// Runs `chain` for a tenant with a quota: refused when the tenant is at its quota;
    /// stopped as soon as it takes the tenant over it (see [`crate::quota`]); its output
    /// withheld when it ends over it.
    async fn run_within_quota(
        &self,
        session: &Session,
        quota: Quota,
        chain: impl Future<Output = ToolResult>,
    ) -> ToolResult {
        let tenant = &session.tenant;
        let used = match self.tenant_usage(tenant).await {
            Ok(used) => used,
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "cannot measure disk use");
                return chain.await;
            }
        };
        if let Some(over) = quota.exceeded(used, true) {
            return ToolResult::error(format!(
                "disk quota exceeded: tenant '{tenant}' uses {over}; delete files or sessions to continue"
            ));
        }
        // What this call can change: the session's own directories and the tenant's.
        let dirs: Vec<PathBuf> = session
            .mounts()
            .iter()
            .filter(|m| m.scope != Scope::Persistent)
            .map(|m| m.host.clone())
            .collect();
        let before = quota::measure_async(dirs.clone()).await;
        let watch = async {
            loop {
                tokio::time::sleep(QUOTA_CHECK_INTERVAL).await;
                let now = quota::measure_async(dirs.clone()).await;
                if let Some(over) = quota.exceeded(used.moved(before, now), false) {
                    return over;
                }
            }
        };
        let (result, stopped) = tokio::select! {
            result = chain => (result, false),
            over = watch => {
                tracing::warn!(%tenant, session = %session.id, over, "disk quota exceeded during a call; stopped");
                let message = format!(
                    "disk quota exceeded: the call took tenant '{tenant}' to {over} and was stopped; its output is withheld"
                );
                (ToolResult::error(message), true)
            }
        };
        let after = quota::measure_async(dirs).await;
        self.usage.moved(tenant, before, after);
        match quota.exceeded(used.moved(before, after), false) {
            Some(over) if !stopped => {
                tracing::warn!(%tenant, over, "disk quota exceeded by a call");
                ToolResult::error(format!(
                    "disk quota exceeded: the call left tenant '{tenant}' using {over}; its output is withheld"
                ))
            }
            _ => result,
        }
    }

    fn session_of(&self, record: &SessionRecord) -> Result<Session, SessionError> {
        let mounts = self.mounts.resolve(&SessionVars {
            data: &self.data_root,
            tenant: &record.tenant,
            session: &record.id,
            workdir: record.workdir.as_deref(),
        })?;
        let tenant_limits = self
            .tenant(&record.tenant)?
            .map(|t| t.limits)
            .unwrap_or_default();
        Ok(Session {
            id: record.id.clone(),
            tenant: record.tenant.clone(),
            mounts,
            tenant_limits,
        })
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
            .filter(|_| self.may_call(&session.tenant, tool))
            .ok_or_else(|| CallError::UnknownTool {
                name: tool.to_string(),
                known: self
                    .mcp_tools(&session.tenant)
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        chain::validate_arguments(arguments).map_err(|why| CallError::BadArguments {
            tool: tool.to_string(),
            why,
        })?;
        if let Err(e) = self.store.touch(&session.tenant, &session.id) {
            tracing::warn!(session = %session.id, error = %e, "could not mark the session active");
        }
        let _running = InFlight::enter(&self.in_flight, session.key());
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
        let span = tracing::info_span!("call", tool, call_id = %call.id, session = %session.id);
        let chain = self
            .chain(&session.tenant)
            .run(session, ctx, call, target.as_ref())
            .instrument(span);
        let quota = self.quota_of(&session.tenant);
        let result = if quota.is_set() {
            self.run_within_quota(session, quota, chain).await
        } else {
            chain.await
        };
        if let Err(e) = self.store.touch(&session.tenant, &session.id) {
            tracing::debug!(session = %session.id, error = %e, "could not mark the session active");
        }
        tracing::info!(
            tool,
            tenant = %session.tenant,
            session = %session.id,
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            outcome = if result.is_error { "error" } else { "ok" },
            output_bytes = result.output.len(),
            "call"
        );
        Ok((result, target.take_extras(&call_id)))
    }
}

/// Counts a call of a session as running while it lives.
struct InFlight<'a> {
    map: &'a Mutex<HashMap<SessionKey, usize>>,
    key: SessionKey,
}

impl<'a> InFlight<'a> {
    fn enter(map: &'a Mutex<HashMap<SessionKey, usize>>, key: SessionKey) -> InFlight<'a> {
        *map.lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default() += 1;
        InFlight { map, key }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

/// A template the config has validated.
fn workdir_template(spanned: &toml::Spanned<String>) -> WorkdirTemplate {
    WorkdirTemplate::new(spanned.get_ref()).expect("validated with the config")
}
