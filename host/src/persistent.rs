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

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
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
        walk(checkout, "", &mut |relative, meta| {
            if is_host_path(relative) {
                return;
            }
            let now = Version::of(meta);
            bytes += now.size;
            manifest.files.insert(
                relative.to_string(),
                Loaded {
                    base: now,
                    copy: now,
                },
            );
        })?;
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
    pub fn changes(&self, checkout: &Path) -> Result<Vec<(String, FileChange)>, PersistentError> {
        Ok(changes(checkout, self)?
            .into_iter()
            .map(|(relative, change)| {
                let change = match change {
                    Change::Put { created: true } => FileChange::Created,
                    Change::Put { created: false } => FileChange::Updated,
                    Change::Delete => FileChange::Deleted,
                };
                (relative, change)
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
        published: &[(String, FileChange)],
        version: String,
    ) -> Result<(), PersistentError> {
        for (relative, change) in published {
            match (change, current(&checkout.join(relative))?) {
                (FileChange::Deleted, _) | (_, None) => {
                    self.files.remove(relative);
                }
                (_, Some(now)) => {
                    self.files.insert(
                        relative.clone(),
                        Loaded {
                            base: now,
                            copy: now,
                        },
                    );
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
        for (relative, base) in self.files()? {
            let from = self.root.join(&relative);
            let to = checkout.join(&relative);
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent).map_err(io_at(parent))?;
            }
            bytes += fs::copy(&from, &to).map_err(io_at(&from))?;
            let copy = Version::of(&fs::symlink_metadata(&to).map_err(io_at(&to))?);
            manifest.files.insert(relative, Loaded { base, copy });
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
        let changes = changes(checkout, manifest)?;
        let mut report = CommitReport::default();
        let mut conflicts = Vec::new();
        let mut puts = Vec::new();
        let mut deletes = Vec::new();
        for (relative, change) in changes {
            let now = current(&self.root.join(&relative))?;
            let base = manifest.files.get(&relative).map(|l| l.base);
            if now != base && matches!(change, Change::Put { .. }) {
                let (theirs, ours) = (self.root.join(&relative), checkout.join(&relative));
                if now.is_some() && same_content(&theirs, &ours)? {
                    // Already published: what the store has is what the session has.
                    if let (Some(base), Some(copy)) = (now, current(&ours)?) {
                        manifest.files.insert(relative, Loaded { base, copy });
                    }
                    continue;
                }
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
                Change::Put { created } => {
                    if created && now.is_none() {
                        report.created.push(relative.clone());
                    } else {
                        report.updated.push(relative.clone());
                    }
                    puts.push(relative);
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

        room.admits(&self.root, checkout, &puts, &deletes)?;

        // Nothing may fail after the commit point but the file system itself: a file that
        // would replace a directory, or need one where the store has a file, stops the
        // commit here.
        for relative in &puts {
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
        for (n, relative) in puts.iter().enumerate() {
            let from = checkout.join(relative);
            let to = staged.join(n.to_string());
            report.bytes += fs::copy(&from, &to).map_err(io_at(&from))?;
            File::open(&to)
                .and_then(|f| f.sync_all())
                .map_err(io_at(&to))?;
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
        for (_, relative) in &journal.puts {
            let base = current(&self.root.join(relative))?;
            let copy = current(&checkout.join(relative))?;
            if let (Some(base), Some(copy)) = (base, copy) {
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
        let mut brought = 0;
        let mut seen = std::collections::BTreeSet::new();
        for (relative, now) in self.files()? {
            let target = checkout.join(&relative);
            let unchanged = match manifest.files.get(&relative) {
                Some(loaded) if loaded.base == now => None,
                Some(loaded) => Some(current(&target)? == Some(loaded.copy)),
                None => Some(current(&target)?.is_none()),
            };
            seen.insert(relative.clone());
            if unchanged == Some(true) {
                let from = self.root.join(&relative);
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).map_err(io_at(parent))?;
                }
                // Made beside it and renamed over it: a reader sees one version or the other.
                let tmp = target.with_file_name(format!(
                    ".hookhost-refresh-{}",
                    uuid::Uuid::new_v4().simple()
                ));
                fs::copy(&from, &tmp).map_err(io_at(&from))?;
                fs::rename(&tmp, &target).map_err(io_at(&target))?;
                let copy = Version::of(&fs::symlink_metadata(&target).map_err(io_at(&target))?);
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
            let target = checkout.join(&relative);
            if current(&target)? == manifest.files.get(&relative).map(|l| l.copy) {
                remove_any(&target)?;
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
    fn files(&self) -> Result<Vec<(String, Version)>, PersistentError> {
        let mut files = Vec::new();
        walk(&self.root, "", &mut |relative, meta| {
            if !is_host_path(relative) {
                files.push((relative.to_string(), Version::of(meta)));
            }
        })?;
        Ok(files)
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

    /// Fails with [`PersistentError::Quota`] when publishing `puts` (from `checkout`) and
    /// removing `deletes` would grow the store at `root` by more than the room left.
    fn admits(
        &self,
        root: &Path,
        checkout: &Path,
        puts: &[String],
        deletes: &[String],
    ) -> Result<(), PersistentError> {
        if self.bytes.is_none() && self.files.is_none() {
            return Ok(());
        }
        let size = |path: &Path| fs::symlink_metadata(path).map(|m| m.len()).ok();
        let (mut added, mut removed, mut files, mut gone) = (0u64, 0u64, 0u64, 0u64);
        for relative in puts {
            added += size(&checkout.join(relative)).unwrap_or(0);
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

/// Whether the files at `a` and `b` hold the same bytes.
fn same_content(a: &Path, b: &Path) -> Result<bool, PersistentError> {
    use std::io::Read;
    let (meta_a, meta_b) = (
        fs::metadata(a).map_err(io_at(a))?,
        fs::metadata(b).map_err(io_at(b))?,
    );
    if meta_a.len() != meta_b.len() {
        return Ok(false);
    }
    let mut fa = io::BufReader::new(File::open(a).map_err(io_at(a))?);
    let mut fb = io::BufReader::new(File::open(b).map_err(io_at(b))?);
    let (mut ba, mut bb) = ([0u8; 8192], [0u8; 8192]);
    loop {
        let n = fa.read(&mut ba).map_err(io_at(a))?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut bb[..n]).map_err(io_at(b))?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// How a file of the checkout changed since the load.
enum Change {
    /// Made (`created`: it was not loaded) or rewritten.
    Put {
        created: bool,
    },
    Delete,
}

/// What changed in `checkout` since `manifest`.
fn changes(checkout: &Path, manifest: &Manifest) -> Result<Vec<(String, Change)>, PersistentError> {
    let mut found = BTreeMap::new();
    walk(checkout, "", &mut |relative, meta| {
        let refreshing = relative
            .rsplit('/')
            .next()
            .is_some_and(|name| name.starts_with(REFRESH_PREFIX));
        if !is_host_path(relative) && !refreshing {
            found.insert(relative.to_string(), Version::of(meta));
        }
    })?;
    let mut changes = Vec::new();
    for (relative, loaded) in &manifest.files {
        match found.get(relative) {
            None => changes.push((relative.clone(), Change::Delete)),
            Some(now) if *now != loaded.copy => {
                changes.push((relative.clone(), Change::Put { created: false }));
            }
            Some(_) => {}
        }
    }
    for relative in found.into_keys() {
        if !manifest.files.contains_key(&relative) {
            changes.push((relative, Change::Put { created: true }));
        }
    }
    changes.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(changes)
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

/// Calls `found` with each regular file under `dir` (relative, `/`-separated) and its
/// metadata; never follows a symlink.
fn walk(
    dir: &Path,
    prefix: &str,
    found: &mut dyn FnMut(&str, &fs::Metadata),
) -> Result<(), PersistentError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_at(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_at(dir))?;
        let Ok(name) = entry.file_name().into_string() else {
            tracing::warn!(dir = %dir.display(), "a file name that is not UTF-8 is not kept");
            continue;
        };
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        // The entry's type comes with the listing, and its metadata is `fstatat` on the
        // listed directory (never following a symlink): no path is looked up again.
        let kind = entry.file_type().map_err(io_at(&entry.path()))?;
        if kind.is_dir() {
            walk(&entry.path(), &relative, found)?;
        } else if kind.is_file() {
            let meta = entry.metadata().map_err(io_at(&entry.path()))?;
            found(&relative, &meta);
        }
    }
    Ok(())
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
