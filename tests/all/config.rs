//! Config files: the examples load, and every bad config names what to fix.

use hookhost::Config;
use hookhost_tests::{TestHost, fixtures};
use serde_json::json;
use std::path::PathBuf;

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn every_example_config_loads_and_runs() {
    let files = examples();
    assert!(files.len() >= 3, "{files:?}");
    for file in files {
        let mut config = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
        // Upstream servers are started by the MCP tests, not here.
        config.plan.upstreams.clear();
        let data = tempfile::tempdir().unwrap();
        let runtime = hookhost::Runtime::new(config.plan, data.path())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            runtime.tools().iter().any(|t| t.name == "read_file"),
            "{}",
            file.display()
        );
    }
}

#[tokio::test]
async fn the_agent_example_runs_offload_audit_and_plan_writer_in_order() {
    let text = std::fs::read_to_string(
        examples()
            .iter()
            .find(|f| f.ends_with("agent.toml"))
            .unwrap(),
    )
    .unwrap();
    let host = TestHost::new(&text).await;
    let chain = host.runtime.chain(&hookhost::TenantId::default_tenant());
    let names: Vec<&str> = chain.layers().iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["offload", "audit", "plan-writer"]);
    let mut tools: Vec<String> = host
        .runtime
        .tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "bash",
            "echo",
            "edit_file",
            "read_file",
            "todo_write",
            "write_file"
        ]
    );

    let s = host.session().await;
    let r = host
        .call(&s, "bash", json!({"command": "seq 1 3000"}))
        .await;
    assert!(r.output.starts_with("[Output offloaded"), "{}", r.output);
    // audit runs inside offload: it logs the tool's own output size.
    let log = std::fs::read_to_string(host.data.path().join("tenants/default/audit/audit.jsonl"))
        .unwrap();
    let done: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(done["event"], "done");
    assert_eq!(
        done["output_bytes"],
        (1..=3000)
            .map(|i: u32| i.to_string().len() + 1)
            .sum::<usize>()
    );
}

/// Parses `text` as a config file and returns its error message.
fn error_of(text: &str) -> String {
    match Config::parse(text, "bad.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_configs_say_what_to_fix() {
    let probe = fixtures::PROBE_HOOK;
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            "[[hooks]]\nname = \"a\"\ncomponent = \"builtin:offload\"\nsetings = {}\n".into(),
            vec!["bad.toml", "line 4", "unknown field `setings`"],
        ),
        (
            "[[hooks]]\nname = \"a\"\ncomponent = \"/nowhere/hook.wasm\"\n".into(),
            vec!["bad.toml:3:", "hooks.a.component", "/nowhere/hook.wasm does not exist"],
        ),
        (
            "[[hooks]]\nname = \"a\"\ncomponent = \"builtin:nope\"\n".into(),
            vec!["bad.toml:3:", "hooks.a.component", "\"builtin:nope\" is not a built-in", "builtin:offload"],
        ),
        (
            format!("[[hooks]]\nname = \"a\"\ncomponent = {probe:?}\n\n[[hooks]]\nname = \"a\"\ncomponent = {probe:?}\n"),
            vec!["bad.toml:6:", "the name \"a\" is used twice"],
        ),
        (
            format!("[[hooks]]\nname = \"a\"\ncomponent = {probe:?}\ngrants = {{ \"/nope\" = \"rw\" }}\n"),
            vec!["bad.toml:4:", "hooks.a.grants", "\"/nope\" is not a declared mount", "/workspace"],
        ),
        (
            "[tools.reader]\ncomponent = \"builtin:read_file\"\ngrants = { \"/secret\" = \"ro\" }\n".into(),
            vec!["bad.toml:3:", "tools.reader.grants", "\"/secret\" is not a declared mount"],
        ),
        (
            "[mounts.\"/w\"]\nhost = \"{data}/{session}\"\nscope = \"session\"\n".into(),
            vec!["bad.toml:1:", "mounts", "must name {tenant} and {session}"],
        ),
        (
            "[mounts.\"/w\"]\nhost = \"{data}/shared\"\nscope = \"tenant\"\n".into(),
            vec!["bad.toml:1:", "must name {tenant}"],
        ),
        (
            "[bash]\nenabled = true\nmount = \"/nope\"\n".into(),
            vec!["bad.toml:3:", "bash.mount", "\"/nope\" is not a declared mount"],
        ),
        (
            "[[hooks]]\nname = \"a\"\ncomponent = \"builtin:offload\"\non_failure = \"maybe\"\n".into(),
            vec!["bad.toml", "line 4", "unknown variant `maybe`", "open", "closed"],
        ),
        (
            "[tools.read_file]\ncomponent = \"builtin:read_file\"\ngrants = { \"/workspace\" = \"write\" }\n".into(),
            vec!["bad.toml", "line 3", "unknown variant `write`"],
        ),
    ];
    for (text, needles) in cases {
        let msg = error_of(&text);
        for needle in needles {
            assert!(
                msg.contains(needle),
                "{needle:?} missing from:\n{msg}\nfor:\n{text}"
            );
        }
    }
}

#[tokio::test]
async fn a_component_of_the_wrong_world_fails_to_load_naming_it() {
    let config = Config::parse(
        &format!("[tools.probe]\ncomponent = {:?}\n", fixtures::PROBE_HOOK),
        "t.toml",
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let e = hookhost::Runtime::new(config.plan, data.path())
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("tools.probe") && e.contains("does not fit the `tool` world"),
        "{e}"
    );
}

/// A reload keeps a hook whose settings and file are unchanged (the same layer, with the
/// instances it keeps), and loads anew one whose file was rebuilt, saying so.
#[tokio::test]
async fn a_reload_keeps_unchanged_hooks_and_loads_rebuilt_ones() {
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.wasm");
    std::fs::copy(fixtures::PROBE_HOOK, &hook).unwrap();
    let text =
        format!("[[hooks]]\nname = \"h\"\ncomponent = {hook:?}\ninstance = \"per-session\"\n");
    let plan = || Config::parse(&text, "test.toml").unwrap().plan;
    let host = TestHost::new(&text).await;
    let tenant = hookhost::TenantId::default_tenant();
    let first = host.runtime.chain(&tenant).layers()[0].clone();

    let same = host.runtime.reload(plan()).await.unwrap();
    assert_eq!(same.to_string(), "nothing changed");
    assert!(std::sync::Arc::ptr_eq(
        &first,
        &host.runtime.chain(&tenant).layers()[0]
    ));

    std::fs::copy(fixtures::OUTCOME_HOOK, &hook).unwrap();
    let rebuilt = host.runtime.reload(plan()).await.unwrap();
    assert_eq!(rebuilt.hooks.changed, ["h"], "{rebuilt}");
    assert!(!std::sync::Arc::ptr_eq(
        &first,
        &host.runtime.chain(&tenant).layers()[0]
    ));
    // The rebuilt hook (the outcome hook, which says what it saw) runs around the
    // embedder's tool, which stays through reloads.
    let s = host.session().await;
    let echoed = host.call(&s, "echo", json!({"output": "kept"})).await;
    assert!(
        echoed.output.starts_with("kept[outcome: done"),
        "{}",
        echoed.output
    );
}

/// A reload puts everything the config says of a tenant in effect at once, for a session
/// opened before it, from its next call: its rate's state carries over while its limits
/// stay the same (a call running still counts) and starts afresh when they change; its
/// new allow-list binds; once it is no longer declared its calls are refused.
#[tokio::test]
async fn a_reload_puts_a_tenants_declaration_in_effect_at_once_for_open_sessions() {
    use hookhost::runtime::{CallError, Rate};
    let alpha = hookhost::TenantId::new("alpha").unwrap();
    let config = |rate: &str, tools: &str, extra: &str| {
        format!(
            "[tenants.alpha]\nrate = {{ concurrent = {rate} }}\ntools = [{tools:?}]\n{extra}[tenants.beta]\n"
        )
    };
    let plan = |text: &str| Config::parse(text, "test.toml").unwrap().plan;
    let host = TestHost::new(&config("1", "echo", "")).await;
    let session = host
        .runtime
        .sessions()
        .create(alpha.clone(), None, None)
        .await
        .unwrap();
    let running = host
        .runtime
        .admit(&session, "echo", Rate::Counted)
        .await
        .unwrap();

    // The same limit, another setting: the call running still holds the one place.
    let reloaded = host
        .runtime
        .reload(plan(&config("1", "echo", "trace = false\n")))
        .await
        .unwrap();
    assert_eq!(reloaded.tenants.changed, ["alpha"], "{reloaded}");
    let refused = host.runtime.call(&session, "echo", "{}").await.unwrap_err();
    assert!(matches!(refused, CallError::RateLimited(_)), "{refused}");
    // A new limit starts afresh.
    host.runtime
        .reload(plan(&config("2", "echo", "")))
        .await
        .unwrap();
    let called = host.runtime.call(&session, "echo", "{}").await.unwrap();
    assert!(!called.is_error, "{}", called.output);
    drop(running);

    host.runtime
        .reload(plan(&config("2", "read_*", "")))
        .await
        .unwrap();
    let refused = host.runtime.call(&session, "echo", "{}").await.unwrap_err();
    assert!(
        matches!(refused, CallError::UnknownTool { .. }),
        "{refused}"
    );

    host.runtime.reload(plan("[tenants.beta]\n")).await.unwrap();
    let refused = host.runtime.call(&session, "echo", "{}").await.unwrap_err();
    assert!(
        refused.to_string().contains("\"alpha\" is not declared"),
        "{refused}"
    );
}
