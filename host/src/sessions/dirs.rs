//! A session's directories: made and checked once before a component first uses them,
//! removed when the session is deleted, and swept when a crash left them without a row.
//!
//! Deleting removes the row first, then every `session`-scoped mount directory of that
//! session; `tenant` and `persistent` mounts are kept. Should the process die in between,
//! the orphan sweep of [`remove_orphans`] finds directories without a row and removes
//! them, so a crash never leaves files behind for good.
//!
//! Security rules for removal: it goes through `cap-std` directory handles opened on the
//! data directory, so no path can lead outside it, and it never follows a symlink (a guest
//! can plant relative symlinks that point anywhere: they are removed as links). Inside a
//! session's directory it goes by descriptor ([`crate::beneath::remove`]): a tree of any
//! depth is removed (no `PATH_MAX`, no recursion), and directories the session made
//! unreadable or unwritable (`chmod 000`, on a host that is not root) are given owner
//! `rwx` back, so a session's files never outlive it.

use super::table::{SessionError, SessionTable};
use crate::beneath::{self, Walk};
use crate::limits::ORPHAN_GRACE;
use crate::mounts::{self, MountError, MountTable, ResolvedMount, Scope};
use crate::persistent::{LoadReport, StoreLocks};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use std::collections::HashSet;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// The mount directories of the data directory already made and checked, so that a call
/// does not redo it; a deleted session's are forgotten with it.
pub struct MountDirs {
    data_root: PathBuf,
    ensured: Mutex<HashSet<PathBuf>>,
    /// Persistent directories' checkouts loaded and not yet reported to a trace, by
    /// checkout directory.
    loads: Mutex<Vec<(PathBuf, LoadReport)>>,
    /// The locks of persistent directories' backing trees.
    locks: Arc<dyn StoreLocks>,
}

impl MountDirs {
    pub fn new(data_root: PathBuf, locks: Arc<dyn StoreLocks>) -> MountDirs {
        MountDirs {
            data_root,
            ensured: Mutex::new(HashSet::new()),
            loads: Mutex::default(),
            locks,
        }
    }

    /// The locks of persistent directories' backing trees (see [`StoreLocks`]).
    pub fn locks(&self) -> &Arc<dyn StoreLocks> {
        &self.locks
    }

    pub fn data_root(&self) -> &Path {
        &self.data_root
    }

    fn ensured(&self) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
        self.ensured.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes and checks `mount`'s directory (see [`mounts::ensure_dir`]): once for a mount
    /// in the data directory, whose directory a guest cannot replace later (it only sees
    /// what is inside it); on every grant for a mount in the working directory, where
    /// mounts nest and a guest writing `/workspace` could swap a directory on the way to
    /// `/plans` for a symlink.
    ///
    /// # Errors
    ///
    /// As [`mounts::ensure_dir`].
    pub fn ensure(&self, mount: &ResolvedMount) -> Result<(), MountError> {
        if mount.in_workdir() {
            return mounts::ensure_dir(&self.data_root, mount);
        }
        if !self.ensured().contains(&mount.host) {
            mounts::ensure_dir(&self.data_root, mount)?;
            self.ensured().insert(mount.host.clone());
        }
        Ok(())
    }

    /// Keeps the load of the checkout `host` for the trace of the call that caused it.
    pub fn loaded(&self, host: &Path, loaded: LoadReport) {
        let mut loads = self.loads.lock().unwrap_or_else(|e| e.into_inner());
        loads.push((host.to_path_buf(), loaded));
    }

    /// The loads of `mounts`' checkouts (one session's) not reported yet, by virtual path:
    /// for the trace of the call that caused them.
    pub fn take_loads(&self, mounts: &[ResolvedMount]) -> Vec<(String, LoadReport)> {
        let mut loads = self.loads.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Vec::new();
        loads.retain(
            |(host, loaded)| match mounts.iter().find(|m| &m.host == host) {
                Some(mount) => {
                    taken.push((mount.virtual_path.clone(), *loaded));
                    false
                }
                None => true,
            },
        );
        taken
    }

    /// Forgets `mounts`' directories (their session was deleted).
    fn forget(&self, mounts: &[ResolvedMount]) {
        let mut ensured = self.ensured();
        for mount in mounts {
            ensured.remove(&mount.host);
        }
        drop(self.take_loads(mounts));
    }

    /// Forgets every directory (after a sweep removed some).
    fn forget_all(&self) {
        self.ensured().clear();
    }

    /// Removes the session-scoped directories of one session's `mounts` (see
    /// [`remove_session_dirs`]) and forgets them.
    ///
    /// # Errors
    ///
    /// As [`remove_session_dirs`].
    pub fn remove_session(
        &self,
        table: &MountTable,
        mounts: &[ResolvedMount],
    ) -> Result<(), SessionError> {
        self.forget(mounts);
        remove_session_dirs(&self.data_root, table, mounts)
    }

    /// Sweeps orphaned session directories and stale temporaries under `dirs` (see
    /// [`remove_orphans`] and [`remove_stale_partials`]); forgets every directory.
    /// Returns (orphans, partials) removed.
    ///
    /// # Errors
    ///
    /// As [`remove_orphans`].
    pub async fn sweep(
        &self,
        table: &MountTable,
        store: &dyn SessionTable,
        dirs: &[PathBuf],
        partial_age: Duration,
    ) -> Result<(usize, usize), SessionError> {
        let orphans = remove_orphans(&self.data_root, table, store).await?;
        let partials = remove_stale_partials(
            &self.data_root,
            dirs.iter().map(PathBuf::as_path),
            partial_age,
        );
        self.forget_all();
        Ok((orphans, partials))
    }
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
                if mount.persistent.is_some() {
                    remove_tree(&root, &relative.with_extension("manifest.json"))?;
                }
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

/// Removes `relative` under `dir` and all it holds (see [`beneath::remove`]); symlinks are
/// removed, not followed. A path that is missing is already removed, as when a removal
/// races another (a concurrent delete or sweep).
fn remove_tree(dir: &Dir, relative: &Path) -> Result<(), SessionError> {
    let err = |source| SessionError::Remove {
        path: relative.to_path_buf(),
        source,
    };
    let Some(name) = relative.file_name() else {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a directory's entry",
        )));
    };
    // The way to it is the data directory's layout, opened beneath `dir` through no
    // symlink (mounts may nest); what is in it is the session's.
    let parent = relative
        .parent()
        .map_or(Some(""), Path::to_str)
        .map_or_else(
            || Err(io::Error::new(io::ErrorKind::InvalidInput, "not UTF-8")),
            |parent| beneath::open_dir(dir, parent),
        );
    match parent {
        Ok(parent) => beneath::remove(&parent, name).map_err(err),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err(e)),
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
pub async fn remove_orphans(
    data_root: &Path,
    table: &MountTable,
    store: &dyn SessionTable,
) -> Result<usize, SessionError> {
    let known: HashSet<(String, String)> = store
        .list(None)
        .await?
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
                || !is_orphan(&root, &relative, store, &tenant, &session).await?
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
            && is_orphan(&root, &relative, store, &tenant, &session).await?
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
async fn is_orphan(
    root: &Dir,
    relative: &Path,
    store: &dyn SessionTable,
    tenant: &str,
    session: &str,
) -> Result<bool, SessionError> {
    let old_enough = root
        .symlink_metadata(relative)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.into_std().elapsed().is_ok_and(|age| age >= ORPHAN_GRACE));
    if !old_enough {
        return Ok(false);
    }
    // Listed again: a session of these segments may have been made since the sweep began.
    let has_row = store
        .list(None)
        .await?
        .iter()
        .any(|s| s.tenant.path_segment() == tenant && s.id.path_segment() == session);
    Ok(!has_row)
}

/// Removes regular files named `*.partial` older than `max_age` under `dirs` (inside the
/// data directory only; walked by descriptor without following symlinks, at any depth):
/// temporaries that a built-in was stopped from renaming into place. Returns how many.
pub fn remove_stale_partials<'a>(
    data_root: &Path,
    dirs: impl Iterator<Item = &'a Path>,
    max_age: Duration,
) -> usize {
    let Ok(root) = open_root(data_root) else {
        return 0;
    };
    let Some(cutoff) = std::time::SystemTime::now()
        .checked_sub(max_age)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
    else {
        return 0;
    };
    let cutoff = i128::try_from(cutoff.as_nanos()).unwrap_or(i128::MAX);
    let mut removed = 0;
    for dir in dirs.filter_map(|d| d.strip_prefix(data_root).ok()) {
        let Some(Ok(tree)) = dir.to_str().map(|d| beneath::open_dir(&root, d)) else {
            continue;
        };
        // Temporaries are swept, not hunted: what a session hid is left for its deletion.
        let how = Walk {
            regain: false,
            strict: false,
        };
        let walked = beneath::walk(&tree, how, &mut |e: &beneath::Entry<'_>| {
            let modified =
                i128::from(e.stat.st_mtime) * 1_000_000_000 + i128::from(e.stat.st_mtime_nsec);
            if e.is_file()
                && e.name.to_bytes().ends_with(b".partial")
                && modified <= cutoff
                && rustix::fs::unlinkat(e.dir, e.name, rustix::fs::AtFlags::empty()).is_ok()
            {
                tracing::info!(
                    file = %dir.join(String::from_utf8_lossy(e.path).as_ref()).display(),
                    "removed a stale temporary file"
                );
                removed += 1;
            }
            Ok(true)
        });
        if let Err(e) = walked {
            tracing::debug!(dir = %dir.display(), error = %e, "not swept whole");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A session's directory goes whole: links removed not followed, a chain longer than
    /// `PATH_MAX`, directories and files the session made unreadable or unwritable.
    #[test]
    fn a_session_directory_is_removed_whatever_it_holds() {
        crate::beneath::as_ordinary_user(
            "sessions::dirs::tests::a_session_directory_is_removed_whatever_it_holds",
            |data| {
                use std::os::unix::fs::PermissionsExt;
                let outside = data.join("outside");
                std::fs::create_dir(&outside).unwrap();
                std::fs::write(outside.join("kept"), "host").unwrap();
                let workspace = data.join("tenants/t/sessions/s/workspace");
                std::fs::create_dir_all(workspace.join("hid/deeper")).unwrap();
                std::fs::write(workspace.join("hid/deeper/f"), "x").unwrap();
                std::os::unix::fs::symlink(&outside, workspace.join("link")).unwrap();
                std::os::unix::fs::symlink("../../../../../outside", workspace.join("rel"))
                    .unwrap();
                let mut at = crate::beneath::open_root(&workspace, false).unwrap();
                for _ in 0..500 {
                    rustix::fs::mkdirat(&at, "aaaaaaaaaa", rustix::fs::Mode::RWXU).unwrap();
                    at = crate::beneath::open_dir_in(&at, "aaaaaaaaaa".as_ref()).unwrap();
                }
                drop(at);
                let mode = |p: &Path, m: u32| {
                    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
                };
                mode(&workspace.join("hid/deeper/f"), 0);
                mode(&workspace.join("hid/deeper"), 0);
                mode(&workspace.join("hid"), 0o500);
                mode(&workspace, 0);

                let root = open_root(data).unwrap();
                remove_tree(&root, Path::new("tenants/t/sessions/s/workspace")).unwrap();
                assert!(!workspace.exists());
                assert_eq!(
                    std::fs::read_to_string(outside.join("kept")).unwrap(),
                    "host"
                );
                // Gone already is fine.
                remove_tree(&root, Path::new("tenants/t/sessions/s/workspace")).unwrap();
            },
        );
    }
}
