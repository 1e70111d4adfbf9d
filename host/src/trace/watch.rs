//! One mount of one session as the trace knows it, kept up to date cheaply: an inotify
//! watch on each of its directories says which entries were touched, so a look after a
//! phase that wrote nothing is one `read` that finds no event, whatever the mount holds.
//! A runtime has one inotify instance ([`Inotify`]) whose events are routed to the mounts
//! by watch descriptor.
//!
//! The mount is walked whole (see [`Snapshot`]) only at its first look, when a directory
//! was made, moved or removed (many paths change at once), when the kernel's event queue
//! overflowed, or when inotify is not available (no watch could be added: the per-user
//! limit `fs.inotify.max_user_watches` was reached). A touched entry is stat'ed by name in
//! its watched directory, not followed, and read only when its metadata moved (see
//! [`files::compare`]).
//!
//! A look runs on the async executor only while it is small: at most
//! [`INLINE_WALK_ENTRIES`] entries walked or touched, and [`INLINE_WALK_BYTES`] to read (of
//! a file appended to, only what was appended; nothing of what did not move). Past that it
//! says so (`None`) before reading anything, and is done again on a blocking thread, so
//! that the files a tenant wrote never hold an executor thread that other tenants' calls
//! run on.
//!
//! Events are queued by the kernel before the write that caused them returns, so what a
//! phase did is queued when the phase ends.

use super::files::{self, Change, Entry, EntryType, RACY_WINDOW, Snapshot, WhoseFn};
use super::hash::HashBudget;
use crate::limits::{INLINE_WALK_BYTES, INLINE_WALK_ENTRIES, MAX_TRACE_DIR_FDS};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

/// What a watch reports: every way an entry of a directory can change.
fn watched() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::ATTRIB
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

/// A watched directory: its path in the mount (`""`: the mount) and, for the first
/// [`MAX_TRACE_DIR_FDS`] subdirectories, its descriptor, so that an entry it reports is
/// stat'ed by name from the directory itself (no path walked again, none a guest could
/// swap: a directory moved or removed makes a walk due).
struct WatchedDir {
    path: String,
    fd: Option<OwnedFd>,
}

/// One inotify instance for every traced mount of a runtime, its events routed to the
/// mounts by watch descriptor: an instance per mount would run out of the per-user
/// instance limit (`fs.inotify.max_user_instances`, 128 by default) past some sixty
/// sessions, and every mount past it would be walked at each look.
pub struct Inotify {
    fd: OwnedFd,
    /// Watch descriptor → the queues of the mounts watching that directory (two when one
    /// mount lies in another: a project's `.hookhost/plans`).
    routes: Mutex<HashMap<i32, Vec<Weak<Mutex<Queue>>>>>,
}

/// Events routed to one mount, not yet looked at.
#[derive(Default)]
struct Queue {
    events: Vec<(i32, ReadFlags, Option<Vec<u8>>)>,
    /// The kernel's queue overflowed: events were lost.
    overflowed: bool,
}

impl Inotify {
    /// # Errors
    ///
    /// When no inotify instance can be made (the per-user limit).
    pub fn new() -> io::Result<Arc<Inotify>> {
        Ok(Arc::new(Inotify {
            fd: inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?,
            routes: Mutex::default(),
        }))
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Vec<Weak<Mutex<Queue>>>>> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads every event queued so far and hands each to the mounts that watch its
    /// directory. A read that leaves room for one more event took the whole queue, so it
    /// is not read again to be found empty (a look that found events made two reads).
    pub(super) fn pump(&self) -> io::Result<()> {
        let mut routes = self.routes();
        let mut buffer = [0u8; 8192];
        loop {
            let read = match rustix::io::read(&self.fd, &mut buffer) {
                Ok(read) => read,
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            for (wd, flags, name) in events(&buffer[..read]) {
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    for queue in routes.values().flatten().filter_map(Weak::upgrade) {
                        queue.lock().unwrap_or_else(|e| e.into_inner()).overflowed = true;
                    }
                    continue;
                }
                let Some(queues) = routes.get(&wd) else {
                    continue;
                };
                for queue in queues.iter().filter_map(Weak::upgrade) {
                    let mut queue = queue.lock().unwrap_or_else(|e| e.into_inner());
                    queue.events.push((wd, flags, name.map(<[u8]>::to_vec)));
                }
                if flags.contains(ReadFlags::IGNORED) {
                    routes.remove(&wd);
                }
            }
            if read + EVENT_ROOM <= buffer.len() {
                return Ok(());
            }
        }
    }
}

/// The most one inotify event takes in a read: its header (`struct inotify_event`) and the
/// longest name, NUL-padded (`NAME_MAX` + 1, rounded up by the kernel to 16 bytes).
const EVENT_ROOM: usize = EVENT_HEADER + 256;

/// `wd`, `mask`, `cookie` and `len`, four native-endian 32-bit fields.
const EVENT_HEADER: usize = 16;

/// The events of what one read of an inotify descriptor returned: watch descriptor,
/// flags, and the name in the watched directory when there is one.
fn events(mut read: &[u8]) -> impl Iterator<Item = (i32, ReadFlags, Option<&[u8]>)> {
    std::iter::from_fn(move || {
        let header = read.get(..EVENT_HEADER)?;
        let field = |i: usize| {
            let bytes: [u8; 4] = header[4 * i..4 * i + 4].try_into().expect("four bytes");
            u32::from_ne_bytes(bytes)
        };
        let (wd, flags, len) = (field(0) as i32, field(1), field(3) as usize);
        let padded = read.get(EVENT_HEADER..EVENT_HEADER + len)?;
        read = &read[EVENT_HEADER + len..];
        let name = padded.split(|b| *b == 0).next().filter(|n| !n.is_empty());
        Some((wd, ReadFlags::from_bits_retain(flags), name))
    })
}

/// The watches on a mount's directories.
struct Watcher {
    inotify: Arc<Inotify>,
    queue: Arc<Mutex<Queue>>,
    /// Watch descriptor → the directory.
    dirs: HashMap<i32, WatchedDir>,
    /// Entries touched since the last look: path in the mount → the watch that named it.
    touched: BTreeMap<String, i32>,
    /// Whether the next look must walk the mount whole.
    rescan: bool,
}

impl Watcher {
    fn new(inotify: Arc<Inotify>) -> Watcher {
        Watcher {
            inotify,
            queue: Arc::default(),
            dirs: HashMap::new(),
            touched: BTreeMap::new(),
            rescan: false,
        }
    }

    /// Watches the open directory `dir`, at `path` in the mount.
    fn add(&mut self, dir: &OwnedFd, path: &str) -> io::Result<()> {
        // The directory itself, through its descriptor: no path a guest could swap.
        let wd = inotify::add_watch(
            &self.inotify.fd,
            format!("/proc/self/fd/{}", dir.as_raw_fd()),
            watched(),
        )?;
        let kept = self
            .dirs
            .iter()
            .filter(|(other, d)| **other != wd && d.fd.is_some())
            .count();
        let fd = if path.is_empty() || kept >= MAX_TRACE_DIR_FDS {
            None
        } else {
            Some(rustix::io::fcntl_dupfd_cloexec(dir, 0)?)
        };
        let mut routes = self.inotify.routes();
        let queues = routes.entry(wd).or_default();
        if !queues
            .iter()
            .any(|q| std::ptr::eq(q.as_ptr(), Arc::as_ptr(&self.queue)))
        {
            queues.push(Arc::downgrade(&self.queue));
        }
        self.dirs.insert(
            wd,
            WatchedDir {
                path: path.to_string(),
                fd,
            },
        );
        Ok(())
    }

    /// Each entry touched since the last look, as it is now (`None`: gone), stat'ed by
    /// name in its watched directory when its descriptor is kept (`root`, the mount's, is),
    /// else by path beneath `root`. They stay touched until [`Watcher::touched`] is
    /// cleared.
    fn stat_touched(&self, root: &OwnedFd) -> Vec<(String, io::Result<Option<Entry>>)> {
        self.touched
            .iter()
            .map(|(path, &wd)| {
                let dir = self.dirs.get(&wd);
                let fd = match dir {
                    Some(WatchedDir { path, .. }) if path.is_empty() => Some(root),
                    Some(WatchedDir { fd, .. }) => fd.as_ref(),
                    None => None,
                };
                let entry = match fd {
                    Some(fd) => {
                        let name = path.rsplit_once('/').map_or(path.as_str(), |(_, n)| n);
                        files::entry_in(fd, name)
                    }
                    None => files::entry_at(root, path),
                };
                (path.clone(), entry)
            })
            .collect()
    }

    /// Takes the events routed here so far, the kernel's queue read first when `pump`.
    fn drain(&mut self, pump: bool) -> io::Result<()> {
        if pump {
            self.inotify.pump()?;
        }
        let queue = std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()));
        if queue.overflowed {
            self.rescan = true;
        }
        for (wd, flags, name) in queue.events {
            if flags.contains(ReadFlags::IGNORED) {
                self.dirs.remove(&wd);
                continue;
            }
            let directory_changed = flags.contains(ReadFlags::ISDIR)
                && flags.intersects(
                    ReadFlags::CREATE
                        | ReadFlags::DELETE
                        | ReadFlags::MOVED_FROM
                        | ReadFlags::MOVED_TO,
                );
            if directory_changed || flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
            {
                self.rescan = true;
                continue;
            }
            let (Some(dir), Some(name)) = (self.dirs.get(&wd), name) else {
                continue;
            };
            let name = String::from_utf8_lossy(&name);
            let path = if dir.path.is_empty() {
                name.into_owned()
            } else {
                format!("{}/{name}", dir.path)
            };
            self.touched.insert(path, wd);
        }
        Ok(())
    }
}

impl Drop for Watcher {
    /// Its watches go, unless another mount's watch the same directory.
    fn drop(&mut self) {
        let mut routes = self.inotify.routes();
        for wd in self.dirs.keys() {
            let Some(queues) = routes.get_mut(wd) else {
                continue;
            };
            queues.retain(|q| {
                q.strong_count() > 0 && !std::ptr::eq(q.as_ptr(), Arc::as_ptr(&self.queue))
            });
            if queues.is_empty() {
                routes.remove(wd);
                let _ = inotify::remove_watch(&self.inotify.fd, *wd);
            }
        }
    }
}

/// A mount of a session as last seen: its directory, its entries, and its watches.
pub struct MountState {
    root: OwnedFd,
    snapshot: Snapshot,
    /// Files kept open to read what is appended to them.
    readers: files::Readers,
    /// `None` until the first look, or when inotify is not available or not wanted.
    watcher: Option<Watcher>,
    /// The runtime's inotify instance, when its mounts are watched.
    inotify: Option<Arc<Inotify>>,
    started: bool,
}

/// What a look found.
pub struct Look {
    /// What changed since the look before (nothing at the first look).
    pub changes: Vec<Change>,
    /// Files and bytes in the mount, and whether its walk was cut short, when asked for
    /// (counting walks the snapshot).
    pub size: Option<(u64, u64, bool)>,
}

impl MountState {
    /// Opens the mount's directory `host`, to be watched through `inotify` when given,
    /// else walked at every look.
    ///
    /// # Errors
    ///
    /// When it cannot be opened as a directory (missing, or a symlink).
    pub fn open(host: &Path, inotify: Option<Arc<Inotify>>) -> io::Result<MountState> {
        Ok(MountState {
            root: files::open_dir(rustix::fs::CWD, host)?,
            snapshot: Snapshot::empty(),
            readers: files::Readers::default(),
            watcher: None,
            inotify,
            started: false,
        })
    }

    /// The mount's directory.
    pub fn root(&self) -> &OwnedFd {
        &self.root
    }

    /// Whether the next look walks the mount (the tests' check that a mount stays
    /// watched; `observe` tries a small walk on the executor instead of asking).
    #[cfg(test)]
    fn walks_next(&self) -> bool {
        !self.started || self.watcher.as_ref().is_none_or(|w| w.rescan)
    }

    /// What changed since the last look (at the first look: nothing, and the mount's
    /// size), what it reads counted in `budget`. `whose` says which entries are the
    /// host's own (see [`Whose`]). With `pump`, the runtime's inotify queue is read first
    /// (else the look takes what an earlier read routed here). With `small`, a look that
    /// would walk past [`INLINE_WALK_ENTRIES`] entries or read past [`INLINE_WALK_BYTES`],
    /// or find more touched, stops before reading any file: `None`, nothing looked at, the
    /// look still due.
    pub fn look(
        &mut self,
        whose: &WhoseFn<'_>,
        size: bool,
        pump: bool,
        small: bool,
        budget: &HashBudget,
    ) -> Option<Look> {
        let at_most = if small {
            INLINE_WALK_ENTRIES
        } else {
            usize::MAX
        };
        budget.look_on_executor(small.then_some(INLINE_WALK_BYTES));
        if !self.started {
            if let Some(inotify) = &self.inotify
                && self.watcher.is_none()
            {
                self.watcher = Some(Watcher::new(inotify.clone()));
            }
            self.walk(whose, at_most, budget)?;
            self.started = true;
            return Some(Look {
                changes: Vec::new(),
                size: size.then(|| self.size()),
            });
        }
        if let Some(watcher) = &mut self.watcher
            && let Err(e) = watcher.drain(pump)
        {
            tracing::debug!(error = %e, "cannot read inotify events: walking");
            watcher.rescan = true;
        }
        let changes = match &mut self.watcher {
            Some(watcher) if !watcher.rescan => {
                if small && watcher.touched.len() > INLINE_WALK_ENTRIES {
                    return None;
                }
                let touched = watcher.stat_touched(&self.root);
                // What reading them would take: the bytes appended to a growing log, not
                // its size, so that a long session's audit log stays on the executor.
                let bytes: u64 = touched
                    .iter()
                    .filter_map(|(path, entry)| Some((path, entry.as_ref().ok()?.as_ref()?)))
                    .map(|(path, entry)| {
                        let old = self.snapshot.entries.get(path);
                        let owner = whose(path, entry);
                        files::read_cost(&self.root, &mut self.readers, path, old, entry, owner)
                    })
                    .fold(0, u64::saturating_add);
                if small && bytes > INLINE_WALK_BYTES {
                    return None;
                }
                watcher.touched.clear();
                match self.touched(touched, whose, budget) {
                    Some(changes) => changes,
                    None => self.walk(whose, at_most, budget)?,
                }
            }
            _ => self.walk(whose, at_most, budget)?,
        };
        Some(Look {
            changes,
            size: size.then(|| self.size()),
        })
    }

    fn size(&self) -> (u64, u64, bool) {
        let (files, bytes) = self.snapshot.totals();
        (files, bytes, self.snapshot.truncated)
    }

    /// Walks the mount whole, watching each directory: what changed since the snapshot.
    /// With `at_most` below `usize::MAX`, `None` when the mount holds more entries than
    /// that or more than [`INLINE_WALK_BYTES`]: nothing changed but watches added, and a
    /// walk still due.
    fn walk(
        &mut self,
        whose: &WhoseFn<'_>,
        at_most: usize,
        budget: &HashBudget,
    ) -> Option<Vec<Change>> {
        let mut watcher = self.watcher.take();
        if let Some(w) = &mut watcher {
            w.touched.clear();
            w.rescan = false;
        }
        let mut failed = false;
        let fresh = Snapshot::take_small(
            &self.root,
            &mut |dir, path| {
                if let Some(w) = &mut watcher
                    && !failed
                    && let Err(e) = w.add(dir, path)
                {
                    tracing::warn!(error = %e, "cannot watch a traced directory: traces walk instead");
                    failed = true;
                }
            },
            at_most,
        );
        // Small when what comparing it would read is: a long session's audit log, or the
        // trace file a one-shot process finds, keeps a walk on the executor.
        let small = at_most == usize::MAX
            || fresh.as_ref().is_ok_and(|f| {
                f.as_ref().is_some_and(|f| {
                    let reads = files::compare_cost(
                        &self.root,
                        &mut self.readers,
                        &self.snapshot,
                        f,
                        whose,
                    );
                    reads <= INLINE_WALK_BYTES
                })
            });
        if let Some(w) = &mut watcher {
            w.rescan = !small;
        }
        // A watcher that missed a directory would miss its changes: walk every time.
        self.watcher = watcher.filter(|_| !failed);
        if !small {
            return None;
        }
        let mut fresh = fresh
            .map(|f| f.unwrap_or_else(Snapshot::empty))
            .unwrap_or_else(|e| {
                tracing::debug!(error = %e, "cannot walk a traced mount");
                Snapshot::empty()
            });
        let changes = files::compare(
            &self.root,
            &mut self.readers,
            &self.snapshot,
            &mut fresh,
            whose,
            budget,
        );
        self.snapshot = fresh;
        Some(changes)
    }

    /// What changed among the `touched` entries; `None` when one became a directory (a
    /// walk is due).
    fn touched(
        &mut self,
        touched: Vec<(String, io::Result<Option<Entry>>)>,
        whose: &WhoseFn<'_>,
        budget: &HashBudget,
    ) -> Option<Vec<Change>> {
        if touched.is_empty() {
            return Some(Vec::new());
        }
        // Entries are compared as a walk would, but only these: each was touched, so one
        // whose metadata did not move is read again if small (a rewrite in the same tick).
        let mut before = Snapshot::empty();
        before.taken = SystemTime::UNIX_EPOCH + RACY_WINDOW;
        let mut now = Snapshot::empty();
        for (path, entry) in touched {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    tracing::debug!(path, error = %e, "cannot stat a touched entry");
                    continue;
                }
            };
            if entry.as_ref().is_some_and(|e| e.kind == EntryType::Dir) {
                return None;
            }
            if let Some(old) = self.snapshot.entries.get(&path) {
                before.entries.insert(path.clone(), old.clone());
            }
            if let Some(entry) = entry {
                now.entries.insert(path, entry);
            }
        }
        let changes = files::compare(
            &self.root,
            &mut self.readers,
            &before,
            &mut now,
            whose,
            budget,
        );
        for path in before.entries.keys() {
            self.snapshot.entries.remove(path);
        }
        let now: BTreeMap<String, Entry> = now.entries;
        self.snapshot.entries.extend(now);
        Some(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::files::Whose;
    use crate::trace::hash::Unhashed;

    fn unbounded() -> HashBudget {
        HashBudget::new(u64::MAX)
    }

    #[test]
    fn a_read_is_parsed_into_its_events_and_one_that_left_room_is_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let wd = inotify::add_watch(&inotify.fd, dir.path(), WatchFlags::CREATE).unwrap();
        for name in ["a", "bcdefghijklmnopqrstuvwxyz"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let mut buffer = [0u8; 8192];
        let read = rustix::io::read(&inotify.fd, &mut buffer).unwrap();
        assert!(
            read + EVENT_ROOM <= buffer.len(),
            "room left: the queue was taken whole"
        );
        let parsed: Vec<_> = events(&buffer[..read])
            .map(|(w, flags, name)| {
                (
                    w,
                    flags.contains(ReadFlags::CREATE),
                    name.map(<[u8]>::to_vec),
                )
            })
            .collect();
        assert_eq!(
            parsed,
            [
                (wd.as_raw_fd(), true, Some(b"a".to_vec())),
                (
                    wd.as_raw_fd(),
                    true,
                    Some(b"bcdefghijklmnopqrstuvwxyz".to_vec())
                ),
            ]
        );
        assert_eq!(
            rustix::io::read(&inotify.fd, &mut buffer),
            Err(rustix::io::Errno::AGAIN)
        );
        // A read cut short yields the whole events it holds, and no torn one.
        assert_eq!(events(&buffer[..read - 4]).count(), 1);
    }

    #[test]
    fn more_mounts_than_inotify_instances_allowed_are_all_watched() {
        // Past `fs.inotify.max_user_instances` (128 by default) mounts with an instance
        // each would be walked at every look; one instance serves them all.
        let dir = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let none = |_: &str, _: &Entry| Whose::Other;
        let mut mounts: Vec<MountState> = (0..300)
            .map(|i| {
                let path = dir.path().join(i.to_string());
                std::fs::create_dir(&path).unwrap();
                let mut mount = MountState::open(&path, Some(inotify.clone())).unwrap();
                mount.look(&none, false, true, false, &unbounded()).unwrap();
                mount
            })
            .collect();
        for (i, mount) in mounts.iter_mut().enumerate() {
            assert!(!mount.walks_next(), "mount {i} is walked");
            std::fs::write(dir.path().join(i.to_string()).join("f"), "x").unwrap();
        }
        // Each sees its own write, whichever look read the queue.
        for (i, mount) in mounts.iter_mut().enumerate().rev() {
            let look = mount.look(&none, false, true, false, &unbounded()).unwrap();
            let paths: Vec<&str> = look.changes.iter().map(|c| c.path.as_str()).collect();
            assert_eq!(paths, ["f"], "mount {i}");
        }
        // A mount dropped takes its watches away.
        drop(mounts);
        assert!(inotify.routes().is_empty());
    }

    #[test]
    fn many_directories_keep_few_descriptors_and_their_changes_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..50 {
            std::fs::create_dir(dir.path().join(format!("d{i}"))).unwrap();
        }
        let mut mount = MountState::open(dir.path(), Some(Inotify::new().unwrap())).unwrap();
        let none = |_: &str, _: &Entry| Whose::Other;
        mount.look(&none, false, true, false, &unbounded()).unwrap();
        let watcher = mount.watcher.as_ref().unwrap();
        assert_eq!(watcher.dirs.len(), 51);
        let kept = watcher.dirs.values().filter(|d| d.fd.is_some()).count();
        assert_eq!(kept, MAX_TRACE_DIR_FDS);
        for i in 0..50 {
            std::fs::write(dir.path().join(format!("d{i}/f")), "x").unwrap();
        }
        let look = mount.look(&none, false, true, false, &unbounded()).unwrap();
        assert_eq!(look.changes.len(), 50);
        assert!(!mount.walks_next());
    }

    #[test]
    fn a_look_after_a_write_sees_it_and_one_after_nothing_sees_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old"), "old").unwrap();
        let mut mount = MountState::open(dir.path(), Some(Inotify::new().unwrap())).unwrap();
        let none = |_: &str, _: &Entry| Whose::Other;
        let first = mount.look(&none, true, true, false, &unbounded()).unwrap();
        assert_eq!(first.size, Some((1, 3, false)));
        assert!(first.changes.is_empty());
        assert!(mount.watcher.is_some(), "inotify is available");
        std::fs::write(dir.path().join("new"), "new").unwrap();
        let look = mount.look(&none, false, true, false, &unbounded()).unwrap();
        assert_eq!(look.changes.len(), 1, "{:?}", look.changes);
        assert_eq!(look.changes[0].path, "new");
        assert!(
            mount
                .look(&none, false, true, false, &unbounded())
                .unwrap()
                .changes
                .is_empty()
        );
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/deep"), "deep").unwrap();
        std::fs::remove_file(dir.path().join("old")).unwrap();
        let look = mount.look(&none, false, true, false, &unbounded()).unwrap();
        let paths: Vec<&str> = look.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["old", "sub/deep"]);
        assert!(look.changes[0].after.is_none());
        std::fs::write(dir.path().join("sub/deep"), "DEEP").unwrap();
        let look = mount.look(&none, false, true, false, &unbounded()).unwrap();
        assert_eq!(look.changes.len(), 1);
        assert!(look.changes[0].before.is_some());
    }

    #[test]
    fn a_look_on_the_executor_leaves_a_large_touched_file_to_a_blocking_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut mount = MountState::open(dir.path(), Some(Inotify::new().unwrap())).unwrap();
        let none = |_: &str, _: &Entry| Whose::Other;
        mount.look(&none, false, true, true, &unbounded()).unwrap();
        std::fs::File::create(dir.path().join("sparse"))
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let budget = unbounded();
        assert!(
            mount.look(&none, false, true, true, &budget).is_none(),
            "not looked at on the executor"
        );
        assert_eq!(budget.bytes_read(), 0);
        // Still due: the look on a blocking thread sees it, its holes not read.
        let look = mount.look(&none, false, true, false, &budget).unwrap();
        assert_eq!(look.changes.len(), 1);
        assert!(look.changes[0].after.as_ref().unwrap().sparse);
        assert_eq!(budget.bytes_read(), 0);
        // A small write is looked at on the executor.
        std::fs::write(dir.path().join("small"), "small").unwrap();
        let look = mount.look(&none, false, true, true, &budget).unwrap();
        assert_eq!(look.changes.len(), 1);
        assert_eq!(budget.bytes_read(), 5);
    }

    #[test]
    fn a_look_that_does_not_read_the_queue_takes_what_another_look_routed_to_it() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let inotify = Inotify::new().unwrap();
        let mut at_a = MountState::open(a.path(), Some(inotify.clone())).unwrap();
        let mut at_b = MountState::open(b.path(), Some(inotify)).unwrap();
        let none = |_: &str, _: &Entry| Whose::Other;
        at_a.look(&none, false, true, false, &unbounded()).unwrap();
        at_b.look(&none, false, true, false, &unbounded()).unwrap();
        std::fs::write(b.path().join("f"), "one").unwrap();
        // Nothing read the queue yet: a look that does not read it sees nothing.
        let look = at_b.look(&none, false, false, false, &unbounded()).unwrap();
        assert!(look.changes.is_empty());
        // A's look reads it and routes B's event to B.
        assert!(
            at_a.look(&none, false, true, false, &unbounded())
                .unwrap()
                .changes
                .is_empty()
        );
        let look = at_b.look(&none, false, false, false, &unbounded()).unwrap();
        assert_eq!(look.changes.len(), 1);
        assert_eq!(look.changes[0].path, "f");
    }

    #[test]
    fn a_large_log_appended_to_is_looked_at_on_the_executor_unless_grown_by_a_hole() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut mount = MountState::open(dir.path(), Some(Inotify::new().unwrap())).unwrap();
        let none = |_: &str, _: &Entry| Whose::Other;
        mount.look(&none, false, true, true, &unbounded()).unwrap();
        let log = dir.path().join("audit.jsonl");
        let large = vec![b'a'; 2 * INLINE_WALK_BYTES as usize];
        std::fs::write(&log, &large).unwrap();
        let budget = unbounded();
        assert!(mount.look(&none, false, true, true, &budget).is_none());
        mount.look(&none, false, true, false, &budget).unwrap();
        let read = budget.bytes_read();
        assert_eq!(read, large.len() as u64);
        // A line appended: only it is read, on the executor.
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(b"one more line\n").unwrap();
        let look = mount.look(&none, false, true, true, &budget).unwrap();
        assert_eq!(look.changes.len(), 1);
        assert!(look.changes[0].after.as_ref().unwrap().appended.is_some());
        assert_eq!(budget.bytes_read() - read, 14);
        // The host's own write is not read at all.
        file.write_all(b"the host's\n").unwrap();
        let host = |path: &str, _: &Entry| match path {
            "audit.jsonl" => Whose::HostAsLeft,
            _ => Whose::Other,
        };
        let look = mount.look(&host, false, true, true, &budget).unwrap();
        assert!(look.changes.is_empty());
        assert_eq!(budget.bytes_read() - read, 14);
        // Grown by a hole, the file is hashed whole again: not on the executor.
        let end = file.metadata().unwrap().len();
        file.set_len(end + INLINE_WALK_BYTES / 2).unwrap();
        file.write_all(b"after the hole\n").unwrap();
        assert!(mount.look(&none, false, true, true, &budget).is_none());
        assert_eq!(budget.bytes_read() - read, 14);
    }

    #[test]
    fn a_walk_is_sized_by_what_it_reads_not_by_what_the_mount_holds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("trace")).unwrap();
        let large = vec![b'a'; 2 * INLINE_WALK_BYTES as usize];
        std::fs::write(dir.path().join("trace/events.jsonl"), &large).unwrap();
        // Walked, not watched (a one-shot process's looks).
        let mut mount = MountState::open(dir.path(), None).unwrap();
        let host = |path: &str, _: &Entry| match path {
            "trace/events.jsonl" => Whose::Host,
            _ => Whose::Other,
        };
        let budget = unbounded();
        // The first look leaves the host's trace file unread: on the executor.
        let first = mount.look(&host, true, true, true, &budget).unwrap();
        assert!(first.changes.is_empty());
        assert_eq!(budget.bytes_read(), 0);
        std::thread::sleep(RACY_WINDOW * 2);
        // A look after a phase that wrote nothing reads nothing, whatever the mount holds.
        let quiet = mount.look(&host, false, true, true, &budget).unwrap();
        assert!(quiet.changes.is_empty());
        assert_eq!(budget.bytes_read(), 0);
        // A component's rewrite of it is read and reported, off the executor.
        std::fs::write(dir.path().join("trace/events.jsonl"), &large[1..]).unwrap();
        assert!(mount.look(&host, false, true, true, &budget).is_none());
        let look = mount.look(&host, false, true, false, &budget).unwrap();
        assert_eq!(look.changes.len(), 1, "{:?}", look.changes);
        let before = look.changes[0].before.as_ref().unwrap();
        assert_eq!(before.unhashed, Some(Unhashed::FirstLook));
        assert!(look.changes[0].after.as_ref().unwrap().sha256.is_some());
        assert_eq!(budget.bytes_read(), large.len() as u64 - 1);
    }
}
