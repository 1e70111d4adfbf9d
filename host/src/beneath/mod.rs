//! A tree a session controls, as the host sees it: through directory descriptors, never
//! through a path the session could change between two looks.
//!
//! Whatever runs as hookhost on a session's files — persistent loads, refreshes and
//! commits, quota walks, deletion, gc — treats them as hostile (DESIGN §6): a session may
//! plant a symlink anywhere, swap a directory for one while the host works
//! (`renameat2(RENAME_EXCHANGE)` in a loop), nest directories past `PATH_MAX`, or make
//! its directories unreadable. The rules kept here:
//!
//! - **Nothing is followed.** A directory is opened from its parent's descriptor with
//!   `O_NOFOLLOW | O_DIRECTORY`; a path below a tree's root with `openat2` and
//!   `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, so a symlink on the
//!   way — planted, or swapped in after a listing — fails the open ([`crosses`]) instead
//!   of leading out of the tree.
//! - **What is opened is what is used.** Files are read, hashed and copied from the
//!   descriptor opened ([`open_file`]), never by a path looked up again.
//! - **Writes are made beside, then renamed.** A file written into the tree is created
//!   exclusively under a temporary name in its parent's descriptor and renamed over its
//!   name ([`replace`]): a rename replaces a symlink there, it never writes through one.
//! - **Walks are iterative and descriptor-relative** ([`walk`]): no recursion, no path
//!   longer than one name is ever resolved, and at most [`WALK_OPEN_DIRS`] directory
//!   descriptors are held: deeper levels are closed on the way down and reopened through
//!   `..` on the way up, checked by device and inode to be the directory left (else
//!   reopened by name from the nearest open level, and checked again).
//! - **What the session hid is given back.** A walk that must see everything (a quota
//!   measure, a removal: [`Walk::regain`]) gives a directory it cannot list, search or
//!   change owner `rwx` again when it is hookhost's user's (a session of a host that is
//!   not root makes its files as that user), and goes on. The mode is changed through the
//!   descriptor of the very directory met (`O_PATH`, then `/proc/self/fd`), never by a
//!   name that could have become a link meanwhile.
//!
//! Read-only walks that may miss what they cannot read (a persistent commit fails there
//! instead) leave modes alone.

use crate::limits::{REMOVE_ATTEMPTS, WALK_OPEN_DIRS};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How `openat2` resolves a path below a tree's root: beneath it, through no symlink.
const BENEATH: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// How often an `openat2` that a concurrent rename made the kernel unsure of (`EAGAIN`) is
/// tried again.
const OPEN_ATTEMPTS: usize = 8;

/// The directory at `path`, a host path (a mount's directory, a data directory): its last
/// component is not followed. With `regain`, a directory of hookhost's user's made
/// unreadable is given owner `rwx` back first.
///
/// # Errors
///
/// As `openat`: `NotFound` when there is none.
pub fn open_root(path: &Path, regain: bool) -> io::Result<OwnedFd> {
    Ok(dir_at(rustix::fs::CWD, path.as_os_str(), regain)?)
}

/// The directory `name` (one name) in `dir`, never a symlink.
///
/// # Errors
///
/// As `openat` (`ELOOP`/`ENOTDIR` when it is a symlink or not a directory).
pub fn open_dir_in(dir: impl AsFd, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(dir_at(dir.as_fd(), name, false)?)
}

/// The directory `relative` (`/`-separated names) below `root`, reached through no
/// symlink; `root` itself for `""`.
///
/// # Errors
///
/// As `openat2`; see [`crosses`].
pub fn open_dir(root: impl AsFd, relative: &str) -> io::Result<OwnedFd> {
    if relative.is_empty() {
        return Ok(rustix::io::fcntl_dupfd_cloexec(root, 0)?);
    }
    Ok(open_beneath(
        root.as_fd(),
        relative,
        OFlags::RDONLY | OFlags::DIRECTORY,
    )?)
}

/// The regular file `relative` below `root`, opened to read through no symlink, on the way
/// or at its end.
///
/// # Errors
///
/// As `openat2` (see [`crosses`]); `InvalidInput` when it is not a regular file (a FIFO, a
/// device: never read, so never waited on).
pub fn open_file(root: impl AsFd, relative: &str) -> io::Result<File> {
    let fd = open_beneath(
        root.as_fd(),
        relative,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
    )?;
    if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{relative}: not a regular file"),
        ));
    }
    Ok(File::from(fd))
}

/// What is at `relative` below `root`, a symlink at its end not followed: `None` when
/// nothing is.
///
/// # Errors
///
/// As `openat2`: see [`crosses`] for a way through a symlink or a non-directory.
pub fn stat(root: impl AsFd, relative: &str) -> io::Result<Option<Stat>> {
    match open_beneath(root.as_fd(), relative, OFlags::PATH) {
        Ok(fd) => Ok(Some(rustix::fs::fstat(&fd)?)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether `error` says that a path crosses what the session made of it: a symlink
/// (`ELOOP`, refused by `RESOLVE_NO_SYMLINKS`), or a non-directory (`ENOTDIR`), or leads
/// out (`EXDEV`).
pub fn crosses(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::LOOP | Errno::NOTDIR | Errno::XDEV)
    )
}

/// The directory `relative` (`/`-separated names) below `root`, made (0700) where missing
/// one level at a time from its parent's descriptor; `None` when the way crosses what is
/// not a directory (a symlink, a file, something else).
///
/// # Errors
///
/// As `openat` and `mkdirat`.
pub fn make_dirs(root: impl AsFd, relative: &str) -> io::Result<Option<OwnedFd>> {
    let mut dir = rustix::io::fcntl_dupfd_cloexec(root, 0)?;
    for name in relative.split('/').filter(|n| !n.is_empty()) {
        let opened = match dir_at(dir.as_fd(), name, false) {
            Err(Errno::NOENT) => match rustix::fs::mkdirat(&dir, name, Mode::RWXU) {
                Ok(()) | Err(Errno::EXIST) => dir_at(dir.as_fd(), name, false),
                Err(e) => Err(e),
            },
            opened => opened,
        };
        dir = match opened {
            Ok(next) => next,
            Err(Errno::LOOP | Errno::NOTDIR) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
    }
    Ok(Some(dir))
}

/// Writes the file `name` (one name) in `dir` whole or not at all: a new file `tmp` made
/// beside it (created exclusively, mode `mode`), filled by `fill`, then renamed over
/// `name`, which replaces a file or a symlink there and never writes through one. Returns
/// the new file's metadata.
///
/// # Errors
///
/// What `fill` returns, or the file system's (a directory at `name`: the rename fails);
/// `tmp` is removed then.
pub fn replace(
    dir: impl AsFd,
    name: &str,
    tmp: &str,
    mode: Mode,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<Stat> {
    let dir = dir.as_fd();
    let fd = rustix::fs::openat(
        dir,
        tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )?;
    let mut file = File::from(fd);
    let written = fill(&mut file)
        .and_then(|()| Ok(rustix::fs::fstat(&file)?))
        .and_then(|stat| Ok(rustix::fs::renameat(dir, tmp, dir, name).map(|()| stat)?));
    if written.is_err() {
        let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
    }
    written
}

/// Removes the regular file or symlink `relative` below `root` (never a directory, never
/// through a symlink); gone already is fine.
///
/// # Errors
///
/// As `openat2` (see [`crosses`]) and `unlinkat`.
pub fn remove_file(root: impl AsFd, relative: &str) -> io::Result<()> {
    let (parent, name) = relative.rsplit_once('/').unwrap_or(("", relative));
    let dir = match open_dir(root, parent) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        dir => dir?,
    };
    match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// How a [`walk`] treats what it cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// Give a directory of hookhost's user's that cannot be listed, searched or changed
    /// owner `rwx` again, and go on (else it cannot be walked).
    pub regain: bool,
    /// Fail at a directory that cannot be walked (else it is skipped). An entry gone, or
    /// replaced by something else, between its listing and its opening is skipped either
    /// way: the walk sees it as a later listing would have.
    pub strict: bool,
}

impl Walk {
    /// Every entry or an error: what a persistent commit publishes.
    pub const EXACT: Walk = Walk {
        regain: false,
        strict: true,
    };
    /// Every entry, whatever the session hid, skipping only what cannot be reached: what a
    /// quota counts.
    pub const EVERYTHING: Walk = Walk {
        regain: true,
        strict: false,
    };
    /// Every entry, whatever the session hid, or an error: what a removal removes.
    pub const REMOVAL: Walk = Walk {
        regain: true,
        strict: true,
    };
}

/// An entry met by a [`walk`].
pub struct Entry<'a> {
    /// The directory holding it.
    pub dir: BorrowedFd<'a>,
    pub name: &'a CStr,
    /// Its path below the walk's root, `/`-separated; names need not be UTF-8.
    pub path: &'a [u8],
    /// Its metadata (`fstatat` without following it).
    pub stat: &'a Stat,
}

impl Entry<'_> {
    pub fn is_dir(&self) -> bool {
        is_dir(self.stat)
    }

    pub fn is_file(&self) -> bool {
        FileType::from_raw_mode(self.stat.st_mode) == FileType::RegularFile
    }
}

/// What a [`walk`] tells of what it meets.
pub trait Visit {
    /// Each entry below the root, a directory before what it holds; returns whether to walk
    /// into it (for a directory).
    ///
    /// # Errors
    ///
    /// An error ends the walk with it.
    fn entry(&mut self, entry: &Entry<'_>) -> io::Result<bool>;

    /// A directory walked into, once all it holds was met: `name` in `parent`.
    ///
    /// # Errors
    ///
    /// An error ends the walk with it.
    fn left(&mut self, _parent: BorrowedFd<'_>, _name: &CStr) -> io::Result<()> {
        Ok(())
    }
}

impl<F: FnMut(&Entry<'_>) -> io::Result<bool>> Visit for F {
    fn entry(&mut self, entry: &Entry<'_>) -> io::Result<bool> {
        self(entry)
    }
}

/// One directory of a walk on the way from its root to where it is.
struct Level {
    /// Closed (`None`) past the [`WALK_OPEN_DIRS`] nearest the root, but for the deepest.
    dir: Option<OwnedFd>,
    dev: u64,
    ino: u64,
    /// Its name in its parent (empty for the root).
    name: CString,
    /// The length of its path in the walk's path.
    path_len: usize,
    /// The directories it holds still to walk, the next last.
    subdirs: Vec<CString>,
}

impl Level {
    fn open(dir: OwnedFd, name: CString, path_len: usize) -> rustix::io::Result<Level> {
        let stat = rustix::fs::fstat(&dir)?;
        Ok(Level {
            dir: Some(dir),
            dev: stat.st_dev,
            ino: stat.st_ino,
            name,
            path_len,
            subdirs: Vec::new(),
        })
    }

    fn is(&self, dir: &OwnedFd) -> bool {
        rustix::fs::fstat(dir).is_ok_and(|s| s.st_dev == self.dev && s.st_ino == self.ino)
    }
}

/// Walks the tree below `root`, telling `visit` each entry (never following a symlink:
/// one is an entry, not walked into) and each directory left. Iterative, and relative to
/// descriptors: no depth or path length is too much (see the module's rules).
///
/// # Errors
///
/// What `visit` returns; with [`Walk::strict`], a directory that cannot be listed or
/// walked into, or the tree changed so that the way back up is lost.
pub fn walk(root: impl AsFd, how: Walk, visit: &mut dyn Visit) -> io::Result<()> {
    let mut path = Vec::new();
    let mut levels = vec![Level::open(
        rustix::io::fcntl_dupfd_cloexec(root, 0)?,
        CString::default(),
        0,
    )?];
    list(&mut levels[0], &mut path, how, visit)?;
    loop {
        let depth = levels.len();
        let Some(top) = levels.last_mut() else {
            return Ok(());
        };
        if let Some(name) = top.subdirs.pop() {
            let Some(parent) = top.dir.as_ref() else {
                unreachable!("the deepest level is open");
            };
            path.truncate(top.path_len);
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name.as_bytes());
            let child = match dir_at(parent.as_fd(), name.as_c_str(), how.regain) {
                Ok(child) => child,
                // Gone or replaced since it was listed: as a later listing would have it.
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => continue,
                Err(e) if how.strict => return Err(at(&path, e.into())),
                Err(_) => continue,
            };
            if depth >= WALK_OPEN_DIRS {
                top.dir = None;
            }
            levels.push(Level::open(child, name, path.len())?);
            let last = levels.len() - 1;
            list(&mut levels[last], &mut path, how, visit)?;
        } else {
            let Some(done) = levels.pop() else {
                return Ok(());
            };
            if levels.is_empty() {
                return Ok(());
            }
            if levels[levels.len() - 1].dir.is_none() && !reopen(&mut levels, &done) {
                if how.strict {
                    return Err(io::Error::other(format!(
                        "{}: moved while it was walked",
                        String::from_utf8_lossy(&path)
                    )));
                }
                // Lost the way up: go on from the nearest level still open.
                let open = levels.iter().rposition(|l| l.dir.is_some()).unwrap_or(0);
                levels.truncate(open + 1);
                continue;
            }
            let parent = &levels[levels.len() - 1];
            path.truncate(parent.path_len);
            if let Some(dir) = &parent.dir {
                visit.left(dir.as_fd(), &done.name)?;
            }
        }
    }
}

/// Opens again the deepest of `levels` (closed), which `done` was in: through `done`'s
/// `..`, or else by name from the nearest open level; each checked to be the directory it
/// was. Whether it could.
fn reopen(levels: &mut [Level], done: &Level) -> bool {
    let last = levels.len() - 1;
    let up = done
        .dir
        .as_ref()
        .and_then(|dir| dir_at(dir.as_fd(), c"..", false).ok())
        .filter(|up| levels[last].is(up));
    if let Some(up) = up {
        levels[last].dir = Some(up);
        return true;
    }
    let Some(open) = levels.iter().rposition(|l| l.dir.is_some()) else {
        return false;
    };
    let Some(Ok(mut dir)) = levels[open]
        .dir
        .as_ref()
        .map(|d| rustix::io::fcntl_dupfd_cloexec(d, 0))
    else {
        return false;
    };
    for level in &levels[open + 1..] {
        match dir_at(dir.as_fd(), level.name.as_c_str(), false) {
            Ok(next) if level.is(&next) => dir = next,
            _ => return false,
        }
    }
    levels[last].dir = Some(dir);
    true
}

/// Lists `level` (open): tells `visit` each entry, keeps the directories to walk into.
fn list(level: &mut Level, path: &mut Vec<u8>, how: Walk, visit: &mut dyn Visit) -> io::Result<()> {
    let Some(dir) = level.dir.as_ref() else {
        return Ok(());
    };
    let names = match names_in(dir) {
        Ok(names) => names,
        Err(e) if how.strict => return Err(at(path, e.into())),
        Err(_) => return Ok(()),
    };
    for name in names {
        let stat = match rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::ACCESS) if how.regain => {
                regain(dir).and_then(|()| rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW))
            }
            stat => stat,
        };
        let stat = match stat {
            Ok(stat) => stat,
            Err(Errno::NOENT) => continue,
            Err(e) if how.strict => return Err(at(path, e.into())),
            Err(_) => continue,
        };
        path.truncate(level.path_len);
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name.as_bytes());
        let entry = Entry {
            dir: dir.as_fd(),
            name: &name,
            path,
            stat: &stat,
        };
        if visit.entry(&entry)? && is_dir(&stat) {
            level.subdirs.push(name);
        }
    }
    path.truncate(level.path_len);
    level.subdirs.reverse();
    Ok(())
}

/// The names in `dir`, read whole before any is acted on (a removal unlinks as it goes).
fn names_in(dir: &OwnedFd) -> rustix::io::Result<Vec<CString>> {
    // A listing of its own: the directory's descriptor is used for `*at` calls meanwhile.
    // A duplicate shares its offset, which an earlier listing may have left at the end.
    let mut listing = rustix::fs::Dir::new(rustix::io::fcntl_dupfd_cloexec(dir, 0)?)?;
    listing.rewind();
    let mut names = Vec::new();
    for item in listing {
        let item = item?;
        let name = item.file_name();
        if name != c"." && name != c".." {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// Removes `name` in `dir` and, when it is a directory, everything it holds: symlinks are
/// removed, never followed; directories of hookhost's user's made unreadable or
/// unwritable are given owner `rwx` back; any depth. Gone already is fine.
///
/// # Errors
///
/// What could not be removed, or a tree that kept changing over [`REMOVE_ATTEMPTS`] tries.
pub fn remove(dir: impl AsFd, name: &OsStr) -> io::Result<()> {
    let dir = dir.as_fd();
    let name = CString::new(name.as_bytes())?;
    let mut last = None;
    for _ in 0..REMOVE_ATTEMPTS {
        let stat = match rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::ACCESS) => regain(&dir)
                .and_then(|()| rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)),
            stat => stat,
        };
        let stat = match stat {
            Ok(stat) => stat,
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if !is_dir(&stat) {
            return unlink(dir, &name, AtFlags::empty());
        }
        let tree = match dir_at(dir, name.as_c_str(), true) {
            Ok(tree) => tree,
            Err(Errno::NOENT) => return Ok(()),
            Err(e @ (Errno::NOTDIR | Errno::LOOP)) => {
                last = Some(e.into());
                continue; // replaced since: look again
            }
            Err(e) => return Err(e.into()),
        };
        if let Err(e) = walk(&tree, Walk::REMOVAL, &mut Remover) {
            last = Some(e);
            continue;
        }
        drop(tree);
        match unlink(dir, &name, AtFlags::REMOVEDIR) {
            Ok(()) => return Ok(()),
            // Something was made in it meanwhile.
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("the tree kept changing")))
}

/// Removes everything the directory at `path` holds (its last component is not followed),
/// as [`remove`] does, and keeps the directory itself: one a sandbox holds open stays the
/// one it holds.
///
/// # Errors
///
/// As [`remove`]; `NotFound` when there is no directory.
pub fn empty(path: &Path) -> io::Result<()> {
    let dir = open_root(path, true)?;
    walk(&dir, Walk::REMOVAL, &mut Remover)
}

/// Removes `path` (a host path: its last component is not followed) and, when it is a
/// directory, everything it holds, as [`remove`] does.
///
/// # Errors
///
/// As [`remove`].
pub fn remove_path(path: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a path to remove", path.display()),
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    match open_root(parent, false) {
        Ok(dir) => remove(&dir, name),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The [`Visit`] of a removal: files and links as they are met, directories once left.
struct Remover;

impl Visit for Remover {
    fn entry(&mut self, entry: &Entry<'_>) -> io::Result<bool> {
        if entry.is_dir() {
            return Ok(true);
        }
        unlink(entry.dir, entry.name, AtFlags::empty())
            .map_err(|e| at(entry.path, e))
            .map(|()| false)
    }

    fn left(&mut self, parent: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
        unlink(parent, name, AtFlags::REMOVEDIR)
    }
}

/// `unlinkat`, giving `dir` owner `rwx` back when it is hookhost's user's and refuses;
/// gone already is fine.
fn unlink(dir: BorrowedFd<'_>, name: &CStr, flags: AtFlags) -> io::Result<()> {
    let unlinked = match rustix::fs::unlinkat(dir, name, flags) {
        Err(Errno::ACCESS) => regain(&dir).and_then(|()| rustix::fs::unlinkat(dir, name, flags)),
        unlinked => unlinked,
    };
    match unlinked {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn is_dir(stat: &Stat) -> bool {
    FileType::from_raw_mode(stat.st_mode) == FileType::Directory
}

/// `error` naming `path`.
fn at(path: &[u8], error: io::Error) -> io::Error {
    if path.is_empty() {
        return error;
    }
    io::Error::new(
        error.kind(),
        format!("{}: {error}", String::from_utf8_lossy(path)),
    )
}

/// `openat(at, name, O_DIRECTORY | O_NOFOLLOW)`; with `regain`, a directory of hookhost's
/// user's that refuses (`EACCES`) is given owner `rwx` back and opened again.
fn dir_at<P: rustix::path::Arg + Copy>(
    at: BorrowedFd<'_>,
    name: P,
    regaining: bool,
) -> rustix::io::Result<OwnedFd> {
    let open = || {
        rustix::fs::openat(
            at,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    match open() {
        Err(Errno::ACCESS) if regaining => {
            let path = rustix::fs::openat(
                at,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            regain(&path)?;
            open()
        }
        opened => opened,
    }
}

/// `openat2` of `relative` below `root` with `flags`, resolved beneath it through no
/// symlink, the last component not followed either.
fn open_beneath(
    root: BorrowedFd<'_>,
    relative: &str,
    flags: OFlags,
) -> rustix::io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(root, relative, flags, Mode::empty(), BENEATH) {
            Err(Errno::AGAIN) if tries + 1 < OPEN_ATTEMPTS => tries += 1,
            opened => return opened,
        }
    }
}

/// Gives the directory `dir` (any descriptor of it, `O_PATH` too) owner `rwx` back when it
/// is hookhost's user's; refuses (`EACCES`) otherwise. Through `/proc/self/fd`, as
/// `fchmod` refuses an `O_PATH` descriptor and `fchmodat` would follow a symlink a
/// session swapped in for its name.
fn regain(dir: &impl AsFd) -> rustix::io::Result<()> {
    let stat = rustix::fs::fstat(dir)?;
    if !is_dir(&stat) || stat.st_uid != rustix::process::geteuid().as_raw() {
        return Err(Errno::ACCESS);
    }
    let mode = Mode::from_raw_mode(stat.st_mode) | Mode::RWXU;
    if mode == Mode::from_raw_mode(stat.st_mode) {
        return Err(Errno::ACCESS); // it has them: something else refuses
    }
    match rustix::fs::fchmod(dir, mode) {
        Err(Errno::BADF) => rustix::fs::chmodat(
            rustix_linux_procfs::proc_self_fd()?,
            rustix::path::DecInt::from_fd(dir),
            mode,
            AtFlags::empty(),
        ),
        changed => changed,
    }
}

/// Runs `scenario` in a fresh directory as an ordinary user: in this process when it is
/// not root, else in the test `name` of this binary run again as uid 65534 (through
/// `setpriv`), which finds the directory in its environment. Root is refused nothing, so
/// what a session hides from hookhost's user can only be tried as another.
#[cfg(test)]
pub(crate) fn as_ordinary_user(name: &str, scenario: fn(&Path)) {
    const DIR: &str = "HOOKHOST_TEST_ORDINARY_DIR";
    const ORDINARY: u32 = 65534;
    if let Some(dir) = std::env::var_os(DIR) {
        return scenario(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    if !rustix::process::geteuid().is_root() {
        return scenario(dir.path());
    }
    std::os::unix::fs::chown(dir.path(), Some(ORDINARY), Some(ORDINARY)).unwrap();
    let id = ORDINARY.to_string();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--test-threads", "1", "--nocapture"])
        .env(DIR, dir.path())
        .output()
        .expect("setpriv runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} as uid {ORDINARY}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(test)]
mod tests;
