//! The session table: one row per session (tenant, id, times, workdir, owner, subject), behind
//! [`SessionTable`] so that the store can change (the embedded SQLite file
//! `{data}/sessions.db` by default). Only rows live here; directories are
//! [`super::dirs`]'s.

use crate::ids::{IdError, SessionId, TenantId};
use crate::limits::{SQLITE_BUSY_TIMEOUT, SQLITE_WAL_PAGES};
use crate::persistent::{FileLocks, StoreLocks};
use rusqlite::{Connection, OptionalExtension, params};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The session table's file, in the data directory.
pub const DATABASE_FILE: &str = "sessions.db";

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no session {id:?} for tenant {tenant:?}")]
    NotFound { tenant: String, id: String },
    #[error("tenant {tenant:?} is not declared in the config")]
    UnknownTenant { tenant: String },
    #[error("tenant {tenant:?} has its maximum of {max} sessions")]
    TooManySessions { tenant: String, max: usize },
    #[error("session {id:?} already exists for tenant {tenant:?}")]
    Exists { tenant: String, id: String },
    #[error("data directory {path}: {source}")]
    DataDir { path: PathBuf, source: io::Error },
    #[error("session working directory {path}: {source}")]
    Workdir { path: PathBuf, source: io::Error },
    #[error("session database: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("session database (PostgreSQL): {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// Always inside [`SessionError::Connect`], which names the database.
    #[error("connection pool: {0}")]
    Pool(String),
    #[error("session database (PostgreSQL) at {at}: {source}")]
    Connect {
        /// Where, as [`store_address`](super::postgres::store_address) says it.
        at: String,
        source: Box<SessionError>,
    },
    #[error("session database holds an invalid id: {0}")]
    CorruptId(#[from] IdError),
    #[error("removing {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Mount(#[from] crate::mounts::MountError),
    #[error("commit of {mount}: {source}")]
    Commit {
        mount: String,
        source: crate::persistent::PersistentError,
    },
}

impl SessionError {
    /// The persistent directory and the files of a commit that failed on a conflict: what
    /// a caller is told to settle (`hookhost/commit` with `resolve`, `session commit
    /// --resolve`, or a delete that discards).
    pub fn conflict(&self) -> Option<(&str, &[String])> {
        match self {
            SessionError::Commit {
                mount,
                source: crate::persistent::PersistentError::Conflict(files),
            } => Some((mount, files)),
            _ => None,
        }
    }
}

/// Who made a session, and so who may sweep it when idle: the command line (any
/// `session gc --idle`), or a server process (only itself, or anyone once it is gone).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Owner {
    #[default]
    Cli,
    /// `serve` on stdio.
    Stdio(Server),
    /// `serve --http`.
    Http(Server),
    /// None: an agent's session that the agent ended, kept for it to resume until it has
    /// been idle for `[agents] keep_artifacts` (`session gc` collects it then).
    Ended,
}

/// A server process: its id, on which host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub pid: u32,
    /// The host's name (`uname -n`): a process id means something only there.
    pub host: String,
}

impl Server {
    /// This process.
    pub fn this() -> Server {
        Server {
            pid: std::process::id(),
            host: this_host(),
        }
    }
}

fn this_host() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

impl Owner {
    /// `cli`, `stdio:PID@HOST` or `http:PID@HOST`, as the table keeps it.
    pub fn to_text(&self) -> String {
        match self {
            Owner::Cli => "cli".into(),
            Owner::Ended => "ended".into(),
            Owner::Stdio(s) => format!("stdio:{}@{}", s.pid, s.host),
            Owner::Http(s) => format!("http:{}@{}", s.pid, s.host),
        }
    }

    fn from_text(text: Option<&str>) -> Owner {
        // `KIND:PID@HOST`; rows written before hosts were recorded lack `@HOST`.
        let server = |rest: &str| {
            let (pid, host) = rest.split_once('@').unwrap_or((rest, ""));
            Server {
                pid: pid.parse().unwrap_or(0),
                host: if host.is_empty() {
                    this_host()
                } else {
                    host.to_string()
                },
            }
        };
        if text == Some("ended") {
            return Owner::Ended;
        }
        match text.and_then(|t| t.split_once(':')) {
            Some(("stdio", rest)) => Owner::Stdio(server(rest)),
            Some(("http", rest)) => Owner::Http(server(rest)),
            _ => Owner::Cli,
        }
    }

    /// The server process that owns the session, if it may still be running: on this
    /// host, if it is; on another host (a fleet sharing the table), always — that host's
    /// servers collect it.
    pub fn live_server(&self) -> Option<u32> {
        let (Owner::Stdio(server) | Owner::Http(server)) = self else {
            return None;
        };
        if server.host != this_host() {
            return Some(server.pid);
        }
        let alive = rustix::process::Pid::from_raw(server.pid as i32)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        alive.then_some(server.pid)
    }
}

/// One row of the session table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: SessionId,
    pub tenant: TenantId,
    pub created: SystemTime,
    pub last_active: SystemTime,
    /// The directory the agent works in, `{workdir}` in mount templates.
    pub workdir: Option<PathBuf>,
    /// Who made it.
    pub owner: Owner,
    /// The subject of the JWT it was opened with (see [`Principal`]): only a token of the
    /// same subject may use it over HTTP. `None` for a session made with a tenant's own
    /// token, or from the command line.
    pub subject: Option<String>,
}

/// Who presents a request to a server: a tenant, and the subject of the JWT it came with
/// (`[auth] subject_claim`), if it came with one. A session is used only by whoever made
/// it: a JWT's session by tokens of that subject, a tenant token's by the tenant's tokens.
/// Another's session is, as another tenant's, not found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub subject: Option<String>,
}

impl Principal {
    /// A tenant, by its own token (or the default tenant of a server without tokens).
    pub fn tenant(tenant: TenantId) -> Principal {
        Principal {
            tenant,
            subject: None,
        }
    }

    /// Whether it may use the session `record`.
    pub fn may_use(&self, record: &SessionRecord) -> bool {
        self.tenant == record.tenant && self.subject == record.subject
    }
}

/// Where session rows are kept. Every operation is one statement, so concurrent hosts
/// sharing a table see each row whole.
#[async_trait::async_trait]
pub trait SessionTable: Send + Sync {
    /// Adds a session.
    ///
    /// # Errors
    ///
    /// [`SessionError::Exists`] when the tenant has a session of that id.
    async fn create(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        workdir: Option<&Path>,
        owner: Owner,
        subject: Option<&str>,
    ) -> Result<SessionRecord, SessionError>;

    /// The tenant's session of that id, if any.
    async fn get(
        &self,
        tenant: &TenantId,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, SessionError>;

    /// Sets the session's `last_active` to `now`.
    async fn touch(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        now: SystemTime,
    ) -> Result<(), SessionError>;

    /// Records `owner` as the session's.
    async fn set_owner(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        owner: &Owner,
    ) -> Result<(), SessionError>;

    /// Sessions, oldest first: the tenant's, or every tenant's.
    async fn list(&self, tenant: Option<&TenantId>) -> Result<Vec<SessionRecord>, SessionError>;

    /// Removes the row; false when there was none (another host removed it first).
    async fn delete(&self, tenant: &TenantId, id: &SessionId) -> Result<bool, SessionError>;

    /// Removes the row if the session was last active before `cutoff`, in one statement:
    /// a session touched meanwhile (a call began on another host) is kept. False when
    /// nothing was removed.
    async fn delete_if_idle(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        cutoff: SystemTime,
    ) -> Result<bool, SessionError>;

    /// What an MCP session's client said at `initialize` (rmcp's session state, JSON),
    /// kept so that another host can resume the MCP session `id`.
    async fn mcp_state(&self, id: &str) -> Result<Option<String>, SessionError>;

    /// Keeps `state` for the MCP session `id`.
    async fn set_mcp_state(&self, id: &str, state: &str) -> Result<(), SessionError>;

    /// Forgets the MCP session `id`'s state.
    async fn forget_mcp_state(&self, id: &str) -> Result<(), SessionError>;

    /// Whether several hosts share this table (a fleet).
    fn is_shared(&self) -> bool {
        false
    }

    /// Sessions last active before `cutoff` (compared to the millisecond), least recently
    /// active first.
    async fn idle_since(&self, cutoff: SystemTime) -> Result<Vec<SessionRecord>, SessionError>;

    /// Answers when the table can be read: a server's readiness probe.
    ///
    /// # Errors
    ///
    /// [`SessionError`] from the database.
    async fn ping(&self) -> Result<(), SessionError>;

    /// Who locks persistent directories' backing trees for the hosts sharing this table:
    /// `flock` for one machine's ([`FileLocks`]); a shared database's locks for a fleet.
    fn store_locks(&self) -> Arc<dyn StoreLocks> {
        Arc::new(FileLocks)
    }
}

/// The session table in an SQLite file.
pub struct SqliteTable {
    conn: Mutex<Connection>,
}

/// Puts the database in WAL mode, waiting as long as any other lock for processes doing the
/// same. Turning a new database into WAL needs its exclusive lock, and SQLite answers
/// `SQLITE_BUSY` at once rather than call the busy handler when another connection is
/// converting it too (measured: 7 of 480 openers, 8 processes at a time on a new file), so
/// this retries within [`SQLITE_BUSY_TIMEOUT`].
fn into_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + SQLITE_BUSY_TIMEOUT;
    loop {
        match conn.execute_batch("PRAGMA journal_mode = WAL;") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

impl SqliteTable {
    /// Opens (creating if needed) the table in `data_root`.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] when SQLite cannot open or create it.
    pub fn open(data_root: &Path) -> Result<SqliteTable, SessionError> {
        let mut conn = Connection::open(data_root.join(DATABASE_FILE))?;
        conn.busy_timeout(SQLITE_BUSY_TIMEOUT)?;
        // WAL with synchronous=NORMAL: a commit is not an fsync (a power cut may lose the
        // last touches, never corrupt the table), so touching a session on every call is
        // cheap.
        into_wal(&conn)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
        // The last connection to close leaves the WAL for the next to use, instead of
        // checkpointing it into the database and deleting it: two fsyncs and two unlinks,
        // 1.5 ms of every one-shot command (`strace -T`). Writers fold it in at
        // `SQLITE_WAL_PAGES`, which bounds what the next process reads again. The cost: a
        // power cut (not a crash) may lose what was written since the last fold — up to
        // that many pages of session creations, deletions and touches, as a running
        // server's open connection already could; the table stays whole. `sessions.db`
        // and its `-wal` are one database: copy or remove them together.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )?;
        conn.pragma_update(None, "wal_autocheckpoint", SQLITE_WAL_PAGES)?;
        // The schema is made, or brought up to date, in one write transaction: processes
        // opening a new data directory at once (one-shot commands in parallel, a server
        // beside them) would otherwise each add the same column, and all but one fail.
        let schema = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        schema.execute_batch(
            "CREATE TABLE IF NOT EXISTS sessions (
                 tenant      TEXT    NOT NULL,
                 id          TEXT    NOT NULL,
                 created     INTEGER NOT NULL,
                 last_active INTEGER NOT NULL,
                 workdir     TEXT,
                 owner       TEXT,
                 subject     TEXT,
                 PRIMARY KEY (tenant, id)
             );
             CREATE TABLE IF NOT EXISTS mcp_sessions (
                 id    TEXT NOT NULL PRIMARY KEY,
                 state TEXT NOT NULL
             );",
        )?;
        // Tables made before sessions recorded their owner, or their subject.
        for column in ["owner", "subject"] {
            let has: bool = schema
                .prepare("SELECT 1 FROM pragma_table_info('sessions') WHERE name = ?1")?
                .exists([column])?;
            if !has {
                schema.execute_batch(&format!("ALTER TABLE sessions ADD COLUMN {column} TEXT;"))?;
            }
        }
        schema.commit()?;
        Ok(SqliteTable {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl SessionTable for SqliteTable {
    async fn create(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        workdir: Option<&Path>,
        owner: Owner,
        subject: Option<&str>,
    ) -> Result<SessionRecord, SessionError> {
        let now = SystemTime::now();
        let inserted = self.conn().execute(
            "INSERT OR IGNORE INTO sessions
                 (tenant, id, created, last_active, workdir, owner, subject)
             VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)",
            params![
                tenant.as_str(),
                id.as_str(),
                millis(now),
                workdir.map(|w| w.to_string_lossy().into_owned()),
                owner.to_text(),
                subject
            ],
        )?;
        created(inserted > 0, tenant, id, now, workdir, owner, subject)
    }

    async fn get(
        &self,
        tenant: &TenantId,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, SessionError> {
        self.conn()
            .query_row(
                "SELECT tenant, id, created, last_active, workdir, owner, subject FROM sessions
                 WHERE tenant = ?1 AND id = ?2",
                params![tenant.as_str(), id.as_str()],
                Row::read,
            )
            .optional()?
            .map(Row::into_record)
            .transpose()
    }

    async fn touch(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        now: SystemTime,
    ) -> Result<(), SessionError> {
        self.conn().execute(
            "UPDATE sessions SET last_active = ?3 WHERE tenant = ?1 AND id = ?2",
            params![tenant.as_str(), id.as_str(), millis(now)],
        )?;
        Ok(())
    }

    async fn set_owner(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        owner: &Owner,
    ) -> Result<(), SessionError> {
        self.conn().execute(
            "UPDATE sessions SET owner = ?3 WHERE tenant = ?1 AND id = ?2",
            params![tenant.as_str(), id.as_str(), owner.to_text()],
        )?;
        Ok(())
    }

    async fn list(&self, tenant: Option<&TenantId>) -> Result<Vec<SessionRecord>, SessionError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT tenant, id, created, last_active, workdir, owner, subject FROM sessions
             WHERE ?1 IS NULL OR tenant = ?1 ORDER BY created, id",
        )?;
        let rows = stmt
            .query_map(params![tenant.map(TenantId::as_str)], Row::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(Row::into_record).collect()
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.conn().query_row("SELECT 1", [], |_| Ok(()))?;
        Ok(())
    }

    async fn delete(&self, tenant: &TenantId, id: &SessionId) -> Result<bool, SessionError> {
        let n = self.conn().execute(
            "DELETE FROM sessions WHERE tenant = ?1 AND id = ?2",
            params![tenant.as_str(), id.as_str()],
        )?;
        Ok(n > 0)
    }

    async fn delete_if_idle(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        cutoff: SystemTime,
    ) -> Result<bool, SessionError> {
        let n = self.conn().execute(
            "DELETE FROM sessions WHERE tenant = ?1 AND id = ?2 AND last_active < ?3",
            params![tenant.as_str(), id.as_str(), millis(cutoff)],
        )?;
        Ok(n > 0)
    }

    async fn idle_since(&self, cutoff: SystemTime) -> Result<Vec<SessionRecord>, SessionError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT tenant, id, created, last_active, workdir, owner, subject FROM sessions
             WHERE last_active < ?1 ORDER BY last_active",
        )?;
        let rows = stmt
            .query_map(params![millis(cutoff)], Row::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(Row::into_record).collect()
    }

    async fn mcp_state(&self, id: &str) -> Result<Option<String>, SessionError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT state FROM mcp_sessions WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()?)
    }

    async fn set_mcp_state(&self, id: &str, state: &str) -> Result<(), SessionError> {
        self.conn().execute(
            "INSERT INTO mcp_sessions (id, state) VALUES (?1, ?2)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state",
            params![id, state],
        )?;
        Ok(())
    }

    async fn forget_mcp_state(&self, id: &str) -> Result<(), SessionError> {
        self.conn()
            .execute("DELETE FROM mcp_sessions WHERE id = ?1", params![id])?;
        Ok(())
    }
}

/// A row as the database returns it, before its ids are validated.
pub(super) struct Row {
    pub(super) tenant: String,
    pub(super) id: String,
    pub(super) created: i64,
    pub(super) last_active: i64,
    pub(super) workdir: Option<String>,
    pub(super) owner: Option<String>,
    pub(super) subject: Option<String>,
}

impl Row {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
        Ok(Row {
            tenant: row.get(0)?,
            id: row.get(1)?,
            created: row.get(2)?,
            last_active: row.get(3)?,
            workdir: row.get(4)?,
            owner: row.get(5)?,
            subject: row.get(6)?,
        })
    }

    pub(super) fn into_record(self) -> Result<SessionRecord, SessionError> {
        Ok(SessionRecord {
            id: SessionId::new(self.id)?,
            tenant: TenantId::new(self.tenant)?,
            created: from_millis(self.created),
            last_active: from_millis(self.last_active),
            workdir: self.workdir.map(PathBuf::from),
            owner: Owner::from_text(self.owner.as_deref()),
            subject: self.subject,
        })
    }
}

/// The record of a session just inserted at `now`, or [`SessionError::Exists`] when the
/// insert found the (tenant, id) taken: how every store answers `create`.
pub(super) fn created(
    inserted: bool,
    tenant: &TenantId,
    id: &SessionId,
    now: SystemTime,
    workdir: Option<&Path>,
    owner: Owner,
    subject: Option<&str>,
) -> Result<SessionRecord, SessionError> {
    if !inserted {
        return Err(SessionError::Exists {
            tenant: tenant.to_string(),
            id: id.to_string(),
        });
    }
    Ok(SessionRecord {
        id: id.clone(),
        tenant: tenant.clone(),
        created: now,
        last_active: now,
        workdir: workdir.map(Path::to_path_buf),
        owner,
        subject: subject.map(str::to_string),
    })
}

pub(super) fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
