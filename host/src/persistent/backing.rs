//! A backing tree ([`Backing`]): loads into checkouts, commits from them, under its lock.

use super::checkout::{
    Checkout, Journal, Place, current, finish, remove_any, sync_dir, write_durably,
};
use super::{
    Change, CommitReport, FileLocks, HOST_DIR, LoadReport, Loaded, Manifest, OnConflict,
    PersistentError, Room, StoreLocks, THEIRS_DIR, Version, changes, elapsed_ms, files_in, io_at,
    same_content,
};
use crate::beneath;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
        checkout.clear_theirs()?;
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
            // The store's versions, for the session to merge from (none of a file the store
            // deleted).
            // A copy that cannot be made (the session made `.hookhost` unwritable, the disk
            // is full) is missing; the conflict is said all the same.
            for relative in &conflicts {
                let theirs = self.root.join(relative);
                if theirs.is_file()
                    && let Err(e) = checkout.put(&format!("{THEIRS_DIR}/{relative}"), &theirs)
                {
                    tracing::warn!(file = relative, error = %e, "cannot leave the store's version of a conflicting file in the checkout");
                }
            }
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
