//! A hook written to escape its mounts: every way out is refused and nothing is written
//! outside the granted directories.

use hookhost_tests::{TestHost, fixtures};
use serde_json::json;
use std::path::{Path, PathBuf};

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else {
                out.push(entry.path());
            }
        }
    }
    out
}

#[tokio::test]
async fn a_hostile_hook_cannot_leave_its_mounts() {
    let config = format!(
        r#"
[mounts."/workspace"]
host = "{{data}}/tenants/{{tenant}}/sessions/{{session}}/workspace"
[mounts."/readonly"]
host = "{{data}}/tenants/{{tenant}}/sessions/{{session}}/readonly"

[[hooks]]
name = "escape"
component = {:?}
settings = {{ tag = "escape", mode = "escape" }}
grants = {{ "/workspace" = "rw", "/readonly" = "ro" }}
"#,
        fixtures::PROBE_HOOK
    );
    let host = TestHost::new(&config).await;
    let s = host.session().await;
    let workspace = s.host_dir("/workspace").unwrap().to_path_buf();
    std::fs::create_dir_all(&workspace).unwrap();
    let secret = host.data.path().join("secret.txt");
    std::fs::write(&secret, "SECRET").unwrap();
    std::os::unix::fs::symlink(&secret, workspace.join("planted")).unwrap();

    let r = host.call(&s, "echo", json!({})).await;
    let report: Vec<(&str, &str)> = r
        .output
        .lines()
        .filter_map(|l| l.rsplit_once('='))
        .filter(|(_, verdict)| matches!(*verdict, "denied" | "ALLOWED"))
        .collect();
    assert_eq!(report.len(), 12, "{}", r.output);
    for (attempt, verdict) in report {
        // WASI lets a guest create a symlink (it cannot follow it out); all else is denied.
        if !attempt.starts_with("make-") {
            assert_eq!(verdict, "denied", "{attempt}:\n{}", r.output);
        }
    }

    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "SECRET");
    assert!(!Path::new("/etc/hookhost-escape").exists());
    let session_dir = workspace.parent().unwrap();
    // The host's own files (the session database) aside, only the workspace holds files.
    for file in files_under(&host.data.path().join("tenants")) {
        assert!(
            file.starts_with(&workspace) || file == secret,
            "a file appeared outside the workspace: {}",
            file.display()
        );
    }
    assert!(!session_dir.join("escape-through-link").exists());
    assert!(!session_dir.join("escape-dotdot").exists());
}

#[tokio::test]
async fn a_hook_without_a_grant_cannot_write_and_its_policy_decides() {
    let hook = |policy: &str, grants: &str| {
        format!(
            "[[hooks]]\nname = \"writer\"\ncomponent = {:?}\non_failure = {policy:?}\ngrants = {{ {grants} }}\nsettings = {{ tag = \"w\", mode = \"must-write\" }}\n",
            fixtures::PROBE_HOOK
        )
    };
    let host = TestHost::new(&hook("open", "\"/workspace\" = \"rw\"")).await;
    let s = host.session().await;
    let r = host.call(&s, "echo", json!({})).await;
    assert_eq!(r.output, "tool(args={}, trace=before:w;)|after:w");
    assert!(
        s.host_dir("/workspace")
            .unwrap()
            .join("probe-w.txt")
            .exists()
    );

    for (grants, what) in [("", "no grant"), ("\"/workspace\" = \"ro\"", "read-only")] {
        let host = TestHost::new(&hook("open", grants)).await;
        let s = host.session().await;
        let r = host.call(&s, "echo", json!({})).await;
        assert_eq!(
            r.output, "tool(args={}, trace=)",
            "{what}: open skips the hook"
        );
        assert!(
            !s.host_dir("/workspace")
                .unwrap()
                .join("probe-w.txt")
                .exists()
        );

        let host = TestHost::new(&hook("closed", grants)).await;
        let r = host.call(&host.session().await, "echo", json!({})).await;
        assert_eq!(
            r.output, "call refused: hook 'writer' failed in before-execute (trap)",
            "{what}"
        );
        assert_eq!(host.echo.calls(), 0);
    }
}

/// A host running `hooks` (the probe component as `{probe}`) with a `/workspace` mount, a
/// session of it, and the session's workspace directory, made.
async fn with_workspace(hooks: &str) -> (TestHost, hookhost::Session, PathBuf) {
    let config = format!(
        "[mounts.\"/workspace\"]\n\
         host = \"{{data}}/tenants/{{tenant}}/sessions/{{session}}/workspace\"\n{}",
        hooks.replace("{probe}", &format!("{:?}", fixtures::PROBE_HOOK))
    );
    let host = TestHost::new(&config).await;
    let s = host.session().await;
    let workspace = s.host_dir("/workspace").unwrap().to_path_buf();
    std::fs::create_dir_all(&workspace).unwrap();
    (host, s, workspace)
}

/// A guest reads a file through a stream, as wasi-libc does (Rust's and C's `read`): its
/// first non-blocking `read` already has the data, read on the calling thread, where
/// wasmtime-wasi's own stream gives nothing and sends the read to a blocking thread (a
/// hop each way: a quarter of the context switches of a `read_file` call in `serve`). The
/// file's whole content comes through in reads of at most `WASI_FILE_STREAM_BYTES`.
#[tokio::test]
async fn a_file_read_through_a_stream_is_read_at_once_on_the_calling_thread() {
    let (host, s, workspace) = with_workspace(
        r#"
[[hooks]]
name = "reader"
component = {probe}
settings = { tag = "reader", mode = "stream-read", path = "big.txt" }
grants = { "/workspace" = "ro" }
"#,
    )
    .await;
    let size = 150_000;
    std::fs::write(workspace.join("big.txt"), "z".repeat(size)).unwrap();

    let r = host.call(&s, "echo", json!({})).await;
    let first = hookhost::limits::WASI_FILE_STREAM_BYTES;
    assert!(
        r.output
            .contains(&format!("|stream:first={first},total={size}|after:reader")),
        "{}",
        r.output
    );
}

/// A guest writes a file through streams, as wasi-libc does: a non-blocking `write` is
/// done on the calling thread before it returns, so `check-write` allows a full budget at
/// once (wasmtime-wasi's own stream allows nothing until a blocking thread has written);
/// an append lands at the end; a write to a descriptor opened for reading fails at its
/// `flush`, once, as wasmtime-wasi reports it. An empty file reads as an ended stream.
#[tokio::test]
async fn a_file_written_through_streams_is_written_at_once_and_errors_are_reported() {
    let (host, s, workspace) = with_workspace(
        r#"
[[hooks]]
name = "writer"
component = {probe}
settings = { tag = "writer", mode = "stream-write", path = "out.txt", content = "line\n" }
grants = { "/workspace" = "rw" }

[[hooks]]
name = "reader"
component = {probe}
settings = { tag = "reader", mode = "stream-read", path = "empty.txt" }
grants = { "/workspace" = "ro" }
"#,
    )
    .await;
    std::fs::write(workspace.join("empty.txt"), "").unwrap();

    let r = host.call(&s, "echo", json!({})).await;
    let budget = hookhost::limits::WASI_FILE_STREAM_BYTES;
    // After-execute runs in reverse: the reader's report comes first.
    assert!(
        r.output.contains(&format!(
            "|stream:first=0,total=0|after:reader\
             |stream-write:ready=Ok({budget}),append=true,ro=Err(\"failed\")|after:writer"
        )),
        "{}",
        r.output
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("out.txt")).unwrap(),
        "line\nline\n"
    );
}
