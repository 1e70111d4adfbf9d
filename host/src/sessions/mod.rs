//! Everything a session is, end to end: its row ([`table`]), its directories ([`dirs`]),
//! its tenant's bounds ([`tenants`]) and disk use ([`quota`]), and [`Sessions`], the one
//! place that creates, opens, deletes and collects sessions.
//!
//! A session is created (by the CLI, or by `serve` for an MCP session), touched by every
//! call, listed, and deleted — by hand, when its MCP session ends, or by the idle sweep.
//! Deleting removes the row, then tells everything that holds state for the session
//! ([`holders`]: kept hook instances, the trace, running commands, MCP sessions), then
//! removes its session-scoped directories. A server keeps its sessions with
//! [`Sessions::tend`]: running ones marked active, idle ones collected, those another host
//! of a fleet ended forgotten.

pub mod dirs;
pub mod holders;
pub mod kept;
pub mod postgres;
pub mod quota;
pub mod rate;
pub mod table;
pub mod tenants;

pub use dirs::MountDirs;
pub use holders::SessionHolder;
pub use postgres::PgTable;
pub use quota::{Quota, QuotaCall, Usage};
pub use rate::RateRefusal;
pub use table::{Owner, Principal, Server, SessionError, SessionRecord, SessionTable, SqliteTable};
pub use tenants::{Action, Caller, Tenant, Tenants, WorkdirTemplate};

use crate::ids::{SessionId, TenantId};
use crate::limits::{STALE_PARTIAL_AGE, TOUCH_INTERVAL};
use crate::mounts::{MountTable, ResolvedMount, Scope, SessionVars};
use crate::persistent::keeper::Keeper;
use crate::secret::Secret;
use quota::QuotaBook;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

/// Where an agent's pre-tool hooks leave what their post-tool hooks need, per call, for
/// a session (see `agents`): under the data directory, apart from every mount (no
/// component reaches it), removed when the session ends.
pub fn hook_calls_dir(data: &Path, tenant: &TenantId, session: &SessionId) -> PathBuf {
    data.join("hook-calls")
        .join(tenant.as_str())
        .join(session.as_str())
}

/// Names one session across tenants: a session id means something only with its tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    pub tenant: TenantId,
    pub id: SessionId,
}

impl SessionKey {
    pub fn new(tenant: &TenantId, id: &SessionId) -> SessionKey {
        SessionKey {
            tenant: tenant.clone(),
            id: id.clone(),
        }
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.id)
    }
}

/// One agent session: its id, its tenant, and its mounts resolved to host directories.
/// What the config says of its tenant is not kept on it: a call reads that from the config
/// in effect when it begins (its [`Caller`]).
#[derive(Debug, Clone)]
pub struct Session {
    pub id: SessionId,
    pub tenant: TenantId,
    /// Its working directory, when it has one (the user's project).
    pub workdir: Option<PathBuf>,
    pub(crate) mounts: Vec<ResolvedMount>,
}

impl Session {
    /// The key of this session.
    pub fn key(&self) -> SessionKey {
        SessionKey::new(&self.tenant, &self.id)
    }

    /// The session's mounts.
    pub fn mounts(&self) -> &[ResolvedMount] {
        &self.mounts
    }

    /// The host directory behind `virtual_path` (such as `/workspace`), if it is a mount.
    pub fn host_dir(&self, virtual_path: &str) -> Option<&Path> {
        self.mounts
            .iter()
            .find(|m| m.virtual_path == virtual_path)
            .map(|m| m.host.as_path())
    }

    /// The host directories of its session-scoped mounts: deleted with it.
    fn own_dirs(&self) -> impl Iterator<Item = &Path> {
        self.own_mounts().map(|m| m.host.as_path())
    }

    /// Its session-scoped mounts: deleted with it.
    pub(crate) fn own_mounts(&self) -> impl Iterator<Item = &ResolvedMount> {
        self.mounts.iter().filter(|m| m.scope == Scope::Session)
    }

    /// Its mounts among `writable` (virtual paths) that its tenant's quota counts:
    /// session- and tenant-scoped ones.
    fn quota_mounts<'a>(
        &'a self,
        writable: &'a BTreeSet<&str>,
    ) -> impl Iterator<Item = &'a ResolvedMount> {
        self.mounts
            .iter()
            .filter(|m| m.scope != Scope::Persistent && writable.contains(m.virtual_path.as_str()))
    }
}

/// Which idle sessions [`Sessions::tend`] deletes: those idle for longer than `idle` whose
/// owner `owners` accepts.
#[derive(Clone, Copy)]
pub struct IdleSweep {
    pub idle: Duration,
    pub owners: fn(&Owner) -> bool,
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

/// What [`Sessions::gc`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GcReport {
    /// Idle sessions deleted.
    pub sessions: usize,
    /// Session directories without a session, removed.
    pub orphans: usize,
    /// Stale temporary files removed.
    pub partials: usize,
}

/// What the config in effect says that sessions need, read at each use: the tenants, and
/// the store components that keep persistent directories. A server's is the runtime's one
/// snapshot, which a reload replaces whole; a command that runs no calls has its config's
/// tenants and no store component ([`Declared`]).
pub trait InEffect: Send + Sync {
    /// The tenants as the config in effect declares them.
    fn tenants(&self) -> Arc<Tenants>;

    /// The store component that keeps the persistent directory `virtual_path`, if one is
    /// loaded.
    fn keeper(&self, virtual_path: &str) -> Option<Arc<dyn Keeper>>;
}

/// A config's tenants, in effect for a command that loads no component.
pub struct Declared(pub Arc<Tenants>);

impl InEffect for Declared {
    fn tenants(&self) -> Arc<Tenants> {
        self.0.clone()
    }

    fn keeper(&self, _: &str) -> Option<Arc<dyn Keeper>> {
        None
    }
}

/// The sessions of one host: their table, directories, tenants and disk use.
pub struct Sessions {
    table: Box<dyn SessionTable>,
    dirs: Arc<MountDirs>,
    mounts: MountTable,
    /// The tenants and store components of the config in effect (see [`Sessions::follow`]).
    in_effect: Arc<dyn InEffect>,
    /// Who this process is, recorded on the sessions it makes.
    owner: Owner,
    /// Tenants' disk use, kept.
    usage: QuotaBook,
    /// Calls running per session: a session with one is in use and never idle.
    in_flight: Mutex<HashMap<SessionKey, usize>>,
    /// When each session was last written as active, to skip redundant writes.
    touched: Mutex<HashMap<SessionKey, SystemTime>>,
    holders: holders::Holders,
}

impl Sessions {
    /// The sessions kept under `data_root` (made 0700 when missing): their table (the
    /// PostgreSQL database at `store`, else the SQLite file there), their directories,
    /// `mounts` and `tenants`. All a command that runs no calls needs (`session …`).
    ///
    /// Security: sets the process umask to 077, so that every file and directory made
    /// under it — by the host or by a guest, which WASI gives no way to choose modes — is
    /// private to the host's user (0600 / 0700).
    ///
    /// # Errors
    ///
    /// [`SessionError`] when the directory or the table cannot be opened.
    pub async fn at(
        data_root: &Path,
        store: Option<&Secret>,
        mounts: MountTable,
        tenants: Tenants,
    ) -> Result<Sessions, SessionError> {
        use std::os::unix::fs::DirBuilderExt;
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
        let data_dir = |source| SessionError::DataDir {
            path: data_root.to_path_buf(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_root)
            .map_err(data_dir)?;
        let data_root = data_root.canonicalize().map_err(data_dir)?;
        let table: Box<dyn SessionTable> = match store {
            Some(url) => Box::new(PgTable::connect(url.expose()).await?),
            None => Box::new(SqliteTable::open(&data_root)?),
        };
        let dirs = Arc::new(MountDirs::new(data_root, table.store_locks()));
        Ok(Sessions::new(table, dirs, mounts, tenants))
    }

    pub fn new(
        table: Box<dyn SessionTable>,
        dirs: Arc<MountDirs>,
        mounts: MountTable,
        tenants: Tenants,
    ) -> Sessions {
        Sessions {
            table,
            dirs,
            mounts,
            in_effect: Arc::new(Declared(Arc::new(tenants))),
            owner: Owner::Cli,
            usage: QuotaBook::default(),
            in_flight: Mutex::default(),
            touched: Mutex::default(),
            holders: holders::Holders::default(),
        }
    }

    /// Reads the tenants and store components from `in_effect` from now on: a runtime's
    /// snapshot of the config in effect, which its reloads replace.
    pub fn follow(&mut self, in_effect: Arc<dyn InEffect>) {
        self.in_effect = in_effect;
    }

    /// The sessions' directories.
    pub fn dirs(&self) -> &Arc<MountDirs> {
        &self.dirs
    }

    /// Records `owner` on the sessions made from now on: a server says so, so that idle
    /// sweeps leave its live sessions alone.
    pub fn set_owner(&mut self, owner: Owner) {
        self.owner = owner;
    }

    /// Registers `holder`, to be told when a session ends (see [`holders`]); it is held
    /// weakly, and dropped from the list once gone.
    pub fn hold(&self, holder: Weak<dyn SessionHolder>) {
        self.holders.add(holder);
    }

    /// Whether the session table answers within [`READY_CHECK_TIMEOUT`]: `Err` says why
    /// not.
    ///
    /// [`READY_CHECK_TIMEOUT`]: crate::limits::READY_CHECK_TIMEOUT
    pub async fn ping(&self) -> Result<(), String> {
        match tokio::time::timeout(crate::limits::READY_CHECK_TIMEOUT, self.table.ping()).await {
            Ok(answered) => answered.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no answer within {} s",
                crate::limits::READY_CHECK_TIMEOUT.as_secs()
            )),
        }
    }

    /// Whether several hosts share the session table (a fleet): a session outlives the
    /// host that made it.
    pub fn is_shared(&self) -> bool {
        self.table.is_shared()
    }

    /// The tenants as the config in effect declares them.
    pub fn tenants(&self) -> Arc<Tenants> {
        self.in_effect.tenants()
    }

    /// Creates a session of `tenant`: with `id`, or a new UUID; `workdir` is `{workdir}`
    /// in mount templates. Directories are made when a component first uses them.
    ///
    /// # Errors
    ///
    /// [`SessionError`]: the tenant is not declared or has its maximum of sessions, the id
    /// is taken, the workdir is not a directory, a mount cannot be resolved, or the table
    /// fails.
    pub async fn create(
        &self,
        tenant: TenantId,
        id: Option<SessionId>,
        workdir: Option<&Path>,
    ) -> Result<Session, SessionError> {
        self.create_for(&Principal::tenant(tenant), id, workdir)
            .await
    }

    /// Creates a session as [`Sessions::create`] does, bound to `principal`'s subject:
    /// only it may [`open_for`](Sessions::open_for) the session.
    ///
    /// # Errors
    ///
    /// As [`Sessions::create`].
    pub async fn create_for(
        &self,
        principal: &Principal,
        id: Option<SessionId>,
        workdir: Option<&Path>,
    ) -> Result<Session, SessionError> {
        let tenant = &principal.tenant;
        let workdir = workdir.map(checked_workdir).transpose()?;
        if let Some(max) = self.tenants().get(tenant)?.and_then(|t| t.max_sessions)
            && self.table.list(Some(tenant)).await?.len() >= max
        {
            return Err(SessionError::TooManySessions {
                tenant: tenant.to_string(),
                max,
            });
        }
        let id = id.unwrap_or_else(SessionId::generate);
        let record = self
            .table
            .create(
                tenant,
                &id,
                workdir.as_deref(),
                self.owner.clone(),
                principal.subject.as_deref(),
            )
            .await?;
        self.resolve(&record)
    }

    /// The session `id` of `tenant`, marked active.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when `tenant` has no such session — whether or not
    /// another tenant has one of that id.
    pub async fn open(&self, tenant: &TenantId, id: &SessionId) -> Result<Session, SessionError> {
        let record = self.record(tenant, id).await?;
        self.opened(record).await
    }

    /// The session `id` of `principal`'s tenant, marked active, if `principal` may use
    /// it (see [`Principal::may_use`]).
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when the tenant has no such session, or the session is
    /// another subject's: who presents another's id learns nothing of it.
    pub async fn open_for(
        &self,
        principal: &Principal,
        id: &SessionId,
    ) -> Result<Session, SessionError> {
        let record = self.record(&principal.tenant, id).await?;
        if !principal.may_use(&record) {
            tracing::info!(tenant = %principal.tenant, session = %id, subject = ?principal.subject, "refused a session made by another subject");
            return Err(SessionError::NotFound {
                tenant: principal.tenant.to_string(),
                id: id.to_string(),
            });
        }
        self.opened(record).await
    }

    /// `record`'s session, marked active.
    async fn opened(&self, record: SessionRecord) -> Result<Session, SessionError> {
        let (tenant, id) = (&record.tenant, &record.id);
        // A process that opens one session and ends (`hookhost call`, `hookhost hook`)
        // writes nothing when the table says it was active a moment ago.
        let recent = SystemTime::now()
            .duration_since(record.last_active)
            .is_ok_and(|d| d < TOUCH_INTERVAL);
        if recent {
            self.touched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(SessionKey::new(tenant, id), record.last_active);
        } else {
            self.write_touch(tenant, id).await?;
        }
        self.resolve(&record)
    }

    /// The session `id` of `principal`, made (with `workdir`) when it does not exist yet.
    ///
    /// # Errors
    ///
    /// As [`Sessions::create`]; [`SessionError::NotFound`] when the id is another
    /// subject's session.
    pub async fn open_or_create(
        &self,
        principal: &Principal,
        id: &SessionId,
        workdir: Option<&Path>,
    ) -> Result<Session, SessionError> {
        match self.open_for(principal, id).await {
            Err(SessionError::NotFound { .. }) => {}
            opened => return opened,
        }
        match self.create_for(principal, Some(id.clone()), workdir).await {
            // Made meanwhile by another caller.
            Err(SessionError::Exists { .. }) => self.open_for(principal, id).await,
            made => made,
        }
    }

    /// Writes that the session is active now, unless that was written less than
    /// [`TOUCH_INTERVAL`] ago.
    async fn write_touch(&self, tenant: &TenantId, id: &SessionId) -> Result<(), SessionError> {
        let now = SystemTime::now();
        {
            let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
            let key = SessionKey::new(tenant, id);
            if touched
                .get(&key)
                .is_some_and(|t| now.duration_since(*t).is_ok_and(|d| d < TOUCH_INTERVAL))
            {
                return Ok(());
            }
            touched.insert(key, now);
        }
        self.table.touch(tenant, id, now).await
    }

    /// Marks `session` active, as its calls do (before and after, so that a long call
    /// does not leave it looking idle). A failure is logged: it never fails the call.
    pub async fn mark_active(&self, session: &Session) {
        if let Err(e) = self.write_touch(&session.tenant, &session.id).await {
            tracing::warn!(session = %session.key(), error = %e, "could not mark the session active");
        }
    }

    /// Whether the session `key` has been idle since `cutoff`: no call running, none made
    /// (and no request touching it) since. A session that is gone counts as idle.
    pub async fn is_idle(&self, key: &SessionKey, cutoff: SystemTime) -> bool {
        if self.is_running(key) {
            return false;
        }
        match self.record(&key.tenant, &key.id).await {
            Ok(record) => record.last_active < cutoff,
            Err(SessionError::NotFound { .. }) => true,
            Err(e) => {
                tracing::warn!(session = %key, error = %e, "reading a session failed");
                false
            }
        }
    }

    /// The table row of a session.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when `tenant` has no such session.
    pub async fn record(
        &self,
        tenant: &TenantId,
        id: &SessionId,
    ) -> Result<SessionRecord, SessionError> {
        self.table
            .get(tenant, id)
            .await?
            .ok_or_else(|| SessionError::NotFound {
                tenant: tenant.to_string(),
                id: id.to_string(),
            })
    }

    /// Sessions, oldest first: `tenant`'s, or every tenant's.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a table failure.
    pub async fn list(
        &self,
        tenant: Option<&TenantId>,
    ) -> Result<Vec<SessionRecord>, SessionError> {
        self.table.list(tenant).await
    }

    /// Deletes `tenant`'s session `id`: the row, then what holds state for it is told (see
    /// [`Sessions::hold`]), then every session-scoped directory of it, for every hook and
    /// tool; tenant and persistent mounts are kept.
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`] when `tenant` has no such session; [`SessionError::Remove`]
    /// when a directory cannot be removed (the row is gone: `gc` retries the directories).
    pub async fn delete(&self, tenant: &TenantId, id: &SessionId) -> Result<(), SessionError> {
        self.remove(tenant, id, true).await
    }

    /// Deletes a session as [`Sessions::delete`] does, dropping what its persistent
    /// directories' checkouts changed instead of publishing it.
    ///
    /// # Errors
    ///
    /// As [`Sessions::delete`], without the commit's.
    pub async fn discard(&self, tenant: &TenantId, id: &SessionId) -> Result<(), SessionError> {
        self.remove(tenant, id, false).await
    }

    /// Ends `tenant`'s session `id` as its agent ended it, to be resumed: its persistent
    /// directories published (one that cannot be stays in its checkout, logged), what
    /// holds state for it told it ended (kept instances, commands), its pending hook calls
    /// dropped — and its row and files (offloaded outputs, plans, its trace) kept, owned by
    /// no process ([`Owner::Ended`]), until it has been idle for `[agents] keep_artifacts`
    /// and `session gc` deletes it (see [`Sessions::gc`]).
    ///
    /// # Errors
    ///
    /// [`SessionError::NotFound`], or from the table.
    pub async fn close(&self, tenant: &TenantId, id: &SessionId) -> Result<(), SessionError> {
        let session = self.resolve(&self.record(tenant, id).await?)?;
        if let Err(e) = self.commit(&session, None, None).await {
            tracing::warn!(session = %session.key(), error = %e, "the ended session's persistent directories were not published");
        }
        self.table.set_owner(tenant, id, &Owner::Ended).await?;
        let key = session.key();
        self.tell_ended(&key);
        self.drop_pending_calls(&key);
        tracing::info!(session = %key, "session ended, kept to be resumed");
        Ok(())
    }

    async fn remove(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        publish: bool,
    ) -> Result<(), SessionError> {
        let session = self.resolve(&self.record(tenant, id).await?)?;
        // Its persistent directories are published before it goes; one that cannot be
        // keeps the session (and its checkout) for the conflict to be resolved.
        if publish {
            self.commit(&session, None, None).await?;
        }
        // Row first: a crash after this leaves orphaned directories, which gc removes. Of
        // hosts deleting it at once, the one whose statement removed the row goes on.
        if !self.table.delete(tenant, id).await? {
            return Err(SessionError::NotFound {
                tenant: tenant.to_string(),
                id: id.to_string(),
            });
        }
        self.ended(&session).await
    }

    /// Deletes the idle sessions whose owner `sweep` accepts, each only if it is still
    /// idle when its row is removed — a call that began meanwhile, on this host or
    /// another, keeps it — and never one with a call running here. Returns how many.
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the table or a removal.
    pub async fn sweep_idle(
        &self,
        cutoff: SystemTime,
        sweep: impl Fn(&Owner) -> bool,
    ) -> Result<usize, SessionError> {
        let mut swept = 0;
        for record in self.table.idle_since(cutoff).await? {
            let key = SessionKey::new(&record.tenant, &record.id);
            if !sweep(&record.owner) || self.is_running(&key) {
                continue;
            }
            let session = self.resolve(&record)?;
            if let Err(e) = self.commit(&session, None, None).await {
                tracing::warn!(session = %key, error = %e, "idle session kept: its persistent directories could not be published");
                continue;
            }
            if self
                .table
                .delete_if_idle(&record.tenant, &record.id, cutoff)
                .await?
            {
                self.ended(&session).await?;
                tracing::info!(session = %key, "idle session collected");
                swept += 1;
            }
        }
        Ok(swept)
    }

    /// Marks the sessions with a call running here active, so that no host's sweep takes
    /// them for idle however long the call runs. A server calls it at least once per
    /// idle period.
    pub async fn heartbeat(&self) {
        let running: Vec<SessionKey> = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        for key in running {
            if let Err(e) = self.write_touch(&key.tenant, &key.id).await {
                tracing::warn!(session = %key, error = %e, "could not mark a running session active");
            }
        }
    }

    /// Has every holder forget the sessions any holds state for that are gone from the
    /// table — deleted by another process (the CLI, another host of a fleet). Their files
    /// are the deleting process's to remove.
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the table.
    pub async fn forget_ended_elsewhere(&self) -> Result<(), SessionError> {
        let held = self.holders.held();
        if held.is_empty() {
            return Ok(());
        }
        let live: std::collections::HashSet<SessionKey> = self
            .table
            .list(None)
            .await?
            .into_iter()
            .map(|r| SessionKey::new(&r.tenant, &r.id))
            .collect();
        for key in held.iter().filter(|k| !live.contains(k)) {
            tracing::info!(session = %key, "session ended on another host; its state here dropped");
            self.tell_ended(key);
        }
        Ok(())
    }

    fn tell_ended(&self, key: &SessionKey) {
        self.holders.forget(key);
    }

    /// What a server runs beside its calls, every `tick`, until dropped: marks the
    /// sessions with a call running here active (see [`Sessions::heartbeat`]), has every
    /// holder forget the sessions another process ended (on a fleet's shared table),
    /// measures afresh the tenants kept at their quota (see
    /// [`Sessions::remeasure_over_quota`]), and, with `idle`, deletes the idle sessions it
    /// names.
    pub async fn tend(&self, tick: Duration, idle: Option<IdleSweep>) {
        let mut tick = tokio::time::interval(tick);
        loop {
            tick.tick().await;
            self.heartbeat().await;
            if self.is_shared()
                && let Err(e) = self.forget_ended_elsewhere().await
            {
                tracing::warn!(error = %e, "checking for sessions ended elsewhere failed");
            }
            self.remeasure_over_quota().await;
            let Some(sweep) = idle else {
                continue;
            };
            let cutoff = SystemTime::now()
                .checked_sub(sweep.idle)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            if let Err(e) = self.sweep_idle(cutoff, sweep.owners).await {
                tracing::warn!(error = %e, "the idle sweep failed");
            }
        }
    }

    /// What follows a session's row removal: what holds state for it is told, its MCP
    /// state and its session-scoped directories are removed, and its tenant's kept disk
    /// use loses what they held.
    async fn ended(&self, session: &Session) -> Result<(), SessionError> {
        let key = session.key();
        self.touched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        self.tell_ended(&key);
        if let Err(e) = self.table.forget_mcp_state(key.id.as_str()).await {
            tracing::warn!(session = %key, error = %e, "could not forget the MCP session's state");
        }
        self.drop_pending_calls(&key);
        let freed = quota::measure_async(owned(session.own_dirs())).await;
        self.dirs.remove_session(&self.mounts, session.mounts())?;
        self.usage.moved(&key.tenant, freed, Usage::default());
        tracing::info!(session = %key, "session deleted");
        Ok(())
    }

    /// Removes what an agent's pre-tool events left for their post-tool events.
    fn drop_pending_calls(&self, key: &SessionKey) {
        let calls = hook_calls_dir(self.dirs.data_root(), &key.tenant, &key.id);
        if let Err(e) = std::fs::remove_dir_all(&calls)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(session = %key, error = %e, "could not remove the session's pending agent hook calls");
        }
    }

    /// The MCP client's `initialize` of the MCP session `id`, kept for another host.
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the table.
    pub async fn mcp_state(&self, id: &str) -> Result<Option<String>, SessionError> {
        self.table.mcp_state(id).await
    }

    /// Keeps the MCP session `id`'s `initialize` (see [`Sessions::mcp_state`]).
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the table.
    pub async fn set_mcp_state(&self, id: &str, state: &str) -> Result<(), SessionError> {
        self.table.set_mcp_state(id, state).await
    }

    /// Forgets the MCP session `id`'s `initialize`.
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the table.
    pub async fn forget_mcp_state(&self, id: &str) -> Result<(), SessionError> {
        self.table.forget_mcp_state(id).await
    }

    /// Deletes the sessions their agents ended ([`Sessions::close`]) last active before
    /// `ended_before`, and the sessions last active before `idle_before` (none when
    /// `None`) — but not those of a server still running, which sweeps its own — then
    /// removes session directories that have no session, and temporary files
    /// (`*.partial`) older than [`STALE_PARTIAL_AGE`] that a stopped hook left; then
    /// measures the tenants' disk use afresh.
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the table or a removal.
    pub async fn gc(
        &self,
        idle_before: Option<SystemTime>,
        ended_before: SystemTime,
    ) -> Result<GcReport, SessionError> {
        let mut report = GcReport {
            sessions: self
                .sweep_idle(ended_before, |owner| *owner == Owner::Ended)
                .await?,
            ..GcReport::default()
        };
        if let Some(cutoff) = idle_before {
            report.sessions += self
                .sweep_idle(cutoff, |owner| owner.live_server().is_none())
                .await?;
        }
        // Temporaries in every mount of the data directory (never in a user's workdir).
        let dirs = self
            .mount_dirs(None, |m, dirs| {
                if !m.in_workdir() {
                    dirs.insert(m.host.clone());
                }
            })
            .await?;
        (report.orphans, report.partials) = self
            .dirs
            .sweep(&self.mounts, self.table.as_ref(), &dirs, STALE_PARTIAL_AGE)
            .await?;
        self.measure_quotas().await?;
        Ok(report)
    }

    /// Whether a call of the session `key` runs here now.
    fn is_running(&self, key: &SessionKey) -> bool {
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(key)
    }

    /// Counts a call of `session` as running while the guard lives: the session is not
    /// idle meanwhile.
    pub fn enter(&self, session: &Session) -> InFlight<'_> {
        let key = session.key();
        *self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default() += 1;
        InFlight {
            map: &self.in_flight,
            key,
        }
    }

    /// The host directories that `pick` picks from each mount of every session of
    /// `tenant` (of every tenant when `None`), each once.
    async fn mount_dirs(
        &self,
        tenant: Option<&TenantId>,
        pick: impl Fn(&ResolvedMount, &mut BTreeSet<PathBuf>),
    ) -> Result<Vec<PathBuf>, SessionError> {
        let mut dirs = BTreeSet::new();
        for record in self.table.list(tenant).await? {
            for mount in self.resolve(&record)?.mounts {
                pick(&mount, &mut dirs);
            }
        }
        Ok(dirs.into_iter().collect())
    }

    /// The session of `record`, resolved (its mounts), not touched.
    ///
    /// # Errors
    ///
    /// [`SessionError`] when its tenant is not declared or a mount cannot be resolved.
    pub fn resolve(&self, record: &SessionRecord) -> Result<Session, SessionError> {
        self.tenants().get(&record.tenant)?;
        let mounts = self.mounts.resolve(&SessionVars {
            data: self.dirs.data_root(),
            tenant: &record.tenant,
            session: &record.id,
            workdir: record.workdir.as_deref(),
        })?;
        Ok(Session {
            id: record.id.clone(),
            tenant: record.tenant.clone(),
            workdir: record.workdir.clone(),
            mounts,
        })
    }
}

/// A session's working directory, canonical; it must be a directory.
fn checked_workdir(workdir: &Path) -> Result<PathBuf, SessionError> {
    workdir
        .canonicalize()
        .and_then(|w| {
            if w.is_dir() {
                Ok(w)
            } else {
                Err(std::io::Error::other("not a directory"))
            }
        })
        .map_err(|source| SessionError::Workdir {
            path: workdir.to_path_buf(),
            source,
        })
}

fn owned<'a>(dirs: impl Iterator<Item = &'a Path>) -> Vec<PathBuf> {
    dirs.map(Path::to_path_buf).collect()
}

/// Counts a call of a session as running while it lives (see [`Sessions::enter`]).
pub struct InFlight<'a> {
    map: &'a Mutex<HashMap<SessionKey, usize>>,
    key: SessionKey,
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
