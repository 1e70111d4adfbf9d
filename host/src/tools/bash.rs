//! The host-native `bash` tool: runs a command in the session's workspace.
//!
//! Not sandboxed by WebAssembly: the command runs as the host's user, with the host's
//! programs. Its only confinement is its working directory (the session's `/workspace`),
//! an environment reduced to `PATH`, `HOME` (the workspace) and `LANG`, a time limit after
//! which its whole process group is killed, and a cap on the output kept. That is why a
//! config must enable it explicitly.

use super::Tool;
use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::limits::{DEFAULT_BASH_TIMEOUT, MAX_BASH_TIMEOUT};
use crate::sandbox::{Failure, Sandbox};
use crate::session::Session;
use serde_json::Value;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

/// How long to wait for the pipes to close after the process group was killed.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The bash command line to run, in /workspace"},
    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Time limit in seconds (default 120)"}
  },
  "required": ["command"],
  "additionalProperties": false
}"#;

/// The `bash` tool.
pub struct BashTool {
    descriptor: ToolDescriptor,
    sandbox: Arc<Sandbox>,
    mount: String,
    default_timeout: Duration,
    max_output_bytes: usize,
}

impl BashTool {
    /// A `bash` tool running in the session's `mount` (normally `/workspace`), with
    /// `default_timeout` for calls that give none, keeping at most `max_output_bytes` of
    /// stdout and of stderr.
    pub fn new(
        sandbox: Arc<Sandbox>,
        mount: String,
        default_timeout: Option<Duration>,
        max_output_bytes: u64,
    ) -> BashTool {
        BashTool {
            descriptor: ToolDescriptor {
                name: "bash".into(),
                description: format!(
                    "Run a bash command in {mount} and return its output (stdout, then \
                     stderr, then the exit code when it is not 0)."
                ),
                input_schema: SCHEMA.into(),
            },
            sandbox,
            mount,
            default_timeout: default_timeout.unwrap_or(DEFAULT_BASH_TIMEOUT),
            max_output_bytes: usize::try_from(max_output_bytes).unwrap_or(usize::MAX),
        }
    }

    fn parse(&self, arguments: &str) -> Result<(String, Duration), String> {
        let args: Value =
            serde_json::from_str(arguments).map_err(|e| format!("bash: bad arguments: {e}"))?;
        let command = match args.get("command") {
            Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
            _ => return Err("bash: `command` (a non-empty string) is required".into()),
        };
        let timeout = match args.get("timeout_secs") {
            None | Some(Value::Null) => self.default_timeout,
            Some(v) => match v.as_u64() {
                Some(s) if s >= 1 && s <= MAX_BASH_TIMEOUT.as_secs() => Duration::from_secs(s),
                _ => {
                    return Err(format!(
                        "bash: `timeout_secs` must be an integer from 1 to {}",
                        MAX_BASH_TIMEOUT.as_secs()
                    ));
                }
            },
        };
        Ok((command, timeout))
    }

    async fn run(&self, session: &Session, command: &str, limit: Duration) -> ToolResult {
        let Some(mount) = session
            .mounts()
            .iter()
            .find(|m| m.virtual_path == self.mount)
        else {
            return ToolResult::error(format!("bash: the session has no {} mount", self.mount));
        };
        if let Err(e) = self.sandbox.ensure_dir(mount) {
            return ToolResult::error(format!("bash: {e}"));
        }
        let path =
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let mut child = match Command::new("bash")
            .arg("-c")
            .arg(command)
            .current_dir(&mount.host)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &mount.host)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
        {
            Ok(child) => child,
            Err(e) => return ToolResult::error(format!("bash: cannot start bash: {e}")),
        };
        let cap = self.max_output_bytes;
        let stdout = tokio::spawn(read_capped(child.stdout.take().expect("piped"), cap));
        let stderr = tokio::spawn(read_capped(child.stderr.take().expect("piped"), cap));

        let status = tokio::time::timeout(limit, child.wait()).await;
        let timed_out = status.is_err();
        if timed_out {
            if let Some(pid) = child
                .id()
                .and_then(|id| rustix::process::Pid::from_raw(id as i32))
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.wait().await;
        }
        let stdout = drain(stdout).await;
        let stderr = drain(stderr).await;

        let mut output = String::from_utf8_lossy(&stdout.bytes).into_owned();
        let mut note = |text: String| {
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&text);
        };
        if stdout.dropped > 0 {
            note(format!("[stdout truncated: {} more bytes]", stdout.dropped));
        }
        if !stderr.bytes.is_empty() {
            note(format!(
                "[stderr]\n{}",
                String::from_utf8_lossy(&stderr.bytes)
            ));
        }
        if stderr.dropped > 0 {
            note(format!("[stderr truncated: {} more bytes]", stderr.dropped));
        }
        let mut is_error = false;
        match status {
            Err(_) => {
                note(format!("[timed out after {} s; killed]", limit.as_secs()));
                is_error = true;
            }
            Ok(Err(e)) => {
                note(format!("[bash: waiting for the command failed: {e}]"));
                is_error = true;
            }
            Ok(Ok(status)) if !status.success() => {
                match status.code() {
                    Some(code) => note(format!("[exit code: {code}]")),
                    None => note("[killed by a signal]".to_string()),
                }
                is_error = true;
            }
            Ok(Ok(_)) => {}
        }
        ToolResult {
            output,
            is_error,
            media_type: None,
        }
    }
}

#[async_trait::async_trait]
impl Tool for BashTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        session: &Session,
        _ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        Ok(match self.parse(&call.arguments) {
            Ok((command, limit)) => self.run(session, &command, limit).await,
            Err(message) => ToolResult::error(message),
        })
    }
}

/// What was read from a pipe: the first bytes up to the cap, and how many were dropped.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: u64,
}

/// Reads `reader` to its end, keeping at most `cap` bytes. It keeps reading past the cap
/// so the process never blocks on a full pipe.
async fn read_capped(mut reader: impl AsyncRead + Unpin, cap: usize) -> Captured {
    let mut captured = Captured::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return captured,
            Ok(n) => {
                let keep = n.min(cap.saturating_sub(captured.bytes.len()));
                captured.bytes.extend_from_slice(&chunk[..keep]);
                captured.dropped += (n - keep) as u64;
            }
        }
    }
}

/// Waits a short while for a pipe reader whose process has ended or was killed; a
/// grandchild that escaped the process group may hold the pipe open, so do not wait forever.
async fn drain(task: tokio::task::JoinHandle<Captured>) -> Captured {
    let abort = task.abort_handle();
    match tokio::time::timeout(DRAIN_GRACE, task).await {
        Ok(Ok(captured)) => captured,
        _ => {
            abort.abort();
            Captured::default()
        }
    }
}
