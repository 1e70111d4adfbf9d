//! A tenant's sparse or huge files cost the host a bounded amount of hashing: after
//! `truncate -s 1G a b` (2 GiB of holes) the trace's `file.created` events show both files,
//! hashed by extent (`sparse`, their holes never read), and a file with more data than the
//! trace hashes per file is shown by size and mtime, `unhashed: "file-cap"`. Both through a
//! one-shot `call` (mounts walked) and a stdio server (mounts watched with inotify, the
//! look of a phase beside other tenants' calls on the same async workers). Nothing here
//! times anything: what the trace says is what is asserted.

use crate::harness::{self, Host, text};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

/// What a tenant's command writes: two sparse files of 1 GiB (the sandbox's largest file,
/// `RLIMIT_FSIZE`) and 65 MiB of data, over the trace's per-file cap of 64 MiB.
const WRITE: &str = "truncate -s 1G a b && yes x | head -c 65M > big && ls -l a b big";

/// The `file.*` events of `session`, by virtual path (the last of each).
fn file_events(
    host: &Host,
    tenant: &str,
    session: &str,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let out = host.run(&[
        "session", "trace", session, "--tenant", tenant, "--kind", "file.*",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            (event["path"].as_str().unwrap().to_string(), event)
        })
        .collect()
}

/// The events of the files [`WRITE`] made say what they are without their holes read.
fn assert_traced_by_extent_or_unhashed(host: &Host, tenant: &str, session: &str) {
    let events = file_events(host, tenant, session);
    for name in ["a", "b"] {
        let path = format!("/workspace/{name}");
        let event = events
            .get(&path)
            .unwrap_or_else(|| panic!("no event for {path}: {events:#?}"));
        assert_eq!(event["kind"], "file.created", "{event}");
        assert_eq!(event["after_bytes"], 1u64 << 30, "{event}");
        assert_eq!(event["after_sparse"], true, "hashed by extent: {event}");
        assert!(event["after_sha256"].is_string(), "{event}");
        assert!(event.get("after_unhashed").is_none(), "{event}");
    }
    assert_eq!(
        events["/workspace/a"]["after_sha256"], events["/workspace/b"]["after_sha256"],
        "the same holes, the same digest"
    );
    let big = &events["/workspace/big"];
    assert_eq!(big["after_bytes"], 65u64 << 20, "{big}");
    assert_eq!(big["after_unhashed"], "file-cap", "{big}");
    assert!(big["after_sha256"].is_null(), "{big}");
    assert!(big["after_mtime"].is_string(), "{big}");
}

#[test]
fn a_call_writing_sparse_and_huge_files_has_them_traced_without_reading_them_whole() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let session = host.session("alpha");
        let (out, is_error) = host.bash("alpha", &session, WRITE);
        assert!(!is_error, "{who:?}: {out}");
        assert_traced_by_extent_or_unhashed(&host, "alpha", &session);
    }
}

/// A minimal MCP client over `hookhost serve`'s stdio.
struct Server {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Server {
    fn start(host: &Host, tenant: &str) -> Server {
        let mut child = host
            .command(&["serve", "--tenant", tenant, "--keep-session"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("hookhost serve runs");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            stdin,
            stdout,
            next: 0,
        };
        server.request(
            "initialize",
            serde_json::json!({
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "clientInfo": { "name": "escape", "version": "1" },
            }),
        );
        server.send(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/initialized",
        }));
        server
    }

    fn send(&mut self, message: serde_json::Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request; its result (other messages on the way are skipped).
    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next += 1;
        let id = self.next;
        self.send(serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": method, "params": params,
        }));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server left"
            );
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{message}");
                return message["result"].clone();
            }
        }
    }

    /// `bash` with `command`: (output, is_error).
    fn bash(&mut self, command: &str) -> (String, bool) {
        let result = self.request(
            "tools/call",
            serde_json::json!({ "name": "bash", "arguments": { "command": command } }),
        );
        (
            result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            result["isError"].as_bool().unwrap_or(false),
        )
    }

    /// Ends the session (the client leaves); the server exits.
    fn stop(self) {
        let Server {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

#[test]
fn a_server_call_writing_sparse_and_huge_files_has_them_traced_without_reading_them_whole() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let mut server = Server::start(&host, "alpha");
        let (out, is_error) = server.bash(WRITE);
        assert!(!is_error, "{who:?}: {out}");
        // The next call is answered: the trace's look at the files is over.
        let (out, is_error) = server.bash("echo next");
        assert!(!is_error && out.contains("next"), "{who:?}: {out}");
        server.stop();
        let list = host.run(&["session", "list", "--tenant", "alpha"]);
        let listed = text(&list.stdout);
        let session = listed
            .lines()
            .next()
            .and_then(|l| l.split('\t').next())
            .unwrap_or_else(|| panic!("no session kept: {listed}"));
        assert_traced_by_extent_or_unhashed(&host, "alpha", session);
    }
}
