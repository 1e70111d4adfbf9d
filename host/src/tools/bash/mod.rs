//! The host-native `bash` tool: runs a command with the host's programs, in the session's
//! working mount.
//!
//! By default each command runs in a sandbox of its own ([`sandbox`]): it sees the system
//! read-only, exactly the mounts `bash` is granted at their virtual paths (`pwd` is
//! `/workspace`), no network unless the operator opens it, and it is bounded in processes,
//! memory, CPU time and file size. Everything it started dies with it: when it ends, times
//! out, is cancelled (the MCP client's `notifications/cancelled`, a dropped call), when its
//! session ends, and when hookhost dies.
//!
//! With `[bash] sandbox = false` a command runs as the host's user in the host directory of
//! its mount, with an environment reduced to `PATH`, `HOME` and `LANG`, in a process group
//! of its own killed on timeout, cancellation and session end; background children it
//! leaves behind live on until the session ends. A command that leaves one holding its
//! output returns once bash exits and the output stops within [`DRAIN_GRACE`].

pub mod cgroup;
mod etc;
pub mod sandbox;

pub use sandbox::{Readiness, SYSTEM_PATHS, ShellSandbox, Unavailable};

use super::Tool;
use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::config::{BashPlan, ShellSandboxPlan};
use crate::failure::Failure;
use crate::limits::{DEFAULT_BASH_TIMEOUT, MAX_BASH_TIMEOUT};
use crate::sandbox::{Grants, Sandbox, writable};
use crate::sessions::{Session, SessionKey};
use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
use sandbox::Prepared;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

/// How long to wait for the pipes to close once bash has exited (or was killed): a
/// background child may hold them open for as long as it lives.
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// The `bash` tool.
pub struct BashTool {
    descriptor: ToolDescriptor,
    sandbox: Arc<Sandbox>,
    /// The mount it works in (its virtual path).
    mount: String,
    default_timeout: Duration,
    max_output_bytes: usize,
    confinement: Confinement,
    /// Process groups started per session that may still have members: killed when the
    /// session ends.
    groups: Mutex<HashMap<SessionKey, Vec<Pid>>>,
}

/// How commands are confined.
enum Confinement {
    /// Each in a sandbox seeing `grants`.
    Sandboxed {
        shell: Box<ShellSandbox>,
        plan: ShellSandboxPlan,
        grants: Grants,
    },
    /// As the host's user; `bash` found in `PATH` once, so each spawn names it by its path
    /// (see [`sandbox::find_in_path`]).
    Unsandboxed { program: PathBuf },
}

impl BashTool {
    /// A `bash` tool as `plan` says, whose host is `sandbox` (for the mounts' directories),
    /// keeping at most `max_output_bytes` of stdout and of stderr.
    pub fn new(sandbox: Arc<Sandbox>, plan: &BashPlan, max_output_bytes: u64) -> BashTool {
        let mount = plan.mount.clone();
        let (confinement, confined) = match &plan.sandbox {
            Some(shell) => (
                Confinement::Sandboxed {
                    shell: Box::new(ShellSandbox::new(
                        shell.bwrap.as_deref(),
                        sandbox.data_root(),
                    )),
                    plan: shell.clone(),
                    grants: plan.grants.clone(),
                },
                format!(
                    " It runs in a sandbox that sees the system read-only and {}; background \
                     processes end with the command.",
                    plan.grants
                        .iter()
                        .map(|(path, access)| format!("{path} ({})", access.word()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            None => (
                Confinement::Unsandboxed {
                    program: sandbox::find_in_path("bash").unwrap_or_else(|| "bash".into()),
                },
                String::new(),
            ),
        };
        BashTool {
            descriptor: ToolDescriptor {
                name: "bash".into(),
                description: format!(
                    "Run a bash command in {mount} and return its output (stdout, then \
                     stderr, then the exit code when it is not 0).{confined}"
                ),
                input_schema: schema(&mount),
            },
            sandbox,
            mount,
            default_timeout: plan.timeout.unwrap_or(DEFAULT_BASH_TIMEOUT),
            max_output_bytes: usize::try_from(max_output_bytes).unwrap_or(usize::MAX),
            confinement,
            groups: Mutex::new(HashMap::new()),
        }
    }

    /// Whether commands can run as configured: for a sandboxed bash, what the first
    /// sandbox found (made once per process); `None` for an unsandboxed one.
    ///
    /// # Errors
    ///
    /// [`Unavailable`] when commands cannot be sandboxed here.
    pub async fn readiness(&self) -> Result<Option<&Readiness>, Unavailable> {
        match &self.confinement {
            Confinement::Sandboxed { shell, .. } => shell.ready().await.map(|r| Some(&r.readiness)),
            Confinement::Unsandboxed { .. } => Ok(None),
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

    /// The command to start for `session`, its mounts' directories made.
    async fn prepare(&self, session: &Session, command: &str) -> Result<Prepared, String> {
        let mount = |path: &str| {
            let mount = session
                .mounts()
                .iter()
                .find(|m| m.virtual_path == path)
                .ok_or_else(|| format!("bash: the session has no {path} mount"))?;
            self.sandbox
                .ensure_dir(mount)
                .map_err(|e| format!("bash: {e}"))?;
            Ok::<_, String>(mount)
        };
        match &self.confinement {
            Confinement::Sandboxed {
                shell,
                plan,
                grants,
            } => {
                let ready = shell.ready().await.map_err(|e| e.to_string())?;
                let mounts = grants
                    .iter()
                    .map(|(path, access)| Ok((mount(path)?, *access)))
                    .collect::<Result<Vec<_>, String>>()?;
                let policy = plan.policy(&session.tenant);
                Ok(ready.command(&mounts, &self.mount, &policy, command))
            }
            Confinement::Unsandboxed { program } => {
                let dir = &mount(&self.mount)?.host;
                Ok(Prepared {
                    command: unsandboxed(program, dir, command),
                    cgroup: None,
                })
            }
        }
    }

    async fn run(&self, session: &Session, command: &str, limit: Duration) -> ToolResult {
        let Prepared {
            mut command,
            cgroup,
        } = match self.prepare(session, command).await {
            Ok(prepared) => prepared,
            Err(message) => return ToolResult::error(message),
        };
        let mut child = match command.spawn() {
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
            if let Some(cgroup) = &cgroup {
                cgroup.kill_all();
            }
            let _ = child.wait().await;
        }
        // Both pipes get the same grace, at once.
        let ((stdout, out_held), (stderr, err_held)) =
            tokio::join!(stdout.finish(), stderr.finish());
        let held_open = out_held || err_held;
        if status.is_ok() {
            // The command is done. Unsandboxed, its background children may live on (a
            // server the agent started), until the session ends.
            group.release();
            if !held_open && test_kill_process_group(pid).is_err() {
                self.forget_group(&session.key(), pid);
            }
        }
        drop(cgroup);
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
        match &self.confinement {
            Confinement::Sandboxed { grants, .. } => writable(grants).collect(),
            Confinement::Unsandboxed { .. } => vec![self.mount.as_str()],
        }
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

/// The input schema, naming the working mount.
fn schema(mount: &str) -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": format!("The bash command line to run, in {mount}")},
            "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_BASH_TIMEOUT.as_secs(), "description": format!("Time limit in seconds (default {})", DEFAULT_BASH_TIMEOUT.as_secs())}
        },
        "required": ["command"],
        "additionalProperties": false
    })
    .to_string()
}

/// An unsandboxed command: `bash -c command` as the host's user in `dir`, with `PATH`,
/// `HOME` (`dir`) and `LANG`, in a process group of its own.
fn unsandboxed(program: &Path, dir: &Path, command: &str) -> Command {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut child = Command::new(program);
    child
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    child
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
