//! `hookhost serve` against MCP peers this project did not write: the official Python SDK
//! as the client (stdio and Streamable HTTP), and `@modelcontextprotocol/server-everything`
//! as an upstream server. `.ci/run` installs both under `target/`; the environment
//! variables `HOOKHOST_TEST_PYTHON` and `HOOKHOST_TEST_EVERYTHING` point elsewhere.

use std::io::{BufRead, BufReader};
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

/// Runs the Python client with `args`; panics with its output when it fails.
fn client(args: &[&str]) {
    let script = workspace().join("tests/mcp/client.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "the MCP client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
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

/// A `hookhost serve --http` on a free loopback port, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(data: &Path, config: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(data)
            .arg("--config")
            .arg(config)
            .args(["serve", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hookhost starts");
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut url = None;
        for line in stderr.lines() {
            let line = line.unwrap();
            if let Some(at) = line.find("http://") {
                url = Some(line[at..].trim().to_string());
                break;
            }
        }
        Server {
            child,
            url: url.expect("hookhost announced its address"),
        }
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
    let mut text = std::fs::read_to_string(workspace().join("host/src/default.toml")).unwrap();
    text.push_str(&format!(
        r#"
[upstreams.everything]
command = {:?}
args = ["stdio"]
timeout_secs = 60

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
