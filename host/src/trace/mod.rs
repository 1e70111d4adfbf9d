//! The host's trace of each session: every layer's outcome and every file a component
//! changed, observed from the host side so that a hook cannot hide what it did.
//!
//! Each call's events go, one JSON object per line ([`SCHEMA_VERSION`]), to the session's
//! trace file (`trace/events.jsonl` in the trace mount, `/artifacts` by default: a
//! component sees it only where the config grants that mount), and to `tracing` (target
//! `hookhost::trace`, at debug level). Kinds:
//!
//! - `filesystem.mounted`: a mount granted for the first time in the session (on this
//!   host): its scope, whether writable, and for a writable one its files and bytes;
//! - `hook.before`, `hook.after`, `hook.refused`, `hook.failed` (with the failure's kind
//!   and the guest's stderr, bounded), `tool.executed`: one per layer phase, with its
//!   duration; `call.finished` with the outcome and output bytes;
//! - `file.created`, `file.updated`, `file.deleted`: what a phase changed in the mounts
//!   its layer may write in, attributed to that layer (`layer` is null for a change made
//!   between phases, by something outside the chain: the user editing the project, a
//!   command left running); sizes and SHA-256 before and after; for a text change a
//!   unified diff, inline up to `[trace] diff_bytes`, else written under
//!   `trace/diffs/` and referenced; a binary file's metadata only; a symlink as a symlink
//!   with its target, never followed; a sparse file hashed by extent (`sparse`); a file
//!   past what the trace reads by size and mtime only (`unhashed` says why, see [`hash`]).
//!
//! Cost: before and after each phase, each of its layer's writable mounts is looked at
//! (see [`watch`]): its inotify queue read, and only the entries it names stat'ed, and read
//! when their metadata moved (see [`files`]), at most
//! [`MAX_HASHED_FILE_BYTES`](crate::limits::MAX_HASHED_FILE_BYTES) of a file and
//! [`MAX_HASHED_BYTES_PER_CALL`](crate::limits::MAX_HASHED_BYTES_PER_CALL) in a call, on a
//! blocking thread unless the look is small (see [`hash`]); diffs within
//! [`MAX_DIFF_TIME_PER_CALL`](crate::limits::MAX_DIFF_TIME_PER_CALL). A tenant with
//! `trace = false` pays none of it. The host's own trace files are not reported as
//! changes, unless a component changed them after the host (then they are, as that
//! component's). In a fleet (hosts sharing the sessions) each host reports only what
//! changed during its own calls' phases: what changed between them may be another host's
//! calls, which that host reports, and the trace files every host appends to are never
//! reported.
//!
//! The same seam counts the [`Metrics`] and opens a `tracing` span per layer phase (what
//! OpenTelemetry exports), for every tenant.

mod call;
pub mod files;
pub mod hash;
pub mod watch;

pub use call::{CallTrace, Watch};

use crate::failure::Failure;
use crate::metrics::Metrics;
use crate::mounts::{ResolvedMount, Scope};
use crate::sandbox::Sandbox;
use crate::sessions::{Caller, Session, SessionHolder, SessionKey, Tenant};
use files::{Entry, Whose};
use hash::HashBudget;
use rustix::fd::OwnedFd;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use watch::{Inotify, Look, MountState};

/// The `v` of every event: bumped when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;

/// The trace file, relative to the trace mount's directory.
pub const EVENTS_FILE: &str = "trace/events.jsonl";

/// The directory of the host's trace files in the trace mount.
const TRACE_DIR: &str = "trace";

/// Whether `path` (in the trace mount) is one of the host's trace files.
fn is_trace_file(path: &str) -> bool {
    path.strip_prefix(TRACE_DIR)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `path` (in the trace mount) is a file the host writes: the events file, or a
/// diff under `trace/diffs/`.
fn is_host_written(path: &str) -> bool {
    path == EVENTS_FILE
        || path
            .strip_prefix(TRACE_DIR)
            .is_some_and(|rest| rest.starts_with("/diffs/"))
}

/// How the host traces sessions (`[trace]`).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    /// Whether sessions are traced; a tenant's [`crate::sessions::Tenant::trace`] overrides
    /// it.
    pub enabled: bool,
    /// The mount whose directory holds `trace/`; no trace file when `None`.
    pub mount: Option<String>,
    /// The largest diff written inline.
    pub diff_bytes: usize,
    /// Whether mounts are watched with inotify, or walked at each look.
    /// A server watches. A one-shot process walks: it looks a few times, and closing an
    /// inotify instance waits for a kernel grace period (a `close` of 10–20 ms measured
    /// here at the exit of `hookhost hook …`, more than the rest of its work).
    pub watch: bool,
    /// Whether other hosts serve the same sessions (a fleet's shared session store): a host
    /// cannot tell their calls' writes (and their appends to the trace files) from a
    /// component's or the user's, so only changes seen during its own calls' phases are
    /// reported, never those to the trace files.
    pub fleet: bool,
}

/// Which phase of a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Before,
    After,
    Execute,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Before => "before-execute",
            Phase::After => "after-execute",
            Phase::Execute => "execute",
        }
    }
}

/// How a phase ended.
pub enum PhaseEnd<'a> {
    /// A hook let the call through. `rewrote`: it changed the arguments or the output;
    /// `took_out`: output bytes its after-execute took out of the result.
    Passed {
        rewrote: bool,
        took_out: u64,
    },
    Refused {
        message: &'a str,
    },
    Failed {
        failure: &'a Failure,
    },
    /// The tool ran.
    Executed {
        is_error: bool,
        output_bytes: usize,
    },
}

/// The fields every event of a trace file starts with; the kind's own follow.
#[derive(Debug, Serialize)]
struct Event<'a> {
    v: u32,
    time: String,
    tenant: &'a str,
    session: &'a str,
    call: &'a str,
    seq: u64,
    kind: &'static str,
    layer: Option<&'a str>,
    phase: Option<&'static str>,
}

/// The trace state of one session on this host.
struct SessionTrace {
    /// Each of its own writable mounts as last seen, by virtual path.
    mounts: Mutex<HashMap<String, Arc<Mutex<MountState>>>>,
    /// The runtime's shared mounts (see [`Tracer`]).
    shared: Arc<SharedMounts>,
    /// Makes a mount's directory, as for a grant, before it is first looked at.
    sandbox: Arc<Sandbox>,
    /// The runtime's inotify instance, when mounts are watched (see
    /// [`TraceSettings::watch`]).
    inotify: Option<Arc<Inotify>>,
    /// Mounts already announced.
    mounted: Mutex<HashSet<String>>,
    /// The trace mount's directory.
    trace_mount: Option<ResolvedMount>,
    /// What the host last left in its trace files, by path in the trace mount.
    host_wrote: Arc<Mutex<HashMap<String, Entry>>>,
    /// Every file under `trace/` is a host's (see [`TraceSettings::fleet`]).
    fleet: bool,
    /// Each mount's directory, opened once (by virtual path).
    trace_root: Mutex<Option<Arc<OwnedFd>>>,
    /// The events file, open to append.
    events: Mutex<Option<std::fs::File>>,
    seq: AtomicU64,
}

/// Mounts several sessions write in (a tenant's, persistent ones, the user's project), as
/// last seen, by host directory: looked at as one, so that each change is reported once,
/// to the session whose look saw it first.
type SharedMounts = Mutex<HashMap<PathBuf, Arc<Mutex<MountState>>>>;

/// Observes every call of a runtime: its trace, its metrics, its spans.
pub struct Tracer {
    settings: TraceSettings,
    sessions: Mutex<HashMap<SessionKey, Arc<SessionTrace>>>,
    shared: Arc<SharedMounts>,
    metrics: Arc<Metrics>,
    /// Makes the trace mount's directory, as for a grant.
    sandbox: Arc<Sandbox>,
    /// The one inotify instance of every watched mount, made at the first traced call
    /// (`None`: not watching, or none could be made: mounts are walked).
    inotify: std::sync::OnceLock<Option<Arc<Inotify>>>,
}

impl Tracer {
    pub fn new(settings: TraceSettings, sandbox: Arc<Sandbox>) -> Tracer {
        Tracer {
            settings,
            sessions: Mutex::new(HashMap::new()),
            shared: Arc::default(),
            metrics: Arc::default(),
            sandbox,
            inotify: std::sync::OnceLock::new(),
        }
    }

    fn inotify(&self) -> Option<Arc<Inotify>> {
        self.inotify
            .get_or_init(|| {
                self.settings.watch.then(Inotify::new).and_then(|made| {
                    made.inspect_err(|e| {
                        tracing::warn!(error = %e, "no inotify instance: traced mounts are walked at each look");
                    })
                    .ok()
                })
            })
            .clone()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn settings(&self) -> &TraceSettings {
        &self.settings
    }

    /// Whether the calls of `tenant`'s sessions are traced (`None`: an undeclared tenant).
    pub fn traces(&self, tenant: Option<&Tenant>) -> bool {
        tenant
            .and_then(|t| t.trace)
            .unwrap_or(self.settings.enabled)
    }

    /// Starts tracing one call of `caller`.
    pub fn begin<'a>(&self, caller: &Caller<'a>, call: &'a str, tool: &'a str) -> CallTrace<'a> {
        let session = caller.session;
        let state = self
            .traces(caller.tenant)
            .then(|| self.session_trace(session));
        let mut trace = CallTrace {
            state,
            metrics: self.metrics.clone(),
            session,
            call,
            tool,
            diff_bytes: self.settings.diff_bytes,
            budget: HashBudget::per_call(),
            diff_time_left: crate::limits::MAX_DIFF_TIME_PER_CALL,
            lines: Vec::new(),
            diffs: 0,
            pumped: false,
            requests: caller.requests.clone(),
        };
        // What stores requested loading the call's persistent directories, before any
        // phase: said as no phase's.
        trace.network(None);
        trace
    }

    /// The trace state of `session`, made at its first call here: the trace mount's
    /// directory is made as for a grant.
    fn session_trace(&self, session: &Session) -> Arc<SessionTrace> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let state = sessions.entry(session.key()).or_insert_with(|| {
            let mount = self
                .settings
                .mount
                .as_deref()
                .and_then(|m| session.mounts().iter().find(|r| r.virtual_path == m));
            let trace_mount = mount.and_then(|mount| match self.sandbox.ensure_dir(mount) {
                Ok(()) => Some(mount.clone()),
                Err(e) => {
                    tracing::warn!(session = %session.id, error = %e, "no trace file");
                    None
                }
            });
            let state = SessionTrace {
                mounts: Mutex::default(),
                shared: self.shared.clone(),
                sandbox: self.sandbox.clone(),
                inotify: self.inotify(),
                mounted: Mutex::default(),
                trace_mount,
                host_wrote: Arc::default(),
                fleet: self.settings.fleet,
                trace_root: Mutex::default(),
                events: Mutex::default(),
                seq: AtomicU64::new(0),
            };
            // `trace/` made before the mount is first looked at: a directory made later
            // would make the next look walk the mount.
            if state.trace_mount.is_some()
                && let Err(e) = state.make_dirs(TRACE_DIR)
            {
                tracing::warn!(session = %session.id, error = %e, "cannot make the trace directory");
            }
            Arc::new(state)
        });
        state.clone()
    }
}

/// A traced session's state: its mounts as last seen (inotify watches, kept descriptors),
/// its open events file.
impl SessionHolder for Tracer {
    fn held(&self) -> Vec<SessionKey> {
        self.sessions.held()
    }

    fn forget(&self, key: &SessionKey) {
        self.sessions.forget(key);
    }
}

/// A look at `mount` (see [`MountState::look`]), with its size when `size`, what it reads
/// counted in its call's `budget`: off the executor unless it is small. With `pump`, the
/// runtime's inotify queue is read first; without, the look takes what the last read
/// routed to the mount.
async fn observe(
    state: &SessionTrace,
    mount: &ResolvedMount,
    size: bool,
    pump: bool,
    budget: &Arc<HashBudget>,
) -> Option<Look> {
    let mount_state = match state.mount_state(mount) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(mount = %mount.virtual_path, error = %e, "cannot open a traced mount");
            return None;
        }
    };
    let host_wrote = (state.trace_mount.as_ref() == Some(mount)).then(|| state.host_wrote.clone());
    let fleet = state.fleet;
    let budget = budget.clone();
    let look = move |mount_state: &Mutex<MountState>, small: bool| {
        let mut mount_state = mount_state.lock().unwrap_or_else(|e| e.into_inner());
        // Locked per entry, not for the look: a flush must not wait for a walk.
        mount_state.look(
            &|path, entry| {
                let Some(wrote) = &host_wrote else {
                    return Whose::Other;
                };
                let as_left = || {
                    wrote
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(path)
                        .is_some_and(|w| w.same_metadata(entry))
                };
                if is_trace_file(path) && (fleet || as_left()) {
                    Whose::HostAsLeft
                } else if is_host_written(path) {
                    Whose::Host
                } else {
                    Whose::Other
                }
            },
            size,
            pump,
            small,
            &budget,
        )
    };
    // On the executor unless another look is under way (wait for it off the executor) or
    // what it would walk or read is too large for there.
    let busy = mount_state.try_lock().is_err();
    if !busy && let Some(seen) = look(&mount_state, true) {
        return Some(seen);
    }
    tokio::task::spawn_blocking(move || look(&mount_state, false))
        .await
        .ok()
        .flatten()
}

impl SessionTrace {
    /// The trace mount's directory, opened at the host's first write (a guest sees only
    /// what is inside it, so it cannot be swapped).
    fn trace_root(&self) -> std::io::Result<Arc<OwnedFd>> {
        let mount = self
            .trace_mount
            .as_ref()
            .ok_or_else(|| std::io::Error::other("no trace mount"))?;
        let mut root = self.trace_root.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(root) = &*root {
            return Ok(root.clone());
        }
        let opened = Arc::new(files::open_dir(rustix::fs::CWD, &mount.host)?);
        *root = Some(opened.clone());
        Ok(opened)
    }

    /// Reads the runtime's inotify queue, routing its events to the mounts that watch;
    /// whether it did (then the looks that follow need not).
    fn pump(&self) -> bool {
        self.inotify.as_ref().is_some_and(|inotify| {
            inotify
                .pump()
                .inspect_err(|e| tracing::debug!(error = %e, "cannot read inotify events"))
                .is_ok()
        })
    }

    /// Marks `path` announced; whether it was not yet.
    fn mark_mounted(&self, path: &str) -> bool {
        self.mounted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_string())
    }

    /// The state of `mount`, opened at its first look in the session.
    fn mount_state(&self, mount: &ResolvedMount) -> std::io::Result<Arc<Mutex<MountState>>> {
        let open = || -> std::io::Result<Arc<Mutex<MountState>>> {
            self.sandbox
                .ensure_dir(mount)
                .map_err(std::io::Error::other)?;
            Ok(Arc::new(Mutex::new(MountState::open(
                &mount.host,
                self.inotify.clone(),
            )?)))
        };
        if mount.scope == Scope::Session && !mount.in_workdir() {
            let mut mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(state) = mounts.get(&mount.virtual_path) {
                return Ok(state.clone());
            }
            let state = open()?;
            mounts.insert(mount.virtual_path.clone(), state.clone());
            return Ok(state);
        }
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = shared.get(&mount.host) {
            return Ok(state.clone());
        }
        let state = open()?;
        shared.insert(mount.host.clone(), state.clone());
        Ok(state)
    }

    /// Writes `bytes` to `name` (a path in the trace mount, under `trace/`): appended, or
    /// a new file. Nothing is followed: `trace/` and the file are opened beneath the
    /// mount with no symlink on the way, so a link a guest planted there fails the write.
    fn write(&self, name: &str, bytes: &[u8], append: bool) -> std::io::Result<()> {
        if !append {
            let mut file = self.open_to_write(name, false)?;
            file.write_all(bytes)?;
            self.wrote(name, &rustix::fs::fstat(&file)?);
            return Ok(());
        }
        // The events file stays open between calls. Should a component have deleted it,
        // the write went to a file no one sees: it is opened again and written again.
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..2 {
            let file = match events.as_mut() {
                Some(file) => file,
                None => events.insert(self.open_to_write(name, true)?),
            };
            file.write_all(bytes)?;
            let stat = rustix::fs::fstat(&*file)?;
            if stat.st_nlink > 0 {
                self.wrote(name, &stat);
                return Ok(());
            }
            *events = None;
        }
        Ok(())
    }

    /// Remembers how the host left `name` (not a change to report).
    fn wrote(&self, name: &str, stat: &rustix::fs::Stat) {
        self.host_wrote
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), Entry::from_stat(stat));
    }

    /// Makes the directory `dirs` (a `/`-separated path in the trace mount) and those
    /// above it, 0700, where missing: one level at a time from its parent's descriptor,
    /// none followed, so a symlink a guest planted on the way fails it rather than
    /// making a directory wherever it points.
    fn make_dirs(&self, dirs: &str) -> std::io::Result<()> {
        let mut at: Option<OwnedFd> = None;
        let mount = self.trace_root()?;
        for segment in dirs.split('/') {
            let parent = at.as_ref().unwrap_or(&mount);
            match rustix::fs::mkdirat(parent, segment, rustix::fs::Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            at = Some(files::open_dir(parent, segment)?);
        }
        Ok(())
    }

    /// Opens `name` in the trace mount to append to or to write anew, making its
    /// directories; nothing on the way may be a symlink.
    fn open_to_write(&self, name: &str, append: bool) -> std::io::Result<std::fs::File> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let mount = self.trace_root()?;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        if let Some((parent, _)) = name.rsplit_once('/') {
            self.make_dirs(parent)?;
        }
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::CLOEXEC
            | OFlags::NOFOLLOW
            | if append {
                OFlags::APPEND
            } else {
                OFlags::TRUNC
            };
        let fd = rustix::fs::openat2(&*mount, name, flags, Mode::from_raw_mode(0o600), resolve)?;
        Ok(std::fs::File::from(fd))
    }
}

/// Opens `session`'s trace file to read it, following no symlink (a component granted
/// the trace mount could plant one to make the reader print another file).
///
/// # Errors
///
/// When tracing has no mount, or the file is missing or reached through a symlink.
pub fn open_events(settings: &TraceSettings, session: &Session) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let root = settings
        .mount
        .as_deref()
        .and_then(|m| session.host_dir(m))
        .ok_or_else(|| {
            std::io::Error::other(
                "sessions have no trace file: [trace] mount is not a session mount",
            )
        })?;
    let mount = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let fd = rustix::fs::openat2(
        &mount,
        EVENTS_FILE,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(std::fs::File::from(fd))
}

/// The lines of a trace file that are events whose `kind` matches `kind` (with `*`
/// wildcards), in order; a line that is not a JSON object (a write a crash cut short) is
/// skipped.
pub fn events<'t>(
    text: &'t str,
    kind: Option<&'t wildmatch::WildMatch>,
) -> impl Iterator<Item = &'t str> + 't {
    text.lines().filter(move |line| {
        serde_json::from_str::<serde_json::Value>(line).is_ok_and(|event| {
            event.is_object()
                && kind.is_none_or(|k| event["kind"].as_str().is_some_and(|s| k.matches(s)))
        })
    })
}
