//! What changed in a mount: a snapshot of its metadata before a phase and one after,
//! compared; only what changed is read and hashed.
//!
//! A [`Snapshot`] is one walk of a mount's directory: for every entry its type, size,
//! inode and change times (one `statx` per entry, no reads). Two snapshots are compared by
//! that metadata; an entry whose metadata moved is read and hashed (SHA-256), so a call
//! that wrote nothing reads no file. An entry written so soon after the earlier snapshot
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
//!   [`MAX_KEPT_TEXT_PER_MOUNT`] per mount.

use crate::limits::{
    MAX_BASELINE_READ_BYTES, MAX_KEPT_TEXT, MAX_KEPT_TEXT_PER_MOUNT, MAX_TRACE_READERS,
    MAX_TRACED_DEPTH, MAX_TRACED_ENTRIES,
};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

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
    /// SHA-256 of a regular file's content, once read.
    pub sha256: Option<[u8; 32]>,
    /// The SHA-256 state after the content read, kept for a file of at least
    /// [`TEXT_SNIFF`] bytes: bytes appended to it later are hashed on from here, not read
    /// again from the start (see [`Entry::grown_into`]).
    digest: Option<Arc<Sha256>>,
    /// What was appended to a large file, read instead of the whole file.
    pub appended: Option<Appended>,
    /// Whether a regular file's content is text (UTF-8 without NUL), once read.
    pub text: Option<bool>,
    /// The content of a small text file, kept for diffs.
    pub kept: Option<Arc<str>>,
    /// A symlink's target, as text (never followed).
    pub link: Option<String>,
    /// A file found at a mount's first look too large to read then (see
    /// [`MAX_BASELINE_READ_BYTES`]): its hash before its first change is not known.
    pub unread: bool,
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
            digest: None,
            appended: None,
            text: None,
            kept: None,
            link: None,
            unread: false,
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

    fn changed_at(&self) -> SystemTime {
        let (secs, nanos) = self.mtime.max(self.ctime);
        SystemTime::UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos)
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

    /// Regular files and their bytes.
    pub fn totals(&self) -> (u64, u64) {
        self.entries
            .values()
            .filter(|e| e.kind == EntryType::File)
            .fold((0, 0), |(files, bytes), e| (files + 1, bytes + e.bytes))
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
/// `before`; the others are read and hashed. Directories are walked, not reported; nor are
/// entries `host_wrote` (the host's own trace files, as it last left them).
pub fn compare(
    mount: &OwnedFd,
    readers: &mut Readers,
    before: &Snapshot,
    after: &mut Snapshot,
    host_wrote: &dyn Fn(&str, &Entry) -> bool,
) -> Vec<Change> {
    let racy_since = before
        .taken
        .checked_sub(RACY_WINDOW)
        .unwrap_or(before.taken);
    // The first look at a mount reads what it holds, up to a size: the user's project may
    // hold large files no call will touch.
    let baseline = before.taken == SystemTime::UNIX_EPOCH;
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
        if host_wrote(path, entry) {
            continue;
        }
        if let Some(old) = old
            && old.same_metadata(entry)
            && (entry.kind != EntryType::File || old.is_read() || old.unread)
        {
            entry.sha256 = old.sha256;
            entry.digest = old.digest.clone();
            entry.appended = old.appended;
            entry.text = old.text;
            entry.kept = old.kept.clone();
            entry.unread = old.unread;
            let racy = entry.kind == EntryType::File
                && entry.changed_at() >= racy_since
                && entry.bytes <= MAX_KEPT_TEXT as u64;
            if !racy {
                kept_bytes += entry.kept.as_ref().map_or(0, |k| k.len());
                continue;
            }
        }
        if entry.kind == EntryType::File && baseline && entry.bytes > MAX_BASELINE_READ_BYTES {
            entry.unread = true;
            continue;
        }
        if entry.kind == EntryType::File {
            let appended = old.filter(|old| old.grown_into(entry));
            let read = match appended {
                Some(old) => readers
                    .open(mount, path, entry.ino)
                    .and_then(|file| read_appended(file, old, entry.bytes))
                    .map(|read| {
                        entry.sha256 = Some(read.sha256);
                        entry.digest = Some(read.digest);
                        entry.appended = Some(read.appended);
                        entry.text = Some(read.text && old.text == Some(true));
                        entry.kept = None;
                    }),
                None => {
                    let budget = MAX_KEPT_TEXT_PER_MOUNT.saturating_sub(kept_bytes);
                    read_file(mount, path, budget.min(MAX_KEPT_TEXT)).map(|read| {
                        entry.sha256 = Some(read.sha256);
                        entry.digest = read.digest;
                        entry.appended = None;
                        entry.text = Some(read.text);
                        entry.kept = read.kept;
                    })
                }
            };
            if let Err(e) = read {
                tracing::debug!(path, error = %e, "cannot read a changed file");
            }
        }
        kept_bytes += entry.kept.as_ref().map_or(0, |k| k.len());
        let unchanged = old.is_some_and(|old| {
            old.kind == entry.kind
                && entry.appended.is_none()
                && old.sha256 == entry.sha256
                && old.link == entry.link
                && (entry.kind != EntryType::File || old.bytes == entry.bytes)
        });
        if entry.kind != EntryType::Dir && !unchanged {
            changes.push(Change {
                path: path.clone(),
                before: old.cloned().filter(|o| o.kind != EntryType::Dir),
                after: Some(entry.clone()),
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

/// What reading the bytes appended to a file found.
struct Grown {
    /// The whole file's, hashed on from the state kept at the last read.
    sha256: [u8; 32],
    digest: Arc<Sha256>,
    appended: Appended,
    /// Whether the new bytes are text (no NUL).
    text: bool,
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

/// Reads what was appended to `file` since `old` was read, up to `bytes` (its size when
/// stat'ed, so that the entry's size and hash agree): the new bytes hashed alone and on
/// from `old`'s kept state.
fn read_appended(file: &std::fs::File, old: &Entry, bytes: u64) -> io::Result<Grown> {
    use std::os::unix::fs::FileExt;
    let mut whole = old
        .digest
        .as_deref()
        .cloned()
        .ok_or_else(|| io::Error::other("no hash state kept"))?;
    let mut appended = Sha256::new();
    let mut buffer = [0u8; 16 * 1024];
    let mut text = true;
    let mut at = old.bytes;
    while at < bytes {
        let want = buffer
            .len()
            .min(usize::try_from(bytes - at).unwrap_or(usize::MAX));
        let n = file.read_at(&mut buffer[..want], at)?;
        if n == 0 {
            break;
        }
        let chunk = &buffer[..n];
        appended.update(chunk);
        whole.update(chunk);
        text &= !chunk.contains(&0);
        at += n as u64;
    }
    let digest = Arc::new(whole.clone());
    Ok(Grown {
        sha256: whole.finalize().into(),
        digest,
        appended: Appended {
            from: old.bytes,
            sha256: appended.finalize().into(),
        },
        text,
    })
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

/// What reading a file found.
struct Contents {
    sha256: [u8; 32],
    /// The hash state, for a file of at least [`TEXT_SNIFF`] bytes.
    digest: Option<Arc<Sha256>>,
    text: bool,
    kept: Option<Arc<str>>,
}

/// Reads `path` below `mount` without following any symlink: its hash, whether it is text,
/// and its content when it is text of at most `keep` bytes.
fn read_file(mount: &OwnedFd, path: &str, keep: usize) -> io::Result<Contents> {
    let mut file = open_beneath(mount, path)?;
    let mut hasher = Sha256::new();
    let mut head = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut text = true;
    let mut total = 0usize;
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        let chunk = &buffer[..n];
        hasher.update(chunk);
        text &= !chunk.contains(&0);
        if total + n <= keep.max(TEXT_SNIFF) {
            head.extend_from_slice(chunk);
        }
        total += n;
    }
    let valid = std::str::from_utf8(&head);
    // A file longer than what was kept is judged by its head; a cut inside a character is
    // not a reason to call it binary.
    text &= match valid {
        Ok(_) => true,
        Err(e) => total > head.len() && e.error_len().is_none(),
    };
    let kept = match valid {
        Ok(s) if text && total == head.len() && total <= keep => Some(Arc::from(s)),
        _ => None,
    };
    let digest = (total >= TEXT_SNIFF).then(|| Arc::new(hasher.clone()));
    Ok(Contents {
        sha256: hasher.finalize().into(),
        digest,
        text,
        kept,
    })
}

/// How much of a file too large to keep is read to judge whether it is text; a file at
/// least this large keeps its hash state (about 100 bytes) to hash appended bytes on from.
const TEXT_SNIFF: usize = 8 * 1024;

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

    fn changes(root: &std::path::Path, before: &Snapshot) -> (Snapshot, Vec<Change>) {
        let root = open_dir(rustix::fs::CWD, root).unwrap();
        let mut after = Snapshot::take_watching(&root, &mut |_, _| {}).unwrap();
        let changes = compare(
            &root,
            &mut Readers::default(),
            before,
            &mut after,
            &|_, _| false,
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
        assert!(first.entries["big"].unread && first.entries["big"].sha256.is_none());
        std::thread::sleep(RACY_WINDOW * 2);
        let (second, none) = changes(dir.path(), &first);
        assert!(
            none.is_empty() && second.entries["big"].unread,
            "not read while unchanged"
        );
        std::fs::write(&big, "y").unwrap();
        let (_, changed) = changes(dir.path(), &second);
        assert!(changed[0].before.as_ref().unwrap().sha256.is_none());
        assert!(changed[0].after.as_ref().unwrap().sha256.is_some());
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
}
