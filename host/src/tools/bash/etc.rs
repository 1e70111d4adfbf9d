//! The sandbox's `/etc`: one directory, bound read-only as a whole.
//!
//! Each bind mount costs bubblewrap a read of the mount table, and the cost grows with the
//! mounts made before it: binding the 19 allowed entries of the host's `/etc` one by one
//! took 2.7 ms of a sandbox's 8.4 ms start (measured here). So the allowed entries are
//! read once per process and copied — files as files, links as the same links (they point
//! into `/usr`, which the sandbox has), directories entry by entry — beside the generated
//! files, into `{data}/sandbox/etc-HASH`, named by a hash of what it holds, unless that
//! directory is there already. Processes sharing the
//! data directory (a CLI beside a server, a fleet) make the same directory or reuse it; a
//! directory is complete before it gets its name (built under a temporary name, then
//! renamed), so a sandbox never binds half of one. There are two: a closed sandbox's, in
//! which the entries that resolve names are empty files, and an open one's.

use sha2::{Digest, Sha256};
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How deep a directory of the host's `/etc` is copied.
const MAX_DEPTH: usize = 4;

/// Makes (or finds) the `/etc` directory in `sandbox_dir`: `host` entries of the host's
/// `/etc` copied (missing or unreadable ones skipped), `placeholders` as empty files, and
/// `generated` (name, content) written. Returns its path. The host's entries are read
/// first and written only when no directory holds them yet: making links is slow on some
/// file systems (0.7 ms each here, and Debian's `/etc` has some 700 to copy).
///
/// # Errors
///
/// When `sandbox_dir` or the copy cannot be written.
pub fn make(
    sandbox_dir: &Path,
    host: &[&str],
    placeholders: &[&str],
    generated: &[(&str, &str)],
) -> io::Result<PathBuf> {
    let mut entries = Vec::new();
    for name in host {
        read(Path::new(name), &mut entries, 0);
    }
    let files = placeholders
        .iter()
        .map(|name| (*name, ""))
        .chain(generated.iter().copied());
    for (name, content) in files {
        entries.push((
            PathBuf::from(name),
            Entry::File(content.as_bytes().to_vec()),
        ));
    }
    let mut hash = Sha256::new();
    for (name, entry) in &entries {
        match entry {
            Entry::Dir => hash.update(format!("dir {}\n", name.display())),
            Entry::Link(target) => {
                hash.update(format!("link {} {}\n", name.display(), target.display()))
            }
            Entry::File(bytes) => {
                hash.update(format!("file {} {}\n", name.display(), bytes.len()));
                hash.update(bytes);
            }
        }
    }
    let digest = hash.finalize();
    let name = crate::ids::hex(&digest[..8]);
    let made = sandbox_dir.join(format!("etc-{name}"));
    if made.is_dir() {
        return Ok(made);
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(sandbox_dir)?;
    let building = tempfile::Builder::new()
        .prefix(".etc-")
        .tempdir_in(sandbox_dir)?;
    for (name, entry) in &entries {
        let to = building.path().join(name);
        if let Some(parent) = to.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)?;
        }
        match entry {
            Entry::Dir => fs::DirBuilder::new().mode(0o755).create(&to)?,
            Entry::Link(target) => std::os::unix::fs::symlink(target, &to)?,
            Entry::File(bytes) => {
                fs::write(&to, bytes)?;
                // Readable inside the sandbox, whose user is the host's user under another uid.
                fs::set_permissions(&to, fs::Permissions::from_mode(0o644))?;
            }
        }
    }
    fs::set_permissions(building.path(), fs::Permissions::from_mode(0o755))?;
    match fs::rename(building.path(), &made) {
        Ok(()) => {
            // Renamed away: nothing left for the guard to remove.
            let _ = building.keep();
            Ok(made)
        }
        // Another process made the same one meanwhile (`building` is removed on drop).
        Err(_) if made.is_dir() => Ok(made),
        Err(e) => Err(e),
    }
}

/// One entry of the sandbox's `/etc`.
enum Entry {
    Dir,
    Link(PathBuf),
    File(Vec<u8>),
}

/// Reads the host's `/etc/NAME` into `entries` (a directory before its entries, in name
/// order); what cannot be read is left out.
fn read(name: &Path, entries: &mut Vec<(PathBuf, Entry)>, depth: usize) {
    let from = Path::new("/etc").join(name);
    let Ok(meta) = fs::symlink_metadata(&from) else {
        return;
    };
    if meta.file_type().is_symlink() {
        if let Ok(target) = fs::read_link(&from) {
            entries.push((name.to_path_buf(), Entry::Link(target)));
        }
    } else if meta.is_file() {
        if let Ok(bytes) = fs::read(&from) {
            entries.push((name.to_path_buf(), Entry::File(bytes)));
        }
    } else if meta.is_dir() && depth < MAX_DEPTH {
        let Ok(listing) = fs::read_dir(&from) else {
            return;
        };
        let mut names: Vec<_> = listing.flatten().map(|e| e.file_name()).collect();
        names.sort();
        entries.push((name.to_path_buf(), Entry::Dir));
        for entry in names {
            read(&name.join(entry), entries, depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_content_makes_the_same_directory_and_other_content_another() {
        let dir = tempfile::tempdir().unwrap();
        let made = |content| {
            make(
                dir.path(),
                &["hostname"],
                &["resolv.conf"],
                &[("passwd", content)],
            )
            .unwrap()
        };
        let first = made("a\n");
        assert_eq!(made("a\n"), first);
        let other = made("b\n");
        assert_ne!(other, first);
        assert_eq!(fs::read_to_string(first.join("passwd")).unwrap(), "a\n");
        assert_eq!(fs::read(first.join("resolv.conf")).unwrap(), b"");
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".etc-"))
            .collect();
        assert!(left.is_empty(), "temporaries are removed");
    }

    #[test]
    fn links_stay_links_and_missing_entries_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let made = make(dir.path(), &["no-such-entry", "ssl/certs"], &[], &[]).unwrap();
        assert!(!made.join("no-such-entry").exists());
        if Path::new("/etc/ssl/certs").is_dir() {
            assert!(made.join("ssl/certs").is_dir());
        }
    }
}
