//! The session lifecycle: the session table (SQLite, `{data}/sessions.db`), and the
//! removal of a session's files.
//!
//! A session is created, touched by every call, listed, and deleted — by hand, or by the
//! idle sweep. Deleting removes the row first, then every `session`-scoped mount directory
//! of that session; `tenant` and `persistent` mounts are kept. Should the process die in
//! between, the orphan sweep of [`remove_orphans`] finds directories without a row and
//! removes them, so a crash never leaves files behind for good.
//!
//! Security rules for removal: it goes through `cap-std` directory handles opened on the
//! data directory, so no path can lead outside it, and it never follows a symlink (a guest
//! can plant relative symlinks that point anywhere: they are removed as links).

use crate::ids::{IdError, SessionId, TenantId};
use crate::limits::ORPHAN_GRACE;
use crate::mounts::{MountTable, ResolvedMount, Scope};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The session table's file, in the data directory.
pub const DATABASE_FILE: &str = "sessions.db";

/// How long a call waits for another process holding the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

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
    #[error("session working directory {path}: {source}")]
    Workdir { path: PathBuf, source: io::Error },
    #[error("session database: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("session database holds an invalid id: {0}")]
    CorruptId(#[from] IdError),
    #[error("removing {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Mount(#[from] crate::mounts::MountError),
}

/// Who made a session, and so who may sweep it when idle: the command line (any
/// `session gc --idle`), or a server process (only itself, or anyone once it is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Owner {
    #[default]
    Cli,
    /// `serve` on stdio, by its process id.
    Stdio(u32),
    /// `serve --http`, by its process id.
    Http(u32),
}

impl Owner {
    fn to_text(self) -> String {
        match self {
            Owner::Cli => "cli".into(),
            Owner::Stdio(pid) => format!("stdio:{pid}"),
            Owner::Http(pid) => format!("http:{pid}"),
        }
    }

    fn from_text(text: Option<&str>) -> Owner {
        let parse = |pid: &str| pid.parse().unwrap_or(0);
        match text.and_then(|t| t.split_once(':')) {
            Some(("stdio", pid)) => Owner::Stdio(parse(pid)),
            Some(("http", pid)) => Owner::Http(parse(pid)),
            _ => Owner::Cli,
        }
    }

    /// The server process that owns the session, if it is still running.
    pub fn live_server(self) -> Option<u32> {
        let (Owner::Stdio(pid) | Owner::Http(pid)) = self else {
            return None;
        };
        let alive = rustix::process::Pid::from_raw(pid as i32)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        alive.then_some(pid)
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
}

/// How often a session's `last_active` is written at most.
pub const TOUCH_INTERVAL: Duration = Duration::from_secs(1);

/// The session table.
pub struct SessionStore {
    conn: Mutex<Connection>,
    /// When each session was last written as active, to skip redundant writes.
    touched: Mutex<HashMap<(TenantId, SessionId), SystemTime>>,
}

impl SessionStore {
    /// Opens (creating if needed) the table in `data_root`.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] when SQLite cannot open or create it.
    pub fn open(data_root: &Path) -> Result<SessionStore, SessionError> {
        let conn = Connection::open(data_root.join(DATABASE_FILE))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL with synchronous=NORMAL: a commit is not an fsync (a power cut may lose the
        // last touches, never corrupt the table), so touching a session on every call is
        // cheap.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS sessions (
                 tenant      TEXT    NOT NULL,
                 id          TEXT    NOT NULL,
                 created     INTEGER NOT NULL,
                 last_active INTEGER NOT NULL,
                 workdir     TEXT,
                 PRIMARY KEY (tenant, id)
             );",
        )?;
        // Tables made before sessions recorded their owner.
        let has_owner: bool = conn
            .prepare("SELECT 1 FROM pragma_table_info('sessions') WHERE name = 'owner'")?
            .exists([])?;
        if !has_owner {
            conn.execute_batch("ALTER TABLE sessions ADD COLUMN owner TEXT;")?;
        }
        Ok(SessionStore {
            conn: Mutex::new(conn),
            touched: Mutex::new(HashMap::new()),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a session.
    ///
    /// # Errors
    ///
    /// [`SessionError::Exists`] when the tenant has a session of that id.
    pub fn create(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        workdir: Option<&Path>,
        owner: Owner,
    ) -> Result<SessionRecord, SessionError> {
        let now = SystemTime::now();
        let inserted = self.conn().execute(
            "INSERT OR IGNORE INTO sessions (tenant, id, created, last_active, workdir, owner)
             VALUES (?1, ?2, ?3, ?3, ?4, ?5)",
            params![
                tenant.as_str(),
                id.as_str(),
                millis(now),
                workdir.map(|w| w.to_string_lossy().into_owned()),
                owner.to_text()
            ],
        )?;
        if inserted == 0 {
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
        })
    }

    /// The tenant's session of that id, if any.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a database failure.
    pub fn get(
        &self,
        tenant: &TenantId,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, SessionError> {
        self.conn()
            .query_row(
                "SELECT tenant, id, created, last_active, workdir, owner FROM sessions
                 WHERE tenant = ?1 AND id = ?2",
                params![tenant.as_str(), id.as_str()],
                Row::read,
            )
            .optional()?
            .map(Row::into_record)
            .transpose()
    }

    /// Marks the session active now. At most one write per session per
    /// [`TOUCH_INTERVAL`]: idleness is measured in minutes, calls come in microseconds.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a database failure.
    pub fn touch(&self, tenant: &TenantId, id: &SessionId) -> Result<(), SessionError> {
        let now = SystemTime::now();
        {
            let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
            let key = (tenant.clone(), id.clone());
            if touched
                .get(&key)
                .is_some_and(|t| now.duration_since(*t).is_ok_and(|d| d < TOUCH_INTERVAL))
            {
                return Ok(());
            }
            touched.insert(key, now);
        }
        self.conn().execute(
            "UPDATE sessions SET last_active = ?3 WHERE tenant = ?1 AND id = ?2",
            params![tenant.as_str(), id.as_str(), millis(now)],
        )?;
        Ok(())
    }

    /// Sessions, oldest first: the tenant's, or every tenant's.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a database failure.
    pub fn list(&self, tenant: Option<&TenantId>) -> Result<Vec<SessionRecord>, SessionError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT tenant, id, created, last_active, workdir, owner FROM sessions
             WHERE ?1 IS NULL OR tenant = ?1 ORDER BY created, id",
        )?;
        let rows = stmt
            .query_map(params![tenant.map(TenantId::as_str)], Row::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(Row::into_record).collect()
    }

    /// Sessions last active before `cutoff`.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a database failure.
    pub fn idle_since(&self, cutoff: SystemTime) -> Result<Vec<SessionRecord>, SessionError> {
        Ok(self
            .list(None)?
            .into_iter()
            .filter(|s| s.last_active < cutoff)
            .collect())
    }

    /// Whether a session exists whose tenant and id encode to these path segments (what
    /// the orphan sweep finds in directory names).
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a database failure.
    pub fn has_segments(&self, tenant: &str, session: &str) -> Result<bool, SessionError> {
        Ok(self
            .list(None)?
            .iter()
            .any(|s| s.tenant.path_segment() == tenant && s.id.path_segment() == session))
    }

    /// Removes the row; false when there was none.
    ///
    /// # Errors
    ///
    /// [`SessionError::Database`] on a database failure.
    pub fn delete(&self, tenant: &TenantId, id: &SessionId) -> Result<bool, SessionError> {
        self.touched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(tenant.clone(), id.clone()));
        let n = self.conn().execute(
            "DELETE FROM sessions WHERE tenant = ?1 AND id = ?2",
            params![tenant.as_str(), id.as_str()],
        )?;
        Ok(n > 0)
    }
}

/// A row as SQLite returns it, before its ids are validated.
struct Row {
    tenant: String,
    id: String,
    created: i64,
    last_active: i64,
    workdir: Option<String>,
    owner: Option<String>,
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
        })
    }

    fn into_record(self) -> Result<SessionRecord, SessionError> {
        Ok(SessionRecord {
            id: SessionId::new(self.id)?,
            tenant: TenantId::new(self.tenant)?,
            created: from_millis(self.created),
            last_active: from_millis(self.last_active),
            workdir: self.workdir.map(PathBuf::from),
            owner: Owner::from_text(self.owner.as_deref()),
        })
    }
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Removes the session-scoped directories among `mounts` (one session's), never following
/// a symlink, then the directories above them that became empty, up to the one named by
/// the session id.
///
/// # Errors
///
/// [`SessionError::Remove`] naming the directory that could not be removed.
pub fn remove_session_dirs(
    data_root: &Path,
    table: &MountTable,
    mounts: &[ResolvedMount],
) -> Result<(), SessionError> {
    let root = open_root(data_root)?;
    for mount in mounts.iter().filter(|m| m.scope == Scope::Session) {
        let Some(spec) = table.get(&mount.virtual_path) else {
            continue;
        };
        let depth = session_depth(&spec.host);
        match mount.host.strip_prefix(data_root) {
            Ok(relative) => {
                remove_tree(&root, relative)?;
                prune_empty(&root, relative, depth);
            }
            // Outside the data directory (a {workdir} template): a handle on its parent.
            Err(_) => {
                let (Some(parent), Some(name)) = (mount.host.parent(), mount.host.file_name())
                else {
                    continue;
                };
                match Dir::open_ambient_dir(parent, ambient_authority()) {
                    Ok(dir) => remove_tree(&dir, Path::new(name))?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(SessionError::Remove {
                            path: parent.to_path_buf(),
                            source,
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

fn open_root(data_root: &Path) -> Result<Dir, SessionError> {
    Dir::open_ambient_dir(data_root, ambient_authority()).map_err(|source| SessionError::Remove {
        path: data_root.to_path_buf(),
        source,
    })
}

/// Removes `relative` under `dir` and all it holds; symlinks are removed, not followed. A
/// path that is missing is already removed.
fn remove_tree(dir: &Dir, relative: &Path) -> Result<(), SessionError> {
    let err = |source| SessionError::Remove {
        path: relative.to_path_buf(),
        source,
    };
    match dir.symlink_metadata(relative) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err(e)),
        Ok(meta) if meta.is_dir() => gone_is_fine(dir.remove_dir_all(relative)).map_err(err),
        Ok(_) => gone_is_fine(dir.remove_file(relative)).map_err(err),
    }
}

/// A removal racing another (a concurrent delete or sweep) finds things already gone.
fn gone_is_fine(removed: io::Result<()>) -> io::Result<()> {
    match removed {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// How many segments below `{data}` the directory named by `{session}` is: pruning stops
/// there, so the session's own directory goes but the directories of all sessions stay.
fn session_depth(template: &str) -> usize {
    template
        .split('/')
        .filter(|s| !s.is_empty())
        .skip(1) // {data}
        .position(|s| s.contains("{session}"))
        .map_or(usize::MAX, |i| i + 1)
}

/// Removes the now-empty parents of `relative`, down to `depth` segments.
fn prune_empty(root: &Dir, relative: &Path, depth: usize) {
    let mut path = relative.to_path_buf();
    while path.pop() && path.components().count() >= depth && depth > 0 {
        if root.remove_dir(&path).is_err() {
            break;
        }
    }
}

/// Removes session directories that have no row in `store`: for every session-scoped mount
/// under `{data}`, each directory its template matches whose tenant and session (as path
/// segments) are not a known session; and empty directories named by `{session}` that
/// have none (what a crash while pruning leaves). Returns how many were removed.
///
/// Safe beside live servers: a directory is removed only if it is older than
/// [`ORPHAN_GRACE`] and its session still has no row when read again just before the
/// removal (a row is written before its session's directories); a directory that vanishes
/// meanwhile (a concurrent delete) is not an error.
///
/// Templates outside `{data}` (`{workdir}`, absolute paths) cannot be enumerated and are
/// not swept.
///
/// # Errors
///
/// [`SessionError`] when the table cannot be read or a directory cannot be removed.
pub fn remove_orphans(
    data_root: &Path,
    table: &MountTable,
    store: &SessionStore,
) -> Result<usize, SessionError> {
    let known: HashSet<(String, String)> = store
        .list(None)?
        .into_iter()
        .map(|s| (s.tenant.path_segment(), s.id.path_segment()))
        .collect();
    let root = open_root(data_root)?;
    let mut removed = 0;
    let mut session_dirs = HashSet::new();
    for (_, spec) in table.iter().filter(|(_, s)| s.scope == Scope::Session) {
        let Some(rest) = spec.host.strip_prefix("{data}") else {
            continue;
        };
        let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        let depth = session_depth(&spec.host);
        let mut found = Vec::new();
        walk(&root, PathBuf::new(), &segments, None, None, &mut found);
        // The directories named by {session}, for empty leftovers.
        if let Some(upto) = segments.iter().position(|s| *s == "{session}") {
            let mut level = Vec::new();
            walk(
                &root,
                PathBuf::new(),
                &segments[..=upto],
                None,
                None,
                &mut level,
            );
            session_dirs.extend(level);
        }
        for (relative, tenant, session) in found {
            if known.contains(&(tenant.clone(), session.clone()))
                || !is_orphan(&root, &relative, store, &tenant, &session)?
            {
                continue;
            }
            tracing::info!(dir = %relative.display(), "removing an orphaned session directory");
            remove_tree(&root, &relative)?;
            prune_empty(&root, &relative, depth);
            removed += 1;
        }
    }
    for (relative, tenant, session) in session_dirs {
        let empty = root
            .read_dir(&relative)
            .is_ok_and(|mut entries| entries.next().is_none());
        if empty
            && !known.contains(&(tenant.clone(), session.clone()))
            && is_orphan(&root, &relative, store, &tenant, &session)?
            && root.remove_dir(&relative).is_ok()
        {
            tracing::info!(dir = %relative.display(), "removed an empty orphaned session directory");
            removed += 1;
        }
    }
    Ok(removed)
}

/// Whether `relative` (a directory of tenant and session path segments `tenant`,
/// `session`) is old enough and still has no row.
fn is_orphan(
    root: &Dir,
    relative: &Path,
    store: &SessionStore,
    tenant: &str,
    session: &str,
) -> Result<bool, SessionError> {
    let old_enough = root
        .symlink_metadata(relative)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.into_std().elapsed().is_ok_and(|age| age >= ORPHAN_GRACE));
    Ok(old_enough && !store.has_segments(tenant, session)?)
}

/// Removes regular files named `*.partial` older than `max_age` under `dirs` (inside the
/// data directory only; walked without following symlinks): temporaries that a built-in
/// was stopped from renaming into place. Returns how many.
pub fn remove_stale_partials<'a>(
    data_root: &Path,
    dirs: impl Iterator<Item = &'a Path>,
    max_age: Duration,
) -> usize {
    let Ok(root) = open_root(data_root) else {
        return 0;
    };
    let mut removed = 0;
    let mut stack: Vec<PathBuf> = dirs
        .filter_map(|d| d.strip_prefix(data_root).ok().map(Path::to_path_buf))
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = root.read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = dir.join(entry.file_name());
            let Ok(meta) = root.symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file()
                && path.extension().is_some_and(|e| e == "partial")
                && meta
                    .modified()
                    .is_ok_and(|t| t.into_std().elapsed().is_ok_and(|age| age >= max_age))
                && root.remove_file(&path).is_ok()
            {
                tracing::info!(file = %path.display(), "removed a stale temporary file");
                removed += 1;
            }
        }
    }
    removed
}

/// Finds the directories matching `segments` under `at`: a `{tenant}` or `{session}`
/// segment matches any real directory (never a symlink) and captures its name.
fn walk(
    root: &Dir,
    at: PathBuf,
    segments: &[&str],
    tenant: Option<String>,
    session: Option<String>,
    found: &mut Vec<(PathBuf, String, String)>,
) {
    let Some((segment, rest)) = segments.split_first() else {
        if let (Some(t), Some(s)) = (tenant, session) {
            found.push((at, t, s));
        }
        return;
    };
    let is_real_dir = |p: &Path| root.symlink_metadata(p).is_ok_and(|m| m.is_dir());
    match *segment {
        "{tenant}" | "{session}" => {
            let dir = if at.as_os_str().is_empty() {
                root.try_clone().ok()
            } else if is_real_dir(&at) {
                root.open_dir(&at).ok()
            } else {
                None
            };
            let Some(entries) = dir.and_then(|d| d.entries().ok()) else {
                return;
            };
            for entry in entries.flatten() {
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let next = at.join(&name);
                if !is_real_dir(&next) {
                    continue;
                }
                let (t, s) = if *segment == "{tenant}" {
                    (Some(name), session.clone())
                } else {
                    (tenant.clone(), Some(name))
                };
                walk(root, next, rest, t, s, found);
            }
        }
        literal => {
            let next = at.join(literal);
            if next.components().all(|c| matches!(c, Component::Normal(_))) && is_real_dir(&next) {
                walk(root, next, rest, tenant, session, found);
            }
        }
    }
}
