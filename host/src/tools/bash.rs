//! The host-native `bash` tool: runs a command in the session's workspace.
//!
//! Not sandboxed by WebAssembly: the command runs as the host's user, with the host's
//! programs. Its only confinement is its working directory (the session's `/workspace`),
//! an environment reduced to `PATH`, `HOME` (the workspace) and `LANG`, a time limit after
//! which its whole process group is killed, and a cap on the output kept. That is why a
//! config must enable it explicitly.
//!
//! Each command runs in a process group of its own. The group is killed when the call
//! times out or is cancelled (the MCP client's `notifications/cancelled`, a dropped call),
//! and when its session ends. A command that leaves a background child behind (`server &`)
//! returns once bash exits and the output stops within [`DRAIN_GRACE`]: what was read is
//! kept, with a note that a background process still holds the output.

use super::Tool;
use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::failure::Failure;
use crate::limits::{DEFAULT_BASH_TIMEOUT, MAX_BASH_TIMEOUT};
use crate::sandbox::Sandbox;
use crate::sessions::{Session, SessionKey};
use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
use serde_json::Value;
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

/// How long to wait for the pipes to close once bash has exited (or was killed): a
/// background child may hold them open for as long as it lives.
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

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
    /// `bash` found in `PATH` once, so each spawn names it by its path (see [`find_bash`]).
    program: std::path::PathBuf,
    /// Process groups started per session that may still have members: killed when the
    /// session ends.
    groups: Mutex<HashMap<SessionKey, Vec<Pid>>>,
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
            program: find_bash(),
            groups: Mutex::new(HashMap::new()),
        }
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, Vec<Pid>>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn forget_group(&self, key: &SessionKey, pid: Pid) {
        let mut groups = self.groups();
        if let Some(pids) = groups.get_mut(key) {
            pids.retain(|p| *p != pid);
            if pids.is_empty() {
                groups.remove(key);
            }
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
        let mut child = match Command::new(&self.program)
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
        let Some(pid) = child.id().and_then(|id| Pid::from_raw(id as i32)) else {
            return ToolResult::error("bash: the command ended before it could be watched");
        };
        // Killed on every way out of this call but a normal return (timeout, cancellation).
        let mut group = GroupGuard(Some(pid));
        self.groups().entry(session.key()).or_default().push(pid);
        let cap = self.max_output_bytes;
        let stdout = Capture::start(child.stdout.take().expect("piped"), cap);
        let stderr = Capture::start(child.stderr.take().expect("piped"), cap);

        let status = tokio::time::timeout(limit, child.wait()).await;
        if status.is_err() {
            group.kill();
            let _ = child.wait().await;
        }
        // Both pipes get the same grace, at once.
        let ((stdout, out_held), (stderr, err_held)) =
            tokio::join!(stdout.finish(), stderr.finish());
        let held_open = out_held || err_held;
        if status.is_ok() {
            // The command is done; its background children may live on (a server the
            // agent started), until the session ends.
            group.release();
            if !held_open && test_kill_process_group(pid).is_err() {
                self.forget_group(&session.key(), pid);
            }
        }

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
        if held_open {
            note(format!(
                "[output may be incomplete: a background process still holds it open; \
                 stopped reading {} s after bash exited]",
                DRAIN_GRACE.as_secs()
            ));
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

    fn writable_mounts(&self) -> Vec<&str> {
        vec![self.mount.as_str()]
    }

    fn end_session(&self, key: &SessionKey) {
        for pid in self.groups().remove(key).unwrap_or_default() {
            // ESRCH: the group is gone already.
            if kill_process_group(pid, Signal::KILL).is_ok() {
                tracing::info!(session = %key, pid = pid.as_raw_nonzero(), "killed a command left running by the session");
            }
        }
    }
}

/// Kills a command's process group when dropped, unless released.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }

    fn release(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `bash` as a path found in the host's `PATH` (else the bare name). Spawning a program by
/// its path, with an environment of our own, lets the standard library use `posix_spawn`
/// (a vfork-like spawn) instead of `fork()`: a program looked up in a `PATH` the child's
/// environment replaces cannot be, and a `fork()` of a host holding the pooling allocator's
/// large address-space reservation costs milliseconds (the benchmark measures it).
fn find_bash() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("bash"))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| "bash".into())
}

/// What was read from a pipe: the first bytes up to the cap, and how many were dropped.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: u64,
}

/// A pipe being read into a shared buffer, so what was read survives when the reader is
/// given up on.
struct Capture {
    captured: Arc<Mutex<Captured>>,
    task: tokio::task::JoinHandle<()>,
}

impl Capture {
    /// Reads `reader` to its end in a task, keeping at most `cap` bytes. It keeps reading
    /// past the cap so the process never blocks on a full pipe.
    fn start(mut reader: impl AsyncRead + Unpin + Send + 'static, cap: usize) -> Capture {
        let captured = Arc::new(Mutex::new(Captured::default()));
        let shared = captured.clone();
        let task = tokio::spawn(async move {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let mut c = shared.lock().unwrap_or_else(|e| e.into_inner());
                        let keep = n.min(cap.saturating_sub(c.bytes.len()));
                        c.bytes.extend_from_slice(&chunk[..keep]);
                        c.dropped += (n - keep) as u64;
                    }
                }
            }
        });
        Capture { captured, task }
    }

    /// What was read, once the pipe closed or [`DRAIN_GRACE`] passed (then the reading
    /// stops, and the flag says the pipe was still held open).
    async fn finish(mut self) -> (Captured, bool) {
        let held_open = tokio::time::timeout(DRAIN_GRACE, &mut self.task)
            .await
            .is_err();
        self.task.abort();
        let mut c = self.captured.lock().unwrap_or_else(|e| e.into_inner());
        (std::mem::take(&mut *c), held_open)
    }
}
