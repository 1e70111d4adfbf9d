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
