//! The `hookhost` command line, run as a process.

use std::path::Path;
use std::process::{Command, Output};

fn hookhost(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .args(args)
        .env_remove("HOOKHOST_CONFIG")
        .output()
        .expect("hookhost runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn a_large_bash_output_is_offloaded_and_pages_back() {
    let data = tempfile::tempdir().unwrap();
    let first = hookhost(
        data.path(),
        &["call", "bash", r#"{"command":"seq 1 5000"}"#],
    );
    assert!(first.status.success(), "{}", stderr(&first));
    let session = stderr(&first)
        .lines()
        .find_map(|l| l.strip_prefix("hookhost: session "))
        .expect("the new session's id on stderr")
        .to_string();
    let reference = stdout(&first);
    let path = reference
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .expect("a reference")
        .to_string();
    assert!(path.starts_with("/artifacts/tool-results/bash/") && path.ends_with(".txt"));
    let preview: Vec<&str> = reference
        .split("lines):\n")
        .nth(1)
        .unwrap()
        .lines()
        .collect();
    assert_eq!(preview.len(), 20);

    let mut whole = String::new();
    let mut offset = 0u64;
    loop {
        let args = format!(r#"{{"path":"{path}","offset":{offset},"limit":8192}}"#);
        let page = hookhost(
            data.path(),
            &["call", "--session", &session, "read_file", &args],
        );
        assert!(page.status.success(), "{}", stderr(&page));
        let text = stdout(&page);
        // The CLI ends the output with a newline when it has none.
        match text.rfind("\n\n[bytes ") {
            Some(at) => {
                whole.push_str(&text[..at]);
                let next = text[at..].trim_end().trim_end_matches(']');
                offset = next.rsplit_once("offset=").unwrap().1.parse().unwrap();
            }
            None => {
                whole.push_str(&text);
                break;
            }
        }
    }
    let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    assert_eq!(whole, expected);
}

#[test]
fn json_output_and_exit_codes() {
    let data = tempfile::tempdir().unwrap();
    let ok = hookhost(
        data.path(),
        &["call", "--json", "bash", r#"{"command":"echo hi"}"#],
    );
    assert!(ok.status.success());
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(v["output"], "hi\n");
    assert_eq!(v["is_error"], false);

    let failed = hookhost(
        data.path(),
        &["call", "bash", r#"{"command":"echo oops >&2; exit 3"}"#],
    );
    assert_eq!(failed.status.code(), Some(1), "is-error exits 1");
    assert_eq!(stdout(&failed), "[stderr]\noops\n[exit code: 3]\n");
}

#[test]
fn bad_input_is_a_one_line_error_not_a_panic() {
    let data = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec!["call", "bash", "{not json"],
            "arguments are not valid JSON",
        ),
        (
            vec!["call", "bash", "[1]"],
            "arguments must be a JSON object",
        ),
        (vec!["call", "nope", "{}"], "unknown tool \"nope\""),
        (vec!["call", "--session", "a/b", "bash", "{}"], "--session"),
        (
            vec!["call", "--session", "", "bash", "{}"],
            "session id is empty",
        ),
    ] {
        let out = hookhost(data.path(), &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("hookhost: error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn session_new_prints_a_uuid() {
    let data = tempfile::tempdir().unwrap();
    let out = hookhost(data.path(), &["session", "new"]);
    let id = stdout(&out);
    assert_eq!(id.trim().len(), 36, "{id}");
    assert_eq!(id.trim().matches('-').count(), 4);
}

#[test]
fn session_lifecycle_from_the_command_line() {
    let data = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    std::fs::create_dir(workdir.path().join(".git")).unwrap();
    let workdir_arg = workdir.path().to_str().unwrap();
    let new = hookhost(data.path(), &["session", "new", "--workdir", workdir_arg]);
    assert!(new.status.success(), "{}", stderr(&new));
    let id = stdout(&new).trim().to_string();

    let todo = r#"{"todos":[{"id":"1","content":"Ship it","status":"in_progress"}]}"#;
    let call = hookhost(data.path(), &["call", "--session", &id, "todo_write", todo]);
    assert!(call.status.success(), "{}", stderr(&call));
    let write = r#"{"path":"notes.md","content":"hi"}"#;
    assert!(
        hookhost(
            data.path(),
            &["call", "--session", &id, "write_file", write]
        )
        .status
        .success()
    );

    let list = stdout(&hookhost(data.path(), &["session", "list"]));
    let row: Vec<&str> = list.trim().split('\t').collect();
    assert_eq!(row[0], id);
    assert_eq!(row[1], "default");
    assert_eq!(Path::new(row[4]), workdir.path().canonicalize().unwrap());

    let show = stdout(&hookhost(data.path(), &["session", "show", &id]));
    assert!(
        show.contains(&format!("session: {id}")) && show.contains("/workspace\t"),
        "{show}"
    );

    let other = hookhost(
        data.path(),
        &["session", "show", &id, "--tenant", "someone-else"],
    );
    assert_eq!(other.status.code(), Some(2));
    assert!(stderr(&other).contains("no session"), "{}", stderr(&other));

    assert!(
        hookhost(data.path(), &["session", "delete", &id])
            .status
            .success()
    );
    assert!(stdout(&hookhost(data.path(), &["session", "list"])).is_empty());
    let sessions = data.path().join("tenants/default/sessions");
    assert_eq!(
        std::fs::read_dir(&sessions).unwrap().count(),
        0,
        "no session files left"
    );
    assert!(
        data.path()
            .join("tenants/default/audit/audit.jsonl")
            .exists()
    );
    let plans = workdir.path().join(".hookhost/plans");
    assert_eq!(
        std::fs::read_dir(plans).unwrap().count(),
        1,
        "the plan in the git workdir stays"
    );

    let gone = hookhost(data.path(), &["call", "--session", &id, "bash", "{}"]);
    assert_eq!(gone.status.code(), Some(2));

    let gc = hookhost(data.path(), &["session", "gc", "--idle", "1h"]);
    assert_eq!(
        stdout(&gc),
        "deleted 0 idle sessions; removed 0 orphaned session directories\n"
    );
}

#[test]
fn config_check_prints_the_chain_or_the_error() {
    let data = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agent.toml");
    let ok = hookhost(
        data.path(),
        &["config", "check", examples.to_str().unwrap()],
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    let text = stdout(&ok);
    let chain = text.split("chain (").nth(1).expect("a chain section");
    let at = |hook: &str| {
        chain
            .find(hook)
            .unwrap_or_else(|| panic!("{hook} missing:\n{text}"))
    };
    assert!(at("1. offload") < at("2. audit") && at("2. audit") < at("3. plan-writer"));

    let bad = data.path().join("bad.toml");
    std::fs::write(&bad, "[[hooks]]\nname = \"x\"\ncomponent = \"builtin:offload\"\ngrants = { \"/nope\" = \"rw\" }\n").unwrap();
    let out = hookhost(data.path(), &["config", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bad.toml:4: hooks.x.grants: \"/nope\" is not a declared mount"),
        "{err}"
    );

    let shown = stdout(&hookhost(data.path(), &["config", "show"]));
    assert!(shown.contains("[[hooks]]\nname = \"offload\""));
}
