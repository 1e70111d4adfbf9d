//! `hookhost serve` against MCP peers this project did not write: the official Python SDK
//! as the client (stdio and Streamable HTTP), and `@modelcontextprotocol/server-everything`
//! as an upstream server. `.ci/run` installs both under `target/`; the environment
//! variables `HOOKHOST_TEST_PYTHON` and `HOOKHOST_TEST_EVERYTHING` point elsewhere.

mod common;

use common::{alive, announced_url, wait_gone};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A peer installed by `.ci/run`, or named by `var`.
fn peer(var: &str, installed: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(installed));
    assert!(
        path.exists(),
        "{} is missing: run `bash .ci/run` once (it installs the MCP test peers), or set {var}",
        path.display()
    );
    path
}

fn python() -> PathBuf {
    peer("HOOKHOST_TEST_PYTHON", "target/ci-venv/bin/python")
}

fn everything() -> PathBuf {
    peer(
        "HOOKHOST_TEST_EVERYTHING",
        "target/ci-node/node_modules/.bin/mcp-server-everything",
    )
}

/// Runs the Python client with `args`; returns what it printed, or panics with it.
fn client_output(args: &[&str]) -> String {
    let script = workspace().join("tests/mcp/client.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "the MCP client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs the Python client with `args`; panics with its output when it fails.
fn client(args: &[&str]) {
    client_output(args);
}

/// The entries of `dir` that are not hidden (plan-writer keeps a hidden pointer per session).
fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.'))
        })
        .count()
    })
}

#[test]
fn stdio_session_runs_the_chain_and_is_deleted_on_disconnect() {
    let data = tempfile::tempdir().unwrap();
    client(&[
        "stdio",
        env!("CARGO_BIN_EXE_hookhost"),
        data.path().to_str().unwrap(),
    ]);
    let tenant = data.path().join("tenants/default");
    assert_eq!(
        entries(&tenant.join("plans")),
        1,
        "the plan outlives the session"
    );
    assert!(tenant.join("audit/audit.jsonl").exists());
    assert_eq!(
        entries(&tenant.join("sessions")),
        0,
        "the session's files are gone"
    );
}

/// A client that leaves while a bash call runs (after cancelling another) gets its session
/// ended before its SDK kills the server: no command survives, no session directory stays.
/// Unsandboxed commands run in process groups of their own, out of reach of the SDK's
/// `killpg`, so only hookhost can stop them; a sandboxed session's must end as well.
#[test]
fn a_stdio_client_that_leaves_mid_call_leaves_no_command_behind() {
    for sandbox in [false, true] {
        let data = tempfile::tempdir().unwrap();
        let config = data.path().join("hookhost.toml");
        let mut text =
            std::fs::read_to_string(workspace().join("host/src/config/default.toml")).unwrap();
        if !sandbox {
            text = text.replace(
                "[bash]\nenabled = true",
                "[bash]\nenabled = true\nsandbox = false",
            );
        }
        std::fs::write(&config, text).unwrap();
        let marker = format!("hookhost-leaver-{}-{sandbox}", std::process::id());
        for round in 0..3 {
            client(&[
                "stdio-disconnect",
                env!("CARGO_BIN_EXE_hookhost"),
                data.path().to_str().unwrap(),
                config.to_str().unwrap(),
                &format!("{marker}-{round}"),
            ]);
        }
    }
}

/// A `hookhost serve --http` on a free loopback port, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(data: &Path, config: &Path) -> Server {
        Server::start_at(data, Some(config), "127.0.0.1:0")
    }

    fn start_at(data: &Path, config: Option<&Path>, addr: &str) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        command.arg("--data").arg(data);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let mut child = command
            .args(["serve", "--http", addr])
            .env("HOOKHOST_TEST_SECRET", "the host's secret")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hookhost starts");
        let url = announced_url(&mut child);
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_sessions_tokens_tenants_and_an_upstream_server() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("hookhost.toml");
    let mut text =
        std::fs::read_to_string(workspace().join("host/src/config/default.toml")).unwrap();
    text.push_str(&format!(
        r#"
[upstreams.everything]
command = {:?}
args = ["stdio"]
timeout_secs = 60
env = {{ GIVEN = "by-the-operator" }}

[tenants.alpha]
token = "alpha-token-0123456789"

[tenants.beta]
token = "beta-token-0123456789"
"#,
        everything().to_str().unwrap()
    ));
    std::fs::write(&config, text).unwrap();
    let server = Server::start(data.path(), &config);
    client(&[
        "http",
        &server.url,
        "alpha-token-0123456789",
        "beta-token-0123456789",
        "everything__echo",
    ]);
    let alpha = data.path().join("tenants/alpha");
    assert_eq!(entries(&alpha.join("plans")), 1);
    assert_eq!(
        entries(&alpha.join("sessions")),
        0,
        "DELETE removed the sessions' files"
    );
    assert!(
        !data.path().join("tenants/beta/sessions").exists(),
        "beta reached nothing"
    );
    drop(server);
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn serve_workdir_lets_the_agent_work_in_the_users_git_repository() {
    let data = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    std::fs::write(repo.path().join("README.md"), "hello\n").unwrap();
    git(repo.path(), &["add", "README.md"]);
    git(repo.path(), &["commit", "-qm", "the user's first commit"]);

    client(&[
        "workdir",
        env!("CARGO_BIN_EXE_hookhost"),
        data.path().to_str().unwrap(),
        repo.path().to_str().unwrap(),
    ]);
    // The agent's edits are in the repository, its plan in .hookhost/plans.
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.md")).unwrap(),
        "from the agent\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("README.md")).unwrap(),
        "hello, agent\n"
    );
    assert_eq!(entries(&repo.path().join(".hookhost/plans")), 1);
    // Ending the session deleted /artifacts (the offloaded output) and not one file of the
    // repository.
    assert_eq!(entries(&data.path().join("tenants/default/sessions")), 0);
    let mut files: Vec<String> = git(repo.path(), &["status", "--porcelain", "-uall"])
        .lines()
        .map(str::to_string)
        .collect();
    files.sort();
    files.retain(|f| !f.starts_with("?? .hookhost/plans/."));
    let plan = format!("?? .hookhost/plans/{}", plan_name(repo.path()));
    assert_eq!(files, [" M README.md", plan.as_str(), "?? notes.md"]);
    assert_eq!(git(repo.path(), &["log", "--oneline"]).lines().count(), 1);
}

fn plan_name(repo: &Path) -> String {
    std::fs::read_dir(repo.join(".hookhost/plans"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|name| !name.starts_with('.'))
        .unwrap()
}

/// A kept-alive connection's calls are answered at once: the server sets `TCP_NODELAY` on
/// every accepted socket (see `client.py kept-alive`: the fastest of twenty calls under
/// 10 ms, a bound only the 40 ms delayed-ACK stall breaks, not a performance figure).
#[test]
fn kept_alive_calls_over_http_do_not_wait_for_a_delayed_ack() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("hookhost.toml");
    let mut text =
        std::fs::read_to_string(workspace().join("host/src/config/default.toml")).unwrap();
    text.push_str("\n[tenants.alpha]\ntoken = \"alpha-token-0123456789\"\n");
    std::fs::write(&config, text).unwrap();
    let server = Server::start(data.path(), &config);
    client(&["kept-alive", &server.url, "alpha-token-0123456789"]);
}

#[test]
fn http_front_end_parse_errors_bearer_case_tool_lists_session_caps_and_health() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("hookhost.toml");
    let projects = tempfile::tempdir().unwrap();
    let mut text =
        std::fs::read_to_string(workspace().join("host/src/config/default.toml")).unwrap();
    text.push_str(&format!(
        r#"
[upstreams.broken]
command = "/nonexistent/mcp-server"
timeout_secs = 5

[tenants.alpha]
token = "alpha-token-0123456789"
workdir = "{projects}/{{tenant}}"

[tenants.limited]
token = "limited-token-0123456789"
hooks = ["audit"]
tools = ["read_*"]
max_sessions = 1
"#,
        projects = projects.path().display()
    ));
    std::fs::write(&config, text).unwrap();
    // A name, not an address: resolved.
    let server = Server::start_at(data.path(), Some(&config), "localhost:0");
    client(&[
        "http-checks",
        &server.url,
        "alpha-token-0123456789",
        "limited-token-0123456789",
    ]);
    drop(server);
    // alpha's session works in the directory its config names (made for it); the client
    // chose nothing.
    let listed = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args([
            "--config",
            config.to_str().unwrap(),
            "session",
            "list",
            "--tenant",
            "alpha",
        ])
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    let workdir = projects.path().join("alpha").canonicalize().unwrap();
    assert!(
        listed.trim_end().ends_with(&workdir.display().to_string()),
        "{listed}"
    );
}

/// Waits (bounded) for `child` to exit; kills it and fails if it does not.
fn wait_exit(child: &mut Child, within: std::time::Duration) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    while start.elapsed() < within {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let _ = child.kill();
    panic!("hookhost did not exit within {within:?}");
}

/// `hookhost serve` on stdio, spoken to in raw JSON-RPC lines.
struct StdioServer {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl StdioServer {
    fn start(data: &Path) -> StdioServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(data)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("hookhost starts");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut server = StdioServer {
            stdin: child.stdin.take(),
            child,
            lines,
        };
        server.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        server.answer(1);
        server.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: serde_json::Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next answer to any request (bounded wait).
    fn next_answer(&mut self) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            let line = self.lines.recv_timeout(left).expect("an answer");
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                return message;
            }
        }
        panic!("no answer");
    }

    /// The answer to request `id` (bounded wait).
    fn answer(&mut self, id: u64) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            let line = self.lines.recv_timeout(left).expect("an answer");
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
        panic!("no answer to request {id}");
    }

    /// Starts a bash call that sleeps; returns the host's pid of its `sleep`.
    fn start_sleeping_command(&mut self, id: u64) -> i32 {
        let marker = common::marker("sleeper");
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": common::marked_sleep(&marker, 300)}}}),
        );
        common::wait_for_process(&marker)
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_cancelled_call_kills_its_command() {
    let data = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(data.path());
    let pid = server.start_sleeping_command(2);
    assert!(alive(pid));
    server.send(
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "the user pressed escape"}}),
    );
    wait_gone(pid);
    // The server serves on.
    server.send(serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert!(server.answer(3)["result"]["tools"].is_array());
}

#[test]
fn signals_end_a_stdio_server_gracefully_mid_call() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let data = tempfile::tempdir().unwrap();
        let mut server = StdioServer::start(data.path());
        // A file in the session, to see it deleted.
        server.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": "seq 1 5000"}}}),
        );
        server.answer(2);
        let pid = server.start_sleeping_command(3);
        // SAFETY: signalling the child this test started.
        unsafe { libc::kill(server.child.id() as i32, signal) };
        let status = wait_exit(&mut server.child, std::time::Duration::from_secs(20));
        assert_eq!(status.code(), Some(0), "signal {signal}");
        wait_gone(pid);
        assert_eq!(
            entries(&data.path().join("tenants/default/sessions")),
            0,
            "signal {signal}: the session's files are gone"
        );
    }
}

/// SIGHUP reloads the config: a stdio server serves on, its session kept.
#[test]
fn sighup_reloads_a_stdio_server_which_serves_on() {
    let data = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(data.path());
    let echo = |id: u64, word: &str| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": format!("echo {word}")}}})
    };
    server.send(echo(2, "before"));
    server.answer(2);
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGHUP) };
    server.send(echo(3, "after"));
    let answer = server.answer(3);
    assert_eq!(
        answer["result"]["content"][0]["text"], "after\n",
        "{answer}"
    );
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server ended"
    );
    assert_eq!(entries(&data.path().join("tenants/default/sessions")), 1);
}

#[test]
fn a_client_disconnect_kills_running_commands_before_deleting_files() {
    let data = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(data.path());
    let pid = server.start_sleeping_command(2);
    drop(server.stdin.take());
    let status = wait_exit(&mut server.child, std::time::Duration::from_secs(20));
    assert_eq!(status.code(), Some(0));
    wait_gone(pid);
    assert_eq!(entries(&data.path().join("tenants/default/sessions")), 0);
}

#[test]
fn sigterm_ends_an_http_server_gracefully_mid_call() {
    let data = tempfile::tempdir().unwrap();
    // The built-in config serves bash: over HTTP without tokens only when asked to.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args(["serve", "--http", "127.0.0.1:0", "--unauthenticated-bash"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hookhost starts");
    let url = announced_url(&mut child);
    let marker = common::marker("http-sleeper");
    client(&["http-shutdown", &url, &marker, &child.id().to_string()]);
    let status = wait_exit(&mut child, std::time::Duration::from_secs(20));
    assert_eq!(status.code(), Some(0));
    assert!(
        common::processes_with(&marker).is_empty(),
        "the command is gone"
    );
    assert_eq!(entries(&data.path().join("tenants/default/sessions")), 0);
}

#[test]
fn an_upstream_is_listed_whole_relays_progress_and_is_restarted_when_it_dies() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("hookhost.toml");
    let counter = data.path().join("starts");
    std::fs::write(
        &config,
        format!(
            "[upstreams.test]\ncommand = {:?}\nargs = [{:?}, {:?}]\ntimeout_secs = 30\n\n\
             [tools.read_file]\ncomponent = \"builtin:read_file\"\n",
            python().to_str().unwrap(),
            workspace().join("tests/mcp/upstream.py").to_str().unwrap(),
            counter.to_str().unwrap(),
        ),
    )
    .unwrap();
    client(&[
        "upstream",
        env!("CARGO_BIN_EXE_hookhost"),
        data.path().to_str().unwrap(),
        config.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "2");
}

/// An upstream's structured content, images and embedded resources are judged by the
/// default chain with its text: offload keeps every byte over its threshold from the
/// client (tests/mcp/client.py `rich`, the Python SDK on both sides).
#[test]
fn offload_covers_every_part_of_an_upstreams_result() {
    let data = tempfile::tempdir().unwrap();
    let config = builtin_config_with(
        data.path(),
        &format!(
            "\n[upstreams.test]\ncommand = {:?}\nargs = [{:?}, {:?}]\ntimeout_secs = 60\n",
            python().to_str().unwrap(),
            workspace().join("tests/mcp/upstream.py").to_str().unwrap(),
            data.path().join("starts").to_str().unwrap(),
        ),
    );
    let out = client_output(&[
        "rich",
        env!("CARGO_BIN_EXE_hookhost"),
        data.path().to_str().unwrap(),
        config.to_str().unwrap(),
    ]);
    assert!(out.contains("rich ok"), "{out}");
}

#[test]
fn session_gc_leaves_a_running_servers_sessions_alone() {
    let data = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(data.path());
    server.send(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "kept.txt", "content": "kept"}}}),
    );
    assert_eq!(server.answer(2)["result"]["isError"], false);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let gc = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args(["session", "gc", "--idle", "1ms"])
        .output()
        .unwrap();
    assert!(gc.status.success());
    assert!(
        String::from_utf8_lossy(&gc.stdout).starts_with("deleted 0 idle sessions"),
        "{}",
        String::from_utf8_lossy(&gc.stdout)
    );
    server.send(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "kept.txt"}}}),
    );
    let read = server.answer(3);
    assert_eq!(read["result"]["content"][0]["text"], "kept", "{read}");
}

#[test]
fn kill_9_in_a_burst_of_offloads_leaves_no_torn_file() {
    let data = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(data.path());
    const BYTES: usize = 3_000_000;
    let command = format!("head -c {BYTES} /dev/zero | tr '\\0' a");
    for id in 2..42 {
        server.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": command}}}),
        );
    }
    // Three have been offloaded (answered in the order they finish); others are being
    // written: kill the host mid-burst.
    for _ in 0..3 {
        let answered = server.next_answer();
        let text = answered["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.starts_with("[Output offloaded"), "{answered}");
    }
    // SAFETY: killing the child this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    let _ = server.child.wait();
    let mut whole = 0;
    let sessions = data.path().join("tenants/default/sessions");
    for session in std::fs::read_dir(&sessions).unwrap() {
        let dir = session.unwrap().path().join("artifacts/tool-results/bash");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if name.starts_with('.') {
                continue; // a temporary, for `session gc`
            }
            assert_eq!(
                entry.metadata().unwrap().len(),
                BYTES as u64,
                "{name} is torn"
            );
            whole += 1;
        }
    }
    assert!(whole >= 1, "the answered call's file is there");
    // The host's trace of the calls running at once: each flush is one append, so a kill
    // leaves whole lines; every offloaded file it reports is the one on disk.
    let session = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let trace = std::fs::read_to_string(session.join("artifacts/trace/events.jsonl")).unwrap();
    assert!(trace.ends_with('\n'), "the trace ends with a whole line");
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|line| serde_json::from_str(line).expect(line))
        .collect();
    let finished = events
        .iter()
        .filter(|e| e["kind"] == "call.finished")
        .count();
    assert!(finished >= 3, "{finished} calls finished in the trace");
    let whole_sha = {
        use sha2::Digest;
        let digest = sha2::Sha256::digest("a".repeat(BYTES));
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let offloaded: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "file.created")
        .filter(|e| {
            e["path"]
                .as_str()
                .unwrap()
                .starts_with("/artifacts/tool-results/")
        })
        // Not the temporaries: calls run at once, so a look may catch another call's.
        .filter(|e| !e["path"].as_str().unwrap().ends_with(".partial"))
        .collect();
    // Calls run at once in the session: a file is reported by whichever look saw it
    // first (its own call's, another's, or between phases), but each once. A call's
    // events are one write at its end, so a file another call saw first is lost from the
    // trace when that call is killed before its write (seen once in CI: 3 files reported
    // for 4 finished calls) — a known gap, left open in issue 24's note; what is reported
    // must still be whole and reported once.
    assert!(
        !offloaded.is_empty(),
        "{finished} calls finished, no file reported"
    );
    let mut paths: Vec<&str> = offloaded
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    paths.sort_unstable();
    paths.dedup();
    assert_eq!(paths.len(), offloaded.len(), "a file reported twice");
    for created in offloaded {
        assert_eq!(created["after_bytes"], BYTES, "{created}");
        assert_eq!(created["after_sha256"], whole_sha.as_str());
        let path = created["path"]
            .as_str()
            .unwrap()
            .strip_prefix("/artifacts/")
            .unwrap();
        assert_eq!(
            std::fs::metadata(session.join("artifacts").join(path))
                .unwrap()
                .len(),
            BYTES as u64
        );
    }
    // The audit hook appends each line in one write: a kill cannot leave half a line.
    let log = std::fs::read_to_string(data.path().join("tenants/default/audit/audit.jsonl"))
        .expect("the audit log");
    assert!(log.ends_with('\n'), "the log ends with a whole line");
    let started = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect(line))
        .filter(|event| event["event"] == "start")
        .count();
    assert!(started >= 3, "{log}");
}

#[path = "../../tests/src/postgres.rs"]
mod postgres;

/// A `serve --http` whose stderr lines are kept, for what its log says.
struct LoggedServer {
    child: Child,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl LoggedServer {
    fn start(data: &Path, config: &Path, idle: &str) -> LoggedServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(data)
            .arg("--config")
            .arg(config)
            .args(["-v", "serve", "--http", "127.0.0.1:0", "--idle", idle])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hookhost starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut url = None;
        for line in lines.by_ref().map_while(Result::ok) {
            log.lock().unwrap().push(line.clone());
            if let Some(at) = line.find("http://") {
                url = Some(line[at..].trim().to_string());
                break;
            }
        }
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        LoggedServer {
            child,
            url: url.expect("hookhost announced its address"),
            log,
        }
    }

    /// The lines of its log that say `what` about session `id`.
    fn said(&self, what: &str, id: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(what) && l.contains(id))
            .count()
    }
}

impl Drop for LoggedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The session directories under `data` (`tenants/*/sessions/*`).
fn session_dirs(data: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for tenant in std::fs::read_dir(data.join("tenants"))
        .into_iter()
        .flatten()
    {
        let sessions = tenant.unwrap().path().join("sessions");
        for session in std::fs::read_dir(sessions).into_iter().flatten() {
            found.push(session.unwrap().path());
        }
    }
    found
}

/// The ids the client printed after `prefix`.
fn printed<'a>(stdout: &'a str, prefix: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect()
}

/// A PostgreSQL database, a data directory and a config for a fleet sharing them.
struct Fleet {
    pg: postgres::PgServer,
    data: tempfile::TempDir,
    config: PathBuf,
}

impl Fleet {
    fn new() -> Fleet {
        Fleet::with_config(
            &hookhost::config::DEFAULT_CONFIG.replace("enabled = true", "enabled = false"),
        )
    }

    /// A fleet whose hosts run `config` (with the database as its session store).
    fn with_config(config: &str) -> Fleet {
        let pg = postgres::PgServer::start();
        let url = pg.database("fleet");
        let data = tempfile::tempdir().unwrap();
        let path = data.path().join("hookhost.toml");
        std::fs::write(&path, format!("{config}\n[sessions]\nstore = {url:?}\n")).unwrap();
        Fleet {
            pg,
            data,
            config: path,
        }
    }

    fn host(&self, idle: &str) -> LoggedServer {
        LoggedServer::start(self.data.path(), &self.config, idle)
    }

    fn rows(&self) -> String {
        self.pg
            .query("fleet", "SELECT count(*) FROM hookhost_sessions")
    }

    fn hookhost(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        command
            .arg("--data")
            .arg(self.data.path())
            .arg("--config")
            .arg(&self.config)
            .args(args);
        command
    }
}

#[test]
fn two_hosts_on_one_postgres_database_serve_and_collect_the_same_sessions() {
    let fleet = Fleet::new();
    let (a, b) = (fleet.host("3s"), fleet.host("3s"));

    // One MCP session through a balancer without affinity; one begun on A, deleted on B.
    let stdout = client_output(&["fleet", &a.url, &b.url, fleet.data.path().to_str().unwrap()]);
    let deleted = printed(&stdout, "deleted ")[0];
    assert_eq!(
        a.said("session deleted session=", deleted) + b.said("session deleted session=", deleted),
        1,
        "deleted once"
    );

    // MCP 2026 requests name their hookhost session themselves: one made on A is read
    // on B, alternating, and ended on B (tests/mcp/modern.py --fleet).
    modern(&[&a.url, "--fleet", &b.url]);

    // Sessions begun on either host and written on the other, then left idle.
    let stdout = client_output(&["open-sessions", &a.url, &b.url, "8"]);
    let idle = printed(&stdout, "opened ");
    assert_eq!(idle.len(), 8);
    // The command line, a third process on the same table, lists them.
    let listed = fleet.hookhost(&["session", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(idle.iter().all(|id| listed.contains(id)), "{listed}");

    // Both hosts sweep; every idle session is collected exactly once, its files with it.
    // A sweep deletes the row, then the files, then says so: wait for all three.
    let started = std::time::Instant::now();
    let collected =
        |id: &str| a.said("idle session collected", id) + b.said("idle session collected", id);
    while fleet.rows() != "0"
        || !session_dirs(fleet.data.path()).is_empty()
        || idle.iter().any(|id| collected(id) == 0)
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "idle sessions were not collected: {} left",
            fleet.rows()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    for id in &idle {
        assert_eq!(collected(id), 1, "{id} collected more than once");
    }
    assert_eq!(
        fleet
            .pg
            .query("fleet", "SELECT count(*) FROM hookhost_mcp_sessions"),
        "0",
        "nor their MCP state"
    );
}

/// The session store over TLS (the URL's `sslmode`, rustls), to a server that takes TCP
/// connections over TLS only, with a certificate signed by a CA the test made: verified
/// against `sslrootcert` it connects; the system's roots do not know that CA, so
/// `require` without it is refused, as is `disable`.
#[test]
fn the_session_store_is_reached_over_tls_with_its_certificate_verified() {
    let dir = tempfile::tempdir().unwrap();
    common::leaf_certificate(dir.path(), "db");
    let pg = postgres::PgServer::start_tls(&dir.path().join("db.pem"), &dir.path().join("db.key"));
    let url = pg.database("tls");
    let ca = dir.path().join("ca.pem");
    let session = |query: &str, args: &[&str]| {
        let config = dir.path().join("hookhost.toml");
        std::fs::write(&config, format!("[sessions]\nstore = \"{url}?{query}\"\n")).unwrap();
        Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    let verified = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let made = session(&verified, &["session", "new"]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let id = String::from_utf8_lossy(&made.stdout).trim().to_string();
    let listed = session(&verified, &["session", "list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));
    assert_eq!(
        pg.query("tls", "SELECT count(*) FROM hookhost_sessions"),
        "1"
    );

    for (query, why) in [
        ("sslmode=disable", "no encryption"),
        ("sslmode=require", "certificate"),
    ] {
        let refused = session(query, &["session", "list"]);
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{query}: {said}");
        assert!(said.contains(why), "{query}: {said}");
    }
}

/// A fleet host's `/readyz` says ready while its session store answers, and fails, naming
/// the store, once the database is gone: a balancer's probe takes the host out.
#[test]
fn readyz_fails_while_the_session_store_is_down() {
    let fleet = Fleet::new();
    let host = fleet.host("30s");
    let base = host.url.trim_end_matches("/mcp").to_string();
    let (status, body) = common::http_get(&base, "/readyz", None);
    assert_eq!(status, 200, "{body}");
    let Fleet { pg, .. } = fleet;
    drop(pg); // PostgreSQL shuts down
    let (status, body) = common::http_get(&base, "/readyz", None);
    assert_eq!(status, 503, "{body}");
    let said: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(said["status"], "not ready", "{body}");
    assert!(
        said["not_ready"][0]
            .as_str()
            .is_some_and(|why| why.starts_with("session store: ") && why.contains("127.0.0.1:")),
        "{body}"
    );
}

/// The descriptors process `pid` holds whose path names `what`.
fn fds_naming(pid: u32, what: &str) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|target| target.contains(what))
        .collect()
}

/// A host of a fleet lets go of what it held for a session another process deleted (here
/// the CLI, on the same table): its trace state — the open events file, the descriptors
/// of its mounts — its MCP session, all within a tick of its sweep.
#[test]
fn a_fleet_host_forgets_a_session_deleted_elsewhere() {
    let fleet = Fleet::new();
    // Idle sessions are collected after 20 s, well after this test; the sweep ticks
    // every 5 s.
    let a = fleet.host("20s");
    let stdout = client_output(&["open-sessions", &a.url, &a.url, "1"]);
    let id = printed(&stdout, "opened ")[0].to_string();
    let held = || fds_naming(a.child.id(), &id);
    assert!(
        !held().is_empty(),
        "the trace keeps the session's events file open"
    );
    let out = fleet
        .hookhost(&["session", "delete", &id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = std::time::Instant::now();
    while !held().is_empty() || a.said("session ended on another host", &id) == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "host A still holds {:?}",
            held()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        fleet
            .pg
            .query("fleet", "SELECT count(*) FROM hookhost_mcp_sessions"),
        "0",
        "its MCP session is closed"
    );
}

#[test]
fn after_kill_9_of_both_hosts_two_racing_gcs_remove_each_session_once() {
    let fleet = Fleet::new();
    let (mut a, mut b) = (fleet.host("1h"), fleet.host("1h"));
    let stdout = client_output(&["open-sessions", &a.url, &b.url, "40"]);
    assert_eq!(printed(&stdout, "opened ").len(), 40);
    for host in [&mut a, &mut b] {
        // SAFETY: killing the child this test started.
        unsafe { libc::kill(host.child.id() as i32, libc::SIGKILL) };
        let _ = host.child.wait();
    }
    assert_eq!(session_dirs(fleet.data.path()).len(), 40);

    // Their servers are gone, so any gc may collect their sessions: two race to.
    let racers: Vec<Child> = (0..2)
        .map(|_| {
            fleet
                .hookhost(&["session", "gc", "--idle", "0s"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut deleted = Vec::new();
    for racer in racers {
        let out = racer.wait_with_output().unwrap();
        assert!(out.status.success());
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        let n: usize = said
            .strip_prefix("deleted ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("gc said: {said}"));
        deleted.push(n);
    }
    eprintln!("sessions deleted by each gc: {deleted:?}");
    assert_eq!(
        deleted.iter().sum::<usize>(),
        40,
        "each session deleted by exactly one gc: {deleted:?}"
    );
    assert_eq!(fleet.rows(), "0");
    assert_eq!(session_dirs(fleet.data.path()), Vec::<PathBuf>::new());
}

/// The built-in config with an audit hook that cannot write its log (its directory is
/// missing): it traps in every `before-execute`, a failure open policy lets through.
fn config_with_failing_audit(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join("host/src/config/default.toml"))
        .unwrap()
        .replace("/audit/audit.jsonl", "/audit/missing/audit.jsonl");
    assert!(text.contains("/audit/missing/"));
    let config = dir.join("failing-audit.toml");
    std::fs::write(&config, text).unwrap();
    config
}

#[test]
fn metrics_parsed_by_a_prometheus_parser_count_the_calls_made() {
    let data = tempfile::tempdir().unwrap();
    let config = config_with_failing_audit(data.path());
    // Served over HTTP with no token: no shell.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("enabled = true", "enabled = false")).unwrap();
    let server = Server::start(data.path(), &config);
    let out = client_output(&["metrics", &server.url, "5"]);
    assert!(out.contains("metrics ok 5"), "{out}");
}

#[test]
fn serve_metrics_answers_beside_a_stdio_server() {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args(["serve", "--metrics", "127.0.0.1:0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hookhost starts");
    let url = announced_url(&mut child);
    assert!(url.ends_with("/metrics"), "{url}");
    let out = client_output(&["scrape", &url]);
    let sessions: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|s: &serde_json::Value| s["name"] == "hookhost_sessions")
        .collect();
    assert_eq!(sessions.len(), 1, "{out}");
    assert_eq!(sessions[0]["labels"]["tenant"], "default");
    assert_eq!(sessions[0]["value"], 1.0, "the stdio server's own session");
    drop(child.stdin.take());
    wait_exit(&mut child, std::time::Duration::from_secs(30));
}

/// An OTLP/HTTP receiver (tests/otlp/receiver.py), killed on drop; its spans arrive on a
/// channel.
struct Receiver {
    child: Child,
    port: u16,
    spans: std::sync::mpsc::Receiver<serde_json::Value>,
}

impl Receiver {
    fn start() -> Receiver {
        let mut child = Command::new(python())
            .arg(workspace().join("tests/otlp/receiver.py"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the receiver says its port").unwrap();
        let port = first
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .expect("listening PORT");
        let (tx, spans) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        Receiver { child, port, spans }
    }

    /// Spans received until `count` have come (or 30 s passed).
    fn take(&self, count: usize) -> Vec<serde_json::Value> {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut spans = Vec::new();
        while spans.len() < count {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.spans.recv_timeout(left) {
                Ok(span) => spans.push(span),
                Err(_) => break,
            }
        }
        spans
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The span named `name` and its children, by their names in order of the phases.
fn span_tree<'a>(
    spans: &'a [serde_json::Value],
    name: &str,
) -> (&'a serde_json::Value, Vec<&'a serde_json::Value>) {
    let roots: Vec<_> = spans.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(roots.len(), 1, "one span {name}: {spans:#?}");
    let root = roots[0];
    let children = spans
        .iter()
        .filter(|s| s["parent_span_id"] == root["span_id"])
        .collect::<Vec<_>>();
    for child in &children {
        assert_eq!(child["trace_id"], root["trace_id"]);
    }
    (root, children)
}

#[test]
fn each_call_reaches_a_real_otlp_receiver_as_one_span_tree() {
    let receiver = Receiver::start();
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let data = tempfile::tempdir().unwrap();
    // The standard variable, with the built-in config.
    let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .args(["call", "bash", r#"{"command": "seq 1 3000"}"#])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        // Loaded test machines: more than a one-shot command's 80 ms to reach the receiver.
        .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let session = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("hookhost: session ").map(str::to_string))
        .expect("the new session is named");

    // The config's [telemetry], and a hook that fails.
    let config = config_with_failing_audit(data.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n[telemetry]\notlp_endpoint = {endpoint:?}\n"));
    std::fs::write(&config, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data.path())
        .arg("--config")
        .arg(&config)
        .args(["call", "read_file", r#"{"path": "/workspace/none"}"#])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");

    // 1 + 5 spans, then 1 + 4 (the failed audit hook has no after-execute).
    let spans = receiver.take(11);
    assert_eq!(spans.len(), 11, "{spans:#?}");
    let (call, children) = span_tree(&spans, "call bash");
    assert_eq!(call["parent_span_id"], "");
    assert_eq!(call["service"], "hookhost");
    assert_eq!(call["attributes"]["tenant"], "default");
    assert_eq!(call["attributes"]["session"], session.as_str());
    assert_eq!(call["attributes"]["tool"], "bash");
    assert_eq!(call["attributes"]["outcome"], "done");
    let mut names: Vec<&str> = children
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "audit after-execute",
            "audit before-execute",
            "bash execute",
            "offload after-execute",
            "offload before-execute"
        ]
    );
    assert!(
        children
            .iter()
            .all(|c| c["attributes"]["outcome"] == "passed")
    );

    let (call, children) = span_tree(&spans, "call read_file");
    assert_eq!(call["attributes"]["outcome"], "tool-error");
    assert_ne!(
        call["trace_id"],
        span_tree(&spans, "call bash").0["trace_id"]
    );
    let audit = children
        .iter()
        .find(|c| c["name"] == "audit before-execute")
        .unwrap();
    assert_eq!(audit["attributes"]["outcome"], "failed");
    assert_eq!(audit["attributes"]["failure_kind"], "trap");
    let tool = children
        .iter()
        .find(|c| c["name"] == "read_file execute")
        .unwrap();
    assert_eq!(tool["attributes"]["outcome"], "tool-error");
    // The audit hook failed before: it has no after-execute.
    assert_eq!(children.len(), 4, "{children:#?}");
}

/// A tenant's `deadline_ms` and `max_output_bytes` bound its calls that are not
/// components' too: a `bash` command and an upstream server's tool. Another tenant, with
/// no limits of its own, runs the same calls to their end.
#[test]
fn a_tenants_limits_bound_its_bash_and_upstream_calls_too() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("hookhost.toml");
    let builtin =
        std::fs::read_to_string(workspace().join("host/src/config/default.toml")).unwrap();
    std::fs::write(
        &config,
        format!(
            "{builtin}\n[upstreams.test]\ncommand = {:?}\nargs = [{:?}, {:?}]\n\n\
             [tenants.tight]\nlimits = {{ deadline_ms = 1500, max_output_bytes = 4000 }}\n\n\
             [tenants.free]\n",
            python().to_str().unwrap(),
            workspace().join("tests/mcp/upstream.py").to_str().unwrap(),
            data.path().join("starts").to_str().unwrap(),
        ),
    )
    .unwrap();
    let call = |tenant: &str, tool: &str, arguments: serde_json::Value| {
        let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(data.path())
            .arg("--config")
            .arg(&config)
            .args(["call", "--json", "--tenant", tenant, tool])
            .arg(arguments.to_string())
            .output()
            .unwrap();
        let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (
            result["output"].as_str().unwrap().to_string(),
            result["is_error"].as_bool().unwrap(),
        )
    };
    let slow = serde_json::json!({"command": "sleep 3; echo slept"});
    let (output, failed) = call("tight", "bash", slow.clone());
    assert!(
        failed && output.contains("[timed out after 1.5 s; killed]"),
        "{output}"
    );
    let (output, failed) = call("free", "bash", slow);
    assert!(!failed && output == "slept\n", "{output}");

    let long = serde_json::json!({"command": "head -c 9000 /dev/zero | tr '\\0' a"});
    let (output, failed) = call("tight", "bash", long.clone());
    assert!(
        !failed && output.contains("[stdout truncated: 5000 more bytes]"),
        "{output}"
    );
    let (output, failed) = call("free", "bash", long);
    assert!(!failed && output == "a".repeat(9000), "{output}");

    let wait = serde_json::json!({"secs": 3});
    let (output, failed) = call("tight", "test__wait", wait.clone());
    assert!(
        failed && output.contains("did not answer within 1.5 s"),
        "{output}"
    );
    let (output, failed) = call("free", "test__wait", wait);
    assert!(!failed && output == "waited", "{output}");

    let letters = serde_json::json!({"count": 9000});
    let (output, failed) = call("tight", "test__letters", letters.clone());
    assert!(failed && output.contains("(output-too-large)"), "{output}");
    let (output, failed) = call("free", "test__letters", letters);
    assert!(!failed && output == "a".repeat(9000), "{output}");
}

/// `hookhost --data DATA --config CONFIG ARGS`, run to its end.
fn hookhost_on(data: &Path, config: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap()
}

/// The built-in config with `extra` after it.
fn builtin_config_with(dir: &Path, extra: &str) -> PathBuf {
    let config = dir.join("hookhost.toml");
    let mut text =
        std::fs::read_to_string(workspace().join("host/src/config/default.toml")).unwrap();
    text.push_str(extra);
    std::fs::write(&config, text).unwrap();
    config
}

/// `[upstreams.everything]`: tests/mcp/everything.py (the official Python SDK) on stdio.
fn everything_py_upstream(prefix: Option<&str>) -> String {
    let prefix = prefix.map_or(String::new(), |p| format!("prefix = {p:?}\n"));
    format!(
        "\n[upstreams.everything]\ncommand = {:?}\nargs = [{:?}]\ntimeout_secs = 60\n{prefix}",
        python().to_str().unwrap(),
        workspace()
            .join("tests/mcp/everything.py")
            .to_str()
            .unwrap(),
    )
}

#[test]
fn an_upstreams_resources_prompts_logs_and_requests_reach_the_client_through_hookhost() {
    let data = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let project = project.path().canonicalize().unwrap();
    let config = builtin_config_with(
        data.path(),
        &format!(
            "{}roots = true\n\n[tenants.alpha]\ntoken = \"alpha-token-0123456789\"\n\
             workdir = {:?}\n\n\
             [tenants.beta]\ntoken = \"beta-token-0123456789\"\n\
             resources = [\"test://static-*\"]\nprompts = [\"*simple*\"]\n",
            everything_py_upstream(None),
            project.to_str().unwrap(),
        ),
    );
    let server = Server::start(data.path(), &config);
    let script = workspace().join("tests/mcp/gateway.py");
    let audit = data.path().join("tenants/alpha/audit");
    let out = Command::new(python())
        .arg(script)
        .args([
            server.url.as_str(),
            "alpha-token-0123456789",
            "beta-token-0123456789",
            audit.to_str().unwrap(),
            project.to_str().unwrap(),
        ])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the gateway client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("progress ok: 300 calls"), "{stdout}");
    assert!(stdout.contains("2026 logs ok"), "{stdout}");
}

/// tests/mcp/everything.py serving Streamable HTTP on a free loopback port: its `url` is
/// `http://ADDRESS/mcp`; killed (by its process id) when dropped, as a [`Server`] is.
fn everything_over_http() -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python())
        .arg(workspace().join("tests/mcp/everything.py"))
        .args(["--http", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address = format!("127.0.0.1:{port}");
    for _ in 0..200 {
        if std::net::TcpStream::connect(&address).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Server {
        child,
        url: format!("http://{address}/mcp"),
    }
}

/// An HTTP upstream's connections are kept between calls, and a 307 to the same origin is
/// followed (a Python SDK server at `/mcp` answers `/mcp/` with one).
#[test]
fn an_http_upstream_is_reached_through_a_same_origin_redirect() {
    let data = tempfile::tempdir().unwrap();
    let upstream = everything_over_http();
    let config = builtin_config_with(
        data.path(),
        &format!("\n[upstreams.everything]\nurl = \"{}/\"\n", upstream.url),
    );
    let out = hookhost_on(
        data.path(),
        &config,
        &["call", "everything__test_simple_text"],
    );
    drop(upstream);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("This is a simple text response"),
        "{stdout}"
    );
}

#[test]
fn a_tool_name_two_upstreams_would_serve_stops_the_start_naming_both() {
    let data = tempfile::tempdir().unwrap();
    let mut extra = everything_py_upstream(Some(""));
    extra.push_str(&everything_py_upstream(Some("")).replace("everything]", "twin]"));
    let config = builtin_config_with(data.path(), &extra);
    let out = hookhost_on(data.path(), &config, &["tools"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("upstreams.twin: serves a tool named")
            && stderr.contains("as upstreams.everything does"),
        "{stderr}"
    );
    // With prefixes of their own, both are served.
    let mut extra = everything_py_upstream(None);
    extra.push_str(&everything_py_upstream(Some("twin_")).replace("everything]", "twin]"));
    let config = builtin_config_with(data.path(), &extra);
    let out = hookhost_on(data.path(), &config, &["tools"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("everything__whoami") && stdout.contains("twin_whoami"),
        "{stdout}"
    );
    // Without `roots = true`, an upstream that asks for roots is refused.
    let out = hookhost_on(data.path(), &config, &["call", "everything__roots"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("no roots:"), "{stdout}");
}

/// The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, run by the
/// Node that `.ci/run` installs beside it): `conformance ARGS` in a scratch directory (it
/// writes its results there); panics with its report unless it exits 0.
fn conformance(args: &[&str], env: &[(&str, &str)]) {
    let installed = peer("HOOKHOST_TEST_CONFORMANCE", "target/ci-conformance");
    conformance_of(&installed, args, env);
}

/// The suite of MCP 2026-07-28 (0.2.0, installed by `.ci/run` beside 0.1.16), as
/// [`conformance`].
fn conformance_2026(args: &[&str]) {
    conformance_2026_with(args, &[]);
}

/// [`conformance_2026`] with `env`.
fn conformance_2026_with(args: &[&str], env: &[(&str, &str)]) {
    let installed = peer(
        "HOOKHOST_TEST_CONFORMANCE_2026",
        "target/ci-conformance-2026",
    );
    conformance_of(&installed, args, env);
}

fn conformance_of(installed: &Path, args: &[&str], env: &[(&str, &str)]) {
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(installed.join("node_modules/.bin/node"))
        .arg(installed.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(args)
        .arg("-o")
        .arg(results.path())
        .envs(env.iter().copied())
        .current_dir(results.path())
        .output()
        .expect("the conformance suite runs");
    if out.status.success() {
        return;
    }
    // The checks of the scenarios that failed, as the suite saved them.
    let mut failed = String::new();
    let mut dirs = vec![results.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path)
                && text.contains("\"FAILURE\"")
            {
                failed.push_str(&format!("{}:\n{text}\n", path.display()));
            }
        }
    }
    panic!(
        "conformance {args:?} failed:\n{}\n{}\n{failed}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `hookhost serve --http` on `config` (the built-in config serves bash: loopback, no
/// tokens, so `--unauthenticated-bash`).
fn serve_unauthenticated(data: &Path, config: &Path) -> Server {
    serve_http(data, config, &["--unauthenticated-bash"])
}

/// `hookhost serve --http FLAGS` on `config`.
fn serve_http(data: &Path, config: &Path, flags: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hookhost starts");
    let url = announced_url(&mut child);
    Server { child, url }
}

#[test]
fn the_official_conformance_suite_passes_through_hookhost() {
    let data = tempfile::tempdir().unwrap();
    // (a) The built-in config: what it serves passes; what needs the suite's own tools,
    // resources and prompts is listed in the baseline, which the suite checks both ways.
    let config = builtin_config_with(data.path(), "");
    let server = serve_unauthenticated(data.path(), &config);
    let baseline = workspace().join("tests/conformance/builtin-expected-failures.yml");
    conformance(
        &[
            "server",
            "--suite",
            "all",
            "--url",
            &server.url,
            "--expected-failures",
            baseline.to_str().unwrap(),
        ],
        &[],
    );
    drop(server);

    // (b) Through hookhost, with its default chain, fronting a server that serves what the
    // suite asks (tests/mcp/everything.py) under its own names: every scenario passes,
    // with the upstream on stdio and over HTTP.
    let config = builtin_config_with(data.path(), &everything_py_upstream(Some("")));
    let server = serve_unauthenticated(data.path(), &config);
    conformance(&["server", "--suite", "all", "--url", &server.url], &[]);
    drop(server);

    let upstream = everything_over_http();
    let config = builtin_config_with(
        data.path(),
        &format!(
            "\n[upstreams.everything]\nurl = {:?}\nprefix = \"\"\n",
            upstream.url
        ),
    );
    let server = serve_unauthenticated(data.path(), &config);
    conformance(&["server", "--suite", "all", "--url", &server.url], &[]);
    drop(server);
    drop(upstream);

    // (c) hookhost as the client of the suite's test servers, including an OAuth
    // authorization server and a protected MCP server (the client_credentials grant).
    let client = workspace().join("tests/conformance/client.sh");
    for scenario in [
        "initialize",
        "tools_call",
        "sse-retry",
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
        "auth/resource-mismatch",
    ] {
        conformance(
            &[
                "client",
                "--command",
                client.to_str().unwrap(),
                "--scenario",
                scenario,
            ],
            &[("HOOKHOST", env!("CARGO_BIN_EXE_hookhost"))],
        );
    }
}

/// MCP 2026-07-28, the suite's `--requirements 2026-07-28` server scenarios: against the
/// built-in config and through hookhost fronting tests/mcp/everything.py and the
/// multi-round-trip fixtures of tests/mcp/modern_upstream.cjs, each with the
/// baseline of what cannot pass yet (the files say why), which the suite checks both
/// ways; the suite's 2026 client scenarios that need no person, with hookhost as the
/// client; then the official Python SDK pinned to 2026-07-28 (tests/mcp/modern.py: hookhost
/// sessions named, made, ephemeral, refused across tenants and ended, and a 2025 client
/// beside it), over HTTP with two tenants.
#[test]
fn mcp_2026_clients_are_served_beside_the_2025_era() {
    let data = tempfile::tempdir().unwrap();
    // The 2025-era everything.py and the 2026 fixtures of modern_upstream.cjs, both unprefixed.
    let fronted = format!(
        "{}{}prefix = \"\"\n",
        everything_py_upstream(Some("")),
        modern_upstream_stdio("modern", None)
    );
    for (upstream, baseline) in [
        (String::new(), "builtin-2026-expected-failures.yml"),
        (fronted, "2026-expected-failures.yml"),
    ] {
        let config = builtin_config_with(data.path(), &upstream);
        let server = serve_unauthenticated(data.path(), &config);
        let baseline = workspace().join("tests/conformance").join(baseline);
        conformance_2026(&[
            "server",
            "--requirements",
            "2026-07-28",
            "--url",
            &server.url,
            "--expected-failures",
            baseline.to_str().unwrap(),
        ]);
    }

    // hookhost as the client of the suite's 2026 test servers (its upstream pinned to
    // 2026-07-28): metadata and headers on every request, the parameters a tool marks
    // mirrored into headers, an invalid tool left out, schemas passed on whole.
    let client = workspace().join("tests/conformance/client.sh");
    for scenario in [
        "tools_call",
        "request-metadata",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ] {
        conformance_2026_with(
            &[
                "client",
                "--command",
                client.to_str().unwrap(),
                "--scenario",
                scenario,
                "--spec-version",
                "2026-07-28",
            ],
            &[
                ("HOOKHOST", env!("CARGO_BIN_EXE_hookhost")),
                ("HOOKHOST_UPSTREAM_PROTOCOL", "2026-07-28"),
            ],
        );
    }

    let config = builtin_config_with(
        data.path(),
        "\n[tenants.alpha]\ntoken = \"alpha-token-0123456789abcdef\"\n\
         [tenants.beta]\ntoken = \"beta-token-0123456789abcdefgh\"\n",
    );
    let server = serve_http(data.path(), &config, &[]);
    let data = data.path().to_str().unwrap();
    modern(&[
        &server.url,
        "alpha-token-0123456789abcdef",
        "--other-token",
        "beta-token-0123456789abcdefgh",
        "--data",
        data,
    ]);
}

/// An upstream's question for a client of MCP 2026-07-28 is asked in the answer to the
/// client's request (`input_required`), whichever era the upstream speaks, and the call
/// goes on when the client sends the request again with the answers: through the Python
/// SDK's own driver and callbacks, in a named session and an ephemeral one, the hooks
/// seeing one call each; by hand, the state is bound to its tenant and request, single
/// use, and refused tampered; a call that asks twice is asked both, another tenant's
/// call on the same upstream not at all; an answer slower than the upstream's timeout
/// completes; a retry in an ended session is refused; an undeclared capability fails the
/// request with -32021 (tests/mcp/modern.py --asks).
#[test]
fn an_upstreams_questions_are_asked_of_a_2026_client_in_the_answer() {
    let data = tempfile::tempdir().unwrap();
    let config = builtin_config_with(
        data.path(),
        &format!(
            "{}{}\n[tenants.alpha]\ntoken = \"alpha-token-0123456789abcdef\"\n\
             [tenants.beta]\ntoken = \"beta-token-0123456789abcdefgh\"\n",
            // A short timeout, which an answer given later must not break.
            everything_py_upstream(None).replace("timeout_secs = 60", "timeout_secs = 3"),
            modern_upstream_stdio("modern", None),
        ),
    );
    let server = serve_http(data.path(), &config, &[]);
    modern(&[
        &server.url,
        "alpha-token-0123456789abcdef",
        "--asks",
        "--other-token",
        "beta-token-0123456789abcdefgh",
        "--data",
        data.path().to_str().unwrap(),
    ]);
}

/// tests/mcp/modern.py (the Python SDK pinned to MCP 2026-07-28) with `args`; panics with
/// its output when it fails.
fn modern(args: &[&str]) {
    let out = Command::new(python())
        .arg(workspace().join("tests/mcp/modern.py"))
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "modern.py {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Where `.ci/run` installed the TypeScript SDK v2 (`@modelcontextprotocol/server` and
/// `client`), for
/// `NODE_PATH`; or `HOOKHOST_TEST_NODE_MODULES`.
fn node_modules() -> PathBuf {
    let modules = peer("HOOKHOST_TEST_NODE_MODULES", "target/ci-node/node_modules");
    assert!(
        modules.join("@modelcontextprotocol/server").exists()
            && modules.join("@modelcontextprotocol/client").exists(),
        "the TypeScript SDK v2 is missing from {}: run `bash .ci/run` once",
        modules.display()
    );
    modules
}

/// The TypeScript SDK v2's client (tests/mcp/modern_client.cjs), pinned to MCP 2026-07-28
/// and in `auto` mode, negotiates 2026-07-28 with hookhost over HTTP and over stdio, lists
/// its tools, and keeps a file in the hookhost session it asked for by its id (over HTTP a
/// request naming none runs in an ephemeral session; over stdio the connection is one).
#[test]
fn the_typescript_sdk_v2_client_speaks_mcp_2026_with_hookhost_over_http_and_stdio() {
    let data = tempfile::tempdir().unwrap();
    let config = builtin_config_with(data.path(), "");
    let server = serve_unauthenticated(data.path(), &config);
    let stdio_data = data.path().join("stdio");
    let hookhost = env!("CARGO_BIN_EXE_hookhost");
    for args in [
        vec!["http", server.url.as_str()],
        vec![
            "stdio",
            hookhost,
            stdio_data.to_str().unwrap(),
            config.to_str().unwrap(),
        ],
    ] {
        let out = Command::new("node")
            .arg(workspace().join("tests/mcp/modern_client.cjs"))
            .args(&args)
            .env("NODE_PATH", node_modules())
            .output()
            .expect("node runs");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("modern client ok"),
            "modern_client.cjs {args:?}: {said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// tests/mcp/modern_upstream.cjs (the TypeScript SDK v2, MCP 2026-07-28 only), to run.
fn modern_upstream() -> PathBuf {
    workspace().join("tests/mcp/modern_upstream.cjs")
}

/// `[upstreams.NAME]` running tests/mcp/modern_upstream.cjs on stdio; with `once`, only
/// once that file exists (through `sh -c`: before, it exits at once, as a server that
/// cannot start yet).
fn modern_upstream_stdio(name: &str, once: Option<&Path>) -> String {
    let script = modern_upstream();
    let (command, args) = match once {
        None => ("node".to_string(), format!("[{:?}, \"stdio\"]", script)),
        Some(flag) => (
            "sh".to_string(),
            format!(
                "[\"-c\", {:?}]",
                format!(
                    "test -e '{}' && exec node '{}' stdio",
                    flag.display(),
                    script.display()
                )
            ),
        ),
    };
    format!(
        "\n[upstreams.{name}]\ncommand = {command:?}\nargs = {args}\n\
         env = {{ NODE_PATH = {:?} }}\ntimeout_secs = 60\n",
        node_modules()
    )
}

/// Upstreams that speak only MCP 2026-07-28 (the TypeScript SDK v2 refusing `initialize`),
/// on stdio and over HTTP, are found by discovery and served to clients of both eras
/// (tests/mcp/eras.py): their tools listed and called, and a multi-round-trip request's
/// question asked of a 2025 client that declared elicitation, its answer carried back.
/// One that cannot start yet is tried again until it does, and `/readyz` says so meanwhile;
/// an `optional` one that never starts leaves the host ready, named as degraded.
#[test]
fn upstreams_of_mcp_2026_are_found_retried_and_served_to_both_eras() {
    let data = tempfile::tempdir().unwrap();
    let mut http_upstream = Reaped(
        Command::new("node")
            .arg(modern_upstream())
            .arg("http")
            .env("NODE_PATH", node_modules())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node runs"),
    );
    let line = BufReader::new(http_upstream.0.stdout.take().unwrap())
        .lines()
        .next()
        .expect("the HTTP upstream announces itself")
        .unwrap();
    let upstream_url = line.strip_prefix("listening ").expect(&line).to_string();
    let flag = data.path().join("late-may-start");
    let mut extra = modern_upstream_stdio("modern", None);
    extra.push_str(&format!(
        "\n[upstreams.remote]\nurl = {upstream_url:?}\nprotocol = \"2026-07-28\"\n"
    ));
    extra.push_str(&modern_upstream_stdio("late", Some(&flag)));
    extra.push_str("\n[upstreams.gone]\ncommand = \"/nonexistent/mcp-server\"\noptional = true\n");
    let config = builtin_config_with(data.path(), &extra);
    let server = serve_unauthenticated(data.path(), &config);
    let base = server.url.trim_end_matches("/mcp").to_string();

    let (status, body) = common::http_get(&base, "/readyz", None);
    let said: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        said["not_ready"],
        serde_json::json!(["upstream late: unavailable"]),
        "{body}"
    );
    assert_eq!(
        said["degraded"],
        serde_json::json!(["upstream gone: unavailable"]),
        "{body}"
    );

    eras(&[&server.url, "modern__", "remote__"]);

    // The late one starts once it can: tried again with a backoff, no reload.
    std::fs::write(&flag, "").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let body = loop {
        let (status, body) = common::http_get(&base, "/readyz", None);
        if status == 200 {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "never ready: {body}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let said: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        said["degraded"],
        serde_json::json!(["upstream gone: unavailable"]),
        "{body}"
    );
    eras(&[&server.url, "late__"]);

    let checked = hookhost_on(data.path(), &config, &["config", "check"]);
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(
        said.contains("(upstream modern speaks MCP 2026-07-28)"),
        "{said}"
    );
}

/// A child process killed (by its pid) and reaped when dropped, a failed test included.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// tests/mcp/eras.py with `args`; panics with its output when it fails.
fn eras(args: &[&str]) {
    let out = Command::new(python())
        .arg(workspace().join("tests/mcp/eras.py"))
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "eras.py {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// hookhost as the OAuth client of upstreams that require MCP authorization, against an
/// authorization server and a resource server (the Python SDK's) that tests/mcp/protected.py
/// makes on 127.0.0.1: client_credentials with a secret and with a signed JWT, and the
/// refresh_token grant; tokens that expire and tokens the server revokes are replaced; a
/// revoked refresh token fails the call saying what to configure; nothing secret is logged.
#[test]
fn upstreams_behind_oauth_get_and_renew_their_tokens_without_a_person() {
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(python())
        .arg(workspace().join("tests/mcp/protected.py"))
        .args([
            env!("CARGO_BIN_EXE_hookhost"),
            work.path().to_str().unwrap(),
        ])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "first tokens ok",
        "expiry ok",
        "revocation ok",
        "reconnection ok",
        "revoked refresh token ok",
        "log ok",
    ] {
        assert!(stdout.contains(step), "{stdout}");
    }
}

#[test]
fn upstreams_with_an_instance_per_tenant_or_session_keep_tenants_apart() {
    let data = tempfile::tempdir().unwrap();
    let memory = peer(
        "HOOKHOST_TEST_MEMORY",
        "target/ci-node/node_modules/.bin/mcp-server-memory",
    );
    let config = builtin_config_with(
        data.path(),
        &format!(
            "\n[upstreams.memory]\ncommand = {:?}\nscope = \"tenant\"\n\
             env = {{ MEMORY_FILE_PATH = \"{{data}}/tenants/{{tenant}}/memory.jsonl\" }}\n\n\
             [upstreams.mine]\ncommand = {:?}\nargs = [{:?}]\nscope = \"session\"\nmax_instances = 2\n\n\
             [tenants.alpha]\ntoken = \"alpha-token-0123456789\"\n\n\
             [tenants.beta]\ntoken = \"beta-token-0123456789\"\n",
            memory.to_str().unwrap(),
            python().to_str().unwrap(),
            workspace()
                .join("tests/mcp/everything.py")
                .to_str()
                .unwrap(),
        ),
    );
    std::fs::create_dir_all(data.path().join("tenants/alpha")).unwrap();
    std::fs::create_dir_all(data.path().join("tenants/beta")).unwrap();
    let server = Server::start(data.path(), &config);
    // (scopes.py also reads /healthz, /readyz and /metrics.)
    let out = Command::new(python())
        .arg(workspace().join("tests/mcp/scopes.py"))
        .args([
            server.url.as_str(),
            "alpha-token-0123456789",
            "beta-token-0123456789",
            data.path().to_str().unwrap(),
        ])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    drop(server);

    // Shared by tenants, such a server is what `config check` warns of.
    let shared = builtin_config_with(
        data.path(),
        &format!(
            "\n[upstreams.memory]\ncommand = {:?}\n\n[tenants.alpha]\ntoken = \"alpha-token-0123456789\"\n",
            memory.to_str().unwrap()
        ),
    );
    let out = hookhost_on(data.path(), &shared, &["config", "check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("upstreams.memory looks stateful") && stderr.contains("scope = \"tenant\""),
        "{stderr}"
    );
}

/// Persistent directories as MCP clients meet them (tests/mcp/persistent.py, the Python
/// SDK over `serve --http`): a session's writes reach the others after its
/// `hookhost/commit`; a conflict fails the second commit (-32040, its files in `data`) and
/// keeps its text, until `resolve` settles it; a DELETE in conflict is 409 and keeps the
/// session, until settled or discarded; a read-only directory refuses writes; 16 sessions
/// committing at once all land.
/// A tenant's notes kept across sessions, and read-only docs.
const PERSISTENT_CONFIG: &str = r#"
[tools.read_file]
component = "builtin:read_file"
grants = { "/persistent/notes" = "ro", "/persistent/docs" = "ro" }

[tools.write_file]
component = "builtin:write_file"
grants = { "/persistent/notes" = "rw", "/persistent/docs" = "rw" }

[persistent."/persistent/notes"]
backing = "{data}/tenants/{tenant}/persistent/notes"

[persistent."/persistent/docs"]
backing = "{data}/docs"
access = "ro"
"#;

#[test]
fn persistent_directories_commit_over_mcp() {
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("persistent.toml");
    std::fs::write(&config, PERSISTENT_CONFIG).unwrap();
    let server = serve_unauthenticated(data.path(), &config);
    let backing = data.path().join("tenants/default/persistent/notes");
    let out = Command::new(python())
        .arg(workspace().join("tests/mcp/persistent.py"))
        .args([server.url.as_str(), backing.to_str().unwrap()])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("16 concurrent commits ok"), "{stdout}");
}

/// The first key of the database's advisory locks on backing trees (hookhost's
/// `STORE_LOCKS`, "hook"); the second is `hashtext` of the tree's path.
const STORE_LOCKS: i32 = 0x686f_6f6b;

/// Hosts of a fleet commit to one persistent directory one at a time through the
/// database: 32 sessions spread over two hosts all land, each counted once by the store;
/// and while another connection holds the tree's lock in the database, a commit waits for
/// it (no file lock is involved).
#[test]
fn a_fleet_commits_to_one_store_through_the_databases_lock() {
    let fleet = Fleet::with_config(PERSISTENT_CONFIG);
    let (a, b) = (fleet.host("1h"), fleet.host("1h"));
    let backing = fleet.data.path().join("tenants/default/persistent/notes");
    let out = Command::new(python())
        .arg(workspace().join("tests/mcp/persistent.py"))
        .args(["fleet", &a.url, &b.url, backing.to_str().unwrap(), "32"])
        .output()
        .expect("python runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("32 commits through two hosts ok"),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let run = |args: &[&str]| {
        let out = fleet.hookhost(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let session = run(&["session", "new"]);
    let wrote = run(&[
        "call",
        "--session",
        &session,
        "write_file",
        r#"{"path":"/persistent/notes/held.md","content":"after the lock"}"#,
    ]);
    assert!(wrote.contains("Wrote"), "{wrote}");

    let root = backing.canonicalize().unwrap();
    let mut holder = fleet.pg.psql("fleet");
    let mut sql = holder.stdin.take().unwrap();
    writeln!(
        sql,
        "SELECT pg_advisory_lock({STORE_LOCKS}, hashtext('{}')); SELECT 'held';",
        root.display()
    )
    .unwrap();
    let mut answers = BufReader::new(holder.stdout.take().unwrap()).lines();
    assert!(
        answers.any(|l| l.is_ok_and(|l| l == "held")),
        "psql took the lock"
    );
    let mut commit = fleet
        .hookhost(&["session", "commit", &session])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        commit.try_wait().unwrap().is_none(),
        "the commit waits for the database's lock"
    );
    assert!(!root.join("held.md").exists());
    drop(sql);
    let _ = holder.kill();
    let _ = holder.wait();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = commit.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the commit did not go on once the lock was released"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(root.join("held.md")).unwrap(),
        "after the lock"
    );
}
