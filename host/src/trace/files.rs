//! What changed in a mount: a snapshot of its metadata before a phase and one after,
//! compared; only what changed is read and hashed.
//!
//! A [`Snapshot`] is one walk of a mount's directory: for every entry its type, size,
//! inode and change times (one `statx` per entry, no reads). Two snapshots are compared by
//! that metadata; an entry whose metadata moved is read and hashed (SHA-256, by extent for
//! a sparse file, within a budget per file and per call: see [`hash`]), so a call that
//! wrote nothing reads no file. An entry written so soon after the earlier snapshot
//! that the file system's coarse clock could leave its times unchanged is hashed again
//! anyway (git's "racily clean" rule), so a same-size rewrite in the same tick is seen.
//!
//! Security rules:
//! - nothing is followed: directories are opened `O_NOFOLLOW` from their parent's handle,
//!   files through `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` from the mount's
//!   handle, so a symlink a guest planted (or swapped in meanwhile) is reported as a
//!   symlink, with its target text, and never read through;
//! - a walk stops at [`MAX_TRACED_ENTRIES`] entries and [`MAX_TRACED_DEPTH`] levels: a guest
//!   cannot make the host walk without bound;
//! - text is kept (for diffs) only for files up to [`MAX_KEPT_TEXT`], within
//!   [`MAX_KEPT_TEXT_PER_MOUNT`] per mount;
//! - what is read of a file, and of all files in one call, is bounded (see [`hash`]): a
//!   file past a bound is reported by its metadata, [`Entry::unhashed`] saying why.

use super::hash::{self, HashBudget, Unhashed};
use crate::limits::{
    MAX_BASELINE_READ_BYTES, MAX_KEPT_TEXT, MAX_KEPT_TEXT_PER_MOUNT, MAX_TRACE_READERS,
    MAX_TRACED_DEPTH, MAX_TRACED_ENTRIES,
};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use sha2::Sha256;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Whose an entry of a traced mount is (see [`compare`]): the host's own trace files are
/// not read as what components change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// One of the host's trace files as the host last left it (in a fleet, any of them):
    /// neither read nor reported.
    HostAsLeft,
    /// A file the host writes (`trace/events.jsonl`, a diff under `trace/diffs/`), not as
    /// this host last left it: at its mount's first look taken as the hosts left it, not
    /// read (what the processes before this one appended, a one-shot process would
    /// otherwise read whole at every call); read and reported when it changes later, as
    /// any file.
    Host,
    /// Anything else.
    Other,
}

/// Tells whose each entry is, by its path in the mount.
pub type WhoseFn<'a> = dyn Fn(&str, &Entry) -> Whose + 'a;

/// How far a file system's timestamps may lag the clock: an entry changed less than this
/// before a snapshot may keep its times when written again, so it is hashed to be sure.
pub(super) const RACY_WINDOW: Duration = Duration::from_millis(20);

/// What kind of entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of a snapshot.
#[derive(Debug, Clone)]
pub struct Entry {
    pub kind: EntryType,
    pub bytes: u64,
    ino: u64,
    mtime: (i64, u32),
    ctime: (i64, u32),
    /// SHA-256 of a regular file's content, once read (of its extents when `sparse`).
    pub sha256: Option<[u8; 32]>,
    /// `sha256` is the file's digest by extent, not of its content (see [`hash`]).
    pub sparse: bool,
    /// The SHA-256 state after the content read, kept for a file hashed as its content
    /// and of at least [`hash::TEXT_SNIFF`] bytes: bytes appended to it later are hashed on
    /// from here, not read again from the start (see [`Entry::grown_into`]).
    digest: Option<Arc<Sha256>>,
    /// What was appended to a large file, read instead of the whole file.
    pub appended: Option<Appended>,
    /// Whether a regular file's content is text (UTF-8 without NUL), once read.
    pub text: Option<bool>,
    /// The content of a small text file, kept for diffs.
    pub kept: Option<Arc<str>>,
    /// A symlink's target, as text (never followed).
    pub link: Option<String>,
    /// Why a regular file's content was not read (its `sha256` is `None`): too large at
    /// its mount's first look (see [`MAX_BASELINE_READ_BYTES`]), past a bound of what the
    /// trace hashes, or unreadable.
    pub unhashed: Option<Unhashed>,
}

impl EntryType {
    fn of(stat: &Stat) -> EntryType {
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => EntryType::File,
            FileType::Directory => EntryType::Dir,
            FileType::Symlink => EntryType::Symlink,
            _ => EntryType::Other,
        }
    }
}

impl Entry {
    /// An entry with `stat`'s metadata, not read yet.
    pub fn from_stat(stat: &Stat) -> Entry {
        Entry {
            kind: EntryType::of(stat),
            bytes: stat.st_size.max(0) as u64,
            ino: stat.st_ino,
            mtime: (stat.st_mtime, stat.st_mtime_nsec as u32),
            ctime: (stat.st_ctime, stat.st_ctime_nsec as u32),
            sha256: None,
            sparse: false,
            digest: None,
            appended: None,
            text: None,
            kept: None,
            link: None,
            unhashed: None,
        }
    }

    /// Whether its content was read (hashed whole, or what was appended).
    fn is_read(&self) -> bool {
        self.sha256.is_some() || self.appended.is_some()
    }

    /// Whether `now` looks like this file with bytes appended (same inode, longer) and too
    /// large to keep for a diff: then only the appended bytes are read, hashed on from the
    /// kept state (an audit log grows by a line per call). Files up to [`MAX_KEPT_TEXT`]
    /// are read whole.
    fn grown_into(&self, now: &Entry) -> bool {
        self.kind == EntryType::File
            && now.kind == EntryType::File
            && self.ino == now.ino
            && now.bytes > self.bytes
            && now.bytes > MAX_KEPT_TEXT as u64
            && self.digest.is_some()
    }

    /// Whether `other` has the same type, size, inode and times.
    pub fn same_metadata(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.bytes == other.bytes
            && self.ino == other.ino
            && self.mtime == other.mtime
            && self.ctime == other.ctime
    }

    /// When its content last changed.
    pub fn mtime(&self) -> SystemTime {
        let (secs, nanos) = self.mtime;
        SystemTime::UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos)
    }

    /// Whether it stays as last looked at while its metadata does not move: read (or left
    /// unread for a reason that holds), or not a regular file.
    fn settled(&self) -> bool {
        self.kind != EntryType::File
            || self.is_read()
            || self.unhashed.is_some_and(Unhashed::is_kept)
    }

    fn changed_at(&self) -> SystemTime {
        let (secs, nanos) = self.mtime.max(self.ctime);
        SystemTime::UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos)
    }

    /// Whether it is a small file changed so soon after `since` that a write in the same
    /// clock tick could have left its metadata as it was: read again though it did not move.
    fn racy(&self, since: SystemTime) -> bool {
        self.kind == EntryType::File
            && self.changed_at() >= since
            && self.bytes <= MAX_KEPT_TEXT as u64
    }
}

/// One walk of a mount directory.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Entries by path relative to the mount, `/`-separated.
    pub entries: BTreeMap<String, Entry>,
    /// When the walk began.
    pub(super) taken: SystemTime,
    /// The walk stopped at a bound; entries past it are not seen.
    pub truncated: bool,
}

impl Snapshot {
    /// Nothing: what a mount is compared against before its first snapshot.
    pub fn empty() -> Snapshot {
        Snapshot {
            entries: BTreeMap::new(),
            taken: SystemTime::UNIX_EPOCH,
            truncated: false,
        }
    }

    /// Whether it is [`Snapshot::empty`]'s: a mount's first look compares against it.
    fn is_before_first_look(&self) -> bool {
        self.taken == SystemTime::UNIX_EPOCH
    }

    /// Since when an entry changed is racy (see [`Entry::racy`]).
    fn racy_since(&self) -> SystemTime {
        self.taken.checked_sub(RACY_WINDOW).unwrap_or(self.taken)
    }

    /// Regular files and their bytes.
    pub fn totals(&self) -> (u64, u64) {
        self.entries
            .values()
            .filter(|e| e.kind == EntryType::File)
            .fold((0, 0), |(files, bytes): (u64, u64), e| {
                (files + 1, bytes.saturating_add(e.bytes))
            })
    }

    /// Walks the directory `root`, telling `opened` each directory (and its path) before
    /// listing it: so a watch put on it sees every entry made after the listing.
    ///
    /// # Errors
    ///
    /// When `root` cannot be listed.
    pub fn take_watching(
        root: &OwnedFd,
        opened: &mut dyn FnMut(&OwnedFd, &str),
    ) -> io::Result<Snapshot> {
        Ok(Snapshot::take_small(root, opened, usize::MAX)?.unwrap_or_else(Snapshot::empty))
    }

    /// [`Snapshot::take_watching`] of a directory of at most `at_most` entries: `None`
    /// when it has more (the walk stops there).
    ///
    /// # Errors
    ///
    /// When `root` cannot be listed.
    pub fn take_small(
        root: &OwnedFd,
        opened: &mut dyn FnMut(&OwnedFd, &str),
        at_most: usize,
    ) -> io::Result<Option<Snapshot>> {
        let taken = SystemTime::now();
        let dir = open_dir(root, ".")?;
        let mut snapshot = Snapshot {
            entries: BTreeMap::new(),
            taken,
            truncated: false,
        };
        let mut pending = vec![(dir, String::new(), 0usize)];
        while let Some((dir, prefix, depth)) = pending.pop() {
            opened(&dir, &prefix);
            let mut listing = rustix::fs::Dir::read_from(&dir)?;
            for item in &mut listing {
                let item = item?;
                let name = item.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let name = String::from_utf8_lossy(name).into_owned();
                if snapshot.entries.len() >= at_most {
                    return Ok(None);
                }
                if snapshot.entries.len() >= MAX_TRACED_ENTRIES {
                    snapshot.truncated = true;
                    return Ok(Some(snapshot));
                }
                let Ok(stat) =
                    rustix::fs::statat(&dir, item.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                else {
                    continue; // gone meanwhile
                };
                let kind = EntryType::of(&stat);
                let path = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                let link = (kind == EntryType::Symlink)
                    .then(|| rustix::fs::readlinkat(&dir, item.file_name(), Vec::new()).ok())
                    .flatten()
                    .map(|target| target.to_string_lossy().into_owned());
                if kind == EntryType::Dir {
                    if depth + 1 < MAX_TRACED_DEPTH {
                        if let Ok(child) = open_dir(&dir, item.file_name()) {
                            pending.push((child, path.clone(), depth + 1));
                        }
                    } else {
                        snapshot.truncated = true;
                    }
                }
                let mut entry = Entry::from_stat(&stat);
                entry.link = link;
                snapshot.entries.insert(path, entry);
            }
        }
        Ok(Some(snapshot))
    }
}

/// Bytes appended to a file: from which offset, and their SHA-256. The bytes before
/// `from` are not read again, so whether they changed meanwhile is not known: the file's
/// `sha256` is that of the bytes before as last read, followed by these.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    pub from: u64,
    pub sha256: [u8; 32],
}

/// One entry that changed between two snapshots.
#[derive(Debug, Clone)]
pub struct Change {
    pub path: String,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
}

/// Compares `after` (taken of `root`) with `before`: what was created, changed or deleted.
/// Entries of `after` whose metadata did not move take their hash and kept text from
/// `before`; the others are read and hashed, within `budget`. Directories are walked, not
/// reported; nor are the host's own trace files as it last left them (see [`Whose`]).
pub fn compare(
    mount: &OwnedFd,
    readers: &mut Readers,
    before: &Snapshot,
    after: &mut Snapshot,
    whose: &WhoseFn<'_>,
    budget: &HashBudget,
) -> Vec<Change> {
    let racy_since = before.racy_since();
    let baseline = before.is_before_first_look();
    let mut kept_bytes = 0usize;
    let mut changes = Vec::new();
    // Both are sorted by path: one pass over each, side by side.
    let mut earlier = before.entries.iter().peekable();
    for (path, entry) in &mut after.entries {
        while let Some((gone, old)) = earlier.next_if(|(p, _)| *p < path) {
            readers.open.remove(gone);
            if old.kind != EntryType::Dir {
                changes.push(Change {
                    path: gone.clone(),
                    before: Some(old.clone()),
                    after: None,
                });
            }
        }
        let old = earlier.next_if(|(p, _)| *p == path).map(|(_, old)| old);
        let owner = whose(path, entry);
        if owner == Whose::HostAsLeft {
            continue;
        }
        if let Some(old) = old
            && old.same_metadata(entry)
            && old.settled()
        {
            entry.sha256 = old.sha256;
            entry.sparse = old.sparse;
            entry.digest = old.digest.clone();
            entry.appended = old.appended;
            entry.text = old.text;
            entry.kept = old.kept.clone();
            entry.unhashed = old.unhashed;
            if !entry.racy(racy_since) {
                kept_bytes += entry.kept.as_ref().map_or(0, |k| k.len());
                continue;
            }
        }
        if baseline && unread_at_first_look(entry, owner) {
            entry.unhashed = Some(Unhashed::FirstLook);
            continue;
        }
        if entry.kind == EntryType::File {
            let keep = MAX_KEPT_TEXT_PER_MOUNT.saturating_sub(kept_bytes);
            read(
                mount,
                readers,
                path,
                old,
                entry,
                keep.min(MAX_KEPT_TEXT),
                budget,
            );
        }
        kept_bytes += entry.kept.as_ref().map_or(0, |k| k.len());
        let unchanged = old.is_some_and(|old| {
            old.kind == entry.kind
                && entry.appended.is_none()
                && old.link == entry.link
                && if entry.kind == EntryType::File
                    && (old.sha256.is_none() || entry.sha256.is_none())
                {
                    // A side not hashed: only its metadata tells.
                    old.same_metadata(entry)
                } else {
                    old.sha256 == entry.sha256
                        && old.sparse == entry.sparse
                        && (entry.kind != EntryType::File || old.bytes == entry.bytes)
                }
        });
        if entry.kind != EntryType::Dir && !unchanged {
            changes.push(Change {
                path: path.clone(),
                before: old.cloned().filter(|o| o.kind != EntryType::Dir),
                after: Some(entry.clone()),
            });
        } else if entry.kind == EntryType::Dir
            && let Some(old) = old.filter(|o| o.kind != EntryType::Dir)
        {
            // A file replaced by a directory of its name: the file is gone.
            readers.open.remove(path);
            changes.push(Change {
                path: path.clone(),
                before: Some(old.clone()),
                after: None,
            });
        }
    }
    for (gone, old) in earlier {
        readers.open.remove(gone);
        if old.kind != EntryType::Dir {
            changes.push(Change {
                path: gone.clone(),
                before: Some(old.clone()),
                after: None,
            });
        }
    }
    changes
}

/// Reads and hashes the regular file `entry` at `path` below `mount` (`old`: what was
/// there before), within `budget`, keeping its text up to `keep` bytes: only the bytes
/// appended when it grew in place past [`MAX_KEPT_TEXT`], else whole. What it found, or
/// why it was not read, goes into `entry`.
fn read(
    mount: &OwnedFd,
    readers: &mut Readers,
    path: &str,
    old: Option<&Entry>,
    entry: &mut Entry,
    keep: usize,
    budget: &HashBudget,
) {
    entry.sha256 = None;
    entry.sparse = false;
    entry.digest = None;
    entry.appended = None;
    entry.text = None;
    entry.kept = None;
    entry.unhashed = None;
    if let Some(old) = old.filter(|old| old.grown_into(entry))
        && let Some(state) = old.digest.as_deref()
    {
        let grown = readers
            .open(mount, path, entry.ino)
            .and_then(|file| hash::appended(file, state, old.bytes, entry.bytes, budget));
        match grown {
            Ok(Ok(Some(grown))) => {
                entry.sha256 = Some(grown.sha256);
                entry.digest = Some(grown.digest);
                entry.appended = Some(Appended {
                    from: old.bytes,
                    sha256: grown.appended_sha256,
                });
                entry.text = Some(grown.text && old.text == Some(true));
                return;
            }
            Ok(Ok(None)) => {} // grown by a hole: hashed whole, below
            Ok(Err(why)) => {
                entry.unhashed = Some(why);
                return;
            }
            Err(e) => {
                tracing::debug!(path, error = %e, "cannot read what was appended to a file");
                entry.unhashed = Some(Unhashed::Unreadable);
                return;
            }
        }
    }
    let hashed =
        open_beneath(mount, path).and_then(|file| hash::whole(&file, entry.bytes, keep, budget));
    match hashed {
        Ok(Ok(hashed)) => {
            entry.sha256 = Some(hashed.sha256);
            entry.sparse = hashed.sparse;
            entry.digest = hashed.digest;
            entry.text = Some(hashed.text);
            entry.kept = hashed.kept;
        }
        Ok(Err(why)) => entry.unhashed = Some(why),
        Err(e) => {
            tracing::debug!(path, error = %e, "cannot read a changed file");
            entry.unhashed = Some(Unhashed::Unreadable);
        }
    }
}

/// The most a look would read of the touched `entry` at `path` ([`compare`]'s reads), `old`
/// being the entry as last looked at and `owner` whose it is: nothing of what is not a file
/// or is the host's own as it left it; of a file grown by appending (an audit log, the
/// trace file), only what was appended, unless that holds a hole (then the whole file is
/// hashed again); else its size.
pub(super) fn read_cost(
    mount: &OwnedFd,
    readers: &mut Readers,
    path: &str,
    old: Option<&Entry>,
    entry: &Entry,
    owner: Whose,
) -> u64 {
    if entry.kind != EntryType::File || owner == Whose::HostAsLeft {
        return 0;
    }
    let Some(old) = old.filter(|old| old.grown_into(entry)) else {
        return entry.bytes;
    };
    let hole = readers.open(mount, path, entry.ino).and_then(|file| {
        Ok(rustix::fs::seek(
            file,
            rustix::fs::SeekFrom::Hole(old.bytes),
        )?)
    });
    match hole {
        Ok(hole) if hole >= entry.bytes => entry.bytes - old.bytes,
        _ => entry.bytes,
    }
}

/// What [`compare`] of `after` against `before` would read, counted as [`read_cost`]
/// counts a touched entry's: nothing of an entry whose metadata did not move (unless
/// racily), nor, at the mount's first look, of what that look leaves unread.
pub(super) fn compare_cost(
    mount: &OwnedFd,
    readers: &mut Readers,
    before: &Snapshot,
    after: &Snapshot,
    whose: &WhoseFn<'_>,
) -> u64 {
    let racy_since = before.racy_since();
    let baseline = before.is_before_first_look();
    after
        .entries
        .iter()
        .map(|(path, entry)| {
            let old = before.entries.get(path);
            let unmoved = old.is_some_and(|old| {
                old.same_metadata(entry) && old.settled() && !entry.racy(racy_since)
            });
            if unmoved {
                return 0;
            }
            let owner = whose(path, entry);
            if baseline && unread_at_first_look(entry, owner) {
                return 0;
            }
            read_cost(mount, readers, path, old, entry, owner)
        })
        .fold(0, u64::saturating_add)
}

/// Whether a mount's first look leaves `entry` unread: the user's project may hold large
/// files no call will touch, and the files the host writes are as the hosts left them.
fn unread_at_first_look(entry: &Entry, owner: Whose) -> bool {
    entry.kind == EntryType::File && (entry.bytes > MAX_BASELINE_READ_BYTES || owner == Whose::Host)
}

/// Files of a mount kept open to read what is appended to them, by path: at most
/// [`MAX_TRACE_READERS`], each with the inode it was opened on.
#[derive(Default)]
pub struct Readers {
    open: HashMap<String, (u64, std::fs::File)>,
}

impl Readers {
    /// `path` below `mount` opened to read (following no symlink), or the file kept open
    /// from an earlier read when it is still inode `ino`.
    fn open(&mut self, mount: &OwnedFd, path: &str, ino: u64) -> io::Result<&std::fs::File> {
        if self.open.get(path).is_none_or(|(kept, _)| *kept != ino) {
            let file = open_beneath(mount, path)?;
            if rustix::fs::fstat(&file)?.st_ino != ino {
                return Err(io::Error::other("replaced while read"));
            }
            if self.open.len() >= MAX_TRACE_READERS {
                self.open.clear();
            }
            self.open.insert(path.to_string(), (ino, file));
        }
        Ok(&self.open[path].1)
    }
}

/// The entry at `path` below `mount` now (`None`: there is none), following no symlink:
/// a symlink is itself the entry.
pub fn entry_at(mount: &OwnedFd, path: &str) -> io::Result<Option<Entry>> {
    let fd = match rustix::fs::openat2(
        mount,
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    let mut entry = Entry::from_stat(&stat);
    if entry.kind == EntryType::Symlink {
        entry.link = rustix::fs::readlinkat(&fd, "", Vec::new())
            .ok()
            .map(|target| target.to_string_lossy().into_owned());
    }
    Ok(Some(entry))
}

/// The entry `name` of the directory `dir` now (`None`: there is none), not followed when
/// a symlink.
pub fn entry_in(dir: &OwnedFd, name: &str) -> io::Result<Option<Entry>> {
    let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut entry = Entry::from_stat(&stat);
    if entry.kind == EntryType::Symlink {
        entry.link = rustix::fs::readlinkat(dir, name, Vec::new())
            .ok()
            .map(|target| target.to_string_lossy().into_owned());
    }
    Ok(Some(entry))
}

/// Opens `path` below `mount` to read, following no symlink on the way.
fn open_beneath(mount: &OwnedFd, path: &str) -> io::Result<std::fs::File> {
    let fd = rustix::fs::openat2(
        mount,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(std::fs::File::from(fd))
}

/// Opens the directory `path` (relative to `at`), not following a symlink.
pub fn open_dir<P: rustix::path::Arg>(at: impl AsFd, path: P) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// SHA-256 as lowercase hex.
pub fn hex(hash: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(64);
    for b in hash {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_HASHED_FILE_BYTES;
    use sha2::Digest;

    fn changes(root: &std::path::Path, before: &Snapshot) -> (Snapshot, Vec<Change>) {
        changes_within(root, before, &HashBudget::new(u64::MAX))
    }

    fn changes_within(
        root: &std::path::Path,
        before: &Snapshot,
        budget: &HashBudget,
    ) -> (Snapshot, Vec<Change>) {
        let root = open_dir(rustix::fs::CWD, root).unwrap();
        let mut after = Snapshot::take_watching(&root, &mut |_, _| {}).unwrap();
        let changes = compare(
            &root,
            &mut Readers::default(),
            before,
            &mut after,
            &|_, _| Whose::Other,
            budget,
        );
        (after, changes)
    }

    #[test]
    fn sees_created_rewritten_and_deleted_files_and_reports_symlinks_unfollowed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret.path(), "secret").unwrap();
        let (first, created) = {
            std::fs::create_dir(root.join("sub")).unwrap();
            std::fs::write(root.join("sub/a.txt"), "one\n").unwrap();
            changes(root, &Snapshot::empty())
        };
        assert_eq!(created.len(), 1);
        assert_eq!(created[0].path, "sub/a.txt");
        let a = created[0].after.as_ref().unwrap();
        assert_eq!(a.kept.as_deref(), Some("one\n"));
        assert_eq!(
            a.sha256.unwrap(),
            <[u8; 32]>::from(Sha256::digest(b"one\n"))
        );

        // Same size, same tick: still seen (racy rule).
        std::fs::write(root.join("sub/a.txt"), "two\n").unwrap();
        std::os::unix::fs::symlink(secret.path(), root.join("link")).unwrap();
        std::fs::write(root.join("bin"), [0u8, 1, 2]).unwrap();
        let (second, changed) = changes(root, &first);
        let by_path: BTreeMap<_, _> = changed.iter().map(|c| (c.path.as_str(), c)).collect();
        assert_eq!(by_path.len(), 3, "{changed:?}");
        assert_eq!(
            by_path["sub/a.txt"]
                .before
                .as_ref()
                .unwrap()
                .kept
                .as_deref(),
            Some("one\n")
        );
        assert_eq!(
            by_path["sub/a.txt"].after.as_ref().unwrap().kept.as_deref(),
            Some("two\n")
        );
        let link = by_path["link"].after.as_ref().unwrap();
        assert_eq!(link.kind, EntryType::Symlink);
        assert_eq!(link.link.as_deref(), secret.path().to_str());
        assert!(link.sha256.is_none(), "a symlink is never read through");
        assert_eq!(by_path["bin"].after.as_ref().unwrap().text, Some(false));

        std::fs::remove_file(root.join("sub/a.txt")).unwrap();
        let (_, deleted) = changes(root, &second);
        assert_eq!(deleted.len(), 1);
        assert!(deleted[0].after.is_none());
    }

    #[test]
    fn a_large_file_that_grew_has_only_its_new_bytes_read() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(&log, "a\n".repeat(MAX_KEPT_TEXT)).unwrap();
        let (first, _) = changes(dir.path(), &Snapshot::empty());
        assert!(first.entries["log"].sha256.is_some());
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"b\n")
            .unwrap();
        let (second, grown) = changes(dir.path(), &first);
        let after = grown[0].after.as_ref().unwrap();
        let appended = after.appended.unwrap();
        assert_eq!(appended.from, 2 * MAX_KEPT_TEXT as u64);
        assert_eq!(appended.sha256, <[u8; 32]>::from(Sha256::digest(b"b\n")));
        // The whole file's hash, hashed on from the state kept at the first read.
        let whole = std::fs::read(&log).unwrap();
        assert_eq!(after.sha256, Some(<[u8; 32]>::from(Sha256::digest(&whole))));
        // And again: each append hashed on from the last.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"c\n")
            .unwrap();
        let (second, grown) = changes(dir.path(), &second);
        let whole = std::fs::read(&log).unwrap();
        assert_eq!(
            grown[0].after.as_ref().unwrap().sha256,
            Some(<[u8; 32]>::from(Sha256::digest(&whole)))
        );
        // Rewritten whole (a new inode): read whole again.
        std::fs::write(dir.path().join("tmp"), "c").unwrap();
        std::fs::rename(dir.path().join("tmp"), &log).unwrap();
        let (_, rewritten) = changes(dir.path(), &second);
        let after = rewritten[0].after.as_ref().unwrap();
        assert!(after.appended.is_none());
        assert_eq!(
            after.sha256.unwrap(),
            <[u8; 32]>::from(Sha256::digest(b"c"))
        );
    }

    #[test]
    fn a_large_file_is_not_read_at_the_first_look_but_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; MAX_BASELINE_READ_BYTES as usize + 1]).unwrap();
        let (first, _) = changes(dir.path(), &Snapshot::empty());
        let unread = |s: &Snapshot| s.entries["big"].unhashed == Some(Unhashed::FirstLook);
        assert!(unread(&first) && first.entries["big"].sha256.is_none());
        std::thread::sleep(RACY_WINDOW * 2);
        let (second, none) = changes(dir.path(), &first);
        assert!(
            none.is_empty() && unread(&second),
            "not read while unchanged"
        );
        std::fs::write(&big, "y").unwrap();
        let (_, changed) = changes(dir.path(), &second);
        assert!(changed[0].before.as_ref().unwrap().sha256.is_none());
        assert!(changed[0].after.as_ref().unwrap().sha256.is_some());
    }

    #[test]
    fn a_file_replaced_by_a_directory_is_reported_deleted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret.rs"), "fn main() {}\n").unwrap();
        let (first, _) = changes(dir.path(), &Snapshot::empty());
        std::fs::remove_file(dir.path().join("secret.rs")).unwrap();
        std::fs::create_dir(dir.path().join("secret.rs")).unwrap();
        let (_, changed) = changes(dir.path(), &first);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0].path, "secret.rs");
        assert!(changed[0].before.as_ref().unwrap().sha256.is_some());
        assert!(changed[0].after.is_none());
    }

    #[test]
    fn a_quiet_mount_reports_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "a").unwrap();
        let (first, _) = changes(dir.path(), &Snapshot::empty());
        std::thread::sleep(RACY_WINDOW * 2);
        let (second, _) = changes(dir.path(), &first);
        std::thread::sleep(RACY_WINDOW * 2);
        let (_, none) = changes(dir.path(), &second);
        assert!(none.is_empty());
    }

    #[test]
    fn a_1_gib_sparse_file_is_traced_with_no_gib_read() {
        let dir = tempfile::tempdir().unwrap();
        let (first, _) = changes(dir.path(), &Snapshot::empty());
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(1 << 30).unwrap();
        let budget = HashBudget::new(crate::limits::MAX_HASHED_BYTES_PER_CALL);
        let (second, created) = changes_within(dir.path(), &first, &budget);
        let after = created[0].after.as_ref().unwrap();
        assert_eq!(after.bytes, 1 << 30);
        assert!(after.sparse && after.sha256.is_some() && after.unhashed.is_none());
        assert_eq!(budget.bytes_read(), 0, "its holes are not read");
        // Data written in its middle: that block read, not the rest.
        use std::os::unix::fs::FileExt;
        std::thread::sleep(RACY_WINDOW * 2);
        sparse.write_all_at(b"data", 1 << 29).unwrap();
        let budget = HashBudget::new(crate::limits::MAX_HASHED_BYTES_PER_CALL);
        let (_, updated) = changes_within(dir.path(), &second, &budget);
        let after = updated[0].after.as_ref().unwrap();
        assert!(after.sparse);
        assert_ne!(after.sha256, updated[0].before.as_ref().unwrap().sha256);
        assert!(
            budget.bytes_read() <= 64 * 1024,
            "read {}",
            budget.bytes_read()
        );
    }

    #[test]
    fn a_file_over_the_cap_is_reported_unhashed_and_its_changes_by_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let (first, _) = changes(dir.path(), &Snapshot::empty());
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; MAX_HASHED_FILE_BYTES as usize + 1]).unwrap();
        let budget = HashBudget::new(u64::MAX);
        let (second, created) = changes_within(dir.path(), &first, &budget);
        let after = created[0].after.as_ref().unwrap();
        assert_eq!(after.unhashed, Some(Unhashed::FileCap));
        assert!(after.sha256.is_none());
        assert_eq!(budget.bytes_read(), 0);
        std::thread::sleep(RACY_WINDOW * 2);
        let (third, none) = changes(dir.path(), &second);
        assert!(none.is_empty(), "not read again while unchanged: {none:?}");
        // Rewritten in place, same size: its metadata moved, so it changed.
        use std::os::unix::fs::FileExt;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&big)
            .unwrap()
            .write_all_at(b"y", 0)
            .unwrap();
        let (_, updated) = changes(dir.path(), &third);
        assert_eq!(updated.len(), 1, "{updated:?}");
        assert_eq!(
            updated[0].after.as_ref().unwrap().unhashed,
            Some(Unhashed::FileCap)
        );
    }

    #[test]
    fn files_past_the_call_budget_are_left_unhashed_until_they_change() {
        let dir = tempfile::tempdir().unwrap();
        let (first, _) = changes(dir.path(), &Snapshot::empty());
        for name in ["a", "b"] {
            std::fs::write(dir.path().join(name), [b'x'; 3000]).unwrap();
        }
        let budget = HashBudget::new(4000);
        let (second, created) = changes_within(dir.path(), &first, &budget);
        let reasons: Vec<_> = created
            .iter()
            .map(|c| c.after.as_ref().unwrap().unhashed)
            .collect();
        assert_eq!(reasons, [None, Some(Unhashed::CallBudget)]);
        assert_eq!(
            created[0].after.as_ref().unwrap().sha256,
            Some(<[u8; 32]>::from(Sha256::digest([b'x'; 3000])))
        );
        std::thread::sleep(RACY_WINDOW * 2);
        let (_, none) = changes(dir.path(), &second);
        assert!(none.is_empty(), "{none:?}");
    }
}
