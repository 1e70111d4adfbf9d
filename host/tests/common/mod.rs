//! Helpers shared by the binary's test files: processes found by a marker in their
//! command line (a sandboxed command's `$$` is its own PID namespace's, not the host's).

#![allow(dead_code)] // each test file uses some

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Whether the process `pid` is alive (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}

/// The host's processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).contains(marker))
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// A command line that runs `sleep SECS` under the name `marker`, to be found by it.
pub fn marked_sleep(marker: &str, secs: u32) -> String {
    format!("exec -a {marker} sleep {secs}")
}

/// Waits (bounded) for a process whose command line contains `marker`; its pid.
pub fn wait_for_process(marker: &str) -> i32 {
    for _ in 0..400 {
        if let Some(pid) = processes_with(marker).first() {
            return *pid;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("no process {marker} started");
}

/// Waits (bounded) for `pid` to be gone.
pub fn wait_gone(pid: i32) {
    for _ in 0..400 {
        if !alive(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("process {pid} is still running");
}

/// A marker no other test's process has.
pub fn marker(what: &str) -> String {
    format!("hookhost-test-{what}-{}", uuid::Uuid::new_v4().simple())
}

/// The URL a `serve --http` child announces on stderr; the rest of its stderr is drained
/// (a closed pipe would fail its log writes).
pub fn announced_url(child: &mut Child) -> String {
    announced_url_and_log(child).0
}

/// As [`announced_url`], with the lines of its stderr that follow, as they come.
pub fn announced_url_and_log(child: &mut Child) -> (String, Arc<Mutex<Vec<String>>>) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            let at = l.find("https://").or_else(|| l.find("http://"))?;
            Some(l[at..].trim().to_string())
        })
        .expect("hookhost announced its address");
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            kept.lock().unwrap().push(line);
        }
    });
    (url, log)
}

/// An example hook or store built by `.ci/run` (examples/hooks/build.sh,
/// examples/stores/http-mirror/build.sh and tests/foreign/build.sh) into
/// target/example-hooks, or `HOOKHOST_EXAMPLE_HOOKS`.
pub fn example_hook(file: &str) -> String {
    let dir = std::env::var_os("HOOKHOST_EXAMPLE_HOOKS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/example-hooks"));
    let path = dir.join(file);
    assert!(
        path.is_file(),
        "{} is missing: build the examples first (examples/hooks/build.sh, \
         examples/stores/http-mirror/build.sh and tests/foreign/build.sh; .ci/run does all \
         three)",
        path.display()
    );
    path.display().to_string()
}

/// `GET path` of the server at `base` (`http://HOST:PORT`), with `token` as a bearer
/// token: the status and the body. A raw HTTP/1.1 request, so nothing answers for the
/// server.
pub fn http_get(base: &str, path: &str, token: Option<&str>) -> (u16, String) {
    http_request(base, "GET", path, token)
}

/// A `method` request of `path` without a body, as [`http_get`].
pub fn http_request(base: &str, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = authorization
        .as_deref()
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    http_exchange(base, method, path, &headers)
}

/// A `method` request of `path` without a body, with `headers`: the status and the body.
pub fn http_exchange(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_string();
    (status, body)
}

/// `openssl`, run in `dir`; it must succeed.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate for localhost and 127.0.0.1, `NAME.pem` with its key `NAME.key`, signed
/// by the CA `ca.pem` (made first).
pub fn leaf_certificate(dir: &Path, name: &str) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    if !dir.join("ca.pem").exists() {
        openssl(
            dir,
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-subj",
                    "/CN=hookhost test CA",
                    "-days",
                    "2",
                ],
            ]
            .concat(),
        );
    }
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    let (key, csr, pem) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
    );
    openssl(
        dir,
        &[
            &["req"][..],
            &ec,
            &["-keyout", &key, "-out", &csr, "-subj", "/CN=localhost"],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "1",
            "-extfile",
            "san.ext",
        ],
    );
}

/// The host's own address toward its network (not loopback): the source of a route to a
/// documentation address (RFC 5737). Connecting a UDP socket sends nothing; a listener
/// there is reached through slirp4netns on this machine, never over a wire.
pub fn outward_address() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket
        .connect("192.0.2.1:9")
        .expect("the escape suite needs an address other than loopback (a default route)");
    socket.local_addr().unwrap().ip()
}

/// `tests/mcp/client.py MODE ARGS…` with the Python MCP SDK of `target/ci-venv` (`.ci/run`
/// installs it): what it printed, or a panic with it.
pub fn mcp_client(args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(root.join("target/ci-venv/bin/python"))
        .arg(root.join("tests/mcp/client.py"))
        .args(args)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the MCP client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
