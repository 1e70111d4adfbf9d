//! `hookhost hook AGENT EVENT` through the real binary, fed what each agent writes on a
//! hook's stdin (built from its documented schema, see docs/agents.md), with the built-in
//! components and the C guard example (built by `.ci/run` into target/example-hooks).

mod common;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A data directory, a git project the agent works in, and a config: the built-in one
/// with the C guard refusing `rm -rf` after its hooks.
struct Agent {
    dir: tempfile::TempDir,
    config: PathBuf,
    project: PathBuf,
}

impl Agent {
    fn new(extra: &str) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join(".git")).unwrap();
        let builtin = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/default.toml"),
        )
        .unwrap();
        let guard = common::example_hook("c-guard.wasm");
        // Innermost: the built-in hooks (audit) see what it refuses.
        let config = dir.path().join("hookhost.toml");
        std::fs::write(
            &config,
            format!(
                "{builtin}\n[[hooks]]\nname = \"guard\"\ncomponent = {guard:?}\n\
                 allow_unknown_imports = true\ntools = [\"bash\"]\n\
                 settings = {{ deny = [\"*rm -rf*\"] }}\n{extra}"
            ),
        )
        .unwrap();
        Agent {
            dir,
            config,
            project,
        }
    }

    /// The data directory: its name has a space, as macOS's default has
    /// (`~/Library/Application Support/hookhost`), so every path hookhost hands an agent
    /// must survive its shell.
    fn data(&self) -> PathBuf {
        self.dir.path().join("data dir")
    }

    /// `hookhost hook AGENT EVENT` with `stdin`.
    fn hook(&self, agent: &str, event: &str, stdin: &[u8]) -> Output {
        self.hook_with(agent, event, &[], stdin)
    }

    /// `hookhost hook AGENT EVENT FLAGS` with `stdin`.
    fn hook_with(&self, agent: &str, event: &str, flags: &[&str], stdin: &[u8]) -> Output {
        fed(
            Command::new(env!("CARGO_BIN_EXE_hookhost"))
                .arg("--data")
                .arg(self.data())
                .arg("--config")
                .arg(&self.config)
                .args(["hook", agent, event])
                .args(flags),
            stdin,
        )
    }

    /// The answer's stdout as JSON (`Null` when empty), once it exited 0.
    fn answer(&self, agent: &str, event: &str, stdin: &Value) -> Value {
        let out = self.hook(agent, event, stdin.to_string().as_bytes());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let said = text(&out.stdout);
        if said.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&said).unwrap_or_else(|e| panic!("{e}: {said}"))
        }
    }

    fn sessions(&self) -> String {
        self.sessions_of("default")
    }

    /// `hookhost session gc`, which must succeed.
    fn gc(&self) {
        let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(self.data())
            .arg("--config")
            .arg(&self.config)
            .args(["session", "gc"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
}

/// An ended agent session idle for longer than `[agents] keep_artifacts` is collected by
/// `session gc`; one that is not ended is not.
#[test]
fn session_gc_collects_ended_agent_sessions_once_kept_long_enough() {
    let agent = Agent::new("\n[agents]\nkeep_artifacts = \"1ms\"\n");
    for (session, ends) in [("ended-1", true), ("running-1", false)] {
        let start = json!({"session_id": session, "cwd": agent.project, "hook_event_name": "SessionStart", "source": "startup"});
        agent.answer("claude-code", "SessionStart", &start);
        if ends {
            let end = json!({"session_id": session, "cwd": agent.project, "hook_event_name": "SessionEnd", "reason": "logout"});
            agent.answer("claude-code", "SessionEnd", &end);
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    agent.gc();
    let left = agent.sessions();
    assert!(
        !left.contains("ended-1") && left.contains("running-1"),
        "{left}"
    );
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What Claude Code writes for a `Bash` call (`tool_response` in post-tool events).
fn claude(
    session: &str,
    project: &Path,
    event: &str,
    command: &str,
    response: Option<&str>,
) -> Value {
    let mut input = json!({
        "session_id": session,
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": project,
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "run it"},
        "tool_use_id": format!("toolu_{}", command.len()),
    });
    if let Some(stdout) = response {
        input["tool_response"] = json!({
            "stdout": stdout, "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false
        });
    }
    input
}

/// `seq 1 100000`, as the shell prints it.
fn seq() -> String {
    (1..=100_000).map(|n| format!("{n}\n")).collect()
}

#[test]
fn claude_code_calls_run_through_the_chain() {
    let agent = Agent::new("");
    let session = "5d0f6a4e-0c1b-4c55-9d6e-6f2a0d1c2b3a";
    let start = json!({"session_id": session, "cwd": agent.project, "hook_event_name": "SessionStart", "source": "startup"});
    assert_eq!(
        agent.answer("claude-code", "SessionStart", &start),
        Value::Null
    );
    assert!(agent.sessions().contains(session), "{}", agent.sessions());

    // Allowed: nothing to say, the agent's own permissions decide.
    let ls = claude(session, &agent.project, "PreToolUse", "ls", None);
    assert_eq!(agent.answer("claude-code", "pre-tool", &ls), Value::Null);

    // Refused by the guard: a deny the model sees the reason of.
    let rm = claude(session, &agent.project, "PreToolUse", "rm -rf /", None);
    assert_eq!(
        agent.answer("claude-code", "pre-tool-use", &rm),
        json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "refused by policy: the command matches the operator's pattern `*rm -rf*`",
        }})
    );

    // A large output is offloaded: Bash's own shape, naming a host file with all of it
    // and how to page it with Read.
    let big = seq();
    let pre = claude(session, &agent.project, "PreToolUse", "seq 1 100000", None);
    assert_eq!(agent.answer("claude-code", "pre-tool", &pre), Value::Null);
    let post = claude(
        session,
        &agent.project,
        "PostToolUse",
        "seq 1 100000",
        Some(&big),
    );
    let answer = agent.answer("claude-code", "post-tool", &post);
    let replaced = &answer["hookSpecificOutput"]["updatedToolOutput"];
    assert_eq!(replaced["stderr"], "");
    assert_eq!(replaced["interrupted"], false);
    let reference = replaced["stdout"].as_str().unwrap();
    assert!(
        reference.starts_with("[Output offloaded: 588895 characters"),
        "{reference}"
    );
    let file = reference
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .unwrap();
    assert!(file.starts_with(agent.data().to_str().unwrap()), "{file}");
    assert_eq!(std::fs::read_to_string(file).unwrap(), big);
    assert!(
        reference.contains(&format!(
            "call Read with {{\"file_path\": \"{file}\", \"offset\": 1"
        )),
        "{reference}"
    );

    // A small output passes unchanged.
    let small = claude(session, &agent.project, "PostToolUse", "ls", Some("a\nb\n"));
    assert_eq!(
        agent.answer("claude-code", "post-tool", &small),
        Value::Null
    );

    // TodoWrite feeds plan-writer: the plan lands in the git project.
    let todos = json!({"todos": [
        {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
    ]});
    let todo = json!({
        "session_id": session, "cwd": agent.project, "hook_event_name": "PostToolUse",
        "tool_name": "TodoWrite", "tool_input": todos, "tool_use_id": "toolu_todo",
        "tool_response": {"oldTodos": [], "newTodos": todos["todos"]},
    });
    assert_eq!(agent.answer("claude-code", "post-tool", &todo), Value::Null);
    let plans: Vec<_> = std::fs::read_dir(agent.project.join(".hookhost/plans"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .collect();
    assert_eq!(plans.len(), 1);
    let plan = std::fs::read_to_string(plans[0].path()).unwrap();
    assert!(
        plan.contains("Fix the bug") && plan.contains("Read the code"),
        "{plan}"
    );

    // Audit saw every call start and end (each call's two events in two processes), the
    // refused one too.
    let audit =
        std::fs::read_to_string(agent.data().join("tenants/default/audit/audit.jsonl")).unwrap();
    let events: Vec<(String, String)> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|e| {
            (
                e["call_id"].as_str().unwrap().into(),
                e["event"].as_str().unwrap().into(),
            )
        })
        .collect();
    let rm = format!("toolu_{}", "rm -rf /".len());
    let seq_id = format!("toolu_{}", "seq 1 100000".len());
    for (call, event) in [
        (&rm, "start"),
        (&rm, "refused"),
        (&seq_id, "start"),
        (&seq_id, "done"),
    ] {
        assert!(
            events.contains(&(call.clone(), event.to_string())),
            "{call} {event}: {audit}"
        );
    }

    // The session's end keeps it, and its files, for a resume; what its pre-tool events
    // left goes.
    let end = json!({"session_id": session, "cwd": agent.project, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"});
    assert_eq!(agent.answer("claude-code", "SessionEnd", &end), Value::Null);
    assert!(agent.sessions().contains(session), "{}", agent.sessions());
    assert!(
        !agent
            .data()
            .join("hook-calls/default")
            .join(session)
            .exists()
    );
    assert!(Path::new(file).exists(), "the offloaded file is gone");
    // `session gc` keeps it until it has been idle for `[agents] keep_artifacts` (7 days).
    agent.gc();
    assert!(Path::new(file).exists(), "collected before its time");
    // Resumed, it is the same session.
    let resume = json!({"session_id": session, "cwd": agent.project, "hook_event_name": "SessionStart", "source": "resume"});
    assert_eq!(
        agent.answer("claude-code", "SessionStart", &resume),
        Value::Null
    );
    assert!(Path::new(file).exists());
    // A cleared conversation is gone, and its session with it.
    let clear = json!({"session_id": session, "cwd": agent.project, "hook_event_name": "SessionEnd", "reason": "clear"});
    assert_eq!(
        agent.answer("claude-code", "SessionEnd", &clear),
        Value::Null
    );
    assert!(!agent.sessions().contains(session), "{}", agent.sessions());
    assert!(
        !Path::new(file).exists(),
        "the offloaded file outlived its session"
    );
    assert!(plans[0].path().exists(), "the plan outlives the session");
}

#[test]
fn each_agent_gets_its_own_deny_and_replacement() {
    let agent = Agent::new("");
    let big = seq();
    let project = agent.project.to_str().unwrap().to_string();
    // (agent, pre-tool input, post-tool input, the deny's reason at, the replacement at)
    type Pointer = &'static str;
    let cases: [(&str, Value, Value, Pointer, Option<Pointer>); 4] = [
        (
            "codex",
            json!({"session_id": "codex-1", "turn_id": "t", "model": "m", "cwd": project,
                   "hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_input": {"command": "rm -rf /"}, "tool_use_id": "call_1"}),
            json!({"session_id": "codex-1", "cwd": project, "hook_event_name": "PostToolUse",
                   "tool_name": "Bash", "tool_input": {"command": "seq 1 100000"},
                   "tool_use_id": "call_2", "tool_response": big}),
            "/hookSpecificOutput/permissionDecisionReason",
            Some("/reason"),
        ),
        (
            "gemini",
            json!({"session_id": "gemini-1", "cwd": project, "hook_event_name": "BeforeTool",
                   "timestamp": "2026-12-01T00:00:00Z", "tool_name": "run_shell_command",
                   "tool_input": {"command": "rm -rf /"}}),
            json!({"session_id": "gemini-1", "cwd": project, "hook_event_name": "AfterTool",
                   "tool_name": "run_shell_command", "tool_input": {"command": "seq 1 100000"},
                   "tool_response": {"llmContent": big, "returnDisplay": big}}),
            "/reason",
            Some("/reason"),
        ),
        (
            "cursor",
            json!({"conversation_id": "cursor-1", "generation_id": "g", "workspace_roots": [project],
                   "hook_event_name": "preToolUse", "tool_name": "Shell",
                   "tool_input": {"command": "rm -rf /"}, "tool_use_id": "c1"}),
            json!({"conversation_id": "cursor-1", "workspace_roots": [project],
                   "hook_event_name": "postToolUse", "tool_name": "Shell",
                   "tool_input": {"command": "seq 1 100000"}, "tool_use_id": "c2",
                   "tool_output": big}),
            "/agent_message",
            None,
        ),
        (
            "copilot",
            json!({"timestamp": 1, "cwd": project, "toolName": "bash",
                   "toolArgs": json!({"command": "rm -rf /"}).to_string()}),
            json!({"timestamp": 2, "cwd": project, "toolName": "bash",
                   "toolArgs": json!({"command": "seq 1 100000"}).to_string(),
                   "toolResult": {"resultType": "success", "textResultForLlm": big}}),
            "/permissionDecisionReason",
            None,
        ),
    ];
    for (name, pre, post, reason_at, replaced_at) in cases {
        let denied = agent.answer(name, "pre-tool", &pre);
        assert_eq!(
            denied.pointer(reason_at).and_then(Value::as_str),
            Some("refused by policy: the command matches the operator's pattern `*rm -rf*`"),
            "{name}: {denied}"
        );
        let answer = agent.answer(name, "post-tool", &post);
        match replaced_at {
            Some(at) => {
                let reference = answer
                    .pointer(at)
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("{name}: no replacement at {at}: {answer}"));
                let file = reference
                    .lines()
                    .find_map(|l| l.strip_prefix("Full output: "))
                    .unwrap_or_else(|| panic!("{name}: {reference}"));
                assert_eq!(std::fs::read_to_string(file).unwrap(), big, "{name}");
                // Pages under the threshold, the path quoted for the shell.
                assert!(
                    reference.contains(&format!("sed -n '1,1333p' '{file}'")),
                    "{reference}"
                );
            }
            // Cursor and Copilot CLI cannot have an output replaced (Cursor would show
            // the model a reference beside the whole output): nothing is said, and no
            // offloaded file is kept.
            None => {
                let said = if name == "cursor" {
                    json!({})
                } else {
                    Value::Null
                };
                assert_eq!(answer, said, "{name}");
                let offloaded = agent.data().join("tenants/default/sessions");
                let kept: Vec<_> = walk_files(&offloaded)
                    .into_iter()
                    .filter(|p| p.to_string_lossy().contains("tool-results"))
                    .filter(|p| p.to_string_lossy().contains(name))
                    .collect();
                assert!(kept.is_empty(), "{name}: {kept:?}");
            }
        }
    }
}

#[test]
fn input_that_cannot_be_read_is_a_non_blocking_error() {
    let agent = Agent::new("");
    for (name, nothing) in [("claude-code", ""), ("cursor", "{}\n")] {
        for input in [&b"not json"[..], br#"{"cwd": "/"}"#, b""] {
            let out = agent.hook(name, "pre-tool", input);
            assert_eq!(out.status.code(), Some(1), "{name}");
            assert_eq!(text(&out.stdout), nothing, "{name}");
            let said = text(&out.stderr);
            assert!(
                said.starts_with(&format!("hookhost hook {name}: ")),
                "{said}"
            );
            assert_eq!(said.lines().count(), 1, "{said}");
        }
    }
    let unknown = agent.hook("claude-code", "NotAnEvent", b"{}");
    assert_eq!(unknown.status.code(), Some(2));
}

/// A second audit, kept across the tenant's sessions in a persistent directory that is
/// published at each turn's end (its default boundary).
const KEPT_AUDIT: &str = "\n[[hooks]]\nname = \"kept-audit\"\ncomponent = \"builtin:audit\"\n\
     grants = { \"/persistent/audit\" = \"rw\" }\n\
     settings = { file = \"/persistent/audit/audit.jsonl\" }\n\
     [persistent.\"/persistent/audit\"]\nbacking = \"{data}/tenants/{tenant}/kept-audit\"\n";

impl Agent {
    /// The kept audit as published.
    fn kept_audit(&self) -> Option<String> {
        std::fs::read_to_string(self.data().join("tenants/default/kept-audit/audit.jsonl")).ok()
    }
}

/// A turn's end (Claude Code's `Stop`) publishes what the turn's hooks wrote in persistent
/// directories, not before; of two sessions that changed the same file, the second's turn
/// end fails, naming it, as the agent's non-blocking error, and its lines stay in its
/// checkout.
#[test]
fn a_turn_end_publishes_what_the_turn_wrote_in_persistent_directories() {
    let agent = Agent::new(KEPT_AUDIT);
    let call = |session: &str, command: &str| {
        let pre = claude(session, &agent.project, "PreToolUse", command, None);
        assert_eq!(agent.answer("claude-code", "pre-tool", &pre), Value::Null);
        let post = claude(session, &agent.project, "PostToolUse", command, Some("out"));
        agent.answer("claude-code", "post-tool", &post);
    };
    let stop = |session: &str| {
        let input = json!({"session_id": session, "transcript_path": "/tmp/t.jsonl",
            "cwd": agent.project, "hook_event_name": "Stop", "stop_hook_active": false});
        agent.hook("claude-code", "Stop", input.to_string().as_bytes())
    };

    call("s-a", "ls");
    assert_eq!(agent.kept_audit(), None, "published before the turn ended");
    let ended = stop("s-a");
    assert_eq!(ended.status.code(), Some(0), "{}", text(&ended.stderr));
    let published = agent.kept_audit().unwrap();
    assert!(published.contains(r#""call_id":"toolu_2""#), "{published}");

    // b loads what a published; both append to it; a's turn ends first.
    call("s-b", "pwd");
    call("s-a", "date");
    assert_eq!(stop("s-a").status.code(), Some(0));
    let conflict = stop("s-b");
    assert_eq!(conflict.status.code(), Some(1));
    let said = text(&conflict.stderr);
    assert!(
        said.starts_with("hookhost hook claude-code: ")
            && said.contains("conflict")
            && said.contains("audit.jsonl"),
        "{said}"
    );
    let published = agent.kept_audit().unwrap();
    assert!(published.contains(r#""call_id":"toolu_4""#), "{published}");
    assert!(!published.contains(r#""call_id":"toolu_3""#), "{published}");
    let kept = std::fs::read_to_string(
        agent
            .data()
            .join("tenants/default/sessions/s-b/persistent/audit/audit.jsonl"),
    )
    .unwrap();
    assert!(kept.contains(r#""call_id":"toolu_3""#), "{kept}");
    // A turn end of a session hookhost never saw has nothing to publish.
    assert_eq!(stop("s-unknown").status.code(), Some(0));
}

#[test]
fn a_closed_hook_that_fails_before_the_call_denies_it() {
    // An audit log in a directory that does not exist: the closed audit hook traps in
    // before-execute.
    let agent = Agent::new(
        "\n[[hooks]]\nname = \"strict-audit\"\ncomponent = \"builtin:audit\"\n\
         on_failure = \"closed\"\ngrants = { \"/audit\" = \"rw\" }\n\
         settings = { file = \"/audit/missing/audit.jsonl\" }\n",
    );
    let ls = claude("s-closed", &agent.project, "PreToolUse", "ls", None);
    let denied = agent.answer("claude-code", "pre-tool", &ls);
    assert_eq!(
        denied["hookSpecificOutput"]["permissionDecision"], "deny",
        "{denied}"
    );
    let reason = denied["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        reason.starts_with("call refused: hook 'strict-audit' failed in before-execute"),
        "{reason}"
    );
}

/// An agent's CLI (`claude`, `codex`, `gemini`), installed by `.ci/run` (npm) into
/// target/ci-agents, or in the directory `HOOKHOST_AGENTS`.
fn agent_cli(program: &str) -> PathBuf {
    let dir = std::env::var_os("HOOKHOST_AGENTS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-agents/node_modules/.bin"),
        PathBuf::from,
    );
    let path = dir.join(program);
    assert!(
        path.exists(),
        "{} is missing: `.ci/run` installs the agents' CLIs from npm into target/ci-agents",
        path.display()
    );
    path
}

/// Waits for `child` at most `secs` seconds; kills it (by its pid) past that.
fn wait_bounded(child: &mut std::process::Child, secs: u64) -> std::process::ExitStatus {
    for _ in 0..secs * 10 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    panic!("{} did not end within {secs} s", child.id());
}

/// The scripted model of `tests/agents/model.py` for one agent's API, on 127.0.0.1.
struct Model {
    _process: Killed,
    url: String,
    record: PathBuf,
}

impl Model {
    fn start(agent: &str, dir: &Path) -> Model {
        Model::scripted(agent, &[], dir)
    }

    /// The model of `agent` with a script of its own (`script`: model.py's SCRIPT and
    /// PROJECT arguments).
    fn scripted(agent: &str, script: &[&str], dir: &Path) -> Model {
        let record = dir.join("requests.jsonl");
        let mut process = Killed(
            Command::new("python3")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/agents/model.py"))
                .arg(&record)
                .arg(agent)
                .args(script)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(process.0.stdout.take().unwrap()),
            &mut first,
        )
        .unwrap();
        let port = first.trim().strip_prefix("listening ").unwrap();
        Model {
            url: format!("http://127.0.0.1:{port}"),
            _process: process,
            record,
        }
    }

    /// Every tool result of the conversation, as text, as the agent passed them on in its
    /// last request to the model.
    fn results(&self) -> Vec<String> {
        let requests = std::fs::read_to_string(&self.record).unwrap();
        let last: Value = serde_json::from_str(requests.lines().last().unwrap()).unwrap();
        serde_json::from_value(last["results"].clone()).unwrap()
    }
}

impl Agent {
    /// `hookhost hook install ARGS` with `home` as the user's home.
    fn install(&self, home: &Path, args: &[&str]) {
        self.install_by(Path::new(env!("CARGO_BIN_EXE_hookhost")), home, args);
    }

    /// `PROGRAM hook install ARGS` (a hookhost) with `home` as the user's home.
    fn install_by(&self, program: &Path, home: &Path, args: &[&str]) {
        let out = Command::new(program)
            .arg("--data")
            .arg(self.data())
            .arg("--config")
            .arg(&self.config)
            .args(["hook", "install"])
            .args(args)
            .env("HOME", home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    /// The agent's CLI `program` run in the project with `args`, with nothing in its
    /// environment but PATH, HOME and `env`: its stdout, once it succeeded.
    fn run(&self, program: &str, home: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
        // Files, not pipes: a pipe nobody reads while waiting would stall a CLI that
        // prints much (Codex prints each command's whole output).
        let out = self.dir.path().join(format!("{program}.out"));
        let err = self.dir.path().join(format!("{program}.err"));
        let mut cli = Command::new(agent_cli(program))
            .args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", home)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let status = wait_bounded(&mut cli, 180);
        let said = std::fs::read_to_string(&out).unwrap();
        assert!(
            status.success(),
            "{program}: {said}\n{}",
            std::fs::read_to_string(&err).unwrap()
        );
        said
    }

    fn sessions_of(&self, tenant: &str) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(self.data())
            .arg("--config")
            .arg(&self.config)
            .args(["session", "list", "--tenant", tenant])
            .output()
            .unwrap();
        text(&out.stdout)
    }

    /// The tenant's audit log.
    fn audit(&self, tenant: &str) -> String {
        std::fs::read_to_string(
            self.data()
                .join("tenants")
                .join(tenant)
                .join("audit/audit.jsonl"),
        )
        .unwrap()
    }

    /// `serve --http` on 127.0.0.1 with this config: the process and its URL.
    fn daemon(&self) -> (Killed, String) {
        let mut server = Killed(
            Command::new(env!("CARGO_BIN_EXE_hookhost"))
                .arg("--data")
                .arg(self.data())
                .arg("--config")
                .arg(&self.config)
                .args(["serve", "--http", "127.0.0.1:0"])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let url = common::announced_url(&mut server.0);
        (server, url)
    }

    /// `hookhost serve --hooks` on the data directory, logging each event it answers to
    /// `daemon.log`, once its socket is there.
    fn hooks_daemon(&self) -> Killed {
        let log = std::fs::File::create(self.dir.path().join("daemon.log")).unwrap();
        let server = Killed(
            Command::new(env!("CARGO_BIN_EXE_hookhost"))
                .arg("--data")
                .arg(self.data())
                .arg("--config")
                .arg(&self.config)
                .args(["-vv", "serve", "--hooks"])
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let socket = self.data().join("run/hooks.sock");
        for _ in 0..600 {
            if socket.exists() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("serve --hooks made no socket within 60 s");
    }
}

/// `command`'s output, with `stdin` written to it. A command that exits before it reads
/// (a hook that refuses its arguments) breaks the pipe, as it would for an agent.
fn fed(command: &mut Command, stdin: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    match input.write_all(stdin) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// The file an offload reference names (its "Full output: PATH" line).
fn named_file(reference: &str) -> PathBuf {
    reference
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no offloaded file named in {reference}"))
}

/// Every file under `dir`, at any depth.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// `page`, what the model got for the command an offload `reference` gives for the second
/// page of the file (which holds `held`), as written: those lines of the file, not
/// another reference.
fn assert_the_second_page(reference: &str, held: &str, page: &str) {
    let range = reference
        .split_once("then `sed -n '")
        .and_then(|(_, rest)| rest.split_once("p'"))
        .and_then(|(range, _)| range.split_once(','))
        .unwrap_or_else(|| panic!("no second page of lines in {reference}"));
    let (from, to): (usize, usize) = (range.0.parse().unwrap(), range.1.parse().unwrap());
    assert!(
        !page.contains("[Output offloaded"),
        "offloaded again: {page}"
    );
    let lines: Vec<&str> = held.lines().skip(from - 1).take(to + 1 - from).collect();
    assert!(
        lines.len() > 1 && page.contains(&lines.join("\n")),
        "{from}-{to}: {page}"
    );
    assert!(
        page.len() < 10_000,
        "a page larger than the threshold: {}",
        page.len()
    );
}

/// `dir` holds one plan, the scripted model's: one task done, one to do.
fn assert_the_scripted_plan(dir: &Path) {
    let plans: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    assert_eq!(plans.len(), 1, "{plans:?}");
    let plan = std::fs::read_to_string(&plans[0]).unwrap();
    assert!(
        plan.contains("- [x] Count to 100000") && plan.contains("- [ ] Report the count"),
        "{plan}"
    );
}

/// How Claude Code reaches hookhost.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Via {
    /// `hookhost hook claude-code EVENT`, answering in its own process.
    Command,
    /// Claude Code's `http` hooks, posting to the daemon (`hook install --url`).
    Url,
    /// The command, forwarding to the daemon (`HOOKHOST_URL`).
    Forwarded,
    /// The command, forwarding to `serve --hooks` on its data directory's socket.
    Socket,
}

const ALPHA_TOKEN: &str = "alpha-token-0123456789abcdef";

/// The real Claude Code CLI, run with `-p` against the scripted model after `hookhost
/// hook install claude-code`: every call goes through hookhost's chain (`via`).
fn claude_code_end_to_end(via: Via) {
    let tenants = format!("\n[tenants.alpha]\ntoken = \"{ALPHA_TOKEN}\"\n");
    let tokens = matches!(via, Via::Url | Via::Forwarded);
    let agent = Agent::new(if tokens { &tenants } else { "" });
    std::fs::create_dir(agent.project.join("victim")).unwrap();
    let home = agent.dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    // A daemon's tenant is its token's, and it takes no directory from the agent: the
    // plan goes to the tenant's plans.
    let (_daemon, url) = match via {
        Via::Command => (None, String::new()),
        Via::Socket => (Some(agent.hooks_daemon()), String::new()),
        Via::Url | Via::Forwarded => {
            let (daemon, url) = agent.daemon();
            (Some(daemon), url)
        }
    };
    let (tenant, plans) = match via {
        Via::Command | Via::Socket => ("default", agent.project.join(".hookhost/plans")),
        Via::Url | Via::Forwarded => ("alpha", agent.data().join("tenants/alpha/plans")),
    };
    let project = agent.project.to_str().unwrap();
    let mut install = vec!["claude-code", "--project", project];
    if via == Via::Url {
        install.extend(["--url", &url]);
    }
    agent.install(&home, &install);

    let model = Model::start("claude-code", agent.dir.path());
    let mut env = vec![
        ("ANTHROPIC_BASE_URL", model.url.as_str()),
        ("ANTHROPIC_API_KEY", "test-key"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ];
    match via {
        Via::Command | Via::Socket => {}
        Via::Url => env.push(("HOOKHOST_TOKEN", ALPHA_TOKEN)),
        Via::Forwarded => env.extend([("HOOKHOST_TOKEN", ALPHA_TOKEN), ("HOOKHOST_URL", &url)]),
    }
    let print = [
        "-p",
        "Count to 100000, then clean up.",
        "--allowedTools",
        "Bash,Read,TaskCreate,TaskUpdate",
        "--output-format",
        "json",
    ];
    let said = agent.run("claude", &home, &print, &env);

    let results = model.results();
    assert_eq!(results.len(), 6, "{via:?}: {results:#?}");
    // `seq 1 100000` reached the model as a reference to a file holding all of it …
    let reference = &results[0];
    assert!(
        reference.starts_with("[Output offloaded: 588895 characters"),
        "{via:?}: {reference}"
    );
    assert!(
        !reference.contains("\n99999\n"),
        "the whole output reached the model"
    );
    let file = named_file(reference);
    assert!(reference.contains("call Read with"), "{reference}");
    // … which Claude Code's own Read paged back, the second page as the reference says.
    let limit: usize = reference
        .split_once("\"limit\": ")
        .and_then(|(_, rest)| rest.split_once('}'))
        .and_then(|(limit, _)| limit.trim().parse().ok())
        .unwrap_or_else(|| panic!("no page's limit in {reference}"));
    let (first, last) = (limit + 1, 2 * limit);
    assert!(
        results[1].contains(&format!("{first}\t{first}\n"))
            && results[1].contains(&format!("{last}\t{last}"))
            && !results[1].contains(&format!("{}\t", last + 1)),
        "{via:?}: {}",
        &results[1][..results[1].len().min(400)]
    );

    // The tasks became the plan.
    assert_the_scripted_plan(&plans);

    // The guard refused `rm -rf`: it never ran, and the model saw why.
    assert!(results[5].contains("refused by policy"), "{}", results[5]);
    assert!(
        agent.project.join("victim").is_dir(),
        "a refused command ran"
    );

    // Audit logged the calls; the session ended with Claude Code's but kept its files.
    let audit = agent.audit(tenant);
    for line in [
        r#""event":"done","tool":"bash","call_id":"toolu_e2e_0""#,
        r#""event":"refused","tool":"bash","call_id":"toolu_e2e_5""#,
    ] {
        assert!(audit.contains(line), "{line}: {audit}");
    }
    assert!(
        file.exists(),
        "{via:?}: the offloaded file did not outlive the agent"
    );
    if via == Via::Socket {
        // The daemon answered the agent's events, not the hook processes themselves.
        let log = std::fs::read_to_string(agent.dir.path().join("daemon.log")).unwrap();
        let answered = log.matches("answering a hook").count();
        assert!(
            answered >= 12,
            "{answered} events reached the daemon: {log}"
        );
    }
    if via != Via::Command {
        return;
    }
    // `claude -p --resume` picks the conversation up, and the file it was given is there.
    let said: Value = serde_json::from_str(&said).unwrap();
    let session = said["session_id"].as_str().unwrap().to_string();
    let resume = [
        "-p",
        "Read the count again.",
        "--resume",
        &session,
        "--allowedTools",
        "Bash,Read,TaskCreate,TaskUpdate",
        "--output-format",
        "json",
    ];
    agent.run("claude", &home, &resume, &env);
    let results = model.results();
    let reread = results.last().unwrap();
    assert!(
        reread.contains("2500\t2500") && !reread.contains("does not exist"),
        "{reread}"
    );
}

#[test]
fn the_real_claude_code_cli_runs_every_call_through_hookhost() {
    claude_code_end_to_end(Via::Command);
}

#[test]
fn the_real_claude_code_cli_posts_every_call_to_the_daemon() {
    claude_code_end_to_end(Via::Url);
}

#[test]
fn the_real_claude_code_cli_reaches_the_daemon_through_the_command() {
    claude_code_end_to_end(Via::Forwarded);
}

#[test]
fn the_real_claude_code_cli_reaches_serve_hooks_through_the_command() {
    claude_code_end_to_end(Via::Socket);
}

#[test]
fn the_real_codex_cli_runs_every_call_through_hookhost() {
    let agent = Agent::new(KEPT_AUDIT);
    std::fs::create_dir(agent.project.join("victim")).unwrap();
    let home = agent.dir.path().join("home");
    let model = Model::start("codex", agent.dir.path());
    // The model provider, then hookhost's hooks, in the user's config.toml.
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\n\
             name = \"scripted\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
             env_key = \"SCRIPTED_KEY\"\n",
            model.url
        ),
    )
    .unwrap();
    agent.install(&home, &["codex", "--user"]);
    let said = agent.run(
        "codex",
        &home,
        &[
            "exec",
            "--dangerously-bypass-approvals-and-sandbox",
            "--dangerously-bypass-hook-trust",
            "--skip-git-repo-check",
            "--json",
            "Count to 100000, then clean up.",
        ],
        &[
            ("CODEX_HOME", codex_home.to_str().unwrap()),
            ("SCRIPTED_KEY", "test-key"),
        ],
    );
    let thread: Value = serde_json::from_str(said.lines().next().unwrap()).unwrap();
    let session = thread["thread_id"].as_str().unwrap();

    let results = model.results();
    assert_eq!(results.len(), 3, "{results:#?}");
    // Codex cuts a command's output (to about 10,000 tokens, head and tail) before its
    // hooks see it: the file holds what Codex had, its last line the command's last.
    let reference = &results[0];
    assert!(reference.starts_with("[Output offloaded: "), "{reference}");
    let file = named_file(reference);
    let held = std::fs::read_to_string(&file).unwrap();
    assert!(held.ends_with("\n99999\n100000\n"), "{held}");
    // Codex's own shell ran the reference's second page as written.
    assert_the_second_page(reference, &held, &results[1]);
    // The guard refused `rm -rf`.
    assert!(results[2].contains("refused by policy"), "{}", results[2]);
    assert!(agent.project.join("victim").is_dir());

    let audit = agent.audit("default");
    for line in [
        r#""event":"done","tool":"bash","call_id":"call_e2e_0""#,
        r#""event":"refused","tool":"bash","call_id":"call_e2e_2""#,
    ] {
        assert!(audit.contains(line), "{line}: {audit}");
    }
    // Codex says no goodbye: the session stays for the idle sweep. Its turn's end (Codex's
    // `Stop`) published the kept audit.
    assert!(agent.sessions().contains(session), "{}", agent.sessions());
    let kept = agent.kept_audit().expect("published at the turn's end");
    assert!(kept.contains(r#""call_id":"call_e2e_1""#), "{kept}");
}

#[test]
fn the_real_gemini_cli_runs_every_call_through_hookhost() {
    let agent = Agent::new("");
    std::fs::create_dir(agent.project.join("victim")).unwrap();
    let home = agent.dir.path().join("home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        r#"{"security": {"folderTrust": {"enabled": false}, "auth": {"selectedType": "gemini-api-key"}}}"#,
    )
    .unwrap();
    let project = agent.project.to_str().unwrap();
    agent.install(&home, &["gemini", "--project", project]);
    let model = Model::start("gemini", agent.dir.path());
    let said = agent.run(
        "gemini",
        &home,
        &[
            "-p",
            "Count to 100000, then clean up.",
            "-m",
            "gemini-2.5-pro",
            "--yolo",
            "--output-format",
            "json",
        ],
        &[
            ("GOOGLE_GEMINI_BASE_URL", &model.url),
            ("GEMINI_API_KEY", "test-key"),
        ],
    );
    let said: Value = serde_json::from_str(&said).unwrap();
    let session = said["session_id"].as_str().unwrap();

    let results = model.results();
    assert_eq!(results.len(), 4, "{results:#?}");
    // Gemini hands its hooks the whole output: the file holds all of it, and only it
    // (without Gemini's `<untrusted_context>`, `Output:` and `Process Group PGID:`).
    let reference = &results[0];
    assert!(
        reference.starts_with("[Output offloaded: 588894 characters"),
        "{reference}"
    );
    let file = named_file(reference);
    let held = std::fs::read_to_string(&file).unwrap();
    assert_eq!(held.trim_end(), seq().trim_end());
    assert_the_second_page(reference, &held, &results[1]);
    // write_todos became the plan, in the git project.
    assert_the_scripted_plan(&agent.project.join(".hookhost/plans"));
    assert!(results[3].contains("refused by policy"), "{}", results[3]);
    assert!(agent.project.join("victim").is_dir());

    let audit = agent.audit("default");
    assert!(
        audit.contains(r#""event":"refused","tool":"bash""#),
        "{audit}"
    );
    // Gemini's session end ended hookhost's, which keeps its files for a resume.
    assert!(agent.sessions().contains(session), "{}", agent.sessions());
    assert!(file.exists());
}

#[test]
fn the_real_copilot_cli_runs_every_call_through_hookhost() {
    let agent = Agent::new("");
    std::fs::create_dir(agent.project.join("victim")).unwrap();
    let home = agent.dir.path().join("home");
    // Copilot CLI reads a repository's hooks only in a folder the user trusts.
    std::fs::create_dir_all(home.join(".copilot")).unwrap();
    std::fs::write(
        home.join(".copilot/config.json"),
        json!({ "trusted_folders": [agent.project] }).to_string(),
    )
    .unwrap();
    let project = agent.project.to_str().unwrap();
    agent.install(&home, &["copilot", "--project", project]);
    let model = Model::start("copilot", agent.dir.path());
    let base = format!("{}/v1", model.url);
    agent.run(
        "copilot",
        &home,
        &["-p", "Count to 100000, then clean up.", "--allow-all-tools"],
        &[
            ("COPILOT_PROVIDER_BASE_URL", &base),
            ("COPILOT_PROVIDER_WIRE_API", "responses"),
            ("COPILOT_PROVIDER_API_KEY", "test-key"),
            ("COPILOT_MODEL", "gpt-5.5"),
        ],
    );
    let results = model.results();
    assert_eq!(results.len(), 2, "{results:#?}");
    // Copilot CLI keeps a large output in a file of its own before hooks see it, and
    // ignores what a post-tool hook answers: the output reaches the model as Copilot made it.
    assert!(!results[0].contains("Output offloaded"), "{}", results[0]);
    assert!(results[1].contains("refused by policy"), "{}", results[1]);
    assert!(agent.project.join("victim").is_dir());
    let audit = agent.audit("default");
    for event in ["done", "refused"] {
        assert!(
            audit.contains(&format!(r#""event":"{event}","tool":"bash""#)),
            "{event}: {audit}"
        );
    }
    // Its session end ended hookhost's session, kept for a resume; no offloaded file
    // was kept, since Copilot would not show the model a reference.
    assert_eq!(agent.sessions().lines().count(), 1, "{}", agent.sessions());
    let offloaded: Vec<_> = walk_files(&agent.data())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("tool-results"))
        .collect();
    assert!(offloaded.is_empty(), "{offloaded:?}");
}

/// `POST path` with `body` (and a bearer `token`) to the server at `url`, over one
/// connection: (status, headers and body as text).
fn post(url: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    use std::io::Read;
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n{auth}\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

#[test]
fn the_daemon_answers_hooks_and_the_command_forwards_to_it() {
    let agent = Agent::new(&format!(
        "\n[tenants.alpha]\ntoken = \"{ALPHA_TOKEN}\"\n\n[tenants.beta]\ntoken = \"beta-token-0123456789abcdef\"\n"
    ));
    let (_server, url) = agent.daemon();
    let rm = claude("s-daemon", &agent.project, "PreToolUse", "rm -rf /", None).to_string();

    let (status, response) = post(&url, "/hooks/claude-code/pre-tool", Some(ALPHA_TOKEN), &rm);
    assert_eq!(status, 200, "{response}");
    assert!(
        response.contains("\r\nx-hookhost-exit: 0\r\n"),
        "{response}"
    );
    assert!(
        response.contains(r#""permissionDecision":"deny""#),
        "{response}"
    );
    let (status, _) = post(&url, "/hooks/claude-code/pre-tool", None, &rm);
    assert_eq!(status, 401);
    // A post-tool event as large as a big output makes it (3 MB, over axum's default
    // body limit of 2 MB) is offloaded, as by the command.
    let big: String = (1..=400_000).map(|n| format!("{n}\n")).collect();
    let post_tool = claude(
        "s-daemon",
        &agent.project,
        "PostToolUse",
        "seq 1 400000",
        Some(&big),
    )
    .to_string();
    assert!(post_tool.len() > 3_000_000);
    let (status, response) = post(
        &url,
        "/hooks/claude-code/post-tool",
        Some(ALPHA_TOKEN),
        &post_tool,
    );
    assert_eq!(status, 200, "{}", &response[..response.len().min(400)]);
    assert!(
        response.contains("[Output offloaded: 2688895 characters"),
        "{}",
        &response[..response.len().min(400)]
    );
    let (status, response) = post(
        &url,
        "/hooks/claude-code/pre-tool",
        Some(ALPHA_TOKEN),
        "not json",
    );
    assert_eq!(status, 422, "{response}");
    assert!(
        response.contains("\r\nx-hookhost-exit: 1\r\n"),
        "{response}"
    );

    // The command form (told tenant beta) forwards to the daemon: its sessions are then
    // the token's tenant's (alpha).
    let forwarded = |url: &str, session: &str| {
        let start =
            json!({"session_id": session, "cwd": agent.project, "hook_event_name": "SessionStart"});
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(agent.data())
            .arg("--config")
            .arg(&agent.config)
            .args(["hook", "claude-code", "session-start", "--tenant", "beta"])
            .env("HOOKHOST_URL", url)
            .env("HOOKHOST_TOKEN", ALPHA_TOKEN)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(start.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    forwarded(&url, "s-through-daemon");
    // A daemon that does not answer: the command answers itself, as tenant beta.
    forwarded("http://127.0.0.1:9", "s-without-daemon");
    assert!(
        agent.sessions_of("alpha").contains("s-through-daemon"),
        "{}",
        agent.sessions_of("alpha")
    );
    assert!(
        agent.sessions_of("beta").contains("s-without-daemon"),
        "{}",
        agent.sessions_of("beta")
    );
    assert!(
        !agent.sessions_of("beta").contains("s-through-daemon"),
        "{}",
        agent.sessions_of("beta")
    );
    // A daemon with tenants takes no directory from a request: the session has none.
    let show = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(agent.data())
        .arg("--config")
        .arg(&agent.config)
        .args(["session", "show", "s-through-daemon", "--tenant", "alpha"])
        .output()
        .unwrap();
    let shown = text(&show.stdout);
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(!shown.contains(agent.project.to_str().unwrap()), "{shown}");
}

/// A child killed (by its pid) when dropped, also when a test fails.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The hook endpoint passes the same gate as MCP calls: a flood of pre-tool events past
/// the tenant's rate is refused, as the agent's denial naming the limit; the post-tool
/// event of a call admitted before still runs (the tool ran), and its output is offloaded.
#[test]
fn a_flood_of_hook_events_is_held_to_the_tenants_rate() {
    const EVENTS: usize = 100;
    let agent = Agent::new(&format!(
        "\n[tenants.alpha]\ntoken = \"{ALPHA_TOKEN}\"\nrate = {{ calls_per_second = 1, burst = 3 }}\n"
    ));
    let (_server, url) = agent.daemon();
    let pre = |command: &str| {
        let event = claude("s-flood", &agent.project, "PreToolUse", command, None);
        let (status, response) = post(
            &url,
            "/hooks/claude-code/pre-tool",
            Some(ALPHA_TOKEN),
            &event.to_string(),
        );
        assert_eq!(status, 200, "{response}");
        response
    };
    let first = pre("seq 1 100000");
    assert!(!first.contains("deny"), "{first}");
    let answers: Vec<String> = (1..EVENTS).map(|n| pre(&format!("echo {n}"))).collect();
    assert!(
        !answers[0].contains("deny") && !answers[1].contains("deny"),
        "{answers:?}"
    );
    let refused: Vec<&String> = answers.iter().filter(|a| a.contains("deny")).collect();
    assert!(!refused.is_empty(), "{answers:?}");
    for answer in &refused {
        assert!(
            answer.contains("hookhost refused the call: rate limit: tenant 'alpha'"),
            "{answer}"
        );
    }
    let post_tool = claude(
        "s-flood",
        &agent.project,
        "PostToolUse",
        "seq 1 100000",
        Some(&seq()),
    );
    let (status, response) = post(
        &url,
        "/hooks/claude-code/post-tool",
        Some(ALPHA_TOKEN),
        &post_tool.to_string(),
    );
    assert_eq!(status, 200, "{}", &response[..response.len().min(400)]);
    assert!(
        response.contains("[Output offloaded"),
        "{}",
        &response[..response.len().min(400)]
    );
}

/// A daemon that accepts and never answers costs one hook event the daemon timeout: the
/// event is answered here, and the breaker keeps the next one from asking it. The same
/// through `hookhost-agent`, which runs `hookhost` with the input it read.
#[test]
fn a_hung_daemon_is_skipped_after_one_timeout() {
    for program in [
        env!("CARGO_BIN_EXE_hookhost"),
        env!("CARGO_BIN_EXE_hookhost-agent"),
    ] {
        let agent = Agent::new("");
        let run = agent.data().join("run");
        std::fs::create_dir_all(&run).unwrap();
        // Never accepted: the kernel queues each connection, and nobody reads it.
        let hung = std::os::unix::net::UnixListener::bind(run.join("hooks.sock")).unwrap();
        hung.set_nonblocking(true).unwrap();
        let rm = claude(
            "s-hung",
            &agent.project,
            "PreToolUse",
            "rm -rf victim",
            None,
        );
        for _ in 0..2 {
            let out = fed(
                Command::new(program)
                    .arg("--data")
                    .arg(agent.data())
                    .arg("--config")
                    .arg(&agent.config)
                    .args(["hook", "claude-code", "pre-tool"])
                    .args(["--daemon-timeout-ms", "300"]),
                rm.to_string().as_bytes(),
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "{program}: {}",
                text(&out.stderr)
            );
            let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
        }
        assert!(run.join("hooks.sock.down").exists());
        let asked = std::iter::from_fn(|| hung.accept().ok()).count();
        assert_eq!(
            asked, 1,
            "{program}: the daemon was asked again past its breaker"
        );
    }
}

/// `hook install` next to `hookhost-agent` writes it as the program, and uninstall knows
/// it; the installed command answers through `serve --hooks` without starting `hookhost`,
/// and without a daemon runs `hookhost` in its place.
#[test]
fn the_installed_forwarder_answers_through_the_daemon_or_runs_hookhost() {
    let agent = Agent::new("on_failure = \"closed\"\n");
    let home = agent.dir.path().join("home");
    agent.install(
        &home,
        &["claude-code", "--project", agent.project.to_str().unwrap()],
    );
    let file = agent.project.join(".claude/settings.json");
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        command.starts_with(env!("CARGO_BIN_EXE_hookhost-agent")),
        "{command}"
    );
    let run = |tool_input: Value| {
        let input = json!({"session_id": "s-forwarder", "cwd": agent.project, "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": tool_input, "tool_use_id": "t1"});
        let out = fed(
            Command::new("sh")
                .args(["-c", &command])
                .current_dir(&agent.project),
            input.to_string().as_bytes(),
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // No daemon: `hookhost` answers in its place.
    assert!(run(json!({"command": "rm -rf victim"})).contains("\"deny\""));
    assert_eq!(run(json!({"command": "ls"})).trim(), "");
    {
        let _daemon = agent.hooks_daemon();
        assert!(run(json!({"command": "rm -rf victim"})).contains("\"deny\""));
        assert_eq!(run(json!({"command": "ls"})).trim(), "");
        let log = std::fs::read_to_string(agent.dir.path().join("daemon.log")).unwrap();
        assert_eq!(log.matches("answering a hook").count(), 2, "{log}");
    }
    agent.install(
        &home,
        &[
            "claude-code",
            "--project",
            agent.project.to_str().unwrap(),
            "--uninstall",
        ],
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}\n");
}

/// A config hookhost cannot read denies the tools a closed layer wrapped when the hooks
/// were installed (`--closed-tools`), and only them: Read goes on, with a line for the
/// user.
#[test]
fn a_broken_config_denies_only_the_closed_tools() {
    let agent = Agent::new("");
    std::fs::write(&agent.config, "[[hooks]\nname = ").unwrap();
    let ask = |tool_input: Value, tool: &str| {
        let input = json!({"session_id": "s-broken", "cwd": agent.project, "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": tool_input, "tool_use_id": "t1"});
        agent.hook_with(
            "claude-code",
            "pre-tool",
            &["--closed-tools", "Bash,bash"],
            input.to_string().as_bytes(),
        )
    };
    let bash = ask(json!({"command": "rm -rf victim"}), "Bash");
    assert_eq!(bash.status.code(), Some(0), "{}", text(&bash.stderr));
    let answer: Value = serde_json::from_slice(&bash.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("a `closed` hook wraps this tool"),
        "{reason}"
    );
    let read = ask(json!({"file_path": "/etc/hostname"}), "Read");
    // Claude Code's non-blocking error: the user sees the line, the call goes on.
    assert_eq!(read.status.code(), Some(1));
    assert!(
        text(&read.stderr).contains("hookhost hook claude-code"),
        "{}",
        text(&read.stderr)
    );
    assert!(!text(&read.stdout).contains("deny"));
}

/// `hook install` with a closed guard, by a `hookhost` in a directory with a space, which
/// then goes away: the installed pre-tool command, run by `sh` as Claude Code runs it,
/// denies Bash and lets Read through; a second install changes nothing, and uninstall
/// takes the entries out.
#[test]
fn an_installed_hook_whose_program_is_gone_denies_only_the_closed_tools() {
    let agent = Agent::new("on_failure = \"closed\"\n");
    let bin = agent.dir.path().join("my bin");
    std::fs::create_dir(&bin).unwrap();
    let copy = bin.join("hookhost");
    std::fs::copy(env!("CARGO_BIN_EXE_hookhost"), &copy).unwrap();
    let home = agent.dir.path().join("home");
    let install = |program: &Path, extra: &[&str]| {
        let out = Command::new(program)
            .arg("--data")
            .arg(agent.data())
            .arg("--config")
            .arg(&agent.config)
            .args(["hook", "install", "claude-code", "--project"])
            .arg(&agent.project)
            .args(extra)
            .env("HOME", &home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    install(&copy, &[]);
    let file = agent.project.join(".claude/settings.json");
    let once = std::fs::read_to_string(&file).unwrap();
    install(&copy, &[]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), once);
    let settings: Value = serde_json::from_str(&once).unwrap();
    let pre = &settings["hooks"]["PreToolUse"][0];
    let command = pre["hooks"][0]["command"].as_str().unwrap().to_string();
    assert!(command.contains("--closed-tools Bash,bash"), "{command}");

    std::fs::remove_file(&copy).unwrap();
    let run = |tool: &str, tool_input: Value| {
        let input = json!({"session_id": "s-gone", "cwd": agent.project, "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": tool_input, "tool_use_id": "t1"});
        fed(
            Command::new("sh")
                .args(["-c", &command])
                .current_dir(&agent.project),
            input.to_string().as_bytes(),
        )
    };
    let bash = run("Bash", json!({"command": "rm -rf victim"}));
    assert_eq!(bash.status.code(), Some(0));
    let answer: Value = serde_json::from_slice(&bash.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    let read = run("Read", json!({"file_path": "/etc/hostname"}));
    assert_eq!(
        (read.status.code(), text(&read.stdout).trim()),
        (Some(0), "")
    );

    install(Path::new(env!("CARGO_BIN_EXE_hookhost")), &["--uninstall"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}\n");
}

/// `hook doctor` reads an installation back and tries it: the entries, program, config
/// and data directory it names, the daemon, and a synthetic call run through the entries
/// as the agent runs them, whose session it then deletes; and it finds what breaks each.
#[test]
fn hook_doctor_says_what_the_agent_will_run_and_what_breaks_it() {
    let agent = Agent::new("on_failure = \"closed\"\n");
    let home = agent.dir.path().join("home");
    let hookhost = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(agent.data())
            .arg("--config")
            .arg(&agent.config)
            .args(args)
            .arg("--project")
            .arg(&agent.project)
            .env("HOME", &home)
            .env("CODEX_HOME", home.join(".codex"))
            .output()
            .unwrap()
    };
    // The doctor's own flags are not the installation's: it reads what the agent runs.
    let doctor = |name: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .args(["hook", "doctor", name, "--project"])
            .arg(&agent.project)
            .env("HOME", &home)
            .env("CODEX_HOME", home.join(".codex"))
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout))
    };
    let (code, said) = doctor("claude-code");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("problem  ") && said.contains("does not exist"),
        "{said}"
    );

    assert!(
        hookhost(&["hook", "install", "claude-code"])
            .status
            .success()
    );
    let (code, said) = doctor("claude-code");
    assert_eq!(code, Some(0), "{said}");
    for line in [
        "ok       PreToolUse for tools *: runs",
        "ok       Stop: runs",
        "tenant default: offload (*), audit (*), plan-writer (todo_write), guard (bash, closed)",
        &format!("ok       data: {}", agent.data().display()),
        "note     no `hookhost serve --hooks`",
        "ok       pre-tool `echo hookhost doctor`: hookhost let it run",
        "ok       post-tool `echo hookhost doctor`: hookhost answered, the output as it was",
    ] {
        assert!(said.contains(line), "{line:?} in\n{said}");
    }
    assert!(!said.contains("problem"), "{said}");
    assert_eq!(agent.sessions().trim(), "", "the doctor's session stays");
    // It ran through the chain: the audit has the synthetic call.
    let audit = agent.audit("default");
    assert!(
        audit.contains(r#""event":"done","tool":"bash","call_id":"hookhost-doctor-"#),
        "{audit}"
    );

    {
        let _daemon = agent.hooks_daemon();
        let (code, said) = doctor("claude-code");
        assert_eq!(code, Some(0), "{said}");
        assert!(
            said.contains("ok       daemon: `serve --hooks` answers on"),
            "{said}"
        );
        let log = std::fs::read_to_string(agent.dir.path().join("daemon.log")).unwrap();
        assert!(log.matches("answering a hook").count() >= 3, "{log}");
        assert_eq!(agent.sessions().trim(), "", "the doctor's session stays");
    }

    // The daemon killed (as `kill -9` leaves it): its socket stays, and answers nothing.
    let (code, said) = doctor("claude-code");
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("note     nothing listens on"), "{said}");

    // Installed twice: in the user's settings too.
    let user = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--config")
        .arg(&agent.config)
        .args(["hook", "install", "claude-code", "--user"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(user.status.success(), "{}", text(&user.stderr));
    let (code, said) = doctor("claude-code");
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("hookhost answers each event twice"), "{said}");

    // A chain that now wraps Read too: the matchers are stale.
    let config = std::fs::read_to_string(&agent.config).unwrap();
    std::fs::write(
        &agent.config,
        config.replace("tools = [\"bash\"]", "tools = [\"bash\", \"read_file\"]"),
    )
    .unwrap();
    let (_, said) = doctor("claude-code");
    assert!(said.contains("installed for another chain"), "{said}");
    // A config that cannot be read.
    std::fs::write(&agent.config, "[[hooks]\n").unwrap();
    let (code, said) = doctor("claude-code");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("problem  config {}", agent.config.display())),
        "{said}"
    );
    std::fs::write(&agent.config, config).unwrap();

    // A project's settings that run a program of its own: read, never run.
    let planted = agent.project.join("hookhost");
    let ran = agent.dir.path().join("ran");
    std::fs::write(&planted, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    std::fs::set_permissions(
        &planted,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let settings = agent.project.join(".claude/settings.json");
    let installed = std::fs::read_to_string(&settings).unwrap();
    let planted_settings = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "./hookhost hook claude-code pre-tool"}]}]}});
    std::fs::write(&settings, planted_settings.to_string()).unwrap();
    let (_, said) = doctor("claude-code");
    assert!(said.contains("not this hookhost"), "{said}");
    assert!(!ran.exists(), "the doctor ran a project's program");
    std::fs::write(&settings, installed).unwrap();

    // Codex reads a project's hooks only once it trusts the project.
    assert!(hookhost(&["hook", "install", "codex"]).status.success());
    let (code, said) = doctor("codex");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("Codex ignores this project's hooks"),
        "{said}"
    );
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::write(
        home.join(".codex/config.toml"),
        format!(
            "[projects.{:?}]\ntrust_level = \"trusted\"\n",
            agent.project.display().to_string()
        ),
    )
    .unwrap();
    let (code, said) = doctor("codex");
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("ok       pre-tool `echo hookhost doctor`"),
        "{said}"
    );
}

/// `serve --hooks` answers 12 sessions' events at once, each pre-tool and post-tool pair
/// through `hookhost-agent`: every output offloaded into its own session's file, every
/// call audited once, every event answered by the daemon.
#[test]
fn serve_hooks_answers_many_sessions_at_once() {
    const SESSIONS: usize = 12;
    let agent = Agent::new("");
    let _daemon = agent.hooks_daemon();
    let hook = |event: &str, input: &Value| {
        fed(
            Command::new(env!("CARGO_BIN_EXE_hookhost-agent"))
                .arg("--data")
                .arg(agent.data())
                .arg("--config")
                .arg(&agent.config)
                .args(["hook", "claude-code", event]),
            input.to_string().as_bytes(),
        )
    };
    let output = seq();
    let files: Vec<PathBuf> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..SESSIONS)
            .map(|n| {
                let (hook, output, project) = (&hook, &output, &agent.project);
                scope.spawn(move || {
                    let session = format!("s-many-{n}");
                    let pre = claude(&session, project, "PreToolUse", "seq 1 100000", None);
                    let out = hook("pre-tool", &pre);
                    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
                    let post = claude(
                        &session,
                        project,
                        "PostToolUse",
                        "seq 1 100000",
                        Some(output),
                    );
                    let out = hook("post-tool", &post);
                    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
                    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
                    let reference = answer["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
                        .as_str()
                        .unwrap()
                        .to_string();
                    named_file(&reference)
                })
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    let distinct: std::collections::BTreeSet<&PathBuf> = files.iter().collect();
    assert_eq!(distinct.len(), SESSIONS, "{files:?}");
    for file in &files {
        assert_eq!(
            std::fs::read_to_string(file).unwrap(),
            output,
            "{}",
            file.display()
        );
    }
    let audit = agent.audit("default");
    let done = audit
        .lines()
        .filter(|l| l.contains(r#""event":"done""#))
        .count();
    assert_eq!(done, SESSIONS, "{audit}");
    let log = std::fs::read_to_string(agent.dir.path().join("daemon.log")).unwrap();
    assert_eq!(
        log.matches("answering a hook").count(),
        2 * SESSIONS,
        "{log}"
    );
}

/// A daemon that dies while answering (its connection closed after it took the event, as
/// `kill -9` leaves it) costs nothing but the event's round trip: the hook process answers
/// by itself, with the input it read, and the daemon is not skipped for it (no breaker:
/// it did not hang).
#[test]
fn a_daemon_that_dies_mid_answer_leaves_the_event_to_the_hook_process() {
    let agent = Agent::new("");
    let run = agent.data().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let socket = run.join("hooks.sock");
    let dying = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let took = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut stream, _) = dying.accept().unwrap();
        stream.write_all(b"+").unwrap();
        let mut asked = Vec::new();
        stream.read_to_end(&mut asked).unwrap();
        // Gone before a word of the answer.
        drop(stream);
        asked
    });
    let rm = claude(
        "s-dying",
        &agent.project,
        "PreToolUse",
        "rm -rf victim",
        None,
    );
    let out = fed(
        Command::new(env!("CARGO_BIN_EXE_hookhost-agent"))
            .arg("--data")
            .arg(agent.data())
            .arg("--config")
            .arg(&agent.config)
            .args(["hook", "claude-code", "pre-tool"]),
        rm.to_string().as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    let asked = String::from_utf8(took.join().unwrap()).unwrap();
    assert!(asked.contains("rm -rf victim"), "{asked}");
    assert!(
        !run.join("hooks.sock.down").exists(),
        "a crash tripped the breaker"
    );

    // The same with no `hookhost` to run after it: the input is read, so no shell
    // fallback could read it again, and `hookhost-agent` denies the closed tool itself.
    std::fs::remove_file(&socket).unwrap();
    let dying = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let took = std::thread::spawn(move || {
        use std::io::Write;
        let (mut stream, _) = dying.accept().unwrap();
        stream.write_all(b"+").unwrap();
    });
    let alone = agent.dir.path().join("alone");
    std::fs::create_dir(&alone).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_hookhost-agent"),
        alone.join("hookhost-agent"),
    )
    .unwrap();
    let out = fed(
        Command::new(alone.join("hookhost-agent"))
            .arg("--data")
            .arg(agent.data())
            .args(["hook", "claude-code", "pre-tool", "--closed-tools", "Bash"])
            .env("PATH", &alone),
        rm.to_string().as_bytes(),
    );
    took.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        text(&out.stderr).contains("cannot run hookhost"),
        "{}",
        text(&out.stderr)
    );
}

/// One of the agents' real CLIs (hookhost's name for it: `claude-code`, `codex` or
/// `gemini`), set up in `home` against the scripted model: a prompt runs a conversation,
/// which a later prompt can resume.
struct RealCli<'a> {
    agent: &'a Agent,
    name: &'static str,
    home: PathBuf,
    model: Model,
}

impl<'a> RealCli<'a> {
    /// The CLI `name` with the model's `script`, its settings written in `home`, hookhost
    /// not yet installed (see [`RealCli::install_by`]).
    fn new(agent: &'a Agent, name: &'static str, script: &[&str]) -> RealCli<'a> {
        let home = agent.dir.path().join("home");
        let model = Model::scripted(name, script, agent.dir.path());
        match name {
            "codex" => {
                std::fs::create_dir_all(home.join(".codex")).unwrap();
                std::fs::write(
                    home.join(".codex/config.toml"),
                    format!(
                        "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n\
                         [model_providers.scripted]\nname = \"scripted\"\n\
                         base_url = \"{}/v1\"\nwire_api = \"responses\"\n\
                         env_key = \"SCRIPTED_KEY\"\n",
                        model.url
                    ),
                )
                .unwrap();
            }
            "gemini" => {
                std::fs::create_dir_all(home.join(".gemini")).unwrap();
                std::fs::write(
                    home.join(".gemini/settings.json"),
                    r#"{"security": {"folderTrust": {"enabled": false}, "auth": {"selectedType": "gemini-api-key"}}}"#,
                )
                .unwrap();
            }
            _ => std::fs::create_dir_all(&home).unwrap(),
        }
        RealCli {
            agent,
            name,
            home,
            model,
        }
    }

    /// `PROGRAM hook install` for this CLI, as its user would (`--uninstall` with
    /// `extra`): Codex's user settings, the others' project's.
    fn install_by(&self, program: &Path, extra: &[&str]) {
        let project = self.agent.project.to_str().unwrap();
        let mut args = vec![self.name];
        args.extend(match self.name {
            "codex" => vec!["--user"],
            _ => vec!["--project", project],
        });
        args.extend(extra);
        self.agent.install_by(program, &self.home, &args);
    }

    /// The settings file hookhost installs into.
    fn settings(&self) -> PathBuf {
        match self.name {
            "codex" => self.home.join(".codex/config.toml"),
            "gemini" => self.agent.project.join(".gemini/settings.json"),
            _ => self.agent.project.join(".claude/settings.json"),
        }
    }

    /// The CLI run with `prompt` (resuming the conversation `resume`): the conversation's id.
    fn prompt(&self, prompt: &str, resume: Option<&str>) -> String {
        let url = self.model.url.as_str();
        let (program, args, env): (&str, Vec<&str>, Vec<(&str, &str)>) = match self.name {
            "codex" => {
                let mut args = vec!["exec"];
                args.extend(resume.map(|_| "resume"));
                args.extend([
                    "--dangerously-bypass-approvals-and-sandbox",
                    "--dangerously-bypass-hook-trust",
                    "--skip-git-repo-check",
                    "--json",
                ]);
                args.extend(resume);
                args.push(prompt);
                let home = self.home.join(".codex");
                let env = vec![
                    ("CODEX_HOME", home.to_str().unwrap()),
                    ("SCRIPTED_KEY", "test-key"),
                ];
                let said = self.agent.run("codex", &self.home, &args, &env);
                let thread: Value = serde_json::from_str(said.lines().next().unwrap()).unwrap();
                return thread["thread_id"].as_str().unwrap().to_string();
            }
            "gemini" => {
                let mut args = vec!["-p", prompt, "-m", "gemini-2.5-pro", "--yolo"];
                args.extend(["--output-format", "json"]);
                if resume.is_some() {
                    args.extend(["--resume", "latest"]);
                }
                let env = vec![
                    ("GOOGLE_GEMINI_BASE_URL", url),
                    ("GEMINI_API_KEY", "test-key"),
                ];
                ("gemini", args, env)
            }
            _ => {
                let mut args = vec!["-p", prompt, "--allowedTools", "Bash,Read"];
                args.extend(["--output-format", "json"]);
                if let Some(session) = resume {
                    args.extend(["--resume", session]);
                }
                let env = vec![
                    ("ANTHROPIC_BASE_URL", url),
                    ("ANTHROPIC_API_KEY", "test-key"),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ];
                ("claude", args, env)
            }
        };
        let said: Value = serde_json::from_str(&self.agent.run(program, &self.home, &args, &env))
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        said["session_id"].as_str().unwrap().to_string()
    }
}

/// A command that prints 23,893 characters and fails, run by each agent's real CLI: the
/// call is audited as failed where the agent tells its hooks (Claude Code's
/// PostToolUseFailure, Gemini's exit code; Codex says nothing of it); where the agent lets
/// hooks replace the output (Codex, Gemini), it is offloaded and the model reads the
/// second page by the reference as written; after the agent exits, a resumed conversation
/// reads the file again.
fn a_failing_command_is_audited_offloaded_and_resumed(name: &'static str) {
    let agent = Agent::new("");
    let cli = RealCli::new(&agent, name, &["fail"]);
    cli.install_by(Path::new(env!("CARGO_BIN_EXE_hookhost")), &[]);
    let session = cli.prompt("Count to 5000, then fail.", None);

    let results = cli.model.results();
    let audit = agent.audit("default");
    let failed = audit
        .lines()
        .filter(|l| l.contains(r#""event":"done""#) && l.contains(r#""tool":"bash""#))
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .next()
        .unwrap_or_else(|| panic!("{name}: no call audited: {audit}"));
    assert_eq!(
        failed["is_error"],
        Value::Bool(name != "codex"),
        "{name}: {failed}"
    );
    if name == "claude-code" {
        // PostToolUseFailure cannot replace what Claude Code tells the model: no offload,
        // which would only add a reference to the whole output (docs/agents.md).
        assert_eq!(results.len(), 1, "{results:#?}");
        assert!(
            results[0].contains("Exit code 1") && !results[0].contains("[Output offloaded"),
            "{}",
            &results[0][..results[0].len().min(400)]
        );
        return;
    }
    assert_eq!(results.len(), 2, "{name}: {results:#?}");
    let reference = &results[0];
    // Gemini hands its hooks the output without its last newline.
    assert!(
        reference.starts_with("[Output offloaded: 23893 characters")
            || (name == "gemini" && reference.starts_with("[Output offloaded: 23892 characters")),
        "{name}: {reference}"
    );
    let file = named_file(reference);
    let held = std::fs::read_to_string(&file).unwrap();
    let counted: String = (1..=5000).map(|n| format!("{n}\n")).collect();
    assert_eq!(
        held.trim_end(),
        counted.trim_end(),
        "{name}: the file is not the command's output"
    );
    assert_the_second_page(reference, &held, &results[1]);

    // The agent exited; its session's files stay for a resume, which reads the file.
    assert!(
        file.exists(),
        "{name}: the offloaded file did not outlive the agent"
    );
    cli.prompt("Read the count again.", Some(&session));
    let results = cli.model.results();
    let reread = results.last().unwrap();
    assert!(reread.contains("2500\n2501\n2502"), "{name}: {reread}");
}

#[test]
fn the_real_claude_code_cli_audits_a_failing_command() {
    a_failing_command_is_audited_offloaded_and_resumed("claude-code");
}

#[test]
fn the_real_codex_cli_offloads_a_failing_command_and_resumes() {
    a_failing_command_is_audited_offloaded_and_resumed("codex");
}

#[test]
fn the_real_gemini_cli_offloads_a_failing_command_and_resumes() {
    a_failing_command_is_audited_offloaded_and_resumed("gemini");
}

/// What keeps hookhost from answering an agent's hook.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Broken {
    /// The program is gone (an upgrade moved it).
    Program,
    /// The config cannot be read.
    Config,
}

/// hookhost installed by a binary in a directory with a space, with a `closed` guard on
/// the shell, then `broken`: the agent's real CLI runs `rm -rf victim` and the guard's
/// hook cannot run, so the agent is told no and the command never runs; a tool no closed
/// layer wraps (Claude's Read, Gemini's read_file) still works. The real binary's
/// uninstall then takes every entry out.
fn a_closed_guard_holds_when_hookhost_cannot_answer(name: &'static str, broken: Broken) {
    let agent = Agent::new("on_failure = \"closed\"\n");
    std::fs::create_dir(agent.project.join("victim")).unwrap();
    std::fs::write(agent.project.join("notes.txt"), "kept notes\n").unwrap();
    let bin = agent.dir.path().join("my bin");
    std::fs::create_dir(&bin).unwrap();
    let built = Path::new(env!("CARGO_BIN_EXE_hookhost"));
    for program in ["hookhost", "hookhost-agent"] {
        std::fs::copy(built.with_file_name(program), bin.join(program)).unwrap();
    }
    let project = agent.project.to_str().unwrap();
    let cli = RealCli::new(&agent, name, &["closed", project]);
    let before = std::fs::read_to_string(cli.settings()).unwrap_or_default();
    cli.install_by(&bin.join("hookhost"), &[]);
    let installed = std::fs::read_to_string(cli.settings()).unwrap();
    assert!(installed.contains("my bin"), "{installed}");
    let config = std::fs::read_to_string(&agent.config).unwrap();
    match broken {
        Broken::Program => std::fs::remove_dir_all(&bin).unwrap(),
        Broken::Config => std::fs::write(&agent.config, "[[hooks]\nname = ").unwrap(),
    }

    cli.prompt("Clean up, then read the notes.", None);
    let results = cli.model.results();
    assert!(
        agent.project.join("victim").is_dir(),
        "{name}: rm -rf ran: {results:#?}"
    );
    assert!(
        results[0].contains("a `closed` hook wraps this tool"),
        "{name}: {}",
        results[0]
    );
    if name != "codex" {
        assert!(results[1].contains("kept notes"), "{name}: {results:#?}");
    }

    std::fs::write(&agent.config, config).unwrap();
    cli.install_by(built, &["--uninstall"]);
    let after = std::fs::read_to_string(cli.settings()).unwrap_or_default();
    assert!(!after.contains("hookhost"), "{name}: {after}");
    if !before.is_empty() {
        assert_eq!(after.trim(), before.trim(), "{name}");
    }
}

#[test]
fn the_real_claude_code_cli_is_denied_a_closed_tool_when_hookhost_is_gone() {
    a_closed_guard_holds_when_hookhost_cannot_answer("claude-code", Broken::Program);
}

#[test]
fn the_real_claude_code_cli_is_denied_a_closed_tool_when_the_config_is_broken() {
    a_closed_guard_holds_when_hookhost_cannot_answer("claude-code", Broken::Config);
}

#[test]
fn the_real_codex_cli_is_denied_a_closed_tool_when_hookhost_is_gone() {
    a_closed_guard_holds_when_hookhost_cannot_answer("codex", Broken::Program);
}

#[test]
fn the_real_codex_cli_is_denied_a_closed_tool_when_the_config_is_broken() {
    a_closed_guard_holds_when_hookhost_cannot_answer("codex", Broken::Config);
}

#[test]
fn the_real_gemini_cli_is_denied_a_closed_tool_when_hookhost_is_gone() {
    a_closed_guard_holds_when_hookhost_cannot_answer("gemini", Broken::Program);
}

#[test]
fn the_real_gemini_cli_is_denied_a_closed_tool_when_the_config_is_broken() {
    a_closed_guard_holds_when_hookhost_cannot_answer("gemini", Broken::Config);
}
