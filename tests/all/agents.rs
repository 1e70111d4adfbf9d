//! An agent's pre-tool and post-tool hooks answered by the real host and the probe hook,
//! each event by a runtime of its own (as two `hookhost hook` processes are).

use hookhost::agents::protocol::Options;
use hookhost::agents::{Agent, Event, HookSettings, answer_hook};
use hookhost::{Config, Runtime, TenantId};
use hookhost_tests::probe_chain;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// Answers `event` of Claude Code with `input`, in a new runtime over `data`.
async fn answer(config: &str, data: &Path, event: Event, input: &Value) -> Value {
    let config = Config::parse(config, "test.toml").expect("test config is valid");
    let settings = HookSettings {
        tenant: TenantId::default_tenant(),
        subject: None,
        options: Options::default(),
        trust_cwd: true,
        closed_tools: None,
    };
    let stdin = input.to_string();
    let answer = answer_hook(
        Agent::ClaudeCode,
        event,
        &settings,
        Duration::from_secs(30),
        stdin.as_bytes(),
        None,
        || async { Ok(Runtime::new(config.plan.clone(), data).await?) },
    )
    .await;
    assert_eq!(answer.exit, 0, "{:?}", answer.stderr);
    if answer.stdout.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&answer.stdout).unwrap()
    }
}

fn bash(event: &str, id: &str, response: Option<&str>) -> Value {
    let mut input = json!({
        "session_id": "agent-session", "cwd": "/", "hook_event_name": event,
        "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": id,
    });
    if let Some(stdout) = response {
        input["tool_response"] =
            json!({"stdout": stdout, "stderr": "", "interrupted": false, "isImage": false});
    }
    input
}

#[tokio::test]
async fn a_rewrite_is_the_updated_input_and_after_execute_runs_innermost_first_in_the_next_process()
{
    let data = tempfile::tempdir().unwrap();
    let config = probe_chain(&[("a", "pass", "open"), ("b", "rewrite", "open")]).replace(
        "mode = \"rewrite\"",
        "mode = \"rewrite\", arguments = '{\"command\":\"ls -l\"}'",
    );
    let pre = answer(
        &config,
        data.path(),
        Event::PreTool,
        &bash("PreToolUse", "t1", None),
    )
    .await;
    // Rewritten, not approved: Claude Code's own permissions still decide.
    assert_eq!(
        pre,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "ls -l"}}})
    );
    let post = answer(
        &config,
        data.path(),
        Event::PostTool,
        &bash("PostToolUse", "t1", Some("x")),
    )
    .await;
    assert_eq!(
        post["hookSpecificOutput"]["updatedToolOutput"]["stdout"],
        "x|after:b|after:a"
    );
    assert!(
        !data
            .path()
            .join("hook-calls/default/agent-session")
            .read_dir()
            .unwrap()
            .any(|_| true),
        "the call's pending state outlived its post-tool event"
    );
}

#[tokio::test]
async fn a_refusal_or_a_closed_layers_failure_denies_the_call() {
    let data = tempfile::tempdir().unwrap();
    let config = probe_chain(&[
        ("a", "pass", "open"),
        ("b", "refuse", "open"),
        ("c", "pass", "open"),
    ]);
    let pre = answer(
        &config,
        data.path(),
        Event::PreTool,
        &bash("PreToolUse", "t2", None),
    )
    .await;
    assert_eq!(pre["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(
        pre["hookSpecificOutput"]["permissionDecisionReason"],
        "refused by b"
    );
    // A trap in a closed layer denies too; in an open one the call goes on.
    for (on_failure, denied) in [("closed", true), ("open", false)] {
        let config = probe_chain(&[("t", "trap-before", on_failure)]);
        let pre = answer(
            &config,
            data.path(),
            Event::PreTool,
            &bash("PreToolUse", "t3", None),
        )
        .await;
        assert_eq!(pre != Value::Null, denied, "{on_failure}: {pre}");
    }
}
