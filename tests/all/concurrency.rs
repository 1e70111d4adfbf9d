//! Many sessions at once, some behind hostile hooks: every healthy call returns its exact
//! result, every offloaded file is whole.

use hookhost::TenantId;
use hookhost_tests::{TestHost, fixtures};
use serde_json::json;
use std::sync::Arc;

const SESSIONS: usize = 32;
const HOSTILE_EVERY: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_sessions_in_parallel_some_hostile() {
    let host = Arc::new(
        TestHost::new(&format!(
            r#"
[[hooks]]
name = "offload"
component = "builtin:offload"
grants = {{ "/artifacts" = "rw" }}

[[hooks]]
name = "spinner"
component = {probe:?}
settings = {{ tag = "spinner", mode = "loop-before" }}
limits = {{ deadline_ms = 400 }}

[tenants.good]
hooks = ["offload"]

[tenants.evil]
hooks = ["offload", "spinner"]
"#,
            probe = fixtures::PROBE_HOOK
        ))
        .await,
    );

    let mut tasks = Vec::new();
    for i in 0..SESSIONS {
        let host = host.clone();
        tasks.push(tokio::spawn(async move {
            let hostile = i % HOSTILE_EVERY == 0;
            let tenant = TenantId::new(if hostile { "evil" } else { "good" }).unwrap();
            let s = host
                .runtime
                .sessions()
                .create(tenant, None, None)
                .await
                .unwrap();
            let mut checked = 0;
            for round in 0..3 {
                let small = format!("session {i} round {round}");
                let r = host.call(&s, "echo", json!({ "output": small })).await;
                assert_eq!((r.output.as_str(), r.is_error), (small.as_str(), false));

                let big: String = (0..2_000).map(|n| format!("{i}:{round}:{n}\n")).collect();
                let r = host.call(&s, "echo", json!({ "output": big })).await;
                let path = r
                    .output
                    .lines()
                    .find_map(|l| l.strip_prefix("Full output: "))
                    .unwrap_or_else(|| panic!("session {i}: not offloaded: {}", r.output));
                let file = s
                    .host_dir("/artifacts")
                    .unwrap()
                    .join(path.strip_prefix("/artifacts/").unwrap());
                assert_eq!(std::fs::read_to_string(file).unwrap(), big, "session {i}");
                checked += 2;
            }
            checked
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.expect("no task panics");
    }
    assert_eq!(total, SESSIONS * 6);
}
