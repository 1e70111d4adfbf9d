//! The audit hook: one JSON line per event, for done, refused and failed calls.

use hookhost_tests::{TestHost, fixtures};
use serde_json::{Value, json};

#[tokio::test]
async fn audit_logs_done_refused_and_failed_calls() {
    let config = format!(
        r#"
[[hooks]]
name = "audit"
component = "builtin:audit"
grants = {{ "/audit" = "rw" }}

[[hooks]]
name = "gate"
component = {probe:?}
tools = ["read_file"]
settings = {{ tag = "gate", mode = "refuse" }}

[[hooks]]
name = "broken"
component = {probe:?}
tools = ["todo_write"]
on_failure = "closed"
settings = {{ tag = "broken", mode = "trap-before" }}

[[hooks]]
name = "flaky"
component = {probe:?}
tools = ["write_file"]
on_failure = "open"
settings = {{ tag = "flaky", mode = "trap-after" }}

[tools.read_file]
component = "builtin:read_file"
grants = {{ "/workspace" = "ro" }}

[tools.todo_write]
component = "builtin:todo_write"
grants = {{ "/session" = "rw" }}

[tools.write_file]
component = "builtin:write_file"
grants = {{ "/workspace" = "rw" }}
"#,
        probe = fixtures::PROBE_HOOK
    );
    let host = TestHost::new(&config).await;
    let s = host.session().await;
    let done = host.call(&s, "echo", json!({"output": "hello"})).await;
    let refused = host.call(&s, "read_file", json!({"path": "x"})).await;
    let failed = host.call(&s, "todo_write", json!({"todos": []})).await;
    let degraded = host
        .call(&s, "write_file", json!({"path": "f", "content": "x"}))
        .await;
    assert_eq!(done.output, "hello");
    assert_eq!(refused.output, "refused by gate");
    assert_eq!(
        failed.output,
        "call refused: hook 'broken' failed in before-execute (trap)"
    );
    assert!(
        !degraded.is_error,
        "an open hook's failure does not fail the call"
    );

    let log = std::fs::read_to_string(host.data.path().join("tenants/default/audit/audit.jsonl"))
        .unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["tool"].as_str().unwrap(), l["event"].as_str().unwrap()))
        .collect();
    assert_eq!(
        events,
        [
            ("echo", "start"),
            ("echo", "done"),
            ("read_file", "start"),
            ("read_file", "refused"),
            ("todo_write", "start"),
            ("todo_write", "failed"),
            ("write_file", "start"),
            ("write_file", "failed"),
        ]
    );
    for line in &lines {
        assert_eq!(line["session"], s.id.as_str());
        assert_eq!(line["tenant"], "default");
        assert!(line["call_id"].as_str().unwrap().len() == 36);
        assert!(line["time"].as_str().unwrap().ends_with('Z'));
    }
    let done = &lines[1];
    assert_eq!(done["is_error"], false);
    assert_eq!(done["output_bytes"], 5);
    assert!(done["duration_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(lines[0]["call_id"], done["call_id"]);
    assert_eq!(lines[3]["refused_by"], "gate");
    assert_eq!(lines[3]["reason"], "refused by gate");
    assert_eq!(lines[3]["is_error"], true);
    assert_eq!(lines[5]["reason"], "hook 'broken' before-execute: trap");
    assert_eq!(lines[7]["reason"], "hook 'flaky' after-execute: trap");
    assert_eq!(lines[7]["is_error"], false);
}

/// Per-session audit instances keep the log open across calls; fresh ones open it once
/// per call. Either way, lines of many calls at once land whole, one per event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_of_many_sessions_append_whole_lines() {
    const SESSIONS: usize = 12;
    const CALLS: usize = 8;
    for instance in ["per-call", "per-session"] {
        let host = std::sync::Arc::new(
            TestHost::new(&format!(
                "[[hooks]]\nname = \"audit\"\ncomponent = \"builtin:audit\"\ninstance = {instance:?}\ngrants = {{ \"/audit\" = \"rw\" }}\n"
            ))
            .await,
        );
        let mut sessions = Vec::new();
        for _ in 0..SESSIONS {
            sessions.push(host.session().await);
        }
        let tasks: Vec<_> = sessions
            .iter()
            .flat_map(|s| (0..CALLS).map(move |n| (s.clone(), n)))
            .map(|(s, n)| {
                let host = host.clone();
                tokio::spawn(async move {
                    host.call(&s, "echo", json!({ "output": "x".repeat(1000 + n) }))
                        .await
                })
            })
            .collect();
        for task in tasks {
            assert!(!task.await.unwrap().is_error);
        }

        let path = host.data.path().join("tenants/default/audit/audit.jsonl");
        let log = std::fs::read_to_string(path).unwrap();
        let lines: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{instance}: {e}: {l}")))
            .collect();
        assert_eq!(lines.len(), SESSIONS * CALLS * 2, "{instance}");
        for s in &sessions {
            let mut done: Vec<u64> = lines
                .iter()
                .filter(|l| l["session"] == s.id.as_str() && l["event"] == "done")
                .map(|l| l["output_bytes"].as_u64().unwrap())
                .collect();
            done.sort_unstable();
            let expected: Vec<u64> = (0..CALLS as u64).map(|n| 1000 + n).collect();
            assert_eq!(done, expected, "{instance}: session {}", s.id);
        }
    }
}
