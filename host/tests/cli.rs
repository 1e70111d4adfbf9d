//! The `hookhost` command line, run as a process.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

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
    let visible = std::fs::read_dir(plans)
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(visible, 1, "the plan in the git workdir stays");

    let gone = hookhost(data.path(), &["call", "--session", &id, "bash", "{}"]);
    assert_eq!(gone.status.code(), Some(2));

    let gc = hookhost(data.path(), &["session", "gc", "--idle", "1h"]);
    assert_eq!(
        stdout(&gc),
        "deleted 0 idle sessions; removed 0 orphaned session directories and 0 stale temporary files\n"
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

fn hookhost_with(data: &Path, config: &Path, args: &[&str]) -> Output {
    let mut full = vec!["--config", config.to_str().unwrap()];
    full.extend_from_slice(args);
    hookhost(data, &full)
}

fn example(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

#[test]
fn an_unsandboxed_bash_keeps_what_a_command_printed_before_leaving_a_background_child() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("unsandboxed.toml");
    std::fs::write(&config, "[bash]\nenabled = true\nsandbox = false\n").unwrap();
    let marker = common::marker("background");
    let started = std::time::Instant::now();
    let out = hookhost_with(
        data.path(),
        &config,
        &[
            "call",
            "--json",
            "bash",
            &serde_json::json!({"command": format!("({}) & echo started", common::marked_sleep(&marker, 30))})
                .to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let output = v["output"].as_str().unwrap();
    assert!(output.starts_with("started\n"), "{output}");
    assert!(
        output.contains("a background process still holds it open"),
        "{output}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "did not wait for the background child"
    );
    // The child ended with the one-shot process, its host: its guard saw it go.
    let gone = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(25));
        common::processes_with(&marker).is_empty()
    });
    assert!(
        gone,
        "outlived its host: {:?}",
        common::processes_with(&marker)
    );
}

#[test]
fn the_agent_example_works_in_the_git_repository_it_is_given() {
    let data = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap()
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("a.txt"), "a\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "first"]);
    // The header of examples/agent.toml, as a user runs it.
    let config = example("agent.toml");
    let new = hookhost_with(
        data.path(),
        &config,
        &["session", "new", "--workdir", repo.path().to_str().unwrap()],
    );
    assert!(new.status.success(), "{}", stderr(&new));
    let id = stdout(&new).trim().to_string();
    let log = hookhost_with(
        data.path(),
        &config,
        &[
            "call",
            "--session",
            &id,
            "bash",
            r#"{"command":"git log --oneline -3"}"#,
        ],
    );
    assert!(log.status.success(), "{}", stdout(&log));
    assert!(stdout(&log).contains("first"), "{}", stdout(&log));
    // Deleting the session leaves the repository alone.
    assert!(
        hookhost_with(data.path(), &config, &["session", "delete", &id])
            .status
            .success()
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        "a\n"
    );
    assert!(repo.path().join(".git").is_dir());
}

#[test]
fn an_audit_hook_that_cannot_write_fails_closed_and_says_why() {
    let data = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(example("audited-readonly.toml"))
        .unwrap()
        .replace("/audit/readonly-agent.jsonl", "/audit/2026/x.jsonl");
    let config = data.path().join("audit.toml");
    std::fs::write(&config, text).unwrap();
    let out = hookhost_with(
        data.path(),
        &config,
        &["call", "read_file", r#"{"path":"/artifacts/none"}"#],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("hook 'audit' failed in before-execute (trap)"),
        "{}",
        stdout(&out)
    );
    // The guest's own reason reaches the log.
    assert!(
        stderr(&out).contains("audit: cannot append to /audit/2026/x.jsonl"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn mistyped_or_unknown_settings_of_a_built_in_are_refused_at_load() {
    let data = tempfile::tempdir().unwrap();
    for (settings, needle) in [
        (
            "{ treshold = 100 }",
            "builtin:offload has no setting \"treshold\"",
        ),
        (
            "{ threshold = \"ten thousand\" }",
            "settings.threshold: must be a non-negative integer",
        ),
    ] {
        let config = data.path().join("bad.toml");
        std::fs::write(
            &config,
            format!(
                "[[hooks]]\nname = \"o\"\ncomponent = \"builtin:offload\"\nsettings = {settings}\n"
            ),
        )
        .unwrap();
        let out = hookhost(data.path(), &["config", "check", config.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
        assert!(stderr(&out).contains("bad.toml:4:"), "{}", stderr(&out));
        // The first start asks the hook and remembers; the second reads what it said.
        // An entry that does not parse is asked again.
        let remembered: Vec<_> = std::fs::read_dir(data.path().join("cache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".settings.json"))
            .collect();
        assert_eq!(remembered.len(), 1, "{remembered:?}");
        std::fs::write(&remembered[0], "not json").unwrap();
    }
}

/// A tool's description is asked once per component (and settings), then read from beside
/// its compiled code: a one-shot command makes no instance to describe its tools.
#[test]
fn a_tools_description_is_remembered_beside_its_compiled_code() {
    let data = tempfile::tempdir().unwrap();
    let remembered = || -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(data.path().join("cache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(".tool-"))
            .collect();
        files.sort();
        files
    };
    assert!(hookhost(data.path(), &["tools"]).status.success());
    let files = remembered();
    assert_eq!(files.len(), 4, "the four built-in tools: {files:?}");
    // What is remembered is what a start uses: no instance asked again.
    for file in &files {
        let said: (String, String, String) =
            serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        let changed = (said.0, format!("remembered: {}", said.1), said.2);
        std::fs::write(file, serde_json::to_vec(&changed).unwrap()).unwrap();
    }
    let listed = stdout(&hookhost(data.path(), &["tools"]));
    assert_eq!(listed.matches("\tremembered: ").count(), 4, "{listed}");
    // An entry that does not parse is asked again.
    std::fs::write(&files[0], "not json").unwrap();
    assert!(hookhost(data.path(), &["tools"]).status.success());
    assert!(
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&files[0]).unwrap()).is_ok()
    );
}

#[test]
fn errors_are_said_once_in_words() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("broken.toml");
    std::fs::write(&config, "[bash\n").unwrap();
    let out = hookhost_with(data.path(), &config, &["tools"]);
    let err = stderr(&out);
    assert_eq!(err.matches("unclosed table").count(), 1, "{err}");

    let missing = hookhost(
        data.path(),
        &["--config", "/nonexistent/hookhost.toml", "tools"],
    );
    let err = stderr(&missing);
    assert_eq!(err.matches("No such file").count(), 1, "{err}");

    // A path outside the tool's grants says so, with no WASI error number.
    let out = hookhost(
        data.path(),
        &[
            "call",
            "write_file",
            r#"{"path":"/artifacts/x.txt","content":"x"}"#,
        ],
    );
    let text = stdout(&out);
    assert!(
        text.contains("/artifacts is not a mount this tool may use"),
        "{text}"
    );
    let out = hookhost(
        data.path(),
        &["call", "read_file", r#"{"path":"missing.txt"}"#],
    );
    let text = stdout(&out);
    assert!(
        text.contains("no such file or directory") && !text.contains("os error"),
        "{text}"
    );
}

#[test]
fn serve_http_refuses_an_unauthenticated_shell_and_names_a_busy_address() {
    let data = tempfile::tempdir().unwrap();
    let out = hookhost(data.path(), &["serve", "--http", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("refusing to serve the `bash` tool") && err.contains("--unauthenticated-bash"),
        "{err}"
    );

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let out = hookhost(
        data.path(),
        &["serve", "--http", &addr, "--unauthenticated-bash"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
}

#[test]
fn config_check_fails_when_an_upstream_does_not_start() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("up.toml");
    std::fs::write(
        &config,
        "[upstreams.gone]\ncommand = \"/nonexistent/server\"\ntimeout_secs = 5\n",
    )
    .unwrap();
    let out = hookhost(data.path(), &["config", "check", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("upstreams did not start: gone (unavailable)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_fifo_is_refused_not_waited_on() {
    let data = tempfile::tempdir().unwrap();
    let new = hookhost(data.path(), &["session", "new"]);
    let id = stdout(&new).trim().to_string();
    let made = hookhost(
        data.path(),
        &[
            "call",
            "--session",
            &id,
            "bash",
            r#"{"command":"mkfifo pipe"}"#,
        ],
    );
    assert!(made.status.success(), "{}", stdout(&made));
    // Opening a FIFO for reading would wait for a writer forever: bounded here, so a
    // regression fails instead of hanging.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args(["call", "--session", &id, "read_file", r#"{"path":"pipe"}"#])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            panic!("read_file waited on the FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("it is not a regular file"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_working_hooks_stderr_is_logged_at_debug_with_its_component_and_phase() {
    // offload cannot write to a read-only /artifacts: it says so on stderr and passes the
    // output through (it is fail-open), so the hook works and its stderr is debug output.
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("ro.toml");
    let text = std::fs::read_to_string(example("offload-only.toml"))
        .unwrap()
        .replace(
            "grants = { \"/artifacts\" = \"rw\" }",
            "grants = { \"/artifacts\" = \"ro\" }",
        );
    std::fs::write(&config, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args(["--config", config.to_str().unwrap()])
        .args(["call", "bash", r#"{"command":"seq 1 1000"}"#])
        .env("HOOKHOST_LOG", "hookhost=debug")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 1000, "passed through whole");
    let log = stderr(&out);
    let line = log
        .lines()
        .find(|l| l.contains("guest stderr"))
        .unwrap_or_else(|| panic!("no guest stderr in:\n{log}"));
    assert!(
        line.contains("offload: could not write")
            && line.contains("component=\"offload\"")
            && line.contains("phase=\"after-execute\""),
        "{line}"
    );
}

#[test]
fn session_trace_prints_the_trace_filters_it_and_follows_it() {
    let data = tempfile::tempdir().unwrap();
    let out = hookhost(data.path(), &["session", "new"]);
    let id = stdout(&out).trim().to_string();
    let out = hookhost(
        data.path(),
        &[
            "call",
            "--session",
            &id,
            "bash",
            r#"{"command": "seq 1 3000"}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    let all = stdout(&hookhost(data.path(), &["session", "trace", &id]));
    let events: Vec<serde_json::Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["kind"], "filesystem.mounted");
    assert_eq!(events.last().unwrap()["kind"], "call.finished");
    let files = stdout(&hookhost(
        data.path(),
        &["session", "trace", &id, "--kind", "file.*"],
    ));
    let files: Vec<serde_json::Value> = files
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(files.len() >= 2, "{files:?}");
    assert!(
        files
            .iter()
            .all(|e| e["kind"].as_str().unwrap().starts_with("file."))
    );
    assert_eq!(
        files.len(),
        events
            .iter()
            .filter(|e| e["kind"].as_str().unwrap().starts_with("file."))
            .count()
    );

    // --follow prints a call made after it started, and ends when the session is deleted.
    let mut follow = std::process::Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args([
            "session",
            "trace",
            &id,
            "--follow",
            "--kind",
            "call.finished",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(follow.stdout.take().unwrap()));
    assert!(lines.next().unwrap().unwrap().contains("\"tool\":\"bash\""));
    let out = hookhost(
        data.path(),
        &[
            "call",
            "--session",
            &id,
            "write_file",
            r#"{"path": "/workspace/a", "content": "a"}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        lines
            .next()
            .unwrap()
            .unwrap()
            .contains("\"tool\":\"write_file\"")
    );
    assert!(
        hookhost(data.path(), &["session", "delete", &id])
            .status
            .success()
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while follow.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < until,
            "--follow did not end with the session"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Configs that could not work say so at once, with the file, the line and the fix.
#[test]
fn configs_that_cannot_work_are_refused_or_explained_plainly() {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("edges.toml");
    let refused = |text: &str, said: &str| {
        std::fs::write(&file, text).unwrap();
        let out = hookhost(data.path(), &["config", "check", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{text}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains(said), "{text}\nexpected {said:?} in {err}");
    };
    let tool = "[tools.read_file]\ncomponent = \"builtin:read_file\"\ngrants = { \"/workspace\" = \"ro\" }\n";
    // Values no component can run with, and absurd ones.
    refused(
        &format!("{tool}limits = {{ deadline_ms = 0, memory_bytes = 0 }}\n"),
        "edges.toml:4: tools.read_file.limits: memory_bytes = 0: no call can run with it (at least 65536)",
    );
    refused(
        &format!(
            "\n\n[[hooks]]\nname = \"o\"\ncomponent = \"builtin:offload\"\nlimits = {{ deadline_ms = {} }}\n",
            u64::MAX
        ),
        "edges.toml:6: hooks.o.limits: deadline_ms = 18446744073709551615: at most 86400000",
    );
    refused(
        "[tenants.a.limits]\nmax_resources = 0\n",
        "edges.toml:1: tenants.a.limits: max_resources = 0",
    );
    refused(
        "[bash]\nenabled = true\nlimits = { tmp_bytes = 0 }\n",
        "edges.toml:3: bash.limits: tmp_bytes = 0",
    );
    refused(
        "[bash]\nenabled = true\ntimeout_secs = 0\n",
        "edges.toml:3: bash.timeout_secs = 0: from 1 to 600",
    );
    // An upstream's OAuth client takes one grant, with the authentication it needs.
    let upstream =
        "[upstreams.u]\nurl = \"http://127.0.0.1:9/mcp\"\n[upstreams.u.oauth]\nclient_id = \"c\"\n";
    refused(
        upstream,
        "upstreams.u: `oauth` needs `client_secret` or `private_key`",
    );
    refused(
        &format!("{upstream}client_secret = \"s\"\nprivate_key = \"k\"\n"),
        "upstreams.u: `oauth` takes `client_secret` or `private_key`, not both",
    );
    refused(
        &format!("{upstream}refresh_token = \"r\"\nprivate_key = \"k\"\n"),
        "upstreams.u: `oauth.private_key` signs for the client_credentials grant",
    );
    refused(
        &format!("{upstream}private_key = \"k\"\nsigning_algorithm = \"HS256\"\n"),
        "unknown variant `HS256`",
    );

    // A component that is not WebAssembly (the README, say) is called that.
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::write(
        &file,
        format!("[tools.r]\ncomponent = {:?}\n", readme.to_str().unwrap()),
    )
    .unwrap();
    let out = hookhost_with(data.path(), &file, &["call", "r", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("README.md: not a WebAssembly component (it does not begin with the `\\0asm` header; it begins \"# hookhost"),
        "{err}"
    );
    assert!(!err.contains("expected '('"), "{err}");

    // A file that defines no tools names itself and where to start from.
    std::fs::write(&file, "[sessions]\n").unwrap();
    let out = hookhost_with(
        data.path(),
        &file,
        &["call", "bash", r#"{"command":"true"}"#],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("edges.toml defines no tools") && err.contains("hookhost config show"),
        "{err}"
    );
}

/// A tenant's file-count quota (`disk_quota_files`) stops a shell that makes empty files
/// by the thousand: the call fails, and the count stays near the quota. Over it, the
/// tenant's calls may look and delete, not write, until it is back under.
#[test]
fn a_tenant_cannot_make_files_without_bound() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("quota.toml");
    let text = format!(
        "{}\n[tenants.small]\ndisk_quota_files = 500\n",
        hookhost::config::DEFAULT_CONFIG
    );
    std::fs::write(&config, text).unwrap();
    let session = hookhost_with(
        data.path(),
        &config,
        &["session", "new", "--tenant", "small"],
    );
    let session = stdout(&session).trim().to_string();
    let bash = |command: &str| {
        let args = format!(r#"{{"command":{command:?},"timeout_secs":60}}"#);
        let out = hookhost_with(
            data.path(),
            &config,
            &[
                "call",
                "--tenant",
                "small",
                "--session",
                &session,
                "--json",
                "bash",
                &args,
            ],
        );
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
        (
            v["is_error"] == true,
            v["output"].as_str().unwrap().to_string(),
        )
    };
    let (failed, output) = bash("for i in $(seq 1 26000); do : > f$i; done; echo made");
    assert!(
        failed && output.starts_with("disk quota exceeded: the call took tenant 'small' to "),
        "{output}"
    );
    let files = walkdir(&data.path().join("tenants/small"));
    assert!(
        files > 500 && files < 26_000,
        "{files} entries under the tenant"
    );
    // Over its quota, the tenant is not locked out: a call that only looks goes through,
    // one that writes has its output withheld, with the rule; one that deletes gets it
    // back under, and then it writes again.
    let (failed, listed) = bash("ls | wc -l");
    assert!(
        !failed && listed.trim().parse::<usize>().unwrap() > 500,
        "{listed}"
    );
    let (failed, output) = bash("touch more; echo touched");
    assert!(
        failed
            && output.starts_with("disk quota exceeded: the call left tenant 'small' with ")
            && output.contains(" and 1 more files in the tool's directories")
            && output.contains("only a call that deletes or shrinks files goes through"),
        "{output}"
    );
    let (failed, output) = bash("rm -f f* more; echo deleted");
    assert!(!failed && output.trim() == "deleted", "{output}");
    let (failed, output) = bash("touch again; echo touched");
    assert!(!failed && output.trim() == "touched", "{output}");
}

/// Entries below `dir`, recursively (symlinks not followed).
fn walkdir(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| {
                1 + if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walkdir(&e.path())
                } else {
                    0
                }
            })
            .sum()
    })
}

/// Commands that run no call open only the session table and the directories: they never
/// compile a component or start an upstream server (here, neither could).
#[test]
fn session_commands_neither_compile_components_nor_start_upstreams() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("heavy.toml");
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::write(
        &config,
        format!(
            "[[hooks]]\nname = \"broken\"\ncomponent = {:?}\n\n[upstreams.down]\ncommand = \"/nonexistent/server\"\n",
            readme.to_str().unwrap()
        ),
    )
    .unwrap();
    let quiet = |args: &[&str]| {
        let out = hookhost_with(data.path(), &config, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?} said something");
        stdout(&out)
    };
    let id = quiet(&["session", "new"]).trim().to_string();
    assert!(quiet(&["session", "list"]).contains(&id));
    assert!(quiet(&["session", "show", &id]).contains("mounts:"));
    quiet(&["session", "trace", &id]);
    quiet(&["session", "delete", &id]);
    quiet(&["session", "gc"]);
    quiet(&["config", "show"]);
    // Nor make an engine: one makes its compiled-code cache at once.
    assert!(
        !data.path().join("cache").exists(),
        "a session command made an engine"
    );
    // A call needs both, and says which failed.
    let out = hookhost_with(data.path(), &config, &["call", "read_file", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a WebAssembly component"),
        "{}",
        stderr(&out)
    );
}

/// A hook kept per session keeps nothing between one-shot calls: `call --session` says so,
/// once, on stderr.
#[test]
fn a_per_session_hook_under_call_session_is_said_to_start_afresh() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("kept.toml");
    let text = hookhost::config::DEFAULT_CONFIG.replacen(
        "on_failure = \"open\"\n",
        "on_failure = \"open\"\ninstance = \"per-session\"\n",
        1,
    );
    std::fs::write(&config, text).unwrap();
    let first = hookhost_with(
        data.path(),
        &config,
        &["call", "bash", r#"{"command":"true"}"#],
    );
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        !stderr(&first).contains("start afresh"),
        "{}",
        stderr(&first)
    );
    let session = stderr(&first)
        .lines()
        .find_map(|l| l.strip_prefix("hookhost: session "))
        .unwrap()
        .to_string();
    let again = hookhost_with(
        data.path(),
        &config,
        &[
            "call",
            "--session",
            &session,
            "bash",
            r#"{"command":"true"}"#,
        ],
    );
    let said = stderr(&again);
    assert_eq!(
        said.matches("start afresh in each `hookhost call`").count(),
        1,
        "{said}"
    );
    assert!(said.contains("hookhost serve"), "{said}");
}

/// A collector that is down, or that never answers, costs a one-shot command one warning
/// and a bounded wait at exit (`OTLP_FLUSH_AT_EXIT`), not every span's export timeout.
#[test]
fn an_unreachable_otlp_collector_costs_a_command_one_warning() {
    let data = tempfile::tempdir().unwrap();
    // Refused: a port nothing listens on any more.
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused_url = format!("http://{}", refused.local_addr().unwrap());
    drop(refused);
    // Silent: a listener that never accepts; the connection waits in its backlog.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    for url in [&refused_url, &silent_url] {
        let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(data.path())
            .args([
                "call",
                "write_file",
                r#"{"path":"/workspace/a.txt","content":"a"}"#,
            ])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", url)
            .env_remove("OTEL_BSP_EXPORT_TIMEOUT")
            .env_remove("HOOKHOST_CONFIG")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(warnings.len(), 1, "{err}");
        // Refused or unanswered, the export does not end within the flush: a refused one
        // is retried after a backoff (strace: ECONNREFUSED 0.6 ms after the connect, then
        // a 114 ms sleep before the retry), so the wait is cut short either way.
        assert!(
            warnings[0].contains("spans") && warnings[0].contains(url.as_str()),
            "{err}"
        );
    }
    drop(silent);
}

/// `--log-format json`: every log line on stderr is one JSON object a log shipper reads, with
/// the call's tenant and session as fields.
#[test]
fn json_logs_are_one_object_per_line_with_the_calls_fields() {
    let data = tempfile::tempdir().unwrap();
    let out = hookhost(
        data.path(),
        &[
            "--log-format",
            "json",
            "-v",
            "call",
            "write_file",
            r#"{"path":"/workspace/a.txt","content":"a"}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(!lines.is_empty(), "{}", stderr(&out));
    for line in &lines {
        assert!(
            line["timestamp"].is_string()
                && line["level"].is_string()
                && line["target"].is_string(),
            "{line}"
        );
    }
    let call = lines
        .iter()
        .find(|l| l["fields"]["message"] == "call")
        .unwrap_or_else(|| panic!("no call event: {lines:?}"));
    assert_eq!(call["fields"]["tenant"], "default", "{call}");
    assert_eq!(call["fields"]["outcome"], "done", "{call}");
    assert!(call["fields"]["session"].is_string(), "{call}");
}

/// Under `--log-format json` every line hookhost writes on stderr is JSON, those it says
/// whatever the level included: the address a server announces (with the URL as a field),
/// the drain at SIGTERM, and a command's error.
#[test]
fn json_logs_leave_no_plain_line_in_a_servers_stderr_or_an_error() {
    use std::io::{BufRead, BufReader};
    let data = tempfile::tempdir().unwrap();
    let parse = |l: &str| -> serde_json::Value {
        serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}"))
    };
    let mut server = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args([
            "--log-format",
            "json",
            "-v",
            "serve",
            "--http",
            "127.0.0.1:0",
        ])
        .arg("--unauthenticated-bash")
        .env_remove("HOOKHOST_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let announced = lines
        .by_ref()
        .map_while(Result::ok)
        .map(|l| parse(&l))
        .find(|l| l["fields"]["url"].is_string())
        .expect("the address is announced");
    let url = announced["fields"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{announced}"
    );
    assert_eq!(announced["level"], "INFO", "{announced}");
    let (status, _) = common::http_get(&url.replace("/mcp", ""), "/readyz", None);
    assert_eq!(status, 200);
    // SAFETY: a signal to the child this test started, by its pid.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(server.wait().unwrap().success());
    assert!(rest.iter().any(|l| l.contains("shutting down")), "{rest:?}");
    for line in &rest {
        parse(line);
    }

    let failed = hookhost(
        data.path(),
        &["--log-format", "json", "call", "no_such_tool", "{}"],
    );
    assert!(!failed.status.success());
    let said = stderr(&failed);
    let parsed: Vec<serde_json::Value> = said.lines().map(parse).collect();
    let last = parsed.last().expect("an error line");
    assert_eq!(last["level"], "ERROR", "{said}");
    assert!(
        last["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no_such_tool")),
        "{said}"
    );
}

/// Tokens and the session store's URL may come from the environment or a file, and a token
/// may be given as its SHA-256: the config then holds no secret, and no output of hookhost
/// (`config check`, a server's log at debug, its answers, an error) shows one.
#[test]
fn secrets_come_from_the_environment_and_files_and_are_never_shown() {
    use std::io::{BufRead, BufReader, Read, Write};
    let data = tempfile::tempdir().unwrap();
    let token_a = "token-a-from-the-environment-0123456789";
    let token_b = "token-b-from-a-mounted-file-0123456789";
    let token_c = "token-c-known-by-its-digest-0123456789";
    let password = "pg-password-never-shown-4321";
    let admin = "admin-token-from-the-environment-0123";
    let secret_file = data.path().join("token-b");
    std::fs::write(&secret_file, format!("{token_b}\n")).unwrap();
    let digest_c: String = {
        use sha2::Digest;
        sha2::Sha256::digest(token_c.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let tenants = format!(
        "{}\n[tenants.a]\ntoken = \"${{HOOKHOST_TEST_TOKEN_A}}\"\n\
         [tenants.b]\ntoken = \"${{file:{}}}\"\n[tenants.c]\ntoken_sha256 = \"{digest_c}\"\n",
        hookhost::config::DEFAULT_CONFIG.replace(
            "[serve]\n",
            "[serve]\nadmin_token = \"${HOOKHOST_TEST_ADMIN}\"\n"
        ),
        secret_file.display()
    );
    let config = data.path().join("secrets.toml");
    std::fs::write(&config, &tenants).unwrap();
    let secrets = [token_a, token_b, token_c, password, admin];
    let mut said = String::new();
    let run = |args: &[&str], store: Option<&Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        command
            .arg("--data")
            .arg(data.path())
            .arg("--config")
            .arg(store.unwrap_or(&config))
            .args(args)
            .env("HOOKHOST_TEST_TOKEN_A", token_a)
            .env("HOOKHOST_TEST_ADMIN", admin)
            .env(
                "HOOKHOST_TEST_STORE",
                format!("postgres://hookhost:{password}@127.0.0.1:1/hookhost"),
            );
        command
    };

    // A variable that is not set is named, with the line.
    let out = run(&["config", "check"], None)
        .env_remove("HOOKHOST_TEST_TOKEN_A")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("tenants.a.token: the environment variable HOOKHOST_TEST_TOKEN_A is not set"),
        "{}",
        stderr(&out)
    );
    said += &stderr(&out);

    let out = run(&["-vv", "config", "check"], None).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for line in [
        "\n  a\ttoken: set\ttools: all",
        "\n  c\ttoken: set",
        "\nsessions: SQLite ",
        "\n  admin page: /admin (token set)",
    ] {
        assert!(stdout(&out).contains(line), "{line:?}: {}", stdout(&out));
    }
    said += &stdout(&out);
    said += &stderr(&out);

    // A store whose password comes from the environment, unreachable: the error says so
    // without the password.
    let with_store = data.path().join("store.toml");
    std::fs::write(
        &with_store,
        format!("{tenants}\n[sessions]\nstore = \"${{HOOKHOST_TEST_STORE}}\"\n"),
    )
    .unwrap();
    let out = run(&["-vv", "session", "list"], Some(&with_store))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("at hookhost@127.0.0.1:1/hookhost (sslmode prefer)"),
        "{}",
        stderr(&out)
    );
    said += &stdout(&out);
    said += &stderr(&out);

    // Each tenant's token opens a session over HTTP; the log at debug shows none.
    let mut server = run(&["-vv", "serve", "--http", "127.0.0.1:0"], None)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(server.stderr.take().unwrap());
    let mut url = String::new();
    for _ in 0..1000 {
        let mut line = String::new();
        if log.read_line(&mut line).unwrap() == 0 {
            break;
        }
        said += &line;
        if let Some(at) = line.find("http://") {
            url = line[at..].trim().to_string();
            break;
        }
    }
    let address = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address announced: {said}"))
        .to_string();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    for (token, status) in [
        (token_a, "200"),
        (token_b, "200"),
        (token_c, "200"),
        (&digest_c[..], "401"),
        ("token-x-of-no-tenant-at-all-0123456789", "401"),
    ] {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{initialize}",
            initialize.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{token}: {answer}"
        );
        said += &answer;
    }
    server.kill().unwrap();
    server.wait().unwrap();
    let mut rest = String::new();
    let _ = log.read_to_string(&mut rest);
    said += &rest;

    assert!(said.contains("serving MCP"), "{said}");
    for secret in secrets {
        assert!(!said.contains(secret), "{secret} was shown:\n{said}");
    }
}

/// The service recipe's unit (`deploy/hookhost.service`) is one systemd takes without a
/// warning: keys it knows, an executable it can run.
#[test]
fn the_systemd_unit_verifies_clean() {
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/hookhost.service"),
    )
    .unwrap()
    .replace("/usr/local/bin/hookhost", env!("CARGO_BIN_EXE_hookhost"));
    let path = dir.path().join("hookhost.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze runs (bash .ci/run installs systemd)");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        stderr(&out)
    );
}

/// A config with persistent directories: `/persistent/notes` (per tenant, published at the
/// session's end), `/persistent/log` (published after every call) and `/persistent/docs`
/// (read-only, though `write_file` is granted it read-write).
fn persistent_config(dir: &Path) -> std::path::PathBuf {
    let config = dir.join("persistent.toml");
    std::fs::write(
        &config,
        r#"
[tools.read_file]
component = "builtin:read_file"
grants = { "/persistent/notes" = "ro", "/persistent/log" = "ro", "/persistent/docs" = "ro" }

[tools.write_file]
component = "builtin:write_file"
grants = { "/persistent/notes" = "rw", "/persistent/log" = "rw", "/persistent/docs" = "rw" }

[persistent."/persistent/notes"]
backing = "{data}/tenants/{tenant}/persistent/notes"

[persistent."/persistent/log"]
backing = "{data}/tenants/{tenant}/persistent/log"
commit = "call"

[persistent."/persistent/docs"]
backing = "{data}/docs"
access = "ro"
"#,
    )
    .unwrap();
    config
}

/// A session's checkout of a persistent directory is loaded before the first call whose
/// hooks or tool are granted it, and not before: a call that cannot reach it copies
/// nothing.
#[test]
fn a_persistent_directory_is_loaded_for_the_first_call_granted_it() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("granted.toml");
    std::fs::write(
        &config,
        r#"
[tools.read_file]
component = "builtin:read_file"
grants = { "/persistent/notes" = "ro" }

[tools.write_file]
component = "builtin:write_file"
grants = { "/persistent/log" = "rw" }

[persistent."/persistent/notes"]
backing = "{data}/notes"

[persistent."/persistent/log"]
backing = "{data}/log"
"#,
    )
    .unwrap();
    std::fs::create_dir_all(data.path().join("notes")).unwrap();
    std::fs::write(data.path().join("notes/seed.md"), "seeded").unwrap();
    let run = |args: &[&str]| stdout(&hookhost_with(data.path(), &config, args));
    let session = run(&["session", "new"]).trim().to_string();
    let checkouts = data
        .path()
        .join("tenants/default/sessions")
        .join(&session)
        .join("persistent");
    let loaded = |name: &str| checkouts.join(format!("{name}.manifest.json")).exists();

    let wrote = run(&[
        "call",
        "--session",
        &session,
        "write_file",
        r#"{"path":"/persistent/log/a.md","content":"a"}"#,
    ]);
    assert!(wrote.contains("Wrote"), "{wrote}");
    assert!(loaded("log"));
    assert!(!loaded("notes") && !checkouts.join("notes/seed.md").exists());

    let read = run(&[
        "call",
        "--session",
        &session,
        "read_file",
        r#"{"path":"/persistent/notes/seed.md"}"#,
    ]);
    assert!(read.contains("seeded"), "{read}");
    assert!(loaded("notes"));
}

/// A tenant's disk quota counts its persistent directories' stores beside its checkouts:
/// a commit that would take it over fails, nothing of it published, and the session keeps
/// its checkout.
#[test]
fn a_commit_over_the_tenants_quota_fails_and_keeps_the_checkout() {
    let data = tempfile::tempdir().unwrap();
    let config = persistent_config(data.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[tenants.small]\ndisk_quota_bytes = 450000\n");
    std::fs::write(&config, text).unwrap();
    let run = |args: &[&str]| {
        let out = hookhost_with(data.path(), &config, args);
        (out.status.success(), stdout(&out), stderr(&out))
    };
    let session = run(&["session", "new", "--tenant", "small"])
        .1
        .trim()
        .to_string();
    let write = |name: &str| {
        let args = format!(
            r#"{{"path":"/persistent/notes/{name}","content":"{}"}}"#,
            "x".repeat(100_000)
        );
        let (_, out, _) = run(&[
            "call",
            "--tenant",
            "small",
            "--session",
            &session,
            "write_file",
            &args,
        ]);
        assert!(out.contains("Wrote"), "{out}");
    };
    // 100 KB in the checkout, then in the store too: 200 KB of 450.
    write("one.md");
    let (ok, _, err) = run(&["session", "commit", "--tenant", "small", &session]);
    assert!(ok, "{err}");
    // 200 KB more in the checkout fit (400 KB); in the store as well they would not.
    write("two.md");
    write("three.md");
    let (ok, _, err) = run(&["session", "commit", "--tenant", "small", &session]);
    assert!(
        !ok && err.contains("disk quota: the commit would add 200000 bytes and 2 files"),
        "{err}"
    );
    let store = data.path().join("tenants/small/persistent/notes");
    assert!(store.join("one.md").exists());
    assert!(!store.join("two.md").exists() && !store.join("three.md").exists());
    let checkout = data
        .path()
        .join("tenants/small/sessions")
        .join(&session)
        .join("persistent/notes");
    assert!(checkout.join("two.md").exists() && checkout.join("three.md").exists());
    // Dropping the checkout frees its room.
    assert!(
        run(&[
            "session",
            "delete",
            "--tenant",
            "small",
            "--discard",
            &session
        ])
        .0
    );
}

/// Sessions work in their own checkouts of a persistent directory: what one writes reaches
/// the others only after its commit boundary, at their next call; a file changed on both
/// sides fails the second
/// commit, which keeps that session and its checkout until it is discarded; a read-only
/// one refuses writes; nothing of the sessions is left when they are gone.
#[test]
fn persistent_directories_publish_a_sessions_changes_at_its_commit_boundary() {
    let data = tempfile::tempdir().unwrap();
    let config = persistent_config(data.path());
    let run = |args: &[&str]| {
        let out = hookhost_with(data.path(), &config, args);
        (out.status.success(), stdout(&out), stderr(&out))
    };
    let new = || run(&["session", "new"]).1.trim().to_string();
    let call =
        |session: &str, tool: &str, args: &str| run(&["call", "--session", session, tool, args]).1;
    let read =
        |session: &str, path: &str| call(session, "read_file", &format!(r#"{{"path":"{path}"}}"#));
    let write = |session: &str, path: &str, text: &str| {
        call(
            session,
            "write_file",
            &format!(r#"{{"path":"{path}","content":"{text}"}}"#),
        )
    };

    let (a, b) = (new(), new());
    assert!(write(&a, "/persistent/notes/a.md", "from a").contains("Wrote"));
    assert!(
        read(&b, "/persistent/notes/a.md").contains("no such file"),
        "not yet published"
    );
    let (ok, out, err) = run(&["session", "commit", &a]);
    assert!(ok, "{err}");
    assert!(out.contains("/persistent/notes: 1 created"), "{out}");
    // The command line's commit is in the session's trace, as a server's is.
    let (_, trace, _) = run(&["session", "trace", &a, "--kind", "persistent_dir.commit.*"]);
    assert!(
        trace.contains(r#""kind":"persistent_dir.commit.succeeded""#),
        "{trace}"
    );
    assert!(
        read(&b, "/persistent/notes/a.md").contains("from a"),
        "b's next call sees it"
    );

    // b and c change one file: the first to commit wins; the second's commit fails,
    // naming it, and keeps b with its text.
    let c = new();
    assert!(write(&b, "/persistent/notes/n.md", "from b").contains("Wrote"));
    assert!(write(&c, "/persistent/notes/n.md", "from c").contains("Wrote"));
    assert!(run(&["session", "delete", &c]).0);
    assert!(
        read(&b, "/persistent/notes/n.md").contains("from b"),
        "b's change is kept"
    );
    let (ok, _, err) = run(&["session", "delete", &b]);
    assert!(
        !ok && err.contains("conflict") && err.contains("n.md"),
        "{err}"
    );
    // The error says how to settle it.
    assert!(
        err.contains(&format!("session commit --resolve ours {b}"))
            && err.contains(&format!("session delete --discard {b}")),
        "{err}"
    );
    assert!(
        read(&b, "/persistent/notes/n.md").contains("from b"),
        "b's checkout is kept"
    );
    assert!(
        read(&new(), "/persistent/notes/n.md").contains("from c"),
        "none of b's commit"
    );
    // Settled once with the store's version: nothing of b's n.md published, the session
    // goes on; then with b's.
    let (ok, out, err) = run(&["session", "commit", "--resolve", "theirs", &b]);
    assert!(
        ok && out.contains("1 left as the store has them"),
        "{out}{err}"
    );
    assert!(read(&new(), "/persistent/notes/n.md").contains("from c"));
    let (ok, out, err) = run(&["session", "commit", "--resolve", "ours", &b]);
    assert!(ok && out.contains("1 updated"), "{out}{err}");
    assert!(read(&new(), "/persistent/notes/n.md").contains("from b"));
    assert!(
        run(&["session", "delete", &b]).0,
        "nothing left in conflict"
    );

    // Published after every call, and traced with the call.
    let d = new();
    assert!(write(&d, "/persistent/log/1.txt", "one").contains("Wrote"));
    assert!(read(&new(), "/persistent/log/1.txt").contains("one"));
    let (_, trace, _) = run(&["session", "trace", &d, "--kind", "persistent_dir.*"]);
    let kinds: Vec<String> = trace
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|e| {
            format!(
                "{} {}",
                e["kind"].as_str().unwrap(),
                e["mount"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            // write_file is granted all three: each is loaded at its first grant.
            "persistent_dir.loaded /persistent/docs",
            "persistent_dir.loaded /persistent/log",
            "persistent_dir.loaded /persistent/notes",
            "persistent_dir.commit.started /persistent/log",
            "persistent_dir.commit.succeeded /persistent/log"
        ],
        "{trace}"
    );
    assert!(trace.contains(r#""created":["1.txt"]"#), "{trace}");

    // Read-only whatever the grant says.
    let refused = write(&d, "/persistent/docs/x.md", "no");
    assert!(refused.contains("permission denied"), "{refused}");

    for session in run(&["session", "list"]).1.lines() {
        let id = session.split('\t').next().unwrap();
        assert!(run(&["session", "delete", id]).0);
    }
    let left: Vec<_> = std::fs::read_dir(data.path().join("tenants/default/sessions"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// Writes round `round`'s 1,000 files (a commit's worth) into the checkout of
/// `/persistent/NAME` of `session`, as a command would have made them.
fn write_round(data: &Path, session: &str, name: &str, round: usize) {
    let dir = data.join(format!(
        "tenants/default/sessions/{session}/persistent/{name}/round-{round}"
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for n in 0..1000 {
        std::fs::write(
            dir.join(format!("{n}.txt")),
            format!("round {round} file {n}\n").repeat(20),
        )
        .unwrap();
    }
}

/// How many of a round's files `dir` holds, each checked whole.
fn whole_files(dir: &Path) -> usize {
    let files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    for file in &files {
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert!(
            text.len() > 100 && text.ends_with('\n'),
            "torn: {:?}",
            file.path()
        );
    }
    files.len()
}

/// `hookhost session commit SESSION`, killed (`kill -9`) after `after`.
fn commit_killed_after(data: &Path, config: &Path, session: &str, after: std::time::Duration) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .args(["--data", data.to_str().unwrap()])
        .args(["--config", config.to_str().unwrap()])
        .args(["session", "commit", session])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let _ = child.kill();
    let _ = child.wait();
}

/// A read-only persistent directory refuses every writer at once, whatever its grant:
/// `write_file` and `edit_file` (WASI's read-only preopen) and a `bash` command (a
/// read-only bind mount); the backing tree is untouched.
#[test]
fn a_read_only_persistent_directory_refuses_every_writer() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("ro.toml");
    let text = hookhost::config::DEFAULT_CONFIG
        .replace(
            "# grants = { \"/workspace\" = \"rw\", \"/artifacts\" = \"ro\" }",
            "grants = { \"/workspace\" = \"rw\", \"/persistent/docs\" = \"rw\" }",
        )
        .replace(
            "[tools.write_file]\ncomponent = \"builtin:write_file\"\ngrants = { ",
            "[tools.write_file]\ncomponent = \"builtin:write_file\"\ngrants = { \"/persistent/docs\" = \"rw\", ",
        )
        .replace(
            "[tools.edit_file]\ncomponent = \"builtin:edit_file\"\ngrants = { ",
            "[tools.edit_file]\ncomponent = \"builtin:edit_file\"\ngrants = { \"/persistent/docs\" = \"rw\", ",
        )
        + "\n[persistent.\"/persistent/docs\"]\nbacking = \"{data}/docs\"\naccess = \"ro\"\n";
    assert_eq!(
        text.matches("\"/persistent/docs\" = \"rw\"").count(),
        3,
        "{text}"
    );
    std::fs::write(&config, text).unwrap();
    let docs = data.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("readme.md"), "hello").unwrap();
    let run = |args: &[&str]| stdout(&hookhost_with(data.path(), &config, args));
    let session = run(&["session", "new"]).trim().to_string();
    let call = |tool: &str, args: &str| run(&["call", "--session", &session, tool, args]);

    let wrote = call(
        "write_file",
        r#"{"path":"/persistent/docs/x.md","content":"no"}"#,
    );
    assert!(wrote.contains("permission denied"), "{wrote}");
    let edited = call(
        "edit_file",
        r#"{"path":"/persistent/docs/readme.md","old_string":"hello","new_string":"bye"}"#,
    );
    assert!(edited.contains("permission denied"), "{edited}");
    let shell = call(
        "bash",
        r#"{"command":"echo no > /persistent/docs/y.md; cat /persistent/docs/readme.md"}"#,
    );
    assert!(
        shell.contains("Read-only file system") && shell.contains("hello"),
        "{shell}"
    );
    assert!(run(&["session", "delete", &session]).is_empty());
    // The tree holds its own file and the lock its load took, nothing of the session's.
    let mut left: Vec<_> = std::fs::read_dir(&docs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    left.sort();
    assert_eq!(left, [".hookhost", "readme.md"]);
    assert_eq!(
        std::fs::read_to_string(docs.join("readme.md")).unwrap(),
        "hello"
    );
}

/// A persistent directory kept by a store component, the example `builtin:snapshots`:
/// sessions load and commit through it (traced as any persistent directory), a conflict
/// names its file, every commit is a version that `persistent history` lists and
/// `persistent restore` brings back; a commit of 1,000 files killed (`kill -9`) midway
/// leaves the next session a whole version, never part of one.
#[test]
fn a_store_component_keeps_every_commit_as_a_version_to_restore() {
    let data = tempfile::tempdir().unwrap();
    // The example's /persistent/journal is kept by builtin:snapshots.
    let config = example("persistent.toml");
    let run = |args: &[&str]| {
        let out = hookhost_with(data.path(), &config, args);
        (out.status.success(), stdout(&out), stderr(&out))
    };
    let new = || run(&["session", "new"]).1.trim().to_string();
    let call = |session: &str, tool: &str, args: String| {
        run(&["call", "--session", session, tool, &args]).1
    };
    let read = |session: &str| {
        call(
            session,
            "read_file",
            r#"{"path":"/persistent/journal/a.md"}"#.into(),
        )
    };
    let write = |session: &str, text: &str| {
        let args = format!(r#"{{"path":"/persistent/journal/a.md","content":"{text}"}}"#);
        assert!(call(session, "write_file", args).contains("Wrote"));
    };

    let a = new();
    write(&a, "first");
    let (ok, out, err) = run(&["session", "commit", &a]);
    assert!(ok && out.contains("1 created"), "{out}{err}");
    let b = new();
    assert!(read(&b).contains("first"), "b loads what a committed");
    write(&a, "second");
    write(&b, "b's own");
    assert!(run(&["session", "commit", &a]).0);
    let (ok, _, err) = run(&["session", "commit", &b]);
    assert!(
        !ok && err.contains("conflict") && err.contains("a.md"),
        "{err}"
    );
    let (_, trace, _) = run(&["session", "trace", &b, "--kind", "persistent_dir.*"]);
    assert!(
        trace.contains(r#""kind":"persistent_dir.loaded""#),
        "{trace}"
    );
    assert!(run(&["session", "delete", "--discard", &b]).0);

    let (ok, history, err) = run(&["persistent", "history", "/persistent/journal"]);
    assert!(ok, "{err}");
    let versions: Vec<&str> = history
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(versions, ["000001", "000002"], "{history}");
    let (ok, restored, err) = run(&["persistent", "restore", "/persistent/journal", "000001"]);
    assert!(ok, "{err}");
    assert_eq!(restored.trim(), "000003");
    assert!(
        read(&new()).contains("first"),
        "the restored version is the newest"
    );
    let (ok, _, err) = run(&["persistent", "restore", "/persistent/journal", "000009"]);
    assert!(!ok && err.contains("no version"), "{err}");
    // A tenant that never committed has nothing to list, which is said, and made nothing.
    let (ok, out, err) = run(&[
        "persistent",
        "history",
        "/persistent/journal",
        "--tenant",
        "nosuch",
    ]);
    assert!(
        !ok && out.is_empty() && err.contains("tenant \"nosuch\" has nothing kept"),
        "{err}"
    );
    assert!(!data.path().join("tenants/nosuch").exists());

    // 1,000 files, killed at points over the commit's length.
    let store = data.path().join("tenants/default/persistent/journal");
    let prepare = |round: usize| {
        let session = new();
        read(&session);
        write_round(data.path(), &session, "journal", round);
        session
    };
    let session = prepare(0);
    let started = std::time::Instant::now();
    assert!(run(&["session", "commit", &session]).0);
    let length = started.elapsed();
    for (round, fraction) in [0.3, 0.6, 0.9].into_iter().enumerate() {
        let round = round + 1;
        let session = prepare(round);
        commit_killed_after(data.path(), &config, &session, length.mul_f64(fraction));
        let next = new();
        read(&next);
        let count = whole_files(&data.path().join(format!(
            "tenants/default/sessions/{next}/persistent/journal/round-{round}"
        )));
        assert!(
            count == 0 || count == 1000,
            "round {round}: {count} of 1000 files in the version loaded"
        );
    }
    let head = std::fs::read_to_string(store.join("HEAD")).unwrap();
    assert!(
        store.join("v").join(head.trim()).is_dir(),
        "HEAD names a whole version"
    );
}

/// A commit of 1,000 files killed (`kill -9`) at points spread over its length: the store
/// then holds all of it or none of it once the next session has loaded it, never part, and
/// never a torn file.
#[test]
fn a_commit_killed_midway_leaves_all_of_it_or_none() {
    let data = tempfile::tempdir().unwrap();
    let config = persistent_config(data.path());
    let run = |args: &[&str]| hookhost_with(data.path(), &config, args);
    let backing = data.path().join("tenants/default/persistent/notes");
    // A session's first use loads the checkout (and completes or sweeps a commit
    // stopped midway).
    let session_used = || {
        let session = stdout(&run(&["session", "new"])).trim().to_string();
        run(&[
            "call",
            "--session",
            &session,
            "read_file",
            r#"{"path":"/persistent/notes/x"}"#,
        ]);
        session
    };
    let prepare = |round: usize| {
        let session = session_used();
        write_round(data.path(), &session, "notes", round);
        session
    };
    let published = |round: usize| whole_files(&backing.join(format!("round-{round}")));

    // One commit uninterrupted, to know its length.
    let session = prepare(0);
    let started = std::time::Instant::now();
    assert!(run(&["session", "commit", &session]).status.success());
    let length = started.elapsed();
    assert_eq!(published(0), 1000);

    let mut outcomes = Vec::new();
    for (round, fraction) in [0.1, 0.3, 0.5, 0.7, 0.85, 0.95, 1.1]
        .into_iter()
        .enumerate()
    {
        let round = round + 1;
        let session = prepare(round);
        commit_killed_after(data.path(), &config, &session, length.mul_f64(fraction));
        session_used();
        let count = published(round);
        assert!(
            count == 0 || count == 1000,
            "round {round}: {count} of 1000 files published"
        );
        outcomes.push(count);
    }
    let staged: Vec<_> = std::fs::read_dir(backing.join(".hookhost"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let mut staged = staged;
    staged.sort();
    assert_eq!(staged, ["generation", "lock"], "nothing staged is left");
    eprintln!(
        "files published per killed commit: {outcomes:?} (an uninterrupted one took {length:?})"
    );
}

/// 32 sessions commit to one tenant's persistent directory at once, each from its own
/// process: every commit lands, whole.
#[test]
fn concurrent_commits_to_one_store_all_land() {
    let data = tempfile::tempdir().unwrap();
    let config = persistent_config(data.path());
    let run = |args: &[&str]| hookhost_with(data.path(), &config, args);
    let sessions: Vec<String> = (0..32)
        .map(|n| {
            let session = stdout(&run(&["session", "new"])).trim().to_string();
            let args = format!(r#"{{"path":"/persistent/notes/{n}.md","content":"session {n}"}}"#);
            let out = run(&["call", "--session", &session, "write_file", &args]);
            assert!(stdout(&out).contains("Wrote"), "{}", stderr(&out));
            session
        })
        .collect();
    let children: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            let (data, config) = (data.path().to_path_buf(), config.clone());
            std::thread::spawn(move || {
                Command::new(env!("CARGO_BIN_EXE_hookhost"))
                    .arg("--data")
                    .arg(&data)
                    .arg("--config")
                    .arg(&config)
                    .args(["session", "commit", &session])
                    .output()
            })
        })
        .collect();
    for child in children {
        let out = child.join().unwrap().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let backing = data.path().join("tenants/default/persistent/notes");
    for n in 0..32 {
        let text = std::fs::read_to_string(backing.join(format!("{n}.md"))).unwrap();
        assert_eq!(text, format!("session {n}"));
    }
}

/// Processes opening a new data directory at once (one-shot commands in parallel) all get
/// its session table: its schema is made in one write transaction, not by each.
#[test]
fn many_processes_opening_a_new_data_directory_at_once_all_get_the_table() {
    // 8 openers of a new file failed about 1 time in 100 while WAL mode was not retried.
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        let started: Vec<std::process::Child> = (0..8)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_hookhost"))
                    .arg("--data")
                    .arg(dir.path())
                    .args(["session", "new"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in started {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// As root, in a data directory a service's user owns, the CLI refuses (what it made there
/// the service could not open) and says how to run as the owner; run so, it works, and
/// what it made is the owner's. Run as another user, there is nothing to refuse.
#[test]
fn as_root_in_a_service_users_data_directory_the_cli_says_how_to_run_as_its_owner() {
    if !rustix::process::geteuid().is_root() {
        return; // the case is root's
    }
    let data = tempfile::tempdir().unwrap();
    let service = 65534; // nobody
    std::os::unix::fs::chown(data.path(), Some(service), Some(service)).unwrap();
    let refused = hookhost(data.path(), &["session", "new"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let said = stderr(&refused);
    let advice = format!("setpriv --reuid={service} --regid={service} --clear-groups hookhost");
    assert!(said.contains(&advice), "{said}");
    assert_eq!(
        std::fs::read_dir(data.path()).unwrap().count(),
        0,
        "root made nothing"
    );

    let as_owner = Command::new("setpriv")
        .args([
            &format!("--reuid={service}"),
            &format!("--regid={service}"),
            "--clear-groups",
            env!("CARGO_BIN_EXE_hookhost"),
            "--data",
        ])
        .arg(data.path())
        .args(["session", "new"])
        .env_remove("HOOKHOST_CONFIG")
        .env("HOME", data.path())
        .output()
        .unwrap();
    assert!(as_owner.status.success(), "{}", stderr(&as_owner));
    use std::os::unix::fs::MetadataExt;
    for entry in std::fs::read_dir(data.path()).unwrap() {
        let entry = entry.unwrap();
        assert_eq!(
            entry.metadata().unwrap().uid(),
            service,
            "{:?}",
            entry.path()
        );
    }
}
