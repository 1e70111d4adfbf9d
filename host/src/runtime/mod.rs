//! The runtime: a config turned into loaded components, tools and a hook chain, and the
//! entry point for tool calls.
//!
//! What a config makes of tenants, components, tools, chains, upstream servers and JWT
//! keys is one value ([`Served`]) that a reload ([`Runtime::reload`]) replaces whole while
//! the server runs: a call keeps the one it began with to its end, so calls in flight
//! finish on the old config and new calls run on the new one, and no call sees half of
//! each. The sessions read the tenants and store components from it too ([`InEffect`]). A reload keeps whatever the new config leaves
//! unchanged — a hook's kept instances, an upstream's process, the sandboxes of `bash` —
//! and what the old config had alone is let go when its last call ends (an upstream no
//! longer listed is stopped then). The sessions, the tracer and the metrics outlive
//! reloads; what only a restart changes is [`Fixed`].

mod call;
mod load;
mod reload;
mod served;

pub use call::{Admission, CallError, Rate};
pub use load::{Signals, StartError};
use reload::Fixed;
pub use reload::{Changes, ReloadError, Reloaded};
use served::{Served, holder_of};

use crate::abi::ToolDescriptor;
use crate::chain::HookChain;
use crate::component::{ComponentLoader, ComponentRef};
use crate::config::Plan;
use crate::ids::{SessionId, TenantId};
use crate::jwt::Jwt;
use crate::metrics::Scraped;
use crate::mounts::CommitAt;
use crate::network::RequestLog;
use crate::persistent::keeper::Keeper;
use crate::sandbox::Sandbox;
use crate::secret::TokenDigest;
use crate::sessions::{Action, InEffect};
use crate::sessions::{Session, SessionError, SessionHolder, Sessions, Tenants};
use crate::stores::StoreComponent;
use crate::tools::Tool;
use crate::tools::bash::{Readiness, Unavailable};
use crate::tools::upstream;
use crate::trace::{CallTrace, TraceSettings, Tracer};
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// The compiled-code cache's directory, in the data directory.
pub const CACHE_DIR: &str = "cache";

/// The call id prefix and tool name under which a commit outside a call is traced.
pub const COMMIT_CALL: &str = "hookhost/commit";

/// A configured hookhost: its [`Sessions`], and what its config makes of components,
/// tools, chains and upstream servers (replaced whole by a reload).
pub struct Runtime {
    /// What the config in effect makes; each call keeps the one it began with. Shared
    /// with the sessions, which read their tenants from it ([`Snapshot`]).
    served: Arc<ArcSwap<Served>>,
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
    pub async fn new(plan: Plan, data_root: &Path) -> Result<Runtime, StartError> {
        let fixed = Fixed::of(&plan);
        // The sessions read their tenants from the snapshot, once it is built.
        let mut sessions = Sessions::at(
            data_root,
            plan.session_store.as_ref(),
            plan.mounts.clone(),
            Tenants::default(),
        )
        .await?;
        let dirs = sessions.dirs().clone();
        let signals = Signals::default();
        let (served, holders) = Served::build(plan, &dirs, &[], None, &signals).await?;
        let served = Arc::new(ArcSwap::from_pointee(served));
        sessions.follow(Arc::new(Snapshot(served.clone())));
        sessions.measure_quotas().await?;
        for holder in holders {
            sessions.hold(holder);
        }
        let trace = TraceSettings {
            fleet: sessions.is_shared(),
            ..fixed.trace.clone()
        };
        let tracer = Arc::new(Tracer::new(trace, served.load().sandbox.clone()));
        sessions.hold(Arc::downgrade(&tracer) as Weak<dyn SessionHolder>);
        Ok(Runtime {
            served,
            fixed,
            embedded: Vec::new(),
            reloading: tokio::sync::Mutex::new(()),
            signals,
            data_root: dirs.data_root().to_path_buf(),
            sessions,
            tracer,
        })
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

    /// Readies `session`'s persistent directories for a call: the checkouts of those
    /// `granted` names (what the call's hooks and tool may reach) loaded if they were not
    /// (see [`Sessions::load`]), every loaded one brought up to what other sessions
    /// committed since (see [`Sessions::refresh`]). A store component's requests are
    /// recorded in `requests`: the call's, for its trace.
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming a directory that could not be loaded.
    pub async fn prepare(
        &self,
        session: &Session,
        granted: impl Fn(&str) -> bool,
        requests: &Arc<RequestLog>,
    ) -> Result<(), SessionError> {
        self.sessions.load(session, granted, requests).await?;
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
        let committed = self
            .sessions
            .commit(session, Some(CommitAt::Call), Some(trace.requests()))
            .await;
        trace.commits(&committed);
        committed.map(drop)
    }

    /// Publishes `session`'s persistent directories whose boundary is `at` (every one for
    /// `None`) outside a call — at an agent's turn end, on `hookhost/commit` — as
    /// [`Sessions::commit`] does, traced in the session's trace as [`COMMIT_CALL`]`-ID`;
    /// with `resolve`, every one, a conflict settled by it (see
    /// [`Sessions::commit_resolving`]).
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming the mount that could not be published.
    pub async fn commit(
        &self,
        session: &Session,
        at: Option<CommitAt>,
        resolve: Option<crate::persistent::OnConflict>,
    ) -> Result<Vec<(String, crate::persistent::CommitReport)>, SessionError> {
        // Most turn ends have nothing to publish: no trace is begun for them.
        if !self.sessions.has_due(session, at) {
            return Ok(Vec::new());
        }
        let tenants = self.tenants();
        let requests: Arc<RequestLog> = Arc::default();
        let caller = tenants.caller(session, &requests)?;
        let id = format!("{COMMIT_CALL}-{}", uuid::Uuid::new_v4().simple());
        let mut trace = self.tracer.begin(&caller, &id, COMMIT_CALL);
        let committed = match resolve {
            Some(_) => {
                self.sessions
                    .commit_resolving(session, resolve, Some(&requests))
                    .await
            }
            None => self.sessions.commit(session, at, Some(&requests)).await,
        };
        trace.commits(&committed);
        trace.end();
        committed
    }

    /// Ends `tenant`'s session `id` for good: its persistent directories published first,
    /// traced as any commit is (see [`Runtime::commit`]), or their changes dropped when
    /// `discard`; then its commands stopped and its files deleted.
    ///
    /// # Errors
    ///
    /// As [`Sessions::delete`]: a commit that fails keeps the session.
    pub async fn end_session(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        discard: bool,
    ) -> Result<(), SessionError> {
        if !discard {
            let session = self
                .sessions
                .resolve(&self.sessions.record(tenant, id).await?)?;
            self.commit(&session, None, None).await?;
        }
        self.sessions.discard(tenant, id).await
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
            upstream_instances: self
                .upstream_instances()
                .into_iter()
                .flat_map(|(name, states)| {
                    states
                        .into_iter()
                        .map(move |(state, n)| (name.clone(), state, to_i64(n as u64)))
                })
                .collect(),
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

    /// The tools the host serves itself: configured, built in, registered.
    pub fn host_tools(&self) -> Vec<ToolDescriptor> {
        self.served.load().tools.descriptors().cloned().collect()
    }

    /// The tenants as the config in effect declares them, with their rates.
    pub fn tenants(&self) -> Arc<Tenants> {
        self.served.load().tenants.clone()
    }

    /// Who may call the HTTP endpoint, from one snapshot: the tenants (with their tokens)
    /// and the bearer JWTs' keys (`[auth]`), if configured.
    pub fn credentials(&self) -> (Arc<Tenants>, Option<Arc<Jwt>>) {
        let served = self.served.load();
        (served.tenants.clone(), served.jwt.clone())
    }

    /// The names of the tools `tenant` may call (its `tools` allow-list, else every tool):
    /// the host's and the upstream servers' it shares.
    pub fn tool_names(&self, tenant: &TenantId) -> Vec<String> {
        let tenants = self.tenants();
        self.tools()
            .into_iter()
            .map(|d| d.name)
            .filter(|name| tenants.authorize(tenant, Action::Call(name)))
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

    /// Each component of the config in effect, by who uses it (`hooks.NAME`, `tools.NAME`,
    /// `persistent."PATH".store`): as the config names it, and for a registry's, what it
    /// was pulled as (its digests, the keys that signed it).
    pub fn components(&self) -> Vec<(String, ComponentRef, Option<crate::registry::Pulled>)> {
        let served = self.served.load();
        let hooks = served.hooks.iter().map(|(plan, _)| {
            (
                format!("hooks.{}", plan.component.name),
                &plan.component.component,
            )
        });
        let tools = served
            .guest_tools
            .iter()
            .map(|(plan, _)| (format!("tools.{}", plan.name), &plan.component));
        let stores = served
            .stores
            .iter()
            .map(|(path, store)| (format!("persistent.{path:?}.store"), store.component()));
        hooks
            .chain(tools)
            .chain(stores)
            .map(|(owner, component)| {
                let pulled = match component {
                    ComponentRef::Oci(written) => served.loader.pulled_of(written),
                    _ => None,
                };
                (owner, component.clone(), pulled)
            })
            .collect()
    }

    /// Each upstream server by name: `up`, `down` (it died and is being restarted; its
    /// tools answer with an error) or `unavailable` (it did not start, and is being tried
    /// again).
    pub fn upstream_states(&self) -> Vec<(String, &'static str)> {
        self.served
            .load()
            .upstreams
            .iter()
            .map(|(name, _, server)| (name.clone(), server.state()))
            .collect()
    }

    /// Each upstream server with an instance per tenant or per session (`scope`): how many
    /// of its instances are in each state.
    pub fn upstream_instances(&self) -> Vec<(String, BTreeMap<&'static str, usize>)> {
        self.served
            .load()
            .pools
            .iter()
            .map(|pool| (pool.name().to_string(), pool.states()))
            .collect()
    }

    /// The upstream servers that are not up: their name, state (`down`, `unavailable`) and
    /// whether the config says the host is ready without them (`optional`).
    pub fn upstreams_down(&self) -> Vec<(String, &'static str, bool)> {
        self.served
            .load()
            .upstreams
            .iter()
            .filter(|(_, _, server)| !server.is_up())
            .map(|(name, spec, server)| (name.clone(), server.state(), spec.optional))
            .collect()
    }

    /// The MCP revision each shared upstream server that is up speaks.
    pub fn upstream_protocols(&self) -> Vec<(String, String)> {
        self.served
            .load()
            .upstreams
            .iter()
            .filter_map(|(name, _, server)| Some((name.clone(), server.protocol()?.to_string())))
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

    /// The hook chain of `tenant`'s sessions, in the config in effect.
    pub fn chain(&self, tenant: &TenantId) -> Arc<HookChain> {
        self.served.load().chain(tenant).clone()
    }
}

/// The runtime's snapshot as its sessions read it: the tenants and store components of the
/// config in effect.
struct Snapshot(Arc<ArcSwap<Served>>);

impl InEffect for Snapshot {
    fn tenants(&self) -> Arc<Tenants> {
        self.0.load().tenants.clone()
    }

    fn keeper(&self, virtual_path: &str) -> Option<Arc<dyn Keeper>> {
        let store = self.0.load().stores.get(virtual_path)?.clone();
        Some(store as Arc<dyn Keeper>)
    }
}
