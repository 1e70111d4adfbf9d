//! Components written to break the host: loops, memory growth, huge outputs, disk filling,
//! imports that are not granted. Each gets the outcome its policy says, is named in the
//! audit log, and the host goes on serving other tenants.

use hookhost::{SessionError, TenantId};
use hookhost_tests::{TestHost, fixtures};
use serde_json::{Value, json};

/// A host with tenant `evil` behind [audit, hostile] and tenant `good` behind [audit].
async fn host_with(mode: &str, policy: &str, limits: &str, extra: &str) -> TestHost {
    TestHost::new(&format!(
        r#"
[[hooks]]
name = "audit"
component = "builtin:audit"
grants = {{ "/audit" = "rw" }}

[[hooks]]
name = "hostile"
component = {probe:?}
on_failure = {policy:?}
grants = {{ "/workspace" = "rw" }}
settings = {{ tag = "hostile", mode = {mode:?} {extra} }}
limits = {{ {limits} }}

[tenants.evil]
hooks = ["audit", "hostile"]

[tenants.good]
hooks = ["audit"]
"#,
        probe = fixtures::PROBE_HOOK
    ))
    .await
}

fn tenant(name: &str) -> TenantId {
    TenantId::new(name).unwrap()
}

/// The last audit line of `tenant`.
fn last_audit(host: &TestHost, tenant: &str) -> Value {
    let log = std::fs::read_to_string(
        host.data
            .path()
            .join(format!("tenants/{tenant}/audit/audit.jsonl")),
    )
    .unwrap();
    serde_json::from_str(log.lines().last().unwrap()).unwrap()
}

/// Calls echo as tenant `evil`, checks the result and the audit reason, then checks that
/// tenant `good` is served exactly.
async fn expect(host: &TestHost, output: &str, reason: &str) {
    let evil = host
        .runtime
        .sessions()
        .create(tenant("evil"), None, None)
        .await
        .unwrap();
    let r = host.call(&evil, "echo", json!({})).await;
    assert_eq!(r.output, output);
    let line = last_audit(host, "evil");
    assert_eq!(line["event"], "failed", "{line}");
    assert_eq!(line["reason"], reason, "{line}");

    let good = host
        .runtime
        .sessions()
        .create(tenant("good"), None, None)
        .await
        .unwrap();
    let r = host
        .call(&good, "echo", json!({"output": "still serving"}))
        .await;
    assert_eq!((r.output.as_str(), r.is_error), ("still serving", false));
}

#[tokio::test]
async fn infinite_loops_stop_at_the_deadline() {
    let limits = "deadline_ms = 300";
    let host = host_with("loop-before", "open", limits, "").await;
    expect(
        &host,
        "tool(args={}, trace=)",
        "hook 'hostile' before-execute: timeout",
    )
    .await;
    let host = host_with("loop-before", "closed", limits, "").await;
    expect(
        &host,
        "call refused: hook 'hostile' failed in before-execute (timeout)",
        "hook 'hostile' before-execute: timeout",
    )
    .await;
    let host = host_with("loop-after", "open", limits, "").await;
    expect(
        &host,
        "tool(args={}, trace=before:hostile;)",
        "hook 'hostile' after-execute: timeout",
    )
    .await;
    let host = host_with("loop-after", "closed", limits, "").await;
    expect(
        &host,
        "output withheld: hook 'hostile' failed in after-execute (timeout)",
        "hook 'hostile' after-execute: timeout",
    )
    .await;
}

#[tokio::test]
async fn a_hook_waiting_in_the_host_stops_at_its_deadline() {
    // It sleeps a minute in `wasi:clocks`, where epoch interruption cannot reach it; the
    // host's own timer stops it. (A host that waited out the sleep would take 60 s here.)
    let started = std::time::Instant::now();
    let host = host_with(
        "sleep-before",
        "closed",
        "deadline_ms = 300",
        ", ms = \"60000\"",
    )
    .await;
    expect(
        &host,
        "call refused: hook 'hostile' failed in before-execute (timeout)",
        "hook 'hostile' before-execute: timeout",
    )
    .await;
    let host = host_with(
        "sleep-before",
        "open",
        "deadline_ms = 300",
        ", ms = \"60000\"",
    )
    .await;
    expect(
        &host,
        "tool(args={}, trace=)",
        "hook 'hostile' before-execute: timeout",
    )
    .await;
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[tokio::test]
async fn fuel_stops_a_loop_before_its_deadline() {
    let host = host_with(
        "loop-before",
        "closed",
        "fuel = 5000000, deadline_ms = 60000",
        "",
    )
    .await;
    expect(
        &host,
        "call refused: hook 'hostile' failed in before-execute (fuel)",
        "hook 'hostile' before-execute: fuel",
    )
    .await;
}

#[tokio::test]
async fn memory_growth_stops_at_the_cap() {
    let host = host_with("grow-memory", "closed", "memory_bytes = 16777216", "").await;
    expect(
        &host,
        "call refused: hook 'hostile' failed in before-execute (memory)",
        "hook 'hostile' before-execute: memory",
    )
    .await;
}

#[tokio::test]
async fn a_huge_output_is_refused() {
    // The media type counts toward the cap as well.
    for mode in ["huge-output", "huge-media-type"] {
        let host = host_with(
            mode,
            "closed",
            "max_output_bytes = 1048576",
            ", bytes = \"2000000\"",
        )
        .await;
        expect(
            &host,
            "output withheld: hook 'hostile' failed in after-execute (output-too-large)",
            "hook 'hostile' after-execute: output-too-large",
        )
        .await;
    }
    let host = host_with(
        "huge-output",
        "open",
        "max_output_bytes = 1048576",
        ", bytes = \"2000000\"",
    )
    .await;
    expect(
        &host,
        "tool(args={}, trace=before:hostile;)",
        "hook 'hostile' after-execute: output-too-large",
    )
    .await;
}

#[tokio::test]
async fn empty_files_count_and_a_call_is_stopped_once_over_the_quota() {
    let host = TestHost::new(&format!(
        r#"
[[hooks]]
name = "toucher"
component = {probe:?}
grants = {{ "/workspace" = "rw" }}
settings = {{ tag = "toucher", mode = "touch-files" }}
limits = {{ deadline_ms = 60000 }}

[tenants.small]
disk_quota_files = 100
"#,
        probe = fixtures::PROBE_HOOK
    ))
    .await;
    let s = host
        .runtime
        .sessions()
        .create(tenant("small"), None, None)
        .await
        .unwrap();
    // The hook would make a million empty files; the quota stops it long before.
    let r = host.call(&s, "echo", json!({})).await;
    assert!(
        r.is_error
            && r.output
                .starts_with("disk quota exceeded: the call took tenant 'small' to "),
        "{}",
        r.output
    );
    let usage = host.runtime.sessions().usage(&s).await.unwrap();
    assert!(
        usage.tenant.entries > 100 && usage.tenant.entries < 1_000_000,
        "{usage:?}"
    );
    // Over the quota, the next call is on probation: the hook's files are stopped again,
    // past the little room such a call has, and the agent is told the rule.
    let r = host.call(&s, "echo", json!({})).await;
    assert!(
        r.is_error
            && r.output
                .starts_with("disk quota exceeded: the call took tenant 'small' to ")
            && r.output
                .contains("only a call that deletes or shrinks files"),
        "{}",
        r.output
    );
}

#[tokio::test]
async fn running_out_of_resource_handles_is_an_error_the_guest_sees_not_a_trap() {
    let host = host_with("open-many", "closed", "max_resources = 100", "").await;
    let s = host
        .runtime
        .sessions()
        .create(tenant("evil"), None, None)
        .await
        .unwrap();
    let r = host.call(&s, "echo", json!({})).await;
    assert!(!r.is_error, "{}", r.output);
    let opened: u32 = r
        .output
        .split("|opened:")
        .nth(1)
        .and_then(|rest| rest.split('|').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.output));
    assert!(opened > 0 && opened < 100, "{opened}");
}

#[tokio::test]
async fn a_panic_is_a_trap() {
    let host = host_with("trap-before", "closed", "", "").await;
    expect(
        &host,
        "call refused: hook 'hostile' failed in before-execute (trap)",
        "hook 'hostile' before-execute: trap",
    )
    .await;
}

#[tokio::test]
async fn writes_past_the_disk_quota_fail_the_call_and_the_next_that_writes() {
    let host = TestHost::new(&format!(
        r#"
[[hooks]]
name = "filler"
component = {probe:?}
tools = ["echo"]
grants = {{ "/workspace" = "rw" }}
settings = {{ tag = "filler", mode = "fill-disk" }}

[tools.write_file]
component = "builtin:write_file"
grants = {{ "/workspace" = "rw" }}

[tenants.small]
disk_quota_bytes = 1048576
max_sessions = 2

[tenants.other]
"#,
        probe = fixtures::PROBE_HOOK
    ))
    .await;
    let small = tenant("small");
    let s = host
        .runtime
        .sessions()
        .create(small.clone(), None, None)
        .await
        .unwrap();
    let r = host
        .call(
            &s,
            "write_file",
            json!({"path": "ok.txt", "content": "fits"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.output);

    let r = host.call(&s, "echo", json!({})).await;
    assert!(r.is_error);
    // Stopped while writing, or withheld when it ended: which depends on the disk's speed.
    assert!(
        r.output.starts_with("disk quota exceeded: the call ")
            && r.output.contains("tenant 'small'"),
        "{}",
        r.output
    );
    let usage = host.runtime.sessions().usage(&s).await.unwrap();
    assert_eq!(usage.quota.bytes, Some(1_048_576));
    assert!(
        usage.tenant.bytes > 1_048_576 && usage.session.bytes == usage.tenant.bytes,
        "{usage:?}"
    );

    // Over it, a call that writes has its output withheld, with the rule.
    let r = host
        .call(
            &s,
            "write_file",
            json!({"path": "more.txt", "content": "x"}),
        )
        .await;
    assert!(
        r.is_error
            && r.output
                .starts_with("disk quota exceeded: the call left tenant 'small' with ")
            && r.output
                .contains("only a call that deletes or shrinks files"),
        "{}",
        r.output
    );

    // Another tenant is not affected; deleting the session frees the quota.
    let o = host
        .runtime
        .sessions()
        .create(tenant("other"), None, None)
        .await
        .unwrap();
    let r = host
        .call(&o, "write_file", json!({"path": "a.txt", "content": "x"}))
        .await;
    assert!(!r.is_error, "{}", r.output);
    host.runtime.sessions().delete(&small, &s.id).await.unwrap();
    let s = host
        .runtime
        .sessions()
        .create(small.clone(), None, None)
        .await
        .unwrap();
    let r = host
        .call(
            &s,
            "write_file",
            json!({"path": "ok.txt", "content": "fits"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.output);

    // Sessions are capped too, and undeclared tenants have none.
    host.runtime
        .sessions()
        .create(small.clone(), None, None)
        .await
        .unwrap();
    assert!(matches!(
        host.runtime.sessions().create(small, None, None).await,
        Err(SessionError::TooManySessions { max: 2, .. })
    ));
    assert!(matches!(
        host.runtime
            .sessions()
            .create(tenant("stranger"), None, None)
            .await,
        Err(SessionError::UnknownTenant { .. })
    ));
}

#[tokio::test]
async fn an_import_the_host_does_not_grant_fails_the_load_naming_it() {
    let config = |allow: bool, policy: &str| {
        format!(
            "[[hooks]]\nname = \"importer\"\ncomponent = {:?}\non_failure = {policy:?}\nallow_unknown_imports = {allow}\n",
            fixtures::IMPORT_HOOK
        )
    };
    let parsed = hookhost::Config::parse(&config(false, "open"), "t.toml").unwrap();
    let data = tempfile::tempdir().unwrap();
    let e = hookhost::Runtime::new(parsed.plan, data.path())
        .await
        .err()
        .expect("refused");
    // The reason is the error's source, said on the line with its causes.
    let e = hookhost::error_line(&e);
    assert!(
        e.contains("hooks.importer")
            && e.contains(
                "it imports hookhost-test:backdoor/exfiltrate, which this host does not provide"
            ),
        "{e}"
    );

    // Allowed to load, the import traps when called; the policy decides.
    let host = TestHost::new(&config(true, "open")).await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(r.output, "tool(args={}, trace=)");
    let host = TestHost::new(&config(true, "closed")).await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(
        r.output,
        "call refused: hook 'importer' failed in before-execute (trap)"
    );
}
