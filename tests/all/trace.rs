//! The host's trace of a session: every layer's outcome and every file a component
//! changed, checked against the files on disk.

use hookhost::trace::EVENTS_FILE;
use hookhost::{Session, TenantId};
use hookhost_tests::{TestHost, fixtures, host_path};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The session's trace events, in order.
fn events(session: &Session) -> Vec<Value> {
    let path = session.host_dir("/artifacts").unwrap().join(EVENTS_FILE);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON event"))
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `(kind, layer)` of each event of `call`, leaving out `filesystem.mounted`.
fn layers_of(events: &[Value], call: &str) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["call"] == call && e["kind"] != "filesystem.mounted")
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                e["layer"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect()
}

fn probe(name: &str, mode: &str, tools: &str, extra: &str) -> String {
    format!(
        "[[hooks]]\nname = {name:?}\ncomponent = {:?}\ntools = [{tools:?}]\ngrants = {{ \"/workspace\" = \"rw\" }}\nsettings = {{ tag = {name:?}, mode = {mode:?}{extra} }}\n\n",
        fixtures::PROBE_HOOK
    )
}

#[tokio::test]
async fn an_offloaded_output_is_traced_with_the_size_and_hash_of_the_file_on_disk() {
    let host = TestHost::builtin().await;
    let session = host.session().await;
    let result = host
        .call(
            &session,
            "bash",
            serde_json::json!({"command": "seq 1 5000"}),
        )
        .await;
    assert!(result.output.contains("/artifacts/tool-results/bash/"));
    let events = events(&session);
    let call = events.last().unwrap()["call"].as_str().unwrap().to_string();

    let order: Vec<(String, String)> = layers_of(&events, &call)
        .into_iter()
        .filter(|(kind, _)| !kind.starts_with("file."))
        .collect();
    let expected = [
        ("hook.before", "offload"),
        ("hook.before", "audit"),
        ("tool.executed", "bash"),
        ("hook.after", "audit"),
        ("hook.after", "offload"),
        ("call.finished", "-"),
    ];
    assert_eq!(
        order,
        expected.map(|(k, l)| (k.to_string(), l.to_string())),
        "{events:#?}"
    );
    for event in &events {
        assert_eq!(event["v"], 1);
        assert_eq!(event["tenant"], "default");
        assert_eq!(event["session"], session.id.as_str());
    }

    let created = of_kind(&events, "file.created");
    let offloaded = created
        .iter()
        .find(|e| e["layer"] == "offload")
        .expect("offload's file is traced");
    assert_eq!(offloaded["phase"], "after-execute");
    let path = offloaded["path"].as_str().unwrap();
    let on_disk = std::fs::read(host_path(&session, path)).unwrap();
    assert_eq!(offloaded["after_bytes"], on_disk.len());
    assert_eq!(offloaded["after_sha256"], sha256(&on_disk));
    // Its diff is too large to inline: written beside the trace, referenced.
    assert!(offloaded.get("diff").is_none());
    let reference = offloaded["diff_ref"].as_str().unwrap();
    let diff = std::fs::read_to_string(host_path(&session, reference)).unwrap();
    assert!(diff.contains("+2500\n"));
    // No event holds the file's content.
    let text = serde_json::to_string(&events).unwrap();
    assert!(
        !text.contains("2500\\n2501"),
        "content leaked into an event"
    );

    let mounted = of_kind(&events, "filesystem.mounted");
    let mounts: Vec<&str> = mounted
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(mounts, ["/artifacts", "/audit", "/workspace"]);
    assert!(mounted.iter().all(|e| e["writable"] == true));
    let finished = of_kind(&events, "call.finished");
    assert_eq!(finished[0]["outcome"], "done");
    assert_eq!(finished[0]["output_bytes"], result.output.len());

    // A second call announces nothing again, and sees the audit log grow.
    host.call(&session, "bash", serde_json::json!({"command": "true"}))
        .await;
    let events = self::events(&session);
    assert_eq!(of_kind(&events, "filesystem.mounted").len(), 3);
    let audit = std::fs::read(session.host_dir("/audit").unwrap().join("audit.jsonl")).unwrap();
    let last_audit = of_kind(&events, "file.updated")
        .into_iter()
        .rfind(|e| e["path"] == "/audit/audit.jsonl")
        .unwrap();
    assert_eq!(last_audit["after_sha256"], sha256(&audit));
    assert!(last_audit["diff"].as_str().unwrap().contains("\n+{"));
}

#[tokio::test]
async fn files_a_hook_creates_rewrites_and_deletes_are_attributed_to_it() {
    let config = format!(
        "[bash]\nenabled = true\n\n{}{}{}",
        probe(
            "writer",
            "write-file",
            "echo",
            ", path = \"/workspace/notes.txt\", content = \"one\\ntwo\\n\""
        ),
        probe(
            "rewriter",
            "write-file",
            "echo",
            ", path = \"/workspace/notes.txt\", content = \"one\\nthree\\n\""
        ),
        probe(
            "deleter",
            "delete-file",
            "bash",
            ", path = \"/workspace/notes.txt\""
        ),
    );
    let host = TestHost::new(&config).await;
    let session = host.session().await;
    host.call(&session, "echo", serde_json::json!({"output": "x"}))
        .await;
    let on_disk = std::fs::read(session.host_dir("/workspace").unwrap().join("notes.txt")).unwrap();
    let events = events(&session);

    let created = of_kind(&events, "file.created");
    assert_eq!(created.len(), 1, "{events:#?}");
    assert_eq!(created[0]["layer"], "writer");
    assert_eq!(created[0]["path"], "/workspace/notes.txt");
    assert_eq!(created[0]["after_bytes"], 8);
    assert_eq!(created[0]["after_sha256"], sha256(b"one\ntwo\n"));

    let updated = of_kind(&events, "file.updated");
    assert_eq!(updated.len(), 1);
    let updated = updated[0];
    assert_eq!(updated["layer"], "rewriter");
    assert_eq!(updated["phase"], "before-execute");
    assert_eq!(updated["before_sha256"], sha256(b"one\ntwo\n"));
    assert_eq!(updated["after_sha256"], sha256(&on_disk));
    assert_eq!(updated["after_bytes"], on_disk.len());
    let diff = updated["diff"].as_str().unwrap();
    assert!(diff.contains("-two\n+three\n"), "{diff}");

    host.call(&session, "bash", serde_json::json!({"command": "true"}))
        .await;
    let events = self::events(&session);
    let deleted = of_kind(&events, "file.deleted");
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0]["layer"], "deleter");
    assert_eq!(deleted[0]["before_sha256"], sha256(&on_disk));
    assert!(deleted[0].get("after_sha256").is_none());
}

#[tokio::test]
async fn a_trapping_hook_fails_and_a_refusal_runs_no_tool() {
    let config = format!(
        "[bash]\nenabled = true\n\n{}{}",
        probe("trapper", "trap-before", "echo", ""),
        probe("refuser", "refuse", "bash", ""),
    );
    let host = TestHost::new(&config).await;
    let session = host.session().await;
    host.call(&session, "echo", serde_json::json!({"output": "x"}))
        .await;
    let refused = host
        .call(&session, "bash", serde_json::json!({"command": "touch x"}))
        .await;
    assert!(refused.is_error);
    let events = events(&session);

    let failed = of_kind(&events, "hook.failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_eq!(failed[0]["layer"], "trapper");
    assert_eq!(failed[0]["failure"], "trap");
    assert!(
        failed[0]["stderr"]
            .as_str()
            .unwrap()
            .contains("probe trapper traps")
    );
    assert!(failed[0]["duration_us"].is_u64());

    let refusals = of_kind(&events, "hook.refused");
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0]["message"], "refused by refuser");
    let call = refusals[0]["call"].as_str().unwrap();
    let kinds: Vec<String> = layers_of(&events, call)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(kinds, ["hook.refused", "call.finished"]);
    let finished = of_kind(&events, "call.finished");
    assert_eq!(finished[0]["outcome"], "done");
    assert_eq!(finished[1]["outcome"], "refused");
}

#[tokio::test]
async fn a_planted_symlink_is_reported_as_a_link_and_never_followed() {
    let host = TestHost::new(&probe("escaper", "escape", "echo", "")).await;
    let session = host.session().await;
    host.call(&session, "echo", serde_json::json!({"output": "x"}))
        .await;
    let events = events(&session);
    let link = of_kind(&events, "file.created")
        .into_iter()
        .find(|e| e["path"] == "/workspace/guest-link")
        .expect("the link is traced");
    assert_eq!(link["layer"], "escaper");
    assert_eq!(link["after_type"], "symlink");
    assert_eq!(link["after_link"], "../../../../../../../../etc/passwd");
    assert!(link.get("after_sha256").is_none());
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains("root:"), "a link's target was read");
}

#[tokio::test]
async fn a_tenant_can_be_left_untraced() {
    let config = format!(
        "{}[tenants.quiet]\ntrace = false\n\n[tenants.loud]\n",
        probe(
            "writer",
            "write-file",
            "echo",
            ", path = \"/workspace/a\", content = \"a\""
        )
    );
    let host = TestHost::new(&config).await;
    for (tenant, traced) in [("quiet", false), ("loud", true)] {
        let session = host
            .runtime
            .sessions()
            .create(TenantId::new(tenant).unwrap(), None, None)
            .await
            .unwrap();
        host.call(&session, "echo", serde_json::json!({"output": "x"}))
            .await;
        assert_eq!(!events(&session).is_empty(), traced, "{tenant}");
    }
}

#[tokio::test]
async fn an_audit_log_past_the_diff_limit_reports_each_append_and_the_whole_hash() {
    let host = TestHost::builtin().await;
    let session = host.session().await;
    let log = session.host_dir("/audit").unwrap().join("audit.jsonl");
    // Past 64 KiB, the log is too large to keep for a diff: appends are read alone.
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, "{}\n".repeat(30_000)).unwrap();
    for _ in 0..3 {
        host.call(&session, "bash", serde_json::json!({"command": "true"}))
            .await;
    }
    let on_disk = std::fs::read(&log).unwrap();
    let events = events(&session);
    let appends: Vec<&Value> = of_kind(&events, "file.updated")
        .into_iter()
        .filter(|e| e["path"] == "/audit/audit.jsonl" && e.get("appended_from").is_some())
        .collect();
    assert!(appends.len() >= 4, "{events:#?}");
    for append in &appends {
        let from = append["appended_from"].as_u64().unwrap() as usize;
        let to = append["after_bytes"].as_u64().unwrap() as usize;
        assert_eq!(append["appended_sha256"], sha256(&on_disk[from..to]));
        assert_eq!(append["after_sha256"], sha256(&on_disk[..to]));
        assert!(append.get("diff").is_none());
    }
    let last = appends.last().unwrap();
    assert_eq!(last["after_bytes"], on_disk.len());
}

/// A one-shot process (`hookhost call`, `hook …`) starts with no trace state: its first
/// look takes the session's trace file as the processes before it left it, unread however
/// long the session's history, and a hook that rewrites it is still reported.
#[tokio::test]
async fn a_one_shot_process_leaves_the_trace_file_unread_yet_reports_a_hook_rewriting_it() {
    use hookhost::{Config, OneShot, Runtime};
    let data = tempfile::tempdir().unwrap();
    let one_shot = |config: &str| {
        let plan = Config::parse(config, "test.toml").unwrap().plan;
        let data = data.path().to_path_buf();
        async move {
            let mut runtime = Runtime::new(plan.one_shot(OneShot::Calls), &data)
                .await
                .unwrap();
            runtime
                .register_tool(std::sync::Arc::new(hookhost_tests::EchoTool::default()))
                .unwrap();
            runtime
        }
    };
    let echo = serde_json::json!({"output": "x"}).to_string();

    // An earlier process: the session and its trace file, then a long history in it.
    let earlier = one_shot("").await;
    let session = earlier
        .sessions()
        .create(TenantId::default_tenant(), None, None)
        .await
        .unwrap();
    earlier.call(&session, "echo", &echo).await.unwrap();
    drop(earlier);
    let trace = session.host_dir("/artifacts").unwrap().join(EVENTS_FILE);
    let history = "{\"kind\":\"history\"}\n".repeat(16 * 1024);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&trace)
        .unwrap();
    std::io::Write::write_all(&mut file, history.as_bytes()).unwrap();

    // The next process: a hook granted the trace mount rewrites the trace file.
    let forger = format!(
        "[[hooks]]\nname = \"forger\"\ncomponent = {:?}\ntools = [\"echo\"]\ngrants = {{ \"/artifacts\" = \"rw\" }}\nsettings = {{ tag = \"forger\", mode = \"write-file\", path = \"/artifacts/trace/events.jsonl\", content = \"{{}}\\n\" }}\n",
        fixtures::PROBE_HOOK
    );
    let next = one_shot(&forger).await;
    let session = next
        .sessions()
        .open(&TenantId::default_tenant(), &session.id)
        .await
        .unwrap();
    next.call(&session, "echo", &echo).await.unwrap();

    let events = events(&session);
    let updated = of_kind(&events, "file.updated");
    assert_eq!(updated.len(), 1, "{events:#?}");
    let updated = updated[0];
    assert_eq!(updated["layer"], "forger");
    assert_eq!(updated["path"], "/artifacts/trace/events.jsonl");
    assert!(
        updated["before_bytes"].as_u64().unwrap() > history.len() as u64,
        "{updated:#}"
    );
    assert!(updated["before_sha256"].is_null(), "not read: {updated:#}");
    assert_eq!(updated["before_unhashed"], "first-look");
    assert!(updated["after_sha256"].is_string(), "{updated:#}");
}
