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
use rustix::fs::{Mode, Stat};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The directory in a backing tree that is the host's: its lock, staged files, journals.
pub const HOST_DIR: &str = ".hookhost";

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

/// A backing tree: a host directory whose files sessions load and commit to.
#[derive(Clone)]
pub struct Backing {
    root: PathBuf,
    locks: std::sync::Arc<dyn StoreLocks>,
}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backing").field("root", &self.root).finish()
    }
}

impl Backing {
    /// The tree at `root`, locked with `flock` ([`FileLocks`]).
    pub fn new(root: PathBuf) -> Backing {
        Backing::locked_by(root, std::sync::Arc::new(FileLocks))
    }

    /// The tree at `root`, locked by `locks`.
    pub fn locked_by(root: PathBuf, locks: std::sync::Arc<dyn StoreLocks>) -> Backing {
        Backing { root, locks }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Copies the tree into `checkout` (made if missing; files already there are replaced)
    /// and returns what it loaded: the manifest to keep beside the checkout.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Io`] naming what could not be read or written.
    pub fn load(&self, checkout: &Path) -> Result<(Manifest, LoadReport), PersistentError> {
        let started = Instant::now();
        let _lock = self.lock()?;
        let mut manifest = Manifest::default();
        let mut bytes = 0;
        fs::create_dir_all(checkout).map_err(io_at(checkout))?;
        let checkout = Checkout::open(checkout)?;
        for (relative, base) in self.files()? {
            if let Some(copy) = checkout.put(&relative, &self.root.join(&relative))? {
                bytes += copy.size;
                manifest.files.insert(relative, Loaded { base, copy });
            }
        }
        manifest.generation = self.generation();
        let report = LoadReport {
            files: manifest.files.len(),
            bytes,
            ms: elapsed_ms(started),
        };
        Ok((manifest, report))
    }

    /// Publishes what changed in `checkout` since `manifest` was loaded, all of it or
    /// nothing, and brings `manifest` up to date with what it published.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Conflict`] naming the files changed on both sides (with
    /// [`OnConflict::Fail`]): nothing was published. [`PersistentError::Io`] otherwise; if
    /// it came after the commit point, the commit is completed by the next one to take the
    /// lock.
    pub fn commit(
        &self,
        checkout: &Path,
        manifest: &mut Manifest,
        on_conflict: OnConflict,
        room: Room,
    ) -> Result<CommitReport, PersistentError> {
        let started = Instant::now();
        let _lock = self.lock()?;
        let checkout = Checkout::open(checkout)?;
        let changes = changes(&checkout, manifest)?;
        let mut report = CommitReport::default();
        let mut conflicts = Vec::new();
        let mut puts = Vec::new();
        let mut deletes = Vec::new();
        for (relative, change) in changes {
            let now = current(&self.root.join(&relative))?;
            let base = manifest.files.get(&relative).map(|l| l.base);
            if let (Some(theirs), Change::Put { .. }) =
                (now.filter(|now| Some(*now) != base), change)
                && let Some(copy) = same_content(&self.root.join(&relative), &checkout, &relative)?
            {
                // Already published: what the store has is what the session has.
                manifest
                    .files
                    .insert(relative, Loaded { base: theirs, copy });
                continue;
            }
            if now != base {
                match on_conflict {
                    OnConflict::Fail => {
                        conflicts.push(relative);
                        continue;
                    }
                    OnConflict::Theirs => {
                        report.kept_theirs.push(relative);
                        continue;
                    }
                    OnConflict::Ours => {}
                }
            }
            match change {
                Change::Put {
                    created,
                    now: listed,
                } => {
                    if created && now.is_none() {
                        report.created.push(relative.clone());
                    } else {
                        report.updated.push(relative.clone());
                    }
                    puts.push((relative, listed));
                }
                Change::Delete => {
                    if now.is_some() {
                        report.deleted.push(relative.clone());
                        deletes.push(relative);
                    } else {
                        // Gone on both sides: nothing to publish, nothing to remember.
                        manifest.files.remove(&relative);
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(PersistentError::Conflict(conflicts));
        }
        if puts.is_empty() && deletes.is_empty() {
            report.ms = elapsed_ms(started);
            return Ok(report);
        }

        room.admits(&self.root, &puts, &deletes)?;

        // Nothing may fail after the commit point but the file system itself: a file that
        // would replace a directory, or need one where the store has a file, stops the
        // commit here.
        for (relative, _) in &puts {
            let target = self.root.join(relative);
            let blocked = target.is_dir()
                || Path::new(relative).ancestors().skip(1).any(|dir| {
                    let dir = dir.to_string_lossy();
                    !dir.is_empty()
                        && !deletes.iter().any(|d| *d == dir)
                        && current(&self.root.join(&*dir)).is_ok_and(|v| v.is_some())
                });
            if blocked {
                return Err(PersistentError::Shape(relative.clone()));
            }
        }

        // Stage every new file, durably, then write the journal: the commit point.
        let id = uuid::Uuid::new_v4().simple().to_string();
        let host = self.root.join(HOST_DIR);
        let staged = host.join(format!("staged-{id}"));
        fs::create_dir_all(&staged).map_err(io_at(&staged))?;
        let mut journal = Journal::default();
        let mut copies = Vec::with_capacity(puts.len());
        for (n, (relative, listed)) in puts.iter().enumerate() {
            let to = staged.join(n.to_string());
            let (copy, bytes) = checkout.stage(relative, *listed, &to)?;
            report.bytes += bytes;
            copies.push(copy);
            journal.puts.push((n.to_string(), relative.clone()));
        }
        journal.deletes = deletes;
        sync_dir(&staged)?;
        let journal_path = host.join(format!("journal-{id}.json"));
        let text = serde_json::to_vec(&journal).map_err(|e| PersistentError::Manifest {
            path: journal_path.clone(),
            why: e.to_string(),
        })?;
        write_durably(&journal_path, &text)?;

        journal.apply(&self.root, &staged)?;
        self.next_generation()?;
        finish(&journal_path, &staged)?;

        // What is published is the new base.
        for relative in &journal.deletes {
            manifest.files.remove(relative);
        }
        for ((_, relative), copy) in journal.puts.iter().zip(copies) {
            if let Some(base) = current(&self.root.join(relative))? {
                manifest
                    .files
                    .insert(relative.clone(), Loaded { base, copy });
            }
        }
        report.ms = elapsed_ms(started);
        Ok(report)
    }

    /// Brings the files of `checkout` that the session has not changed up to what the
    /// backing tree holds now — what other sessions committed since it loaded — and
    /// `manifest` with them; the files it changed stay as they are (a commit finds them in
    /// conflict when the tree changed them too). Costs one small read when nothing was
    /// committed since. Returns how many files it brought.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Io`] naming what could not be read or written.
    pub fn refresh(
        &self,
        checkout: &Path,
        manifest: &mut Manifest,
    ) -> Result<usize, PersistentError> {
        if self.generation() == manifest.generation {
            return Ok(0);
        }
        let _lock = self.lock()?;
        let generation = self.generation();
        let checkout = Checkout::open(checkout)?;
        let mut brought = 0;
        let mut seen = std::collections::BTreeSet::new();
        for (relative, now) in self.files()? {
            // What the session left as loaded (or left missing) is brought; a path it
            // changed, or made cross a symlink or a file, is kept as it has it.
            let unchanged = match manifest.files.get(&relative) {
                Some(loaded) if loaded.base == now => false,
                Some(loaded) => checkout.place(&relative)? == Place::File(loaded.copy),
                None => checkout.place(&relative)? == Place::Missing,
            };
            seen.insert(relative.clone());
            if unchanged && let Some(copy) = checkout.put(&relative, &self.root.join(&relative))? {
                manifest.files.insert(relative, Loaded { base: now, copy });
                brought += 1;
            }
        }
        // Removed from the tree since: removed from the checkout unless the session changed it.
        let gone: Vec<String> = manifest
            .files
            .keys()
            .filter(|r| !seen.contains(*r))
            .cloned()
            .collect();
        for relative in gone {
            let loaded = manifest.files.get(&relative).map(|l| l.copy);
            if loaded.is_some_and(|copy| checkout.place(&relative).ok() == Some(Place::File(copy)))
            {
                checkout.remove(&relative)?;
                manifest.files.remove(&relative);
                brought += 1;
            }
        }
        manifest.generation = generation;
        Ok(brought)
    }

    /// How many commits the tree has had (0 for none).
    fn generation(&self) -> u64 {
        fs::read_to_string(self.root.join(HOST_DIR).join("generation"))
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Counts one more commit (under the lock).
    fn next_generation(&self) -> Result<(), PersistentError> {
        let next = self.generation() + 1;
        write_durably(
            &self.root.join(HOST_DIR).join("generation"),
            next.to_string().as_bytes(),
        )
    }

    /// Takes the tree's lock, after completing a commit that stopped after its commit
    /// point and sweeping one that stopped before.
    fn lock(&self) -> Result<Box<dyn Send>, PersistentError> {
        let host = self.root.join(HOST_DIR);
        fs::create_dir_all(&host).map_err(io_at(&host))?;
        let lock = self.locks.lock(&self.root)?;
        self.recover()?;
        Ok(lock)
    }

    /// Rolls forward every journaled commit, then removes what staged commits without a
    /// journal left.
    fn recover(&self) -> Result<(), PersistentError> {
        let host = self.root.join(HOST_DIR);
        let mut entries: Vec<String> = fs::read_dir(&host)
            .map_err(io_at(&host))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        entries.sort();
        for name in &entries {
            let Some(id) = name
                .strip_prefix("journal-")
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            let path = host.join(name);
            let journal: Journal = match fs::read(&path) {
                Ok(text) => {
                    serde_json::from_slice(&text).map_err(|e| PersistentError::Manifest {
                        path: path.clone(),
                        why: e.to_string(),
                    })?
                }
                Err(e) => return Err(io_at(&path)(e)),
            };
            let staged = host.join(format!("staged-{id}"));
            tracing::warn!(backing = %self.root.display(), commit = id, "completing an interrupted commit");
            journal.apply(&self.root, &staged)?;
            self.next_generation()?;
            finish(&path, &staged)?;
        }
        for name in entries {
            if name.starts_with("staged-") || name.ends_with(".tmp") {
                let path = host.join(&name);
                let journaled = name
                    .strip_prefix("staged-")
                    .is_some_and(|id| host.join(format!("journal-{id}.json")).exists());
                if !journaled {
                    remove_any(&path)?;
                }
            }
        }
        Ok(())
    }

    /// Every regular file of the tree with its version, by relative path; the host's
    /// directory and symlinks left out.
    fn files(&self) -> Result<BTreeMap<String, Version>, PersistentError> {
        match beneath::open_root(&self.root, false) {
            Ok(dir) => files_in(&dir, &self.root),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(io_at(&self.root)(e)),
        }
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

/// A session's checkout as the host works in it: through its directory's descriptor, never
/// following what the session made (see the module's security rules).
struct Checkout {
    dir: OwnedFd,
    path: PathBuf,
}

/// What a checkout holds at a file's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Nothing (nor, maybe, the directories on the way).
    Missing,
    /// A regular file.
    File(Version),
    /// What the session made that is not a regular file — a symlink, a directory — or a
    /// way through a symlink or a non-directory.
    Other,
}

impl Checkout {
    /// The checkout at `path` (a host path).
    fn open(path: &Path) -> Result<Checkout, PersistentError> {
        let dir = beneath::open_root(path, false).map_err(io_at(path))?;
        Ok(Checkout {
            dir,
            path: path.to_path_buf(),
        })
    }

    fn failed(&self, relative: &str) -> impl FnOnce(io::Error) -> PersistentError {
        let path = self.path.join(relative);
        move |source| PersistentError::Io { path, source }
    }

    /// Its regular files and their versions (see [`files_in`]).
    fn files(&self) -> Result<BTreeMap<String, Version>, PersistentError> {
        files_in(&self.dir, &self.path)
    }

    /// What is at `relative` now.
    fn place(&self, relative: &str) -> Result<Place, PersistentError> {
        match beneath::stat(&self.dir, relative) {
            Ok(None) => Ok(Place::Missing),
            Ok(Some(stat))
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    == rustix::fs::FileType::RegularFile =>
            {
                Ok(Place::File(Version::of_stat(&stat)))
            }
            Ok(Some(_)) => Ok(Place::Other),
            Err(e) if beneath::crosses(&e) => Ok(Place::Other),
            Err(e) => Err(self.failed(relative)(e)),
        }
    }

    /// The regular file `relative`, opened to read through no symlink, and its metadata
    /// as opened.
    fn open_file(&self, relative: &str) -> Result<(File, Stat), PersistentError> {
        let file = beneath::open_file(&self.dir, relative).map_err(self.failed(relative))?;
        let stat = rustix::fs::fstat(&file).map_err(|e| self.failed(relative)(e.into()))?;
        Ok((file, stat))
    }

    /// Copies the file `relative`, which the walk listed as `listed`, to `to` (a new file
    /// of the store's, synced): from the descriptor it opened, so a symlink swapped in
    /// since the walk is never read through, and only when it is still the file listed
    /// (the same inode). Returns its version as copied and the bytes copied.
    fn stage(
        &self,
        relative: &str,
        listed: Version,
        to: &Path,
    ) -> Result<(Version, u64), PersistentError> {
        let (mut from, stat) = self.open_file(relative)?;
        if stat.st_ino != listed.ino {
            return Err(self.failed(relative)(io::Error::other(
                "replaced while it was being committed; commit again",
            )));
        }
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .mode(file_mode(&stat))
            .open(to)
            .map_err(io_at(to))?;
        let bytes = io::copy(&mut from, &mut file).map_err(io_at(to))?;
        file.sync_all().map_err(io_at(to))?;
        Ok((Version::of_stat(&stat), bytes))
    }

    /// Writes the store's file `from` at `relative`: made beside it in its directory's
    /// descriptor and renamed over it, the directories on the way made one at a time.
    /// Returns the copy's version, or `None` when the file is kept out: its way crosses a
    /// symlink or a file the session made, or its place holds a directory.
    fn put(&self, relative: &str, from: &Path) -> Result<Option<Version>, PersistentError> {
        let mut source = File::open(from).map_err(io_at(from))?;
        let meta = source.metadata().map_err(io_at(from))?;
        let (parent, name) = relative.rsplit_once('/').unwrap_or(("", relative));
        let Some(dir) = beneath::make_dirs(&self.dir, parent).map_err(self.failed(relative))?
        else {
            return Ok(kept_out(relative));
        };
        let tmp = format!("{REFRESH_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let mode = Mode::from_raw_mode(meta.mode() & 0o777) | Mode::RUSR | Mode::WUSR;
        match beneath::replace(&dir, name, &tmp, mode, |to| {
            io::copy(&mut source, to).map(drop)
        }) {
            Ok(stat) => Ok(Some(Version::of_stat(&stat))),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ISDIR.raw_os_error()) => {
                Ok(kept_out(relative))
            }
            Err(e) => Err(self.failed(relative)(e)),
        }
    }

    /// Removes the file `relative` (never through a symlink).
    fn remove(&self, relative: &str) -> Result<(), PersistentError> {
        beneath::remove_file(&self.dir, relative).map_err(self.failed(relative))
    }
}

/// Logs an incoming file kept out of a checkout; `None`.
fn kept_out(relative: &str) -> Option<Version> {
    tracing::info!(
        file = relative,
        "kept out of a checkout: its path there crosses a symlink or a file, or holds a directory"
    );
    None
}

/// The mode of a file the host copies: its permission bits (never set-id), readable and
/// writable by the host.
fn file_mode(stat: &Stat) -> u32 {
    (stat.st_mode & 0o777) | 0o600
}

/// The renames and removals of one commit.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Journal {
    /// (staged file name, relative path it replaces or creates).
    puts: Vec<(String, String)>,
    deletes: Vec<String>,
}

impl Journal {
    /// Applies it to `root`; each step may already have been done (a rolled-forward
    /// commit), and is then skipped.
    fn apply(&self, root: &Path, staged: &Path) -> Result<(), PersistentError> {
        for relative in &self.deletes {
            checked(relative)?;
            let path = root.join(relative);
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_at(&path)(e)),
                _ => prune_empty(root, &path),
            }
        }
        for (name, relative) in &self.puts {
            checked(relative)?;
            let from = staged.join(name);
            if !from.exists() {
                continue; // renamed already
            }
            let to = root.join(relative);
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent).map_err(io_at(parent))?;
            }
            fs::rename(&from, &to).map_err(io_at(&to))?;
        }
        // The renames are durable before the journal goes.
        let mut dirs: Vec<PathBuf> = self
            .puts
            .iter()
            .filter_map(|(_, r)| root.join(r).parent().map(Path::to_path_buf))
            .collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            sync_dir(&dir)?;
        }
        Ok(())
    }
}

/// Refuses a journal path that could leave the tree (a journal is the host's own file,
/// but a damaged one must not write elsewhere).
fn checked(relative: &str) -> Result<(), PersistentError> {
    let ok = !relative.is_empty()
        && Path::new(relative)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(PersistentError::Manifest {
            path: PathBuf::from(relative),
            why: "not a relative path inside the tree".into(),
        })
    }
}

/// Removes a finished commit's journal, then its staging directory.
fn finish(journal: &Path, staged: &Path) -> Result<(), PersistentError> {
    fs::remove_file(journal).map_err(io_at(journal))?;
    if let Some(host) = journal.parent() {
        sync_dir(host)?;
    }
    remove_any(staged)
}

/// Removes the empty directories between `removed` (a file just removed) and `root`.
fn prune_empty(root: &Path, removed: &Path) {
    let mut dir = removed.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

fn remove_any(path: &Path) -> Result<(), PersistentError> {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_at(path)(e)),
        _ => Ok(()),
    }
}

/// The version of the regular file at `path`; `None` when there is none.
fn current(path: &Path) -> Result<Option<Version>, PersistentError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Ok(Some(Version::of(&meta))),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_at(path)(e)),
    }
}

/// Writes `bytes` at `path` through a temporary file renamed over it, fsynced.
fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), PersistentError> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp).map_err(io_at(&tmp))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_at(&tmp))?;
    fs::rename(&tmp, path).map_err(io_at(path))?;
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> Result<(), PersistentError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))
}

/// Milliseconds since `started`.
pub fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(dir: &Path, relative: &str, text: &str) {
        let path = dir.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn read(dir: &Path, relative: &str) -> Option<String> {
        fs::read_to_string(dir.join(relative)).ok()
    }

    /// A commit whose process died after publishing, before its manifest was rewritten,
    /// is not its own conflict when committed again; nor are two sessions' same change.
    #[test]
    fn the_same_bytes_on_both_sides_are_no_conflict() {
        let root = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "n.md", "v1");
        let a = root.path().join("a");
        let (loaded, _) = store.load(&a).unwrap();
        put(&a, "n.md", "v2");
        put(&a, "new.md", "new");
        let mut published = loaded.clone();
        store
            .commit(&a, &mut published, OnConflict::Fail, Room::default())
            .unwrap();
        // The manifest as it was before that commit: what a crash would have left.
        let mut stale = loaded;
        let again = store
            .commit(&a, &mut stale, OnConflict::Fail, Room::default())
            .unwrap();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(stale.files, published.files);

        let b = root.path().join("b");
        let (mut mb, _) = store.load(&b).unwrap();
        put(&b, "n.md", "v3");
        put(&a, "n.md", "v3");
        store
            .commit(&a, &mut published, OnConflict::Fail, Room::default())
            .unwrap();
        let same = store
            .commit(&b, &mut mb, OnConflict::Fail, Room::default())
            .unwrap();
        assert!(same.is_empty(), "{same:?}");
        // A different change is still one.
        put(&b, "n.md", "v4");
        put(&a, "n.md", "v5");
        store
            .commit(&a, &mut published, OnConflict::Fail, Room::default())
            .unwrap();
        let err = store
            .commit(&b, &mut mb, OnConflict::Fail, Room::default())
            .unwrap_err();
        assert!(
            matches!(err, PersistentError::Conflict(ref f) if f == &["n.md"]),
            "{err}"
        );
    }

    /// A commit that would grow the store past the room it has fails before anything is
    /// staged; what it replaces and deletes counts for it.
    #[test]
    fn a_commit_larger_than_its_room_fails_whole() {
        let root = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "old.md", &"o".repeat(600));
        let a = root.path().join("a");
        let (mut manifest, _) = store.load(&a).unwrap();
        put(&a, "big.md", &"b".repeat(1000));
        let room = Room {
            bytes: Some(999),
            files: None,
        };
        let err = store
            .commit(&a, &mut manifest, OnConflict::Fail, room)
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("disk quota: the commit would add 1000 bytes and 1 files"),
            "{err}"
        );
        assert_eq!(read(store.root(), "big.md"), None);
        let staged = fs::read_dir(store.root().join(HOST_DIR))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("staged-"))
            .count();
        assert_eq!(staged, 0);
        // Deleting old.md makes room for it.
        fs::remove_file(a.join("old.md")).unwrap();
        let report = store
            .commit(&a, &mut manifest, OnConflict::Fail, room)
            .unwrap();
        assert_eq!((report.created.len(), report.deleted.len()), (1, 1));
    }

    #[test]
    fn a_commit_publishes_what_the_checkout_changed_and_only_that() {
        let root = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "keep.md", "keep");
        put(store.root(), "edit.md", "v1");
        put(store.root(), "gone/old.md", "old");
        let a = root.path().join("a");
        let (mut manifest, loaded) = store.load(&a).unwrap();
        assert_eq!((loaded.files, loaded.bytes), (3, 9));
        assert_eq!(read(&a, "edit.md").as_deref(), Some("v1"));

        put(&a, "edit.md", "v2");
        put(&a, "new/deep.md", "new");
        fs::remove_file(a.join("gone/old.md")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", a.join("link")).unwrap();
        let report = store
            .commit(&a, &mut manifest, OnConflict::Fail, Room::default())
            .unwrap();
        assert_eq!(report.created, ["new/deep.md"]);
        assert_eq!(report.updated, ["edit.md"]);
        assert_eq!(report.deleted, ["gone/old.md"]);
        assert_eq!(read(store.root(), "edit.md").as_deref(), Some("v2"));
        assert_eq!(read(store.root(), "new/deep.md").as_deref(), Some("new"));
        assert!(
            !store.root().join("gone").exists(),
            "emptied directories go"
        );
        assert!(
            !store.root().join("link").exists(),
            "symlinks are not published"
        );
        let host: Vec<_> = fs::read_dir(store.root().join(HOST_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let mut host = host;
        host.sort();
        assert_eq!(host, ["generation", "lock"], "nothing staged is left");

        // Nothing changed since: an empty commit.
        let again = store
            .commit(&a, &mut manifest, OnConflict::Fail, Room::default())
            .unwrap();
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn a_file_changed_on_both_sides_is_a_conflict_resolved_as_the_mount_says() {
        let root = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "notes.md", "base");
        put(store.root(), "other.md", "base");
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        let (mut ma, _) = store.load(&a).unwrap();
        let (mut mb, _) = store.load(&b).unwrap();
        put(&a, "notes.md", "from a");
        put(&b, "notes.md", "from b");
        put(&b, "other.md", "from b");
        store
            .commit(&a, &mut ma, OnConflict::Fail, Room::default())
            .unwrap();

        let err = store
            .commit(&b, &mut mb, OnConflict::Fail, Room::default())
            .unwrap_err();
        assert!(
            matches!(&err, PersistentError::Conflict(paths) if paths == &["notes.md"]),
            "{err}"
        );
        assert_eq!(read(store.root(), "notes.md").as_deref(), Some("from a"));
        assert_eq!(
            read(store.root(), "other.md").as_deref(),
            Some("base"),
            "none of it"
        );
        assert_eq!(
            read(&b, "notes.md").as_deref(),
            Some("from b"),
            "checkout kept"
        );

        let theirs = store
            .commit(&b, &mut mb, OnConflict::Theirs, Room::default())
            .unwrap();
        assert_eq!(theirs.kept_theirs, ["notes.md"]);
        assert_eq!(theirs.updated, ["other.md"]);
        assert_eq!(read(store.root(), "notes.md").as_deref(), Some("from a"));
        let ours = store
            .commit(&b, &mut mb, OnConflict::Ours, Room::default())
            .unwrap();
        assert_eq!(ours.updated, ["notes.md"]);
        assert_eq!(read(store.root(), "notes.md").as_deref(), Some("from b"));
    }

    #[test]
    fn a_refresh_brings_what_others_committed_and_keeps_what_the_session_changed() {
        let root = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "shared.md", "v1");
        put(store.root(), "mine.md", "v1");
        put(store.root(), "dropped.md", "v1");
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        let (mut ma, _) = store.load(&a).unwrap();
        let (mut mb, _) = store.load(&b).unwrap();
        assert_eq!(
            store.refresh(&b, &mut mb).unwrap(),
            0,
            "nothing committed yet"
        );
        put(&a, "shared.md", "from a");
        put(&a, "mine.md", "from a");
        put(&a, "new.md", "from a");
        fs::remove_file(a.join("dropped.md")).unwrap();
        store
            .commit(&a, &mut ma, OnConflict::Fail, Room::default())
            .unwrap();

        put(&b, "mine.md", "from b");
        assert_eq!(store.refresh(&b, &mut mb).unwrap(), 3);
        assert_eq!(read(&b, "shared.md").as_deref(), Some("from a"));
        assert_eq!(read(&b, "new.md").as_deref(), Some("from a"));
        assert_eq!(read(&b, "dropped.md"), None);
        assert_eq!(
            read(&b, "mine.md").as_deref(),
            Some("from b"),
            "b's change kept"
        );
        let err = store
            .commit(&b, &mut mb, OnConflict::Fail, Room::default())
            .unwrap_err();
        assert!(
            matches!(&err, PersistentError::Conflict(p) if p == &["mine.md"]),
            "{err}"
        );
    }

    /// Attack 1 of issue 39: a session plants a link to a host directory; another
    /// publishes a file at a path through it; the first one's refresh keeps that file out
    /// of its checkout instead of writing it where the link points. A file it loaded, on a
    /// way it turned into a link, is kept out too, and meets the store's change as a
    /// conflict at its commit.
    #[test]
    fn a_refresh_never_writes_through_a_symlink_the_session_planted() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "d/x.md", "v1");
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        let (mut ma, _) = store.load(&a).unwrap();
        let (mut mb, _) = store.load(&b).unwrap();
        std::os::unix::fs::symlink(outside.path(), a.join("evil")).unwrap();
        fs::rename(a.join("d"), a.join("d.mine")).unwrap();
        std::os::unix::fs::symlink(outside.path(), a.join("d")).unwrap();
        put(&b, "evil/planted.txt", "X");
        put(&b, "d/x.md", "v2");
        store
            .commit(&b, &mut mb, OnConflict::Fail, Room::default())
            .unwrap();

        assert_eq!(store.refresh(&a, &mut ma).unwrap(), 0);
        let left: Vec<_> = fs::read_dir(outside.path()).unwrap().collect();
        assert!(left.is_empty(), "written through a link: {left:?}");
        assert!(fs::symlink_metadata(a.join("evil")).unwrap().is_symlink());
        let err = store
            .commit(&a, &mut ma, OnConflict::Fail, Room::default())
            .unwrap_err();
        assert!(
            matches!(&err, PersistentError::Conflict(p) if p == &["d/x.md"]),
            "{err}"
        );
    }

    /// A checkout a load finds already there (a crash before its manifest) may hold links:
    /// the load replaces what is at a file's name, never writes through a link on its way.
    #[test]
    fn a_load_never_writes_through_a_symlink_in_the_checkout() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "notes/a.md", "a");
        put(store.root(), "top.md", "top");
        let a = root.path().join("a");
        fs::create_dir(&a).unwrap();
        std::os::unix::fs::symlink(outside.path(), a.join("notes")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("top.md"), a.join("top.md")).unwrap();
        let (manifest, loaded) = store.load(&a).unwrap();
        assert_eq!(loaded.files, 1);
        assert_eq!(manifest.files.keys().collect::<Vec<_>>(), ["top.md"]);
        assert_eq!(read(&a, "top.md").as_deref(), Some("top"));
        assert!(fs::symlink_metadata(a.join("top.md")).unwrap().is_file());
        let left: Vec<_> = fs::read_dir(outside.path()).unwrap().collect();
        assert!(left.is_empty(), "written through a link: {left:?}");
    }

    /// Attack 2 of issue 39, made deterministic: between the walk that lists a changed
    /// file and the copy of it, the session swaps its directory for a link to a host
    /// directory holding a file of the same name. The copy never reads through the link.
    #[test]
    fn a_directory_swapped_for_a_symlink_after_the_walk_is_never_copied_through() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("f.txt"), "HOST-SECRET").unwrap();
        let store = Backing::new(root.path().join("store"));
        let a = root.path().join("a");
        let (mut manifest, _) = store.load(&a).unwrap();
        put(&a, "real/f.txt", "mine");
        let checkout = Checkout::open(&a).unwrap();
        let listed = changes(&checkout, &manifest).unwrap();
        let [(relative, Change::Put { now, .. })] = listed.as_slice() else {
            panic!("{:?}", listed.iter().map(|(r, _)| r).collect::<Vec<_>>());
        };
        // The swap: `real` is now a link to the host directory.
        fs::rename(a.join("real"), a.join("swap")).unwrap();
        std::os::unix::fs::symlink(outside.path(), a.join("real")).unwrap();
        let to = root.path().join("staged");
        let err = checkout.stage(relative, *now, &to).unwrap_err();
        assert!(
            matches!(&err, PersistentError::Io { source, .. } if beneath::crosses(source)),
            "{err}"
        );
        assert!(!to.exists());
        // Nor does a whole commit, whose walk now meets the link: it publishes the
        // directory where it is now, and nothing of what the link points to.
        let report = store
            .commit(&a, &mut manifest, OnConflict::Fail, Room::default())
            .unwrap();
        assert_eq!(report.created, ["swap/f.txt"]);
        assert_eq!(read(store.root(), "swap/f.txt").as_deref(), Some("mine"));
        assert_eq!(read(store.root(), "real/f.txt"), None);
        // A file replaced since the walk (another inode) is not published in its stead.
        fs::remove_file(a.join("real")).unwrap();
        put(&a, "real/f.txt", "mine");
        let listed = changes(&checkout, &manifest).unwrap();
        let [(relative, Change::Put { now, .. })] = listed.as_slice() else {
            panic!("{:?}", listed.iter().map(|(r, _)| r).collect::<Vec<_>>());
        };
        put(&a, "real/g.txt", "other");
        fs::rename(a.join("real/g.txt"), a.join("real/f.txt")).unwrap();
        assert!(checkout.stage(relative, *now, &to).is_err());
    }

    #[test]
    fn a_commit_stopped_after_its_journal_is_completed_and_one_stopped_before_never_was() {
        let root = tempfile::tempdir().unwrap();
        let store = Backing::new(root.path().join("store"));
        put(store.root(), "a.md", "v1");
        let (_, _) = store.load(&root.path().join("x")).unwrap();
        let host = store.root().join(HOST_DIR);

        // Staged, journaled, not applied: the next lock rolls it forward.
        fs::create_dir_all(host.join("staged-1")).unwrap();
        fs::write(host.join("staged-1/0"), "v2").unwrap();
        let journal = Journal {
            puts: vec![("0".into(), "a.md".into())],
            deletes: vec![],
        };
        fs::write(
            host.join("journal-1.json"),
            serde_json::to_vec(&journal).unwrap(),
        )
        .unwrap();
        // Staged without a journal: swept.
        fs::create_dir_all(host.join("staged-2")).unwrap();
        fs::write(host.join("staged-2/0"), "never").unwrap();

        let (_, loaded) = store.load(&root.path().join("y")).unwrap();
        assert_eq!(loaded.files, 1);
        assert_eq!(read(&root.path().join("y"), "a.md").as_deref(), Some("v2"));
        let mut left: Vec<_> = fs::read_dir(&host)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["generation", "lock"]);
    }
}
