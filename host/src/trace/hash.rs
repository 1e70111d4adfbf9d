//! How the trace reads a changed file: by extent, within a budget per call.
//!
//! The `sha256` of a file in a `file.*` event is defined here:
//! - a file without holes (every file written front to back), or whose holes total at most
//!   [`MAX_ZERO_FILLED_HOLE_BYTES`], is hashed as its content: the SHA-256 `sha256sum`
//!   prints. Its holes are hashed as the zeros they read as, from memory, never read;
//! - a file with more holes (a sparse file: `truncate -s 1G f`) is hashed by extent, and
//!   its event says `sparse`: SHA-256 of [`SPARSE_DIGEST_TAG`] and the file's size, then of
//!   each extent in order, a data extent as `d`, its offset and length and its bytes, a
//!   hole as `h`, its offset and length (offsets, lengths and the size as 8 bytes,
//!   big-endian). A hole costs two `lseek`s however long it is. Equal digests mean equal
//!   content; the layout counts too, so the same bytes written without holes (or with
//!   holes elsewhere) have another digest.
//!
//! Extents are found with `lseek(SEEK_DATA)` and `lseek(SEEK_HOLE)`; a file system that
//! cannot tell holes reports the whole file as data, which is then read, within the bounds.
//!
//! Bounds, so that no tenant's files can make the host hash without end:
//! - a file is read up to its size when it was stat'ed, never further (one growing while it
//!   is read is not followed);
//! - one look reads and hashes at most [`MAX_HASHED_FILE_BYTES`] of one file (its data, and
//!   the holes hashed as zeros), and maps at most [`MAX_HASHED_EXTENTS`] extents of it: a
//!   file past either is left unhashed ([`Unhashed::FileCap`]), reported by size and mtime;
//! - one call reads and hashes at most [`MAX_HASHED_BYTES_PER_CALL`] over all its looks
//!   ([`HashBudget`]); files past it are left unhashed ([`Unhashed::CallBudget`]).

use crate::limits::{
    MAX_HASHED_BYTES_PER_CALL, MAX_HASHED_EXTENTS, MAX_HASHED_FILE_BYTES,
    MAX_ZERO_FILLED_HOLE_BYTES,
};
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a sparse file's digest starts with, so it cannot be the SHA-256 of any content
/// that does not start with it too.
pub const SPARSE_DIGEST_TAG: &[u8] = b"hookhost sparse file v1\0";

/// How much of a file too large to keep is read to judge whether it is text; a file at
/// least this large keeps its hash state (about 100 bytes) to hash appended bytes on from.
pub(super) const TEXT_SNIFF: usize = 8 * 1024;

/// Why a file's content was not hashed (its `sha256` is null): the `unhashed` of its
/// `file.*` event, which then carries its size and mtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unhashed {
    /// Larger than [`crate::limits::MAX_BASELINE_READ_BYTES`] at its mount's first look,
    /// or a file the host writes then (see [`super::files::Whose::Host`]), and not
    /// changed since.
    FirstLook,
    /// More to read than [`MAX_HASHED_FILE_BYTES`], or more than [`MAX_HASHED_EXTENTS`]
    /// extents.
    FileCap,
    /// Its call had read [`MAX_HASHED_BYTES_PER_CALL`] already.
    CallBudget,
    /// It could not be opened or read (its mode, or replaced while read): tried again at
    /// the next look that sees it.
    Unreadable,
}

impl Unhashed {
    /// Whether an entry left unhashed for this reason stays so while its metadata does not
    /// move: reading it again at every look would spend each call's budget on the same
    /// files, and find nothing new.
    pub(super) fn is_kept(self) -> bool {
        self != Unhashed::Unreadable
    }
}

/// What one call may still read and hash, shared by its looks (which may run on blocking
/// threads), and what it read.
#[derive(Debug)]
pub struct HashBudget {
    left: AtomicU64,
    read: AtomicU64,
    /// What the look under way may still take, when it runs on the async executor: the
    /// look sized what it reads before reading (see [`INLINE_WALK_BYTES`]), and this holds
    /// it to that should a file change in between (a hole punched in what was appended
    /// makes a file hashed whole). `u64::MAX` for a look on a blocking thread.
    ///
    /// [`INLINE_WALK_BYTES`]: crate::limits::INLINE_WALK_BYTES
    on_executor: AtomicU64,
}

impl HashBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: u64) -> HashBudget {
        HashBudget {
            left: AtomicU64::new(bytes),
            read: AtomicU64::new(0),
            on_executor: AtomicU64::new(u64::MAX),
        }
    }

    /// A look begins: on the executor, allowed `bytes`; on a blocking thread (`None`), the
    /// call's budget only.
    pub(super) fn look_on_executor(&self, bytes: Option<u64>) {
        self.on_executor
            .store(bytes.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// A call's: [`MAX_HASHED_BYTES_PER_CALL`].
    pub fn per_call() -> Arc<HashBudget> {
        Arc::new(HashBudget::new(MAX_HASHED_BYTES_PER_CALL))
    }

    /// Takes `bytes` from what is left; `false`, and nothing taken, when less is left.
    fn take(&self, bytes: u64) -> bool {
        // A call's looks run one after another: the look's own allowance needs no loop.
        let on_executor = self.on_executor.load(Ordering::Relaxed);
        if on_executor < bytes {
            return false;
        }
        let mut left = self.left.load(Ordering::Relaxed);
        loop {
            let Some(after) = left.checked_sub(bytes) else {
                return false;
            };
            match self
                .left
                .compare_exchange_weak(left, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => left = now,
            }
        }
        if on_executor != u64::MAX {
            self.on_executor
                .store(on_executor - bytes, Ordering::Relaxed);
        }
        true
    }

    /// Bytes read from files so far (holes hashed as zeros are not read).
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
}

/// A run of a file's bytes that is all data or all hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Extent {
    offset: u64,
    len: u64,
    data: bool,
}

/// The data and hole extents of `file` in `[from, to)`, in order; `None` when there are
/// more than [`MAX_HASHED_EXTENTS`].
fn extents(file: &File, from: u64, to: u64) -> io::Result<Option<Vec<Extent>>> {
    let mut found = Vec::new();
    let mut at = from;
    while at < to {
        if found.len() >= MAX_HASHED_EXTENTS {
            return Ok(None);
        }
        let data = match rustix::fs::seek(file, SeekFrom::Data(at)) {
            Ok(data) => data.clamp(at, to),
            // No data past `at`: a hole to the end (or the file shrank meanwhile).
            Err(Errno::NXIO) => to,
            // A file system that cannot tell: all data.
            Err(Errno::INVAL | Errno::OPNOTSUPP) => at,
            Err(e) => return Err(e.into()),
        };
        if data > at {
            found.push(Extent {
                offset: at,
                len: data - at,
                data: false,
            });
        }
        if data >= to {
            break;
        }
        let hole = match rustix::fs::seek(file, SeekFrom::Hole(data)) {
            Ok(hole) if hole > data => hole.min(to),
            Ok(_) | Err(Errno::NXIO | Errno::INVAL | Errno::OPNOTSUPP) => to,
            Err(e) => return Err(e.into()),
        };
        found.push(Extent {
            offset: data,
            len: hole - data,
            data: true,
        });
        at = hole;
    }
    Ok(Some(found))
}

/// What hashing a whole file found.
pub(super) struct Hashed {
    pub sha256: [u8; 32],
    /// The hash state, for a file hashed as its content and of at least [`TEXT_SNIFF`]
    /// bytes: bytes appended to it are hashed on from here.
    pub digest: Option<Arc<Sha256>>,
    /// Hashed by extent (see the module's doc), not as its content.
    pub sparse: bool,
    pub text: bool,
    /// Its content, when it is text of at most the `keep` asked for.
    pub kept: Option<Arc<str>>,
}

/// Whether bytes are text (UTF-8 without NUL), judged by the first [`TEXT_SNIFF`] bytes or
/// the first `keep`, whichever is more, which are kept.
struct TextSniff {
    head: Vec<u8>,
    keep: usize,
    text: bool,
    total: u64,
}

impl TextSniff {
    fn new(keep: usize) -> TextSniff {
        TextSniff {
            head: Vec::new(),
            keep,
            text: true,
            total: 0,
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        self.text &= !chunk.contains(&0);
        if self.text && self.total + chunk.len() as u64 <= self.keep.max(TEXT_SNIFF) as u64 {
            self.head.extend_from_slice(chunk);
        }
        self.total += chunk.len() as u64;
    }

    /// A hole: NUL bytes, so not text.
    fn hole(&mut self, len: u64) {
        self.text = false;
        self.total += len;
    }

    /// Whether it is text, and its content when all of it was kept.
    fn finish(self) -> (bool, Option<Arc<str>>) {
        if !self.text {
            return (false, None);
        }
        let valid = std::str::from_utf8(&self.head);
        // A file longer than what was kept is judged by its head; a cut inside a character
        // is not a reason to call it binary.
        let text = match valid {
            Ok(_) => true,
            Err(e) => self.total > self.head.len() as u64 && e.error_len().is_none(),
        };
        let kept = match valid {
            Ok(s)
                if text
                    && self.total == self.head.len() as u64
                    && self.total as usize <= self.keep =>
            {
                Some(Arc::from(s))
            }
            _ => None,
        };
        (text, kept)
    }
}

/// Hashes `file` as it is up to `size` (its size when stat'ed), within `budget`: by
/// content or by extent (see the module's doc), keeping its content when it is text of at
/// most `keep` bytes. `Ok(Err(why))`: not hashed, nothing read.
///
/// # Errors
///
/// When it cannot be read.
pub(super) fn whole(
    file: &File,
    size: u64,
    keep: usize,
    budget: &HashBudget,
) -> io::Result<Result<Hashed, Unhashed>> {
    let Some(extents) = extents(file, 0, size)? else {
        return Ok(Err(Unhashed::FileCap));
    };
    let data: u64 = extents.iter().filter(|e| e.data).map(|e| e.len).sum();
    let sparse = size - data > MAX_ZERO_FILLED_HOLE_BYTES;
    let cost = if sparse { data } else { size };
    if cost > MAX_HASHED_FILE_BYTES {
        return Ok(Err(Unhashed::FileCap));
    }
    if !budget.take(cost) {
        return Ok(Err(Unhashed::CallBudget));
    }
    let mut hasher = Sha256::new();
    if sparse {
        hasher.update(SPARSE_DIGEST_TAG);
        hasher.update(size.to_be_bytes());
    }
    let mut sniff = TextSniff::new(keep);
    for extent in extents {
        if sparse {
            hasher.update([if extent.data { b'd' } else { b'h' }]);
            hasher.update(extent.offset.to_be_bytes());
            hasher.update(extent.len.to_be_bytes());
        }
        if extent.data {
            read(file, extent.offset, extent.len, budget, |chunk| {
                hasher.update(chunk);
                sniff.feed(chunk);
            })?;
        } else {
            if !sparse {
                hash_zeros(&mut hasher, extent.len);
            }
            sniff.hole(extent.len);
        }
    }
    let (text, kept) = sniff.finish();
    let digest = (!sparse && size >= TEXT_SNIFF as u64).then(|| Arc::new(hasher.clone()));
    Ok(Ok(Hashed {
        sha256: hasher.finalize().into(),
        digest,
        sparse,
        text,
        kept,
    }))
}

/// What hashing the bytes appended to a file found.
pub(super) struct Grown {
    /// The whole file's, hashed on from the state kept at the last read.
    pub sha256: [u8; 32],
    pub digest: Arc<Sha256>,
    /// The appended bytes' own.
    pub appended_sha256: [u8; 32],
    /// Whether the new bytes are text (no NUL).
    pub text: bool,
}

/// Hashes what was appended to `file` since it was `from` bytes long and hashed into
/// `state`, up to `size` (its size when stat'ed, so that the entry's size and hash agree),
/// within `budget`: the new bytes alone and on from `state`. `Ok(Ok(None))`: the new bytes
/// hold a hole, so the file is to be hashed whole (it may now be sparse).
///
/// # Errors
///
/// When it cannot be read.
pub(super) fn appended(
    file: &File,
    state: &Sha256,
    from: u64,
    size: u64,
    budget: &HashBudget,
) -> io::Result<Result<Option<Grown>, Unhashed>> {
    let hole = match rustix::fs::seek(file, SeekFrom::Hole(from)) {
        Ok(hole) => hole,
        Err(Errno::NXIO) => from,                     // shrank meanwhile
        Err(Errno::INVAL | Errno::OPNOTSUPP) => size, // cannot tell
        Err(e) => return Err(e.into()),
    };
    if hole < size {
        return Ok(Ok(None));
    }
    let cost = size - from;
    if cost > MAX_HASHED_FILE_BYTES {
        return Ok(Err(Unhashed::FileCap));
    }
    if !budget.take(cost) {
        return Ok(Err(Unhashed::CallBudget));
    }
    let mut whole = state.clone();
    let mut appended = Sha256::new();
    let mut text = true;
    read(file, from, cost, budget, |chunk| {
        appended.update(chunk);
        whole.update(chunk);
        text &= !chunk.contains(&0);
    })?;
    let digest = Arc::new(whole.clone());
    Ok(Ok(Some(Grown {
        sha256: whole.finalize().into(),
        digest,
        appended_sha256: appended.finalize().into(),
        text,
    })))
}

/// Reads `len` bytes of `file` from `offset`, chunk by chunk, each counted in `budget`;
/// stops early at the end of the file (it shrank meanwhile).
fn read(
    file: &File,
    offset: u64,
    len: u64,
    budget: &HashBudget,
    mut chunk: impl FnMut(&[u8]),
) -> io::Result<()> {
    // No larger than what is read: most reads are a line appended to a log.
    let mut buffer = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX).min(64 * 1024)];
    let end = offset + len;
    let mut at = offset;
    while at < end {
        let want = buffer
            .len()
            .min(usize::try_from(end - at).unwrap_or(usize::MAX));
        let n = match file.read_at(&mut buffer[..want], at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        budget.read.fetch_add(n as u64, Ordering::Relaxed);
        chunk(&buffer[..n]);
        at += n as u64;
    }
    Ok(())
}

/// Hashes `len` zero bytes into `hasher`, from memory.
fn hash_zeros(hasher: &mut Sha256, mut len: u64) {
    static ZEROS: [u8; 16 * 1024] = [0; 16 * 1024];
    while len > 0 {
        let n = ZEROS.len().min(usize::try_from(len).unwrap_or(usize::MAX));
        hasher.update(&ZEROS[..n]);
        len -= n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const GIB: u64 = 1024 * 1024 * 1024;

    fn sha256(bytes: &[u8]) -> [u8; 32] {
        Sha256::digest(bytes).into()
    }

    fn hash(file: &File, budget: &HashBudget) -> Result<Hashed, Unhashed> {
        let size = file.metadata().unwrap().len();
        whole(file, size, 64 * 1024, budget).unwrap()
    }

    #[test]
    fn an_ordinary_file_has_the_sha256_of_its_content() {
        let mut file = tempfile::tempfile().unwrap();
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&content).unwrap();
        let budget = HashBudget::new(u64::MAX);
        let hashed = hash(&file, &budget).unwrap();
        assert_eq!(hashed.sha256, sha256(&content));
        assert!(!hashed.sparse && !hashed.text);
        assert_eq!(budget.bytes_read(), content.len() as u64);

        let mut small = tempfile::tempfile().unwrap();
        small.write_all(b"one\ntwo\n").unwrap();
        let hashed = hash(&small, &budget).unwrap();
        assert_eq!(hashed.sha256, sha256(b"one\ntwo\n"));
        assert_eq!(hashed.kept.as_deref(), Some("one\ntwo\n"));
    }

    #[test]
    fn small_holes_are_hashed_as_the_zeros_they_read_as() {
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(b"tail", 256 * 1024).unwrap();
        let budget = HashBudget::new(u64::MAX);
        let hashed = hash(&file, &budget).unwrap();
        let mut content = vec![0u8; 256 * 1024];
        content.extend_from_slice(b"tail");
        assert_eq!(hashed.sha256, sha256(&content));
        assert!(!hashed.sparse && !hashed.text);
        assert!(budget.bytes_read() < 64 * 1024, "the hole is not read");
    }

    #[test]
    fn a_1_gib_sparse_file_is_hashed_by_extent_without_reading_its_holes() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(GIB).unwrap();
        file.write_all_at(b"middle", GIB / 2).unwrap();
        let budget = HashBudget::new(MAX_HASHED_BYTES_PER_CALL);
        let hashed = hash(&file, &budget).unwrap();
        assert!(hashed.sparse && !hashed.text && hashed.digest.is_none());
        assert!(
            budget.bytes_read() <= 64 * 1024,
            "read {} bytes",
            budget.bytes_read()
        );
        // The digest is over the extent map: the data extent is the block holding the
        // write, the rest holes.
        let extents = extents(&file, 0, GIB).unwrap().unwrap();
        assert_eq!(extents.len(), 3, "{extents:?}");
        let mut expected = Sha256::new();
        expected.update(SPARSE_DIGEST_TAG);
        expected.update(GIB.to_be_bytes());
        for e in &extents {
            expected.update([if e.data { b'd' } else { b'h' }]);
            expected.update(e.offset.to_be_bytes());
            expected.update(e.len.to_be_bytes());
            if e.data {
                let mut bytes = vec![0u8; e.len as usize];
                file.read_exact_at(&mut bytes, e.offset).unwrap();
                expected.update(&bytes);
            }
        }
        assert_eq!(hashed.sha256, <[u8; 32]>::from(expected.finalize()));
        // A file of holes only: nothing read at all.
        let empty = tempfile::tempfile().unwrap();
        empty.set_len(GIB).unwrap();
        let budget = HashBudget::new(MAX_HASHED_BYTES_PER_CALL);
        let holes = hash(&empty, &budget).unwrap();
        assert!(holes.sparse);
        assert_eq!(budget.bytes_read(), 0);
        assert_ne!(holes.sha256, hashed.sha256);
    }

    #[test]
    fn a_file_with_more_data_than_the_cap_is_not_read() {
        let file = tempfile::tempfile().unwrap();
        let chunk = vec![b'x'; 1024 * 1024];
        for i in 0..=MAX_HASHED_FILE_BYTES / chunk.len() as u64 {
            file.write_all_at(&chunk, i * chunk.len() as u64).unwrap();
        }
        let budget = HashBudget::new(u64::MAX);
        assert_eq!(hash(&file, &budget).err(), Some(Unhashed::FileCap));
        assert_eq!(budget.bytes_read(), 0);
    }

    #[test]
    fn a_call_past_its_budget_leaves_files_unhashed() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[b'a'; 3000]).unwrap();
        let budget = HashBudget::new(5000);
        assert!(hash(&file, &budget).is_ok());
        assert_eq!(hash(&file, &budget).err(), Some(Unhashed::CallBudget));
        assert_eq!(budget.bytes_read(), 3000);
    }

    #[test]
    fn a_file_of_too_many_extents_is_not_read() {
        let file = tempfile::tempfile().unwrap();
        let block = 64 * 1024u64;
        for i in 0..=MAX_HASHED_EXTENTS as u64 {
            file.write_all_at(b"x", i * 2 * block).unwrap();
        }
        file.set_len((MAX_HASHED_EXTENTS as u64 + 1) * 2 * block)
            .unwrap();
        let budget = HashBudget::new(u64::MAX);
        assert_eq!(hash(&file, &budget).err(), Some(Unhashed::FileCap));
        assert_eq!(budget.bytes_read(), 0);
    }

    #[test]
    fn a_look_on_the_executor_takes_no_more_than_it_sized() {
        let budget = HashBudget::new(100);
        budget.look_on_executor(Some(10));
        assert!(!budget.take(11));
        assert!(budget.take(6));
        assert!(!budget.take(5));
        budget.look_on_executor(None);
        assert!(budget.take(94));
        assert!(!budget.take(1));
    }

    #[test]
    fn appended_bytes_are_hashed_on_unless_they_hold_a_hole() {
        let file = tempfile::tempfile().unwrap();
        let head = vec![b'a'; 3 * TEXT_SNIFF];
        file.write_all_at(&head, 0).unwrap();
        let budget = HashBudget::new(u64::MAX);
        let first = hash(&file, &budget).unwrap();
        let state = first.digest.unwrap();
        file.write_all_at(b"b\n", head.len() as u64).unwrap();
        let size = head.len() as u64 + 2;
        let grown = appended(&file, &state, head.len() as u64, size, &budget)
            .unwrap()
            .unwrap()
            .unwrap();
        let mut whole = head.clone();
        whole.extend_from_slice(b"b\n");
        assert_eq!(grown.sha256, sha256(&whole));
        assert_eq!(grown.appended_sha256, sha256(b"b\n"));
        // Grown by a hole: hashed whole again, by extent.
        file.set_len(GIB).unwrap();
        let read = budget.bytes_read();
        assert!(
            appended(&file, &grown.digest, size, GIB, &budget)
                .unwrap()
                .unwrap()
                .is_none()
        );
        assert_eq!(budget.bytes_read(), read);
    }
}
