//! Write files in the mounts hookhost granted, with calls the host runs on the calling thread.
//!
//! Rust's `std` writes a file through a WASI output stream (`check-write`, `write`,
//! `flush`), and wasmtime-wasi runs every stream `write` on a blocking thread pool: one
//! thread hop per write of at most 64 KiB, 13–39 µs each on a 2-core machine, so a hook
//! that appends one log line spends more time waiting for that hop than doing its work. Two
//! calls run on the calling thread instead when the host allows blocking (hookhost does):
//! the descriptor's `write` at an offset, and a stream's `blocking-write-and-flush`.
//!
//! - [`write_new`] and [`write`] write a whole file in one call, whatever its size;
//! - an [`Appender`] keeps a file open for appending and appends up to [`APPEND_CHUNK`]
//!   bytes per call, each in one `write(2)`, so lines of concurrent writers do not
//!   interleave.
//!
//! Everything else — directories, renames, reads, metadata — is as fast through `std`.
//! Paths are absolute paths inside a granted mount, as the guest sees them.

use std::cell::OnceCell;
use std::io;
use wasip2::filesystem::preopens;
use wasip2::filesystem::types::{Descriptor, DescriptorFlags, ErrorCode, OpenFlags, PathFlags};
use wasip2::io::streams::{OutputStream, StreamError};

/// The most bytes one `blocking-write-and-flush` takes: the WASI bound, which wasmtime
/// enforces. An append of at most this many bytes is one `write(2)` on the host.
pub const APPEND_CHUNK: usize = 4096;

thread_local! {
    /// The granted mounts, fetched once per instance: each fetch makes new handles.
    static MOUNTS: OnceCell<Vec<(Descriptor, String)>> = const { OnceCell::new() };
}

/// Creates `path` (it must not exist) holding `contents`, written in one call; when the
/// write fails, the file it created is removed.
///
/// # Errors
///
/// `AlreadyExists` when `path` exists (a symlink included), or why it could not be written.
pub fn write_new(path: &str, contents: &[u8]) -> io::Result<()> {
    in_mount(path, |dir, inside| {
        let file = open_at(dir, inside, OpenFlags::CREATE | OpenFlags::EXCLUSIVE)?;
        let written = write_all_at(&file, contents);
        if written.is_err() {
            let _ = dir.unlink_file_at(inside);
        }
        written
    })
}

/// Creates or truncates `path` and writes `contents` in one call, like [`std::fs::write`].
///
/// # Errors
///
/// Why it could not be written.
pub fn write(path: &str, contents: &[u8]) -> io::Result<()> {
    let file = in_mount(path, |dir, inside| {
        open_at(dir, inside, OpenFlags::CREATE | OpenFlags::TRUNCATE)
    })?;
    write_all_at(&file, contents)
}

/// A file kept open for appending: open it once per instance and append many times.
///
/// While it is open, appends go to the file it opened, even if the file is renamed or
/// removed; rotate such a log by copying and truncating it.
pub struct Appender {
    // Declared first so it is dropped first: a stream is a child of its descriptor.
    stream: OutputStream,
    _file: Descriptor,
}

impl Appender {
    /// Opens `path` for appending, creating it if it is missing (its directory must exist).
    ///
    /// # Errors
    ///
    /// Why it could not be opened.
    pub fn open(path: &str) -> io::Result<Appender> {
        let file = in_mount(path, |dir, inside| open_at(dir, inside, OpenFlags::CREATE))?;
        let stream = file.append_via_stream().map_err(from_code)?;
        Ok(Appender {
            stream,
            _file: file,
        })
    }

    /// Appends `bytes`, one `write(2)` per [`APPEND_CHUNK`] bytes.
    ///
    /// # Errors
    ///
    /// Why the host could not write them; some chunks may have been written.
    pub fn append(&self, bytes: &[u8]) -> io::Result<()> {
        for chunk in bytes.chunks(APPEND_CHUNK) {
            self.stream
                .blocking_write_and_flush(chunk)
                .map_err(from_stream)?;
        }
        Ok(())
    }
}

/// Runs `f` with the mount directory holding `path` and the path inside it.
fn in_mount<R>(path: &str, f: impl FnOnce(&Descriptor, &str) -> io::Result<R>) -> io::Result<R> {
    MOUNTS.with(|mounts| {
        let mounts = mounts.get_or_init(preopens::get_directories);
        let (dir, inside) = resolve(mounts, path)?;
        f(dir, inside)
    })
}

/// Opens `inside` for writing with `flags`, following symlinks as `std` does (the host
/// keeps every lookup inside the mount).
fn open_at(dir: &Descriptor, inside: &str, flags: OpenFlags) -> io::Result<Descriptor> {
    dir.open_at(
        PathFlags::SYMLINK_FOLLOW,
        inside,
        flags,
        DescriptorFlags::WRITE,
    )
    .map_err(from_code)
}

/// The mount holding `path` (the longest mount path that is a prefix of it, segment by
/// segment) and the path inside it.
fn resolve<'a, D>(mounts: &'a [(D, String)], path: &'a str) -> io::Result<(&'a D, &'a str)> {
    let path = path.trim_start_matches('/');
    mounts
        .iter()
        .filter_map(|(dir, mount)| {
            let mount = mount.trim_matches('/');
            let inside = if mount.is_empty() {
                path
            } else {
                path.strip_prefix(mount)?.strip_prefix('/')?
            };
            Some((mount.len(), dir, inside))
        })
        .max_by_key(|(len, ..)| *len)
        .map(|(_, dir, inside)| (dir, inside.trim_start_matches('/')))
        .filter(|(_, inside)| !inside.is_empty())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no granted mount holds /{path}"),
            )
        })
}

/// Writes all of `contents` at offset 0; one call unless the host writes less.
fn write_all_at(file: &Descriptor, contents: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < contents.len() {
        let written = file
            .write(&contents[done..], done as u64)
            .map_err(from_code)?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        done += usize::try_from(written).unwrap_or(usize::MAX);
    }
    Ok(())
}

fn from_stream(e: StreamError) -> io::Error {
    match e {
        StreamError::Closed => io::ErrorKind::BrokenPipe.into(),
        StreamError::LastOperationFailed(e) => {
            match wasip2::filesystem::types::filesystem_error_code(&e) {
                Some(code) => from_code(code),
                None => io::Error::other(e.to_debug_string()),
            }
        }
    }
}

fn from_code(code: ErrorCode) -> io::Error {
    use io::ErrorKind as K;
    let kind = match code {
        ErrorCode::NoEntry => K::NotFound,
        ErrorCode::Exist => K::AlreadyExists,
        ErrorCode::Access | ErrorCode::NotPermitted => K::PermissionDenied,
        ErrorCode::ReadOnly => K::ReadOnlyFilesystem,
        ErrorCode::IsDirectory => K::IsADirectory,
        ErrorCode::NotDirectory => K::NotADirectory,
        ErrorCode::NotEmpty => K::DirectoryNotEmpty,
        ErrorCode::InsufficientSpace => K::StorageFull,
        ErrorCode::Quota => K::QuotaExceeded,
        ErrorCode::NameTooLong => K::InvalidFilename,
        ErrorCode::Invalid => K::InvalidInput,
        ErrorCode::Interrupted => K::Interrupted,
        ErrorCode::Unsupported => K::Unsupported,
        _ => return io::Error::other(format!("{code:?}")),
    };
    io::Error::new(kind, code.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts() -> Vec<(&'static str, String)> {
        ["/audit", "/artifacts", "/artifacts/trace", "/"]
            .into_iter()
            .map(|m| (m, m.to_string()))
            .collect()
    }

    #[test]
    fn the_longest_mount_holds_a_path() {
        let m = mounts();
        assert_eq!(
            resolve(&m, "/audit/a.jsonl").unwrap(),
            (&"/audit", "a.jsonl")
        );
        assert_eq!(
            resolve(&m, "/artifacts/trace/e").unwrap(),
            (&"/artifacts/trace", "e")
        );
        assert_eq!(
            resolve(&m, "/artifacts/x/y").unwrap(),
            (&"/artifacts", "x/y")
        );
        assert_eq!(resolve(&m, "/auditor/x").unwrap(), (&"/", "auditor/x"));
        assert_eq!(resolve(&m, "audit//a").unwrap(), (&"/audit", "a"));
    }

    #[test]
    fn a_path_outside_every_mount_or_a_mount_itself_is_not_found() {
        let m = vec![("/audit", "/audit".to_string())];
        let kind = |p| resolve(&m, p).unwrap_err().kind();
        assert_eq!(kind("/etc/passwd"), io::ErrorKind::NotFound);
        assert_eq!(kind("/audit"), io::ErrorKind::NotFound);
        assert_eq!(kind("/auditx/y"), io::ErrorKind::NotFound);
    }
}
