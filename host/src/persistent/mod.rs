//! Persistent directories: a tree kept across sessions in a backing directory, which a
//! session changes only in its own checkout and publishes at a commit boundary.
//!
//! - **Load**: the backing tree is copied into the session's checkout (`copy_file_range`,
//!   which shares the blocks on file systems that can — reflinks on XFS and Btrfs); the
//!   checkout's [`Manifest`] remembers the version of each file it loaded.
//! - **Commit**: the checkout's changes — files created, updated, deleted since the load —
//!   are published to the backing tree all together or not at all. A file that the backing
//!   tree changed since the load and that the session changed too is a conflict, resolved
//!   as the mount's [`OnConflict`] says (by default the commit fails, nothing of it applied,
//!   the checkout kept).
//!
//! A version is a file's (inode, size, modification time): every commit replaces a file by
//! renaming a new one over it, so a new version is a new inode, and nothing is hashed.
//! Only regular files are published: symlinks a guest made are never followed nor copied,
//! and empty directories are not kept.
//!
//! **Atomicity** (the guarantee, whatever stops the process): a commit stages every new
//! file under the backing directory's `.hookhost/` (fsynced), then writes its journal —
//! the list of renames and removals — and renames it into place: that rename is the commit
//! point. Before it, the commit never happened (the staged files are swept); after it, the
//! commit is rolled forward by whoever next takes the backing tree's lock, before any load
//! or commit reads it. Commits, loads and refreshes of one backing tree take its lock, so
//! a load never sees half a commit and commits apply one at a time: by default `flock` on
//! `.hookhost/lock` ([`FileLocks`]), which serialises the processes of one machine; a
//! fleet sharing the tree serialises through its session database instead (see
//! [`StoreLocks`]).
//!
//! A commit that fails on a conflict leaves the store's version of each conflicting file in
//! the checkout at [`THEIRS_DIR`]`/PATH`, for the session to merge from.
//!
//! A commit that finds a file changed in the store since the load, and changed by the
//! session, first compares their contents: the same bytes on both sides (two sessions that
//! made the same change, or a commit whose process died after publishing, before its
//! manifest was rewritten) are no conflict.
//!
//! Security rules: paths in a tree are relative and made of normal components only; the
//! top-level `.hookhost` name is the host's and is neither loaded nor published.
//!
//! **The checkout is the session's**, and hostile: it may hold a symlink anywhere, swap a
//! directory for one while the host works in it, hide what it wrote. The host works in a
//! checkout only through its directory's descriptor ([`crate::beneath`]), never by a path
//! through it:
//! - a walk (what changed, what a store loaded) opens each directory from its parent's
//!   descriptor without following it;
//! - a file hashed, compared or copied is opened beneath the checkout through no symlink
//!   and read from the descriptor opened; a commit publishes the very file its walk
//!   listed (the same inode: a file replaced since fails the commit, to be tried again);
//! - a file written into the checkout (a load, a refresh) is made beside its name in its
//!   parent directory's descriptor and renamed over it, the directories on its way made
//!   one at a time: a symlink is never written through, only ever replaced.
//!
//! **An incoming file is kept out** of a checkout (a load's or a refresh's) when its path
//! there crosses something the session made that is not a directory — a symlink, a file —
//! or its place holds a directory; a refresh also keeps it out when its place holds a
//! symlink (a load of a fresh checkout replaces one). The manifest keeps what it had for
//! that path (or nothing), so the session's own state of the path wins in its checkout:
//! if the session publishes there, its commit meets the store's version as a conflict
//! (or [`PersistentError::Shape`], a file of its where the store has a directory). The
//! backing tree and what the host keeps in it (`.hookhost/`) are the host's: they are
//! worked in by path. Symlinks are never published.

use crate::beneath::{self, Walk};
use rustix::fd::OwnedFd;
use rustix::fs::Stat;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

mod backing;
mod checkout;
pub mod keeper;
#[cfg(test)]
mod tests;

pub use backing::Backing;
use checkout::{Checkout, Place, write_durably};
/// The directory in a backing tree that is the host's: its lock, staged files, journals.
pub const HOST_DIR: &str = ".hookhost";

/// Where, in a session's checkout, a commit that failed on a conflict leaves the store's
/// version of each conflicting file (`THEIRS_DIR/PATH`) for the session to read and merge
/// from: under [`HOST_DIR`], so never published; emptied by the next commit.
pub const THEIRS_DIR: &str = ".hookhost/theirs";

/// The name a refreshed file has in a checkout before it is renamed into place; a file
/// of that name is never published.
const REFRESH_PREFIX: &str = ".hookhost-refresh-";

/// What a commit does with a file that changed both in the backing tree (since the load)
/// and in the checkout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnConflict {
    /// The commit fails; nothing of it is applied.
    #[default]
    Fail,
    /// The backing tree's version stays; the session's change of that file is not published.
    Theirs,
    /// The session's version replaces the backing tree's.
    Ours,
}

/// Why a load or a commit failed.
#[derive(Debug, thiserror::Error)]
pub enum PersistentError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("conflict: changed in the store since this session loaded it: {}", .0.join(", "))]
    Conflict(Vec<String>),
    #[error("the checkout's manifest {path}: {why}")]
    Manifest { path: PathBuf, why: String },
    #[error("the commit stopped: {0}")]
    Stopped(String),
    #[error("the store's lock: {0}")]
    Lock(String),
    #[error(
        "disk quota: the commit would add {bytes} bytes and {files} files to the store; {left}"
    )]
    Quota {
        bytes: u64,
        files: u64,
        left: String,
    },
    #[error("the store component {component}: {why}")]
    Store { component: String, why: String },
    #[error(
        "{0} cannot be published: the store has a directory there, or a file where it needs one"
    )]
    Shape(String),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> PersistentError + '_ {
    move |source| PersistentError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl Version {
    fn of(meta: &fs::Metadata) -> Version {
        Version {
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }

    /// The same as [`Version::of`], from `fstat`'s answer.
    fn of_stat(stat: &Stat) -> Version {
        Version {
            ino: stat.st_ino,
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime_ns: i128::from(stat.st_mtime) * 1_000_000_000
                + i128::from(stat.st_mtime_nsec as i64),
        }
    }
}

/// What a checkout loaded, per file (`/`-separated relative path): the backing tree's
/// version then (`base`), and the checkout's copy as it was made (`copy`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    files: BTreeMap<String, Loaded>,
    /// The backing tree's generation (its count of commits) it is up to date with.
    #[serde(default)]
    generation: u64,
    /// For a store component's checkout: the store's version it is based on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    store_version: Option<String>,
}

/// How a file of a checkout changed since it was loaded (or last published).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileChange {
    Created,
    Updated,
    Deleted,
}

/// A file of a checkout that changed since it was loaded (or last published).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// `/`-separated, relative to the checkout.
    pub path: String,
    pub change: FileChange,
    /// Its size in the checkout as listed (0 when deleted).
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Loaded {
    base: Version,
    copy: Version,
}

impl Manifest {
    /// The manifest of a checkout that a store component has just loaded at `version`:
    /// each of its files as it is now. Returns it with the files and bytes loaded.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Io`] when the checkout cannot be read.
    pub fn loaded_by_store(
        checkout: &Path,
        version: String,
    ) -> Result<(Manifest, u64, u64), PersistentError> {
        let mut manifest = Manifest {
            store_version: Some(version),
            ..Manifest::default()
        };
        let mut bytes = 0;
        for (relative, now) in Checkout::open(checkout)?.files()? {
            bytes += now.size;
            manifest.files.insert(
                relative,
                Loaded {
                    base: now,
                    copy: now,
                },
            );
        }
        let files = manifest.files.len() as u64;
        Ok((manifest, files, bytes))
    }

    /// The store's version a store component's checkout is based on.
    pub fn store_version(&self) -> Option<&str> {
        self.store_version.as_deref()
    }

    /// What changed in `checkout` since this manifest's load or last commit.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Io`] when the checkout cannot be read.
    pub fn changes(&self, checkout: &Path) -> Result<Vec<Changed>, PersistentError> {
        Ok(changes(&Checkout::open(checkout)?, self)?
            .into_iter()
            .map(|(path, change)| match change {
                Change::Put { created, now } => Changed {
                    path,
                    change: if created {
                        FileChange::Created
                    } else {
                        FileChange::Updated
                    },
                    bytes: now.size,
                },
                Change::Delete => Changed {
                    path,
                    change: FileChange::Deleted,
                    bytes: 0,
                },
            })
            .collect())
    }

    /// Records that a store published `published` (changes of `checkout`) as `version`:
    /// the checkout's copies of them are the new base.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Io`] when the checkout cannot be read.
    pub fn published(
        &mut self,
        checkout: &Path,
        published: &[Changed],
        version: String,
    ) -> Result<(), PersistentError> {
        let checkout = Checkout::open(checkout)?;
        for Changed { path, change, .. } in published {
            match (change, checkout.place(path)?) {
                (_, Place::File(now)) if *change != FileChange::Deleted => {
                    self.files.insert(
                        path.clone(),
                        Loaded {
                            base: now,
                            copy: now,
                        },
                    );
                }
                _ => {
                    self.files.remove(path);
                }
            }
        }
        self.store_version = Some(version);
        Ok(())
    }

    /// Reads the manifest at `path`.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Manifest`] when it cannot be read or parsed.
    pub fn read(path: &Path) -> Result<Manifest, PersistentError> {
        let bad = |why: String| PersistentError::Manifest {
            path: path.to_path_buf(),
            why,
        };
        let text = fs::read(path).map_err(|e| bad(e.to_string()))?;
        serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))
    }

    /// Writes it at `path`, whole or not at all (a temporary file renamed over it).
    ///
    /// # Errors
    ///
    /// [`PersistentError::Io`].
    pub fn write(&self, path: &Path) -> Result<(), PersistentError> {
        let text = serde_json::to_vec(self).map_err(|e| PersistentError::Manifest {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
        write_durably(path, &text)
    }

    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// What a load did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadReport {
    pub files: usize,
    pub bytes: u64,
    pub ms: u64,
}

/// What a commit published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitReport {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub deleted: Vec<String>,
    /// Changed on both sides and left as the backing tree has them (`OnConflict::Theirs`).
    pub kept_theirs: Vec<String>,
    pub bytes: u64,
    pub ms: u64,
}

impl CommitReport {
    /// Whether it published nothing.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }
}

/// Who serialises the loads, refreshes and commits of backing trees: every host that
/// reaches a tree must take its lock from the same one.
pub trait StoreLocks: Send + Sync {
    /// Waits for the lock of the tree at `root` and holds it until the guard is dropped.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Lock`] when it cannot be taken.
    fn lock(&self, root: &Path) -> Result<Box<dyn Send>, PersistentError>;
}

/// The lock of a tree as `flock` on its `.hookhost/lock`: for the processes of one machine
/// (on a local file system; NFS and the like may not honour it).
#[derive(Debug, Default)]
pub struct FileLocks;

impl StoreLocks for FileLocks {
    fn lock(&self, root: &Path) -> Result<Box<dyn Send>, PersistentError> {
        let host = root.join(HOST_DIR);
        fs::create_dir_all(&host).map_err(io_at(&host))?;
        let path = host.join("lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_at(&path))?;
        lock.lock().map_err(io_at(&path))?;
        Ok(Box::new(lock))
    }
}

/// What a commit may add to a store, net of what it replaces and deletes (a tenant's disk
/// quota, less what it uses): unbounded by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Room {
    pub bytes: Option<u64>,
    pub files: Option<u64>,
}

impl Room {
    /// What is left after a commit wrote `bytes` and created `files`.
    pub fn less(self, bytes: u64, files: u64) -> Room {
        Room {
            bytes: self.bytes.map(|left| left.saturating_sub(bytes)),
            files: self.files.map(|left| left.saturating_sub(files)),
        }
    }

    /// Fails with [`PersistentError::Quota`] when publishing `puts` (files of a checkout
    /// as listed) and removing `deletes` would grow the store at `root` by more than the
    /// room left.
    fn admits(
        &self,
        root: &Path,
        puts: &[(String, Version)],
        deletes: &[String],
    ) -> Result<(), PersistentError> {
        if self.bytes.is_none() && self.files.is_none() {
            return Ok(());
        }
        let size = |path: &Path| fs::symlink_metadata(path).map(|m| m.len()).ok();
        let (mut added, mut removed, mut files, mut gone) = (0u64, 0u64, 0u64, 0u64);
        for (relative, listed) in puts {
            added += listed.size;
            match size(&root.join(relative)) {
                Some(replaced) => removed += replaced,
                None => files += 1,
            }
        }
        for relative in deletes {
            removed += size(&root.join(relative)).unwrap_or(0);
            gone += 1;
        }
        self.check(added.saturating_sub(removed), files.saturating_sub(gone))
    }

    /// Fails with [`PersistentError::Quota`] when adding `bytes` and `files` to a store
    /// would take more than the room left.
    ///
    /// # Errors
    ///
    /// The [`PersistentError::Quota`] that says so.
    pub fn check(&self, bytes: u64, files: u64) -> Result<(), PersistentError> {
        let left = if let Some(left) = self.bytes.filter(|left| bytes > *left) {
            format!("the tenant has {left} bytes left")
        } else if let Some(left) = self.files.filter(|left| files > *left) {
            format!("the tenant has room for {left} more files")
        } else {
            return Ok(());
        };
        Err(PersistentError::Quota { bytes, files, left })
    }
}

/// Whether `relative` is the host's directory of a tree, or in it: never loaded nor
/// published.
fn is_host_path(relative: &str) -> bool {
    relative
        .strip_prefix(HOST_DIR)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The version of the checkout's file `relative` when it holds the same bytes as the store's
/// file `theirs` (`None` when it does not).
fn same_content(
    theirs: &Path,
    checkout: &Checkout,
    relative: &str,
) -> Result<Option<Version>, PersistentError> {
    use std::io::Read;
    let (ours, stat) = checkout.open_file(relative)?;
    let ours_at = checkout.path.join(relative);
    let meta = fs::metadata(theirs).map_err(io_at(theirs))?;
    if i64::try_from(meta.len()).ok() != Some(stat.st_size) {
        return Ok(None);
    }
    let mut fa = io::BufReader::new(File::open(theirs).map_err(io_at(theirs))?);
    let mut fb = io::BufReader::new(ours);
    let (mut ba, mut bb) = ([0u8; 8192], [0u8; 8192]);
    loop {
        let n = fa.read(&mut ba).map_err(io_at(theirs))?;
        if n == 0 {
            return Ok(Some(Version::of_stat(&stat)));
        }
        fb.read_exact(&mut bb[..n]).map_err(io_at(&ours_at))?;
        if ba[..n] != bb[..n] {
            return Ok(None);
        }
    }
}

/// How a file of the checkout changed since the load.
#[derive(Clone, Copy)]
enum Change {
    /// Made (`created`: it was not loaded) or rewritten; `now` as the walk listed it.
    Put {
        created: bool,
        now: Version,
    },
    Delete,
}

/// What changed in `checkout` since `manifest`.
fn changes(
    checkout: &Checkout,
    manifest: &Manifest,
) -> Result<Vec<(String, Change)>, PersistentError> {
    let mut found = checkout.files()?;
    found.retain(|relative, _| {
        !relative
            .rsplit('/')
            .next()
            .is_some_and(|name| name.starts_with(REFRESH_PREFIX))
    });
    let mut changes = Vec::new();
    for (relative, loaded) in &manifest.files {
        match found.get(relative) {
            None => changes.push((relative.clone(), Change::Delete)),
            Some(now) if *now != loaded.copy => {
                let now = *now;
                changes.push((
                    relative.clone(),
                    Change::Put {
                        created: false,
                        now,
                    },
                ));
            }
            Some(_) => {}
        }
    }
    for (relative, now) in found {
        if !manifest.files.contains_key(&relative) {
            changes.push((relative, Change::Put { created: true, now }));
        }
    }
    changes.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(changes)
}

/// Every regular file below `dir` (the tree at `path`) with its version, by relative path;
/// the host's directory, symlinks and names that are not UTF-8 left out. Never follows a
/// symlink (see [`crate::beneath`]).
fn files_in(dir: &OwnedFd, path: &Path) -> Result<BTreeMap<String, Version>, PersistentError> {
    let mut files = BTreeMap::new();
    beneath::walk(dir, Walk::EXACT, &mut |e: &beneath::Entry<'_>| {
        let Ok(relative) = std::str::from_utf8(e.path) else {
            tracing::warn!(dir = %path.display(), "a file name that is not UTF-8 is not kept");
            return Ok(false);
        };
        if is_host_path(relative) {
            return Ok(false);
        }
        if e.is_file() {
            files.insert(relative.to_string(), Version::of_stat(e.stat));
        }
        Ok(e.is_dir())
    })
    .map_err(io_at(path))?;
    Ok(files)
}

/// Milliseconds since `started`.
pub fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
