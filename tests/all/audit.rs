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
    let s = host.session();
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
