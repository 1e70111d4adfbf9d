//! Host code never follows what a session planted in a persistent directory's checkout:
//! a file another session publishes at a path one session turned into a symlink is never
//! written where the link points (the refresh keeps it out of that checkout), and a commit
//! racing a directory swapped for a symlink (`renameat2(RENAME_EXCHANGE)` in a loop) never
//! reads a host file into the store.

use crate::harness::{self, Host, text};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// `/persistent/notes`, published after every call, and `bash` granted it.
const PERSISTENT: &str = r#"
[persistent."/persistent/notes"]
backing = "{data}/tenants/{tenant}/persistent/notes"
commit = "call"

[bash.grants]
"/workspace" = "rw"
"/persistent/notes" = "rw"
"#;

/// The backing tree of tenant `alpha`'s `/persistent/notes`.
fn backing(host: &Host) -> std::path::PathBuf {
    host.data().join("tenants/alpha/persistent/notes")
}

#[test]
fn a_file_published_where_another_checkout_has_a_symlink_is_never_written_through_it() {
    for who in harness::users() {
        let host = Host::new(who, PERSISTENT);
        let outside = harness::host_dir();
        let (a, b) = (host.session("alpha"), host.session("alpha"));
        // A plants a link to a host directory; links are never published, so B never
        // sees it and makes a real directory of that name.
        let (out, failed) = host.bash(
            "alpha",
            &a,
            &format!("ln -s {} /persistent/notes/evil", outside.path().display()),
        );
        assert!(!failed, "{who:?}: {out}");
        let (out, failed) = host.bash(
            "alpha",
            &b,
            "mkdir -p /persistent/notes/evil && echo X > /persistent/notes/evil/planted.txt",
        );
        assert!(!failed, "{who:?}: {out}");
        assert!(
            backing(&host).join("evil/planted.txt").is_file(),
            "{who:?}: B published it"
        );
        // A's next call refreshes its checkout with what B published.
        let (out, _) = host.bash("alpha", &a, "ls -la /persistent/notes/ 2>&1; true");
        let planted = outside.path().join("planted.txt");
        assert!(
            !planted.exists(),
            "{who:?}: the refresh wrote through A's link, as hookhost's user: {}\n{out}",
            std::fs::read_to_string(&planted).unwrap_or_default()
        );
        // A keeps its own link.
        let (out, failed) = host.bash("alpha", &a, "readlink /persistent/notes/evil");
        assert!(
            !failed && out.contains(&*outside.path().to_string_lossy()),
            "{who:?}: {out}"
        );
    }
}

/// Swaps `real` (a directory holding `f.txt`) and `swap` (a symlink to a host directory
/// holding its own `f.txt`) back and forth for at most `SWAP_SECONDS` and `SWAP_TIMES`.
const SWAPPER: &str = r#"
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.chdir("/persistent/notes")
end, n = time.time() + SWAP_SECONDS, 0
while time.time() < end and n < SWAP_TIMES:
    if libc.renameat2(-100, b"real", -100, b"swap", 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    n += 1
# Left as it began: real the directory.
if os.path.islink("real"):
    libc.renameat2(-100, b"real", -100, b"swap", 2)
print("swapped", n)
"#;

const SWAP_SECONDS: u64 = 6;
const SWAP_TIMES: u64 = 20_000_000;
/// Commits tried while the swapper runs, at most.
const COMMITS: usize = 200;

#[test]
fn a_commit_racing_a_directory_swapped_for_a_symlink_never_reads_a_host_file() {
    for who in harness::users() {
        let host = Host::new(who, PERSISTENT);
        let outside = harness::host_dir();
        let secret = outside.path().join("f.txt");
        std::fs::write(&secret, "HOST-SECRET-3c1f\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let s = host.session("alpha");
        let (out, failed) = host.bash(
            "alpha",
            &s,
            &format!(
                "mkdir /persistent/notes/real && echo mine > /persistent/notes/real/f.txt \
                 && ln -s {} /persistent/notes/swap",
                outside.path().display()
            ),
        );
        assert!(!failed, "{who:?}: {out}");

        let script = SWAPPER
            .replace("SWAP_SECONDS", &SWAP_SECONDS.to_string())
            .replace("SWAP_TIMES", &SWAP_TIMES.to_string());
        let command = format!("python3 - <<'EOF'\n{script}\nEOF");
        // Each commit may publish over what the one before leaked: the store is looked
        // at after each.
        let (out, ran, commits, mut leaked) = std::thread::scope(|scope| {
            let swapper = scope.spawn(|| host.bash("alpha", &s, &command));
            let (mut ran, mut commits, mut leaked) = (0, 0, Vec::new());
            let started = Instant::now();
            while !swapper.is_finished()
                && ran < COMMITS
                && leaked.is_empty()
                && started.elapsed() < Duration::from_secs(SWAP_SECONDS + 30)
            {
                let commit = host.run(&["session", "commit", "--tenant", "alpha", &s]);
                ran += 1;
                commits += usize::from(commit.status.success());
                leaked = files_holding(&backing(&host), b"HOST-SECRET");
            }
            let (out, _) = swapper.join().unwrap();
            (out, ran, commits, leaked)
        });
        assert!(out.contains("swapped"), "{who:?}: the swapper ran: {out}");
        leaked.extend(files_holding(&backing(&host), b"HOST-SECRET"));
        assert!(
            leaked.is_empty(),
            "{who:?}: a host file's content reached the store at {leaked:?} \
             ({commits} of {ran} commits succeeded; {out})"
        );
        eprintln!(
            "{who:?}: {commits} of {ran} commits succeeded; {}",
            out.trim()
        );
    }
}

/// The files below `dir` (never following a link) whose content holds `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file()
                && std::fs::read(entry.path())
                    .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
            {
                found.push(text(entry.path().as_os_str().as_encoded_bytes()));
            }
        }
    }
    found
}
