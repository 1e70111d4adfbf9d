//! Network grants, through the real binary: the example hook `rust-audit-shipper` (built by
//! `.ci/run` into target/example-hooks) posts each call's audit line over `wasi:http` to
//! collectors the test runs on 127.0.0.1 (and 127.0.0.2), names resolved by a DNS server
//! the test runs too; the example store `http-mirror` keeps persistent directories on an
//! nginx the test runs; `bash` reaches its allow-list through hookhost's proxy.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a test's servers wait for what they expect, at most.
const PATIENCE: Duration = Duration::from_secs(30);

/// An HTTP server taking POSTed lines on `address`: answers 200 to each, keeps the bodies.
/// Stopped when dropped.
struct Collector {
    address: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Collector {
    fn start(ip: &str) -> Collector {
        Collector::on(SocketAddr::new(ip.parse().unwrap(), 0))
    }

    fn on(address: SocketAddr) -> Collector {
        let listener = TcpListener::bind(address).unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, counted, stopped) = (lines.clone(), connections.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        counted.fetch_add(1, Ordering::Relaxed);
                        let kept = kept.clone();
                        std::thread::spawn(move || answer(stream, &kept));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Collector {
            address,
            lines,
            connections,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/lines", self.address)
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads one request (a head of at most 64 KiB, a body of its `content-length`), keeps its
/// body, answers `200 ok`.
fn answer(stream: std::net::TcpStream, lines: &Mutex<Vec<String>>) {
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap().take(64 * 1024 + 1024 * 1024));
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    lines
        .lock()
        .unwrap()
        .push(String::from_utf8_lossy(&body).into_owned());
    let mut stream = stream;
    let _ =
        stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
}

/// A DNS server on 127.0.0.1 answering every `A` question with the next of `answers` (the
/// last one once they are used up), TTL 0, and others with no answer. Stopped when dropped.
struct DnsStub {
    address: SocketAddr,
    asked: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl DnsStub {
    fn start(answers: &[&str]) -> DnsStub {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let address = socket.local_addr().unwrap();
        let answers: Vec<std::net::Ipv4Addr> = answers.iter().map(|a| a.parse().unwrap()).collect();
        let asked = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counted, stopped) = (asked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut query = [0u8; 512];
            while !stopped.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut query) else {
                    continue;
                };
                // The question ends after its name's zero byte, its type and its class.
                let Some(end) = query[12..n]
                    .iter()
                    .position(|b| *b == 0)
                    .map(|z| 12 + z + 5)
                else {
                    continue;
                };
                let is_a = end <= n && query[end - 4..end - 2] == [0, 1];
                let mut reply = query[..end].to_vec();
                reply[2] = 0x81; // a response, recursion desired
                reply[3] = 0x80; // recursion available, no error
                reply[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
                if is_a {
                    let asked = counted.fetch_add(1, Ordering::Relaxed);
                    let ip = answers[asked.min(answers.len() - 1)];
                    reply[7] = 1;
                    reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
                    reply.extend_from_slice(&ip.octets());
                }
                let _ = socket.send_to(&reply, from);
            }
        });
        DnsStub {
            address,
            asked,
            stop,
        }
    }
}

impl Drop for DnsStub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A config of the built-in mounts and `read_file`, with the shipper as its one hook
/// (`on_failure = "closed"`: a line not shipped withholds the output) posting to `url`,
/// granted `allow`; `more` is appended.
fn config(dir: &Path, url: &str, allow: &[&str], more: &str) -> std::path::PathBuf {
    let allow: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
    let text = format!(
        r#"
[tools.read_file]
component = "builtin:read_file"
grants = {{ "/workspace" = "ro" }}

[[hooks]]
name = "ship"
component = {shipper:?}
on_failure = "closed"
settings = {{ url = {url:?} }}
network = {{ allow = [{allow}] }}

{more}
"#,
        shipper = common::example_hook("rust-audit-shipper.wasm"),
        allow = allow.join(", "),
    );
    let path = dir.join("hookhost.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `hookhost call read_file` under `config` (for `tenant`, when given), in a new session:
/// what it printed, and the session's id.
fn call(data: &Path, config: &Path, tenant: Option<&str>) -> (Output, String) {
    let out = command(data, config, tenant)
        .output()
        .expect("hookhost runs");
    let session = session_of(&out);
    (out, session)
}

fn command(data: &Path, config: &Path, tenant: Option<&str>) -> Command {
    let mut command = hookhost(data, config);
    command.arg("call");
    if let Some(tenant) = tenant {
        command.args(["--tenant", tenant]);
    }
    command.args(["read_file", r#"{"path":"/workspace/absent.txt"}"#]);
    command
}

/// `hookhost` on `data` under `config` (whatever `HOOKHOST_CONFIG` says), its stdin empty.
fn hookhost(data: &Path, config: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
    command
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .env_remove("HOOKHOST_CONFIG")
        .stdin(Stdio::null());
    command
}

/// The session `hookhost call` made (it says so on stderr).
fn session_of(out: &Output) -> String {
    stderr(out)
        .lines()
        .find_map(|l| l.strip_prefix("hookhost: session "))
        .unwrap_or_else(|| panic!("no session said: {}", stderr(out)))
        .trim()
        .to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `network.request` events of `session`'s trace (of `tenant`).
fn requests(data: &Path, tenant: &str, session: &str) -> Vec<serde_json::Value> {
    let events = data
        .join("tenants")
        .join(tenant)
        .join("sessions")
        .join(session)
        .join("artifacts/trace/events.jsonl");
    let text =
        std::fs::read_to_string(&events).unwrap_or_else(|e| panic!("{}: {e}", events.display()));
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == "network.request")
        .collect()
}

/// The call's output was kept: the tool's own error (the file is absent), not a withheld
/// output.
fn shipped(out: &Output) {
    assert!(
        stdout(out).contains("absent.txt") && !stdout(out).contains("withheld"),
        "{}\n{}",
        stdout(out),
        stderr(out)
    );
}

/// The shipper failed and the call's output was withheld.
fn withheld(out: &Output) {
    assert!(
        stdout(out).contains("output withheld: hook 'ship' failed"),
        "{}\n{}",
        stdout(out),
        stderr(out)
    );
}

#[test]
fn a_granted_host_is_reached_and_no_other() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let other = Collector::start("127.0.0.1");
    let granted = collector.address.to_string();

    let (out, session) = call(
        data.path(),
        &config(data.path(), &collector.url(), &[&granted], ""),
        None,
    );
    shipped(&out);
    let lines = collector.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["tool"], "read_file");
    assert_eq!(line["session"], session.as_str());
    let [event] = &requests(data.path(), "default", &session)[..] else {
        panic!("one request traced");
    };
    assert_eq!(event["layer"], "ship");
    assert_eq!(event["phase"], "after-execute");
    assert_eq!(event["method"], "POST");
    assert_eq!(event["outcome"], "answered");
    assert_eq!(event["status"], 200);
    assert_eq!(event["bytes_out"], lines[0].len());
    assert_eq!(event["bytes_in"], 2);
    assert!(event.get("headers").is_none() && event.get("body").is_none());

    // The same grant, another port of the same address: refused before any connection.
    let (out, session) = call(
        data.path(),
        &config(data.path(), &other.url(), &[&granted], ""),
        None,
    );
    withheld(&out);
    assert!(stdout(&out).contains("declared") || stderr(&out).contains("HttpRequestDenied"));
    assert_eq!(other.connections(), 0);
    let [event] = &requests(data.path(), "default", &session)[..] else {
        panic!("one request traced");
    };
    assert_eq!(event["outcome"], "denied");
    assert!(
        event["reason"]
            .as_str()
            .unwrap()
            .contains("is not in the component's network grant"),
        "{event}"
    );

    // No grant at all: refused the same way.
    let bare = std::fs::read_to_string(config(data.path(), &other.url(), &[], ""))
        .unwrap()
        .replace("network = { allow = [] }", "");
    std::fs::write(data.path().join("bare.toml"), bare).unwrap();
    let (out, bare) = call(data.path(), &data.path().join("bare.toml"), None);
    withheld(&out);
    assert_eq!(other.connections(), 0);
    let [event] = &requests(data.path(), "default", &bare)[..] else {
        panic!("one request traced");
    };
    assert_eq!(event["reason"], "the component has no network grant");
}

#[test]
fn a_name_is_checked_after_resolution_and_resolved_once() {
    // 127.0.0.2 stands for a private address the grant names; 127.0.0.1 for one it does
    // not. Both collectors listen on the same port, so only the address tells them apart.
    let (named, unnamed) = (0..10)
        .find_map(|_| {
            let named = Collector::start("127.0.0.2");
            let port = named.address.port();
            TcpListener::bind(("127.0.0.1", port)).ok()?;
            Some((
                named,
                Collector::on(SocketAddr::from(([127, 0, 0, 1], port))),
            ))
        })
        .expect("a port free on both 127.0.0.1 and 127.0.0.2");
    let port = named.address.port();
    // First 127.0.0.2, then 127.0.0.1: a name that rebinds.
    let dns = DnsStub::start(&["127.0.0.2", "127.0.0.1"]);
    let data = tempfile::tempdir().unwrap();
    let url = format!("http://rebind.test:{port}/lines");
    let more = format!("[network]\nnameservers = [\"{}\"]\n", dns.address);
    let config = config(data.path(), &url, &["rebind.test", "127.0.0.2"], &more);

    let (out, first) = call(data.path(), &config, None);
    shipped(&out);
    assert_eq!(named.lines().len(), 1);
    let [event] = &requests(data.path(), "default", &first)[..] else {
        panic!("one request traced");
    };
    assert_eq!(event["host"], "rebind.test");
    assert_eq!(event["address"], "127.0.0.2");
    assert_eq!(dns.asked.load(Ordering::Relaxed), 1, "resolved once");

    // Now the name says 127.0.0.1, which the grant does not name: refused, and the
    // connection never made.
    let (out, second) = call(data.path(), &config, None);
    withheld(&out);
    assert_eq!(unnamed.connections(), 0);
    assert_eq!(named.lines().len(), 1);
    let [event] = &requests(data.path(), "default", &second)[..] else {
        panic!("one request traced");
    };
    assert_eq!(event["outcome"], "prohibited");
    assert!(
        event["reason"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1 is loopback"),
        "{event}"
    );
}

#[test]
fn loopback_private_and_metadata_addresses_need_naming() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let port = collector.address.port();
    // Each is let through by its grant's host, refused by its address; none is connected
    // to (the metadata address is never tried: no packet leaves).
    for (url, allow, why) in [
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            vec!["*".to_string()],
            "169.254.169.254 is link-local (cloud metadata)",
        ),
        (
            format!("http://localhost:{port}/lines"),
            vec![format!("localhost:{port}")],
            "is loopback",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/lines"),
            vec!["*".to_string()],
            "is loopback",
        ),
        (
            "http://10.1.2.3:9/lines".to_string(),
            vec!["*".to_string()],
            "10.1.2.3 is private",
        ),
    ] {
        let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
        let (out, session) = call(data.path(), &config(data.path(), &url, &allow, ""), None);
        withheld(&out);
        let [event] = &requests(data.path(), "default", &session)[..] else {
            panic!("one request traced for {url}");
        };
        assert_eq!(event["outcome"], "prohibited", "{url}: {event}");
        assert!(event["reason"].as_str().unwrap().contains(why), "{event}");
    }
    assert_eq!(collector.connections(), 0);
}

#[test]
fn a_tenant_ceiling_caps_a_components_grant() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let granted = collector.address.to_string();
    let tenants = format!(
        "[tenants.capped]\nnetwork = {{ allow = [\"127.0.0.1:1\"] }}\n\n\
         [tenants.open]\nnetwork = {{ allow = [{granted:?}, \"*.example\"] }}\n"
    );
    let config = config(data.path(), &collector.url(), &[&granted], &tenants);

    let (out, capped) = call(data.path(), &config, Some("capped"));
    withheld(&out);
    assert_eq!(collector.connections(), 0);
    let [event] = &requests(data.path(), "capped", &capped)[..] else {
        panic!("one request traced");
    };
    assert_eq!(event["outcome"], "denied");
    assert!(
        event["reason"]
            .as_str()
            .unwrap()
            .contains("not in its tenant's network grant"),
        "{event}"
    );

    let (out, _) = call(data.path(), &config, Some("open"));
    shipped(&out);
    assert_eq!(collector.lines().len(), 1);
}

#[test]
fn requests_and_bytes_are_bounded_per_call() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let granted = collector.address.to_string();
    let config_text =
        std::fs::read_to_string(config(data.path(), &collector.url(), &[&granted], ""))
            .unwrap()
            .replace(
                "on_failure = \"closed\"",
                "on_failure = \"closed\"\nlimits = { network_bytes = 40 }",
            );
    let config = data.path().join("limited.toml");
    std::fs::write(&config, config_text).unwrap();
    let (out, limited) = call(data.path(), &config, None);
    withheld(&out);
    let [event] = &requests(data.path(), "default", &limited)[..] else {
        panic!("one request traced");
    };
    assert_eq!(event["outcome"], "limited", "{event}");
    assert!(event["bytes_out"].as_u64().unwrap() > 40, "{event}");
    // The collector may have the connection, never a whole line.
    assert!(collector.lines().is_empty());
}

#[test]
fn sixty_four_sessions_ship_at_once() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let granted = collector.address.to_string();
    let config = config(data.path(), &collector.url(), &[&granted], "");
    let calls: Vec<_> = (0..64)
        .map(|_| {
            command(data.path(), &config, None)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in calls {
        shipped(&child.wait_with_output().unwrap());
    }
    let mut sessions: Vec<String> = collector
        .lines()
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["session"].to_string())
        .collect();
    sessions.sort();
    sessions.dedup();
    assert_eq!(sessions.len(), 64);
}

#[test]
fn a_served_chain_counts_requests_by_tenant_component_and_grant() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let granted = collector.address.to_string();
    let config = config(data.path(), &collector.url(), &[&granted], "");
    let (url, _server) = serve(data.path(), &config, &[]);
    let results = common::mcp_client(&[
        "calls",
        &url,
        "read_file",
        r#"{"path":"/workspace/absent.txt"}"#,
        "3",
    ]);
    assert_eq!(results.lines().count(), 3, "{results}");
    assert_eq!(collector.lines().len(), 3);
    let metrics_url = url.replace("/mcp", "/metrics");
    let samples = common::mcp_client(&["scrape", &metrics_url]);
    let sample = |name: &str, label: (&str, &str)| -> Option<f64> {
        samples.lines().find_map(|line| {
            let s: serde_json::Value = serde_json::from_str(line).unwrap();
            (s["name"] == name
                && s["labels"]["tenant"] == "default"
                && s["labels"]["component"] == "ship"
                && s["labels"]["host"] == granted.as_str()
                && s["labels"][label.0] == label.1)
                .then(|| s["value"].as_f64().unwrap())
        })
    };
    assert_eq!(
        sample("hookhost_network_requests_total", ("outcome", "answered")),
        Some(3.0),
        "{samples}"
    );
    let line_bytes: usize = collector.lines().iter().map(String::len).sum();
    assert_eq!(
        sample("hookhost_network_bytes_total", ("direction", "out")),
        Some(line_bytes as f64)
    );
    assert_eq!(
        sample("hookhost_network_bytes_total", ("direction", "in")),
        Some(6.0)
    );
}

/// A `hookhost serve --http … MORE` of `config` on a port of 127.0.0.1: its MCP URL, and
/// the server, killed by its pid when dropped.
fn serve(data: &Path, config: &Path, more: &[&str]) -> (String, Stop) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(more)
        .env_remove("HOOKHOST_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = common::announced_url(&mut server);
    (url, Stop(server))
}

/// A child process killed by its pid (and reaped) when dropped.
struct Stop(std::process::Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The built-in config with `[bash] network` set to `network` (TOML).
fn bash_config(dir: &Path, network: &str) -> std::path::PathBuf {
    let builtin = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/default.toml"),
    )
    .unwrap();
    assert!(builtin.contains("\n# network = false\n"));
    let text = builtin.replace("\n# network = false\n", &format!("\nnetwork = {network}\n"));
    let path = dir.join("hookhost.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A Python package index (PEP 503, one package `probe` 1.0 as a wheel) served by
/// Python's `http.server` on a port of 127.0.0.1: the server (stopped by its pid when
/// dropped) and its port.
fn package_index(dir: &Path) -> (Stop, u16) {
    let root = dir.join("index");
    std::fs::create_dir_all(root.join("simple/probe")).unwrap();
    std::fs::create_dir_all(root.join("packages")).unwrap();
    let wheel = "probe-1.0-py3-none-any.whl";
    let made = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, zipfile\n\
             with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
             \x20   z.writestr('probe/__init__.py', '')\n\
             \x20   z.writestr('probe-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: probe\\nVersion: 1.0\\n')\n\
             \x20   z.writestr('probe-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
             \x20   z.writestr('probe-1.0.dist-info/RECORD', '')\n",
        )
        .arg(root.join("packages").join(wheel))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    std::fs::write(
        root.join("simple/probe/index.html"),
        format!("<!DOCTYPE html><html><body><a href=\"../../packages/{wheel}\">{wheel}</a></body></html>\n"),
    )
    .unwrap();
    let mut server = Command::new("python3")
        .args([
            "-u",
            "-m",
            "http.server",
            "0",
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
    let port = said
        .split_whitespace()
        .skip_while(|w| *w != "port")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("http.server said: {said}"));
    (Stop(server), port)
}

/// `hookhost call bash COMMAND` in a new session under `config`: its output and session.
fn bash(data: &Path, config: &Path, command: &str) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .arg("call")
        .arg("bash")
        .arg(serde_json::json!({ "command": command }).to_string())
        .env_remove("HOOKHOST_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("hookhost runs");
    let session = session_of(&out);
    (out, session)
}

#[test]
fn bash_reaches_its_allow_list_through_the_proxy_and_nothing_else() {
    let data = tempfile::tempdir().unwrap();
    let (_index, port) = package_index(data.path());
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let other_port = other.local_addr().unwrap().port();
    // The index by its address (a loopback one, so named); the other listener by a name
    // only, which resolves to loopback and so is refused.
    let config = bash_config(
        data.path(),
        &format!(r#"{{ allow = ["127.0.0.1:{port}", "localhost:{other_port}"] }}"#),
    );
    let command = format!(
        "python3 -m pip download --no-cache-dir --disable-pip-version-check --no-deps \
           --index-url http://127.0.0.1:{port}/simple/ -d /tmp/dl probe >/dev/null 2>&1; \
         ls /tmp/dl; \
         curl -sS -p -o /dev/null -w 'tunnel %{{http_code}}\\n' http://127.0.0.1:{port}/simple/; \
         curl -sS http://127.0.0.1:{other_port}/; \
         curl -sS http://localhost:{other_port}/; \
         echo hi > /dev/tcp/127.0.0.1/{other_port} && echo raw-connected; \
         true"
    );
    let (out, session) = bash(data.path(), &config, &command);
    let said = stdout(&out);
    assert!(out.status.success(), "{said}{}", stderr(&out));
    // pip, through HTTP_PROXY, fetched the index and the wheel.
    assert!(said.contains("probe-1.0-py3-none-any.whl"), "{said}");
    // curl's CONNECT tunnel (-p) to the listed address.
    assert!(said.contains("tunnel 200"), "{said}");
    // The other port: refused, with the setting named to the command and in the output.
    assert!(
        said.contains(&format!("hookhost refused GET 127.0.0.1:{other_port}")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "[hookhost: network: refused 127.0.0.1:{other_port} — not in [bash] network allow"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "refused localhost:{other_port} — its address is loopback, which the allow-list does not name"
        )),
        "{said}"
    );
    assert!(!said.contains("raw-connected"), "{said}");
    assert!(
        other.accept().is_err(),
        "the unlisted listener was reached: {said}"
    );
    let events = requests(data.path(), "default", &session);
    let of = |method: &str, host: &str, outcome: &str| {
        events.iter().any(|e| {
            e["layer"] == "bash"
                && e["method"] == method
                && e["host"] == host
                && e["outcome"] == outcome
        })
    };
    assert!(of("GET", "127.0.0.1", "answered"), "{events:#?}");
    assert!(of("CONNECT", "127.0.0.1", "answered"), "{events:#?}");
    assert!(of("GET", "localhost", "prohibited"), "{events:#?}");
    let denied = events
        .iter()
        .find(|e| e["outcome"] == "denied")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(denied["port"], other_port, "{events:#?}");
    let wheel = events
        .iter()
        .find(|e| e["method"] == "GET" && e["status"] == 200 && e["bytes_in"].as_u64() > Some(100))
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert!(wheel["ms"].is_number(), "{wheel}");
}

#[test]
fn sixty_four_served_sessions_use_their_proxies_at_once() {
    let data = tempfile::tempdir().unwrap();
    let (_index, port) = package_index(data.path());
    let config = bash_config(
        data.path(),
        &format!(r#"{{ allow = ["127.0.0.1:{port}"] }}"#),
    );
    // The test's own loopback: no tenant and no token.
    let (url, _server) = serve(data.path(), &config, &["--unauthenticated-bash"]);
    let command = format!("curl -sS http://127.0.0.1:{port}/simple/probe/");
    let arguments = serde_json::json!({ "command": command }).to_string();
    let results = common::mcp_client(&["sessions", &url, "bash", &arguments, "64"]);
    let results: Vec<serde_json::Value> = results
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), 64);
    for result in &results {
        assert!(
            result["is_error"] == false
                && result["text"]
                    .as_str()
                    .unwrap()
                    .contains("probe-1.0-py3-none-any.whl"),
            "{result}"
        );
    }
    let samples = common::mcp_client(&["scrape", &url.replace("/mcp", "/metrics")]);
    let answered = samples.lines().find_map(|line| {
        let s: serde_json::Value = serde_json::from_str(line).unwrap();
        (s["name"] == "hookhost_network_requests_total"
            && s["labels"]["component"] == "bash"
            && s["labels"]["outcome"] == "answered")
            .then(|| s["value"].as_f64().unwrap())
    });
    assert_eq!(answered, Some(64.0), "{samples}");
}

#[test]
fn component_check_says_the_http_import_and_what_its_requests_met() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let shipper = common::example_hook("rust-audit-shipper.wasm");
    let check = |allow: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        command
            .arg("--data")
            .arg(data.path())
            .args(["component", "check", &shipper, "--settings"])
            .arg(format!("url={}", collector.url()));
        for host in allow {
            command.args(["--allow", host]);
        }
        command.env_remove("HOOKHOST_CONFIG").output().unwrap()
    };
    // No grant: each request is refused, and the check says so.
    let out = check(&[]);
    let said = stdout(&out);
    assert!(
        said.contains("imports wasi:http/outgoing-handler") && said.contains("none here"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "POST 127.0.0.1:{} denied",
            collector.address.port()
        )),
        "{said}"
    );
    assert_eq!(collector.connections(), 0);
    // Granted its collector: the requests are answered, and the lines arrive.
    let granted = collector.address.to_string();
    let out = check(&[&granted]);
    let said = stdout(&out);
    assert!(out.status.success(), "{said}{}", stderr(&out));
    assert!(
        said.contains(&format!("its requests reach only {granted}")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "POST 127.0.0.1:{} answered",
            collector.address.port()
        )),
        "{said}"
    );
    assert!(!collector.lines().is_empty());
}

#[test]
fn a_ca_certificate_that_cannot_be_read_stops_the_start_that_names_it() {
    let data = tempfile::tempdir().unwrap();
    let collector = Collector::start("127.0.0.1");
    let absent = data.path().join("absent-ca.pem");
    let more = format!(
        "[network]\nca_certificates = [{:?}]\n",
        absent.display().to_string()
    );
    let config = config(data.path(), &collector.url(), &[], &more);
    let out = command(data.path(), &config, None).output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("[network] ca_certificates {}", absent.display())),
        "{}",
        stderr(&out)
    );
    assert_eq!(collector.connections(), 0);
}

// Stores: the example store `http-mirror` (built by `.ci/run` into target/example-hooks)
// keeps a persistent directory on an nginx the test runs on 127.0.0.1, whose DAV module
// takes its PUTs and DELETEs.

/// An nginx serving `root` with PUT and DELETE on a port of 127.0.0.1, stopped (SIGTERM to
/// its master, by pid) when dropped; `slow` delays requests to 50 a second.
struct Nginx {
    child: std::process::Child,
    port: u16,
    root: std::path::PathBuf,
    access_log: std::path::PathBuf,
}

impl Nginx {
    fn start(dir: &Path) -> Nginx {
        Nginx::started(dir, false)
    }

    fn started(dir: &Path, slow: bool) -> Nginx {
        const NGINX: &str = "/usr/sbin/nginx";
        assert!(
            Path::new(NGINX).is_file(),
            "{NGINX} is missing: install Debian's nginx-light (.ci/run does)"
        );
        let root = dir.join("dav");
        std::fs::create_dir_all(&root).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // As root, nginx's workers would drop to `nobody`, who cannot write the root.
        let user = if unsafe { libc::geteuid() } == 0 {
            "user root;"
        } else {
            ""
        };
        let (zone, limit) = match slow {
            true => (
                "limit_req_zone $binary_remote_addr zone=slow:1m rate=50r/s;",
                "limit_req zone=slow burst=10000;",
            ),
            false => ("", ""),
        };
        let d = dir.display();
        let access_log = dir.join("nginx-access.log");
        let conf = format!(
            r#"{user}
worker_processes 1;
error_log {d}/nginx-error.log;
pid {d}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log {access};
    client_body_temp_path {d}/nginx-body;
    proxy_temp_path {d}/nginx-proxy;
    fastcgi_temp_path {d}/nginx-fastcgi;
    uwsgi_temp_path {d}/nginx-uwsgi;
    scgi_temp_path {d}/nginx-scgi;
    {zone}
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw all:r;
            {limit}
        }}
    }}
}}
"#,
            access = access_log.display(),
            root = root.display(),
        );
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        // `-e`: as a user, the default error log (/var/log/nginx) cannot be opened.
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("nginx-error.log"))
            .arg("-c")
            .arg(&path)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let nginx = Nginx {
            child,
            port,
            root,
            access_log,
        };
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return nginx;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("nginx did not listen on 127.0.0.1:{port}");
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The URL a store keeps each tenant's tree under: `/notes/TENANT`.
    fn store_url(&self) -> String {
        format!("http://{}/notes/{{tenant}}", self.address())
    }

    /// The index the store keeps under `/notes/TENANT` for `tenant` (as the URL names it).
    fn index_of(&self, tenant: &str) -> serde_json::Value {
        let index = self.root.join("notes").join(tenant).join("index.json");
        let text = std::fs::read_to_string(&index).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The default tenant's index.
    fn index(&self) -> serde_json::Value {
        self.index_of("default")
    }

    /// The requests it answered, from its access log.
    fn requests(&self) -> usize {
        self.answered("")
    }

    /// The requests it answered whose line contains `what`.
    fn answered(&self, what: &str) -> usize {
        std::fs::read_to_string(&self.access_log)
            .map(|log| log.lines().filter(|l| l.contains(what)).count())
            .unwrap_or(0)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let pid = i32::try_from(self.child.id()).unwrap();
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// A config whose `/persistent/notes` is kept by `http-mirror` at `url`, granted `allow`
/// (no `network` key when empty), committed after every call, which `read_file` and
/// `write_file` reach; `more` appended.
fn store_config(dir: &Path, url: &str, allow: &[&str], more: &str) -> std::path::PathBuf {
    let allow: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
    let network = match allow.is_empty() {
        true => String::new(),
        false => format!("network = {{ allow = [{}] }}", allow.join(", ")),
    };
    let text = format!(
        r#"
[tools.read_file]
component = "builtin:read_file"
grants = {{ "/persistent/notes" = "ro" }}

[tools.write_file]
component = "builtin:write_file"
grants = {{ "/persistent/notes" = "rw" }}

[persistent."/persistent/notes"]
backing = "{{data}}/tenants/{{tenant}}/notes"
store = {store:?}
commit = "call"
settings = {{ url = {url:?} }}
{network}
limits = {{ network_requests = 100 }}

{more}
"#,
        store = common::example_hook("http-mirror.wasm"),
    );
    let path = dir.join("store.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `hookhost call TOOL ARGS` under `config` in `session` (a new one when `None`), for
/// `tenant`: what it printed, and the session.
fn call_in(
    data: &Path,
    config: &Path,
    tenant: Option<&str>,
    session: Option<&str>,
    tool: &str,
    args: &str,
) -> (Output, String) {
    let mut command = hookhost(data, config);
    command.arg("call");
    command.args(tenant.map(|t| ["--tenant", t]).into_iter().flatten());
    command.args(session.map(|s| ["--session", s]).into_iter().flatten());
    let out = command.args([tool, args]).output().unwrap();
    let session = match session {
        Some(s) => s.to_string(),
        None => session_of(&out),
    };
    (out, session)
}

fn write_note(
    data: &Path,
    config: &Path,
    tenant: Option<&str>,
    file: &str,
    text: &str,
) -> (Output, String) {
    let args = format!(r#"{{"path":"/persistent/notes/{file}","content":{text:?}}}"#);
    call_in(data, config, tenant, None, "write_file", &args)
}

fn read_note(data: &Path, config: &Path, file: &str) -> String {
    let args = format!(r#"{{"path":"/persistent/notes/{file}"}}"#);
    stdout(&call_in(data, config, None, None, "read_file", &args).0)
}

#[test]
fn a_store_keeps_its_tree_on_the_server_it_is_granted() {
    let data = tempfile::tempdir().unwrap();
    let nginx = Nginx::start(data.path());
    let url = nginx.store_url();
    let config = store_config(data.path(), &url, &[&nginx.address()], "");

    let (out, a) = write_note(data.path(), &config, None, "plan.md", "first");
    assert!(
        stdout(&out).contains("Wrote") && !stdout(&out).contains("not published"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let index = nginx.index();
    assert_eq!(index["version"], 1, "{index}");
    assert_eq!(index["files"]["plan.md"], 1, "{index}");
    assert_eq!(
        std::fs::read_to_string(nginx.root.join("notes/default/objects/1/plan.md")).unwrap(),
        "first"
    );
    // Its requests are the call's: traced under the directory's path, counted, answered.
    let events = requests(data.path(), "default", &a);
    assert!(!events.is_empty());
    for event in &events {
        assert_eq!(event["layer"], "/persistent/notes", "{event}");
        assert_eq!(event["outcome"], "answered", "{event}");
        // Made loading before the call and committing after it: no phase's.
        assert!(event["phase"].is_null(), "{event}");
    }
    assert!(events.iter().any(|e| e["method"] == "PUT"), "{events:?}");

    // Another session loads what the first committed, from the server.
    assert!(read_note(data.path(), &config, "plan.md").contains("first"));
    // An update replaces the object, and the one it superseded is deleted.
    write_note(data.path(), &config, None, "plan.md", "second");
    assert_eq!(nginx.index()["files"]["plan.md"], 2);
    assert!(!nginx.root.join("notes/default/objects/1/plan.md").exists());
    assert!(read_note(data.path(), &config, "plan.md").contains("second"));
    // Each tenant's tree is its own, `{tenant}` in the URL one safe segment: `..` too.
    let (out, _) = write_note(data.path(), &config, Some(".."), "plan.md", "theirs");
    assert!(stdout(&out).contains("Wrote"), "{}", stderr(&out));
    assert_eq!(nginx.index_of("~2E~2E")["files"]["plan.md"], 1);
    assert_eq!(nginx.index()["files"]["plan.md"], 2);
    assert!(!nginx.root.join("index.json").exists());
    // `config check` says when a store granted hosts would share one remote tree.
    let shared = "a remote tree its settings name is every tenant's";
    let check = |config: &Path| {
        stderr(
            &hookhost(data.path(), config)
                .args(["config", "check"])
                .output()
                .unwrap(),
        )
    };
    assert!(!check(&config).contains(shared));
    let one_url = format!("http://{}/notes", nginx.address());
    let one = store_config(data.path(), &one_url, &[&nginx.address()], "");
    assert!(check(&one).contains(shared), "{}", check(&one));
}

#[test]
fn a_store_reaches_nothing_it_is_not_granted() {
    let data = tempfile::tempdir().unwrap();
    let nginx = Nginx::start(data.path());
    let url = nginx.store_url();
    let tenants = "[tenants.capped]\nnetwork = { allow = [\"files.example\"] }\n";
    let assert_refused = |config: &Path, tenant: Option<&str>, why: &str| {
        let (out, session) = write_note(data.path(), config, tenant, "plan.md", "text");
        // The checkout cannot be loaded: the call fails before the tool writes.
        assert!(
            stdout(&out).contains("HttpRequestDenied") && !stdout(&out).contains("Wrote"),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
        let events = requests(data.path(), tenant.unwrap_or("default"), &session);
        assert!(
            events
                .iter()
                .any(|e| e["outcome"] == "denied" && e["reason"].as_str().unwrap().contains(why)),
            "{events:?}"
        );
    };
    // Not granted at all; granted another host; granted, under a tenant that is not.
    let none = store_config(data.path(), &url, &[], "");
    assert_refused(&none, None, "has no network grant");
    let other = store_config(data.path(), &url, &["127.0.0.1:1"], "");
    assert_refused(&other, None, "not in the component's network grant");
    let capped = store_config(data.path(), &url, &[&nginx.address()], tenants);
    assert_refused(&capped, Some("capped"), "not in its tenant's network grant");
    assert_eq!(nginx.requests(), 0, "nginx was never reached");
}

#[test]
fn sessions_committing_at_once_through_a_store_lose_nothing() {
    let data = tempfile::tempdir().unwrap();
    let nginx = Nginx::start(data.path());
    let url = nginx.store_url();
    let config = store_config(data.path(), &url, &[&nginx.address()], "");
    let writers: Vec<_> = (0..16)
        .map(|i| {
            let (data, config) = (data.path().to_path_buf(), config.clone());
            std::thread::spawn(move || {
                let (out, _) = write_note(&data, &config, None, &format!("n{i}.md"), "x");
                assert!(
                    stdout(&out).contains("Wrote") && !stdout(&out).contains("not published"),
                    "{}{}",
                    stdout(&out),
                    stderr(&out)
                );
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let index = nginx.index();
    assert_eq!(index["version"], 16, "{index}");
    assert_eq!(index["files"].as_object().unwrap().len(), 16, "{index}");
}

#[test]
fn a_store_commit_killed_midway_leaves_the_tree_as_it_was() {
    const FILES: usize = 40;
    let data = tempfile::tempdir().unwrap();
    let nginx = Nginx::started(data.path(), true);
    let url = nginx.store_url();
    let text = std::fs::read_to_string(store_config(data.path(), &url, &[&nginx.address()], ""))
        .unwrap()
        .replace("commit = \"call\"", "commit = \"turn\"");
    let config = data.path().join("by-hand.toml");
    std::fs::write(&config, text).unwrap();
    let (out, session) = write_note(data.path(), &config, None, "n0.md", "xyzzy");
    assert!(stdout(&out).contains("Wrote"), "{}", stderr(&out));
    for i in 1..FILES {
        let args = format!(r#"{{"path":"/persistent/notes/n{i}.md","content":"x"}}"#);
        call_in(
            data.path(),
            &config,
            None,
            Some(&session),
            "write_file",
            &args,
        );
    }
    let commit = || {
        hookhost(data.path(), &config)
            .args(["session", "commit", &session])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Killed once the server has a few of its objects, long before the index (nginx takes
    // 50 requests a second).
    let mut killed = commit();
    for _ in 0..2000 {
        if nginx.answered("PUT /notes/default/objects/") >= 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    let put = nginx.answered("PUT /notes/default/objects/");
    assert!((5..FILES).contains(&put), "{put} objects were put");
    assert_eq!(nginx.answered("PUT /notes/default/index.json"), 0);
    // Another session sees the tree as it was: nothing.
    let (out, _) = call_in(
        data.path(),
        &config,
        None,
        None,
        "read_file",
        r#"{"path":"/persistent/notes/n0.md"}"#,
    );
    let said = stdout(&out);
    assert!(
        said.contains("n0.md") && !said.contains("xyzzy") && !said.contains("index.json"),
        "{said}"
    );
    // The session's checkout kept its changes: the next commit publishes them whole.
    let out = commit().wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let index = nginx.index();
    assert_eq!(index["version"], 1, "{index}");
    assert_eq!(index["files"].as_object().unwrap().len(), FILES, "{index}");
}

#[test]
fn component_check_runs_the_store_suite_against_the_server_it_is_allowed() {
    let data = tempfile::tempdir().unwrap();
    let nginx = Nginx::start(data.path());
    let check = |allow: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        command
            .arg("--data")
            .arg(data.path())
            .args([
                "component",
                "check",
                &common::example_hook("http-mirror.wasm"),
            ])
            .arg("--settings")
            .arg(format!("url=http://{}/check", nginx.address()))
            .env_remove("HOOKHOST_CONFIG")
            .stdin(Stdio::null());
        for host in allow {
            command.args(["--allow", host]);
        }
        command.output().unwrap()
    };
    let refused = check(&[]);
    assert!(!refused.status.success());
    assert!(
        stdout(&refused).contains("HttpRequestDenied"),
        "{}",
        stdout(&refused)
    );
    assert_eq!(nginx.requests(), 0);
    let out = check(&[&nginx.address()]);
    let said = stdout(&out);
    assert!(out.status.success(), "{said}{}", stderr(&out));
    assert!(
        said.contains("a file changed since the load fails as a conflict naming it"),
        "{said}"
    );
    assert!(nginx.answered("PUT /check/index.json") >= 2, "{said}");
}
