//! A session's checkout as a commit reads it, and the journal that makes a commit atomic.

use super::{PersistentError, REFRESH_PREFIX, THEIRS_DIR, Version, files_in, io_at};
use crate::beneath;
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, Stat};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A session's checkout as the host works in it: through its directory's descriptor, never
/// following what the session made (see the module's security rules).
pub(super) struct Checkout {
    pub(super) dir: OwnedFd,
    pub(super) path: PathBuf,
}

/// What a checkout holds at a file's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
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
    pub(super) fn open(path: &Path) -> Result<Checkout, PersistentError> {
        let dir = beneath::open_root(path, false).map_err(io_at(path))?;
        Ok(Checkout {
            dir,
            path: path.to_path_buf(),
        })
    }

    pub(super) fn failed(&self, relative: &str) -> impl FnOnce(io::Error) -> PersistentError {
        let path = self.path.join(relative);
        move |source| PersistentError::Io { path, source }
    }

    /// Its regular files and their versions (see [`files_in`]).
    pub(super) fn files(&self) -> Result<BTreeMap<String, Version>, PersistentError> {
        files_in(&self.dir, &self.path)
    }

    /// What is at `relative` now.
    pub(super) fn place(&self, relative: &str) -> Result<Place, PersistentError> {
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
    pub(super) fn open_file(&self, relative: &str) -> Result<(File, Stat), PersistentError> {
        let file = beneath::open_file(&self.dir, relative).map_err(self.failed(relative))?;
        let stat = rustix::fs::fstat(&file).map_err(|e| self.failed(relative)(e.into()))?;
        Ok((file, stat))
    }

    /// Copies the file `relative`, which the walk listed as `listed`, to `to` (a new file
    /// of the store's, synced): from the descriptor it opened, so a symlink swapped in
    /// since the walk is never read through, and only when it is still the file listed
    /// (the same inode). Returns its version as copied and the bytes copied.
    pub(super) fn stage(
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
    pub(super) fn put(
        &self,
        relative: &str,
        from: &Path,
    ) -> Result<Option<Version>, PersistentError> {
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

    /// Removes what a failed commit left at [`THEIRS_DIR`] (never through a symlink).
    pub(super) fn clear_theirs(&self) -> Result<(), PersistentError> {
        let (host, theirs) = THEIRS_DIR.split_once('/').unwrap_or_default();
        let dir = match beneath::open_dir(&self.dir, host) {
            Ok(dir) => dir,
            // None, or the session made it something else: nothing of the host's to clear.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                ) || beneath::crosses(&e) =>
            {
                return Ok(());
            }
            Err(e) => return Err(self.failed(host)(e)),
        };
        beneath::remove(&dir, std::ffi::OsStr::new(theirs)).map_err(self.failed(THEIRS_DIR))
    }

    /// Removes the file `relative` (never through a symlink).
    pub(super) fn remove(&self, relative: &str) -> Result<(), PersistentError> {
        beneath::remove_file(&self.dir, relative).map_err(self.failed(relative))
    }
}

/// Logs an incoming file kept out of a checkout; `None`.
pub(super) fn kept_out(relative: &str) -> Option<Version> {
    tracing::info!(
        file = relative,
        "kept out of a checkout: its path there crosses a symlink or a file, or holds a directory"
    );
    None
}

/// The mode of a file the host copies: its permission bits (never set-id), readable and
/// writable by the host.
pub(super) fn file_mode(stat: &Stat) -> u32 {
    (stat.st_mode & 0o777) | 0o600
}

/// The renames and removals of one commit.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Journal {
    /// (staged file name, relative path it replaces or creates).
    pub(super) puts: Vec<(String, String)>,
    pub(super) deletes: Vec<String>,
}

impl Journal {
    /// Applies it to `root`; each step may already have been done (a rolled-forward
    /// commit), and is then skipped.
    pub(super) fn apply(&self, root: &Path, staged: &Path) -> Result<(), PersistentError> {
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
pub(super) fn checked(relative: &str) -> Result<(), PersistentError> {
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
pub(super) fn finish(journal: &Path, staged: &Path) -> Result<(), PersistentError> {
    fs::remove_file(journal).map_err(io_at(journal))?;
    if let Some(host) = journal.parent() {
        sync_dir(host)?;
    }
    remove_any(staged)
}

/// Removes the empty directories between `removed` (a file just removed) and `root`.
pub(super) fn prune_empty(root: &Path, removed: &Path) {
    let mut dir = removed.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

pub(super) fn remove_any(path: &Path) -> Result<(), PersistentError> {
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
pub(super) fn current(path: &Path) -> Result<Option<Version>, PersistentError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Ok(Some(Version::of(&meta))),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_at(path)(e)),
    }
}

/// Writes `bytes` at `path` through a temporary file renamed over it, fsynced.
pub(super) fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), PersistentError> {
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

pub(super) fn sync_dir(dir: &Path) -> Result<(), PersistentError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))
}
