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
    let s = host.session();
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
    for file in files_under(host.data.path()) {
        assert!(
            file.starts_with(&workspace) || file == secret,
            "a file appeared outside the workspace: {}",
            file.display()
        );
    }
    assert!(!session_dir.join("escape-through-link").exists());
    assert!(!session_dir.join("escape-dotdot").exists());
}
