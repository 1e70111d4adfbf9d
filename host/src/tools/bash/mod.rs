//! The host-native `bash` tool: runs a command with the host's programs, in the session's
//! working mount.
//!
//! By default commands run in a sandbox of their session ([`sandbox`]): it sees the system
//! read-only, exactly the mounts `bash` is granted at their virtual paths (`pwd` is
//! `/workspace`), no network unless the operator opens it, and each command is bounded in
//! processes, memory, CPU time and file size; with an allow-list (`network = { allow =
//! [...] }`) its commands reach the listed hosts through hookhost's proxy ([`proxy`]),
//! and the output names each host it refused. The sandbox is kept for the session's next
//! command ([`shell`]), yet each starts clean, as in a new one: everything a command
//! started dies with it: when it ends, times out, is cancelled (the MCP client's
//! `notifications/cancelled`, a dropped call), when its session ends, and when hookhost
//! dies; and `/tmp` is emptied.
//!
//! With `[bash] sandbox = false` a command runs as the host's user in the host directory of
//! its mount, with an environment reduced to `PATH`, `HOME` and `LANG`, under a guard
//! ([`guard`]) that kills everything it started on timeout, cancellation and session end,
//! and when hookhost dies, even by `kill -9`; background children it leaves behind live
//! on until then. A command that leaves one holding its output returns once bash exits
//! and the output stops within [`DRAIN_GRACE`].

pub mod cgroup;
mod etc;
pub mod guard;
pub mod launcher;
mod network;
pub mod proxy;
pub mod sandbox;
pub mod seccomp;
pub mod shell;

pub use sandbox::{Readiness, ShellSandbox, Unavailable};

use super::{Callee, Tool};
use crate::abi::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::config::{BashPlan, ShellSandboxPlan};
use crate::failure::Failure;
use crate::limits::{
    DEFAULT_BASH_TIMEOUT, GUARD_END_GRACE, MAX_BASH_TIMEOUT, SHELL_START_ATTEMPTS,
    SHELL_START_RETRY_BACKOFF, ShellNetwork, ShellPolicy,
};
use crate::mounts::ResolvedMount;
use crate::sandbox::{Grants, Sandbox, writable};
use crate::sessions::{Caller, Session, SessionHolder, SessionKey};
use rustix::fd::OwnedFd;
use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::Value;
use shell::ShellPool;
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
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
    confinement: Confinement,
}

/// How commands are confined.
enum Confinement {
    /// In sandboxes seeing `grants`, one per session at a time, kept across its commands.
    Sandboxed {
        shell: Box<ShellSandbox>,
        plan: ShellSandboxPlan,
        grants: Grants,
        pool: ShellPool,
    },
    /// As the host's user; `bash` found in `PATH` once, so each spawn names it by its path
    /// (see [`sandbox::find_in_path`]).
    Unsandboxed {
        program: PathBuf,
        /// The hookhost program, to run as each command's guard (see [`guard`]).
        guard: Result<PathBuf, String>,
        /// The guards of commands that left processes running, per session: dropped (so
        /// those processes killed) when the session ends.
        groups: Mutex<HashMap<SessionKey, Vec<Guarded>>>,
    },
}

impl BashTool {
    /// A `bash` tool as `plan` says, whose host is `sandbox` (for the mounts' directories).
    pub fn new(sandbox: Arc<Sandbox>, plan: &BashPlan) -> BashTool {
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
                    pool: ShellPool::default(),
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
                    guard: sandbox::launcher_program(),
                    groups: Mutex::new(HashMap::new()),
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
            confinement,
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

    /// The session's mount at `path`, its directory made.
    fn mount<'s>(&self, session: &'s Session, path: &str) -> Result<&'s ResolvedMount, String> {
        let mount = session
            .mounts()
            .iter()
            .find(|m| m.virtual_path == path)
            .ok_or_else(|| format!("bash: the session has no {path} mount"))?;
        self.sandbox
            .ensure_dir(mount)
            .map_err(|e| format!("bash: {e}"))?;
        Ok(mount)
    }

    /// Runs `command` for at most `requested`, or its tenant's `deadline_ms` when shorter,
    /// keeping at most the session's `max_output_bytes` of stdout and of stderr.
    async fn run(&self, caller: &Caller<'_>, command: &str, requested: Duration) -> ToolResult {
        let limit = caller
            .tenant_limits()
            .deadline_ms
            .map_or(requested, |ms| requested.min(Duration::from_millis(ms)));
        let cap = usize::try_from(caller.limits().max_output_bytes).unwrap_or(usize::MAX);
        let ended = match &self.confinement {
            Confinement::Sandboxed { pool, .. } => {
                self.run_sandboxed(pool, caller, command, limit, cap).await
            }
            Confinement::Unsandboxed {
                program,
                guard,
                groups,
            } => match (guard, self.mount(caller, &self.mount)) {
                (Ok(guard), Ok(mount)) => {
                    let command = unsandboxed(guard, program, &mount.host, command);
                    self.run_unsandboxed(groups, &caller.key(), command, limit, cap)
                        .await
                }
                (Err(message), _) => Err(format!("bash: {message}")),
                (_, Err(message)) => Err(message),
            },
        };
        match ended {
            Ok(ended) => ended.result(limit),
            Err(message) => ToolResult::error(message),
        }
    }

    /// A new sandbox for `session`'s commands.
    async fn start(&self, caller: &Caller<'_>) -> Result<shell::Shell, String> {
        let Confinement::Sandboxed {
            shell,
            plan,
            grants,
            ..
        } = &self.confinement
        else {
            return Err("bash: commands are not sandboxed".into());
        };
        let ready = shell.ready().await.map_err(|e| e.to_string())?;
        let mounts = grants
            .iter()
            .map(|(path, access)| Ok((self.mount(caller, path)?, *access)))
            .collect::<Result<Vec<_>, String>>()?;
        let (network, limits, _) = plan.for_tenant(caller.tenant);
        let policy = ShellPolicy {
            network: network.is_open(),
            limits,
        };
        let proxied = matches!(network, ShellNetwork::Allow(_));
        let label = caller.key().to_string();
        // A sandbox that fails to start is tried again, a little later each time: under
        // load the kernel has refused bubblewrap's loopback setup in a new network
        // namespace now and then (`Failed RTM_NEWADDR`), three times in a row once, which
        // a later start does not meet.
        let mut attempt = ready
            .start_with(&mounts, &self.mount, &policy, proxied, &label)
            .await;
        for retry in 1..SHELL_START_ATTEMPTS {
            let Err(e) = &attempt else { break };
            tracing::warn!(session = %label, error = %e, "bash: a sandbox failed to start; trying again");
            tokio::time::sleep(SHELL_START_RETRY_BACKOFF * retry).await;
            attempt = ready
                .start_with(&mounts, &self.mount, &policy, proxied, &label)
                .await;
        }
        attempt.map_err(|e| format!("bash: {e}"))
    }

    /// The network of `caller`'s commands, and with an allow-list the proxy of this one
    /// (its connections recorded in the call's log).
    fn network(&self, caller: &Caller<'_>) -> (ShellNetwork, Option<Arc<proxy::ProxyCall>>) {
        let Confinement::Sandboxed { plan, .. } = &self.confinement else {
            return (ShellNetwork::Closed, None);
        };
        let (network, _, tenants) = plan.for_tenant(caller.tenant);
        let proxy = match &network {
            ShellNetwork::Allow(allow) => {
                let setting = match tenants {
                    true => format!("[tenants.{}.bash] network", caller.key().tenant),
                    false => "[bash] network".to_string(),
                };
                let ceiling = caller
                    .tenant
                    .and_then(|t| t.network.clone())
                    .map(|c| (c, format!("[tenants.{}] network", caller.key().tenant)));
                Some(Arc::new(proxy::ProxyCall::new(
                    self.sandbox.network_policy(),
                    allow.clone(),
                    ceiling,
                    caller.requests.clone(),
                    setting,
                )))
            }
            _ => None,
        };
        (network, proxy)
    }

    /// Runs `command` in a sandbox of the session: a waiting one, else a new one.
    async fn run_sandboxed(
        &self,
        pool: &ShellPool,
        caller: &Caller<'_>,
        command: &str,
        limit: Duration,
        cap: usize,
    ) -> Result<Ended, String> {
        let key = &caller.key();
        let (network, proxy) = self.network(caller);
        let proxied = proxy.is_some();
        // A waiting sandbox may have ended meanwhile (a command killed its launcher):
        // then a new one is made; so is one made under another network setting (a
        // reloaded config).
        let (lease, (stdout, stderr)) = loop {
            let (shell, fresh) = match pool.take(key) {
                Some(shell) if shell.fits(network.is_open(), proxied) => (shell, false),
                Some(_) | None => (self.start(caller).await?, true),
            };
            let lease = pool.lend(key, shell);
            match lease.shell().send(command, &self.mount).await {
                Ok(pipes) => break (lease, pipes),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                    lease.give_back();
                    return Err(format!("bash: {e}"));
                }
                Err(e) if fresh => return Err(format!("bash: the sandbox ended at once: {e}")),
                Err(_) => drop(lease),
            }
        };
        let stdout = Capture::start(stdout, cap);
        let stderr = Capture::start(stderr, cap);
        // The proxy serves while the command runs; its connections end with it (aborted
        // and awaited, so that each is in the call's log before the call returns).
        let mut connections = tokio::task::JoinSet::new();
        let reply = {
            let served = async {
                match (lease.shell().proxy(), &proxy) {
                    (Some(listener), Some(call)) => {
                        proxy::serve(listener, call.clone(), &mut connections).await
                    }
                    _ => std::future::pending().await,
                }
            };
            let replied = async {
                tokio::select! {
                    reply = lease.shell().reply() => reply,
                    never = served => match never {},
                }
            };
            tokio::time::timeout(limit, replied).await
        };
        connections.shutdown().await;
        let status = match reply {
            Ok(Ok(launcher::Reply::Ended {
                code,
                signal,
                reusable,
            })) => {
                if reusable {
                    lease.give_back();
                }
                Status::Exited { code, signal }
            }
            Ok(Ok(launcher::Reply::Failed { message })) => {
                lease.give_back();
                Status::Failed(message)
            }
            // The sandbox is killed (the lease dropped), which closes the pipes.
            Err(_) => {
                drop(lease);
                Status::TimedOut
            }
            Ok(Err(e)) => {
                drop(lease);
                Status::Failed(format!(
                    "the sandbox ended before the command did ({e}): the session ended, or a \
                     command killed the sandbox's launcher"
                ))
            }
            Ok(Ok(launcher::Reply::Ready)) => {
                drop(lease);
                Status::Failed("the sandbox's launcher said `Ready` twice".into())
            }
        };
        let mut ended = Ended::read(stdout, stderr, status).await;
        ended.network = proxy.map(|call| call.notes()).unwrap_or_default();
        Ok(ended)
    }

    /// Runs `command` on the host, under its guard (see [`guard`]).
    async fn run_unsandboxed(
        &self,
        groups: &Mutex<HashMap<SessionKey, Vec<Guarded>>>,
        key: &SessionKey,
        command: std::process::Command,
        limit: Duration,
        cap: usize,
    ) -> Result<Ended, String> {
        let (mut guarded, stdout, stderr) =
            Guarded::start(command).map_err(|e| format!("bash: cannot start bash: {e}"))?;
        let stdout = Capture::start(stdout, cap);
        let stderr = Capture::start(stderr, cap);
        // Dropped on every way out of this call (a cancellation too), unless the command
        // left processes running: they are killed then.
        let status = match tokio::time::timeout(limit, guarded.ended()).await {
            Err(_) => {
                drop(guarded);
                Status::TimedOut
            }
            Ok(Err(e)) => {
                drop(guarded);
                Status::Failed(format!("the command's guard ended before it said how: {e}"))
            }
            Ok(Ok(ended)) => {
                // The command is done; what it started may live on (a server the agent
                // started), until the session ends.
                if ended.lingering {
                    groups
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(key.clone())
                        .or_default()
                        .push(guarded);
                }
                Status::Exited {
                    code: ended.code,
                    signal: ended.signal,
                }
            }
        };
        Ok(Ended::read(stdout, stderr, status).await)
    }
}

/// How a command ended.
enum Status {
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    TimedOut,
    Failed(String),
}

/// A command's output and end.
struct Ended {
    stdout: Captured,
    stderr: Captured,
    /// A background process still held the output open after [`DRAIN_GRACE`].
    held_open: bool,
    /// What the proxy refused, a line each (see [`proxy`]).
    network: Vec<String>,
    status: Status,
}

impl Ended {
    /// The output read to its end (both pipes get the same grace, at once).
    async fn read(stdout: Capture, stderr: Capture, status: Status) -> Ended {
        let ((stdout, out_held), (stderr, err_held)) =
            tokio::join!(stdout.finish(), stderr.finish());
        Ended {
            stdout,
            stderr,
            held_open: out_held || err_held,
            network: Vec::new(),
            status,
        }
    }

    /// The tool's result: stdout, then stderr, then what went wrong.
    fn result(self, limit: Duration) -> ToolResult {
        let mut output = String::from_utf8_lossy(&self.stdout.bytes).into_owned();
        let mut note = |text: String| {
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&text);
        };
        if self.stdout.dropped > 0 {
            note(format!(
                "[stdout truncated: {} more bytes]",
                self.stdout.dropped
            ));
        }
        if !self.stderr.bytes.is_empty() {
            note(format!(
                "[stderr]\n{}",
                String::from_utf8_lossy(&self.stderr.bytes)
            ));
        }
        if self.stderr.dropped > 0 {
            note(format!(
                "[stderr truncated: {} more bytes]",
                self.stderr.dropped
            ));
        }
        for line in self.network {
            note(line);
        }
        if self.held_open {
            note(format!(
                "[output may be incomplete: a background process still holds it open; \
                 stopped reading {} s after bash exited]",
                DRAIN_GRACE.as_secs()
            ));
        }
        let is_error = match self.status {
            Status::TimedOut => {
                note(format!(
                    "[timed out after {} s; killed]",
                    limit.as_secs_f64()
                ));
                true
            }
            Status::Failed(message) => {
                note(format!("[bash: {message}]"));
                true
            }
            Status::Exited { code: Some(0), .. } => false,
            Status::Exited {
                code: Some(code), ..
            } => {
                note(format!("[exit code: {code}]"));
                true
            }
            Status::Exited { code: None, signal } => {
                note(match signal {
                    Some(signal) => format!("[killed by signal {signal}]"),
                    None => "[killed by a signal]".to_string(),
                });
                true
            }
        };
        ToolResult {
            output,
            is_error,
            media_type: None,
        }
    }
}

impl Tool for BashTool {}

#[async_trait::async_trait]
impl Callee for BashTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        caller: &Caller<'_>,
        _ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        Ok(match self.parse(&call.arguments) {
            Ok((command, limit)) => self.run(caller, &command, limit).await,
            Err(message) => ToolResult::error(message),
        })
    }

    fn writable_mounts(&self) -> Vec<&str> {
        match &self.confinement {
            Confinement::Sandboxed { grants, .. } => writable(grants).collect(),
            Confinement::Unsandboxed { .. } => vec![self.mount.as_str()],
        }
    }

    fn granted_mounts(&self) -> Vec<&str> {
        match &self.confinement {
            Confinement::Sandboxed { grants, .. } => grants.keys().map(String::as_str).collect(),
            Confinement::Unsandboxed { .. } => vec![self.mount.as_str()],
        }
    }
}

/// A session's sandboxes (waiting, or running a command), or, unsandboxed, the process
/// groups of its commands that may still have members.
impl SessionHolder for BashTool {
    fn held(&self) -> Vec<SessionKey> {
        match &self.confinement {
            Confinement::Sandboxed { pool, .. } => pool.sessions(),
            Confinement::Unsandboxed { groups, .. } => groups
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .keys()
                .cloned()
                .collect(),
        }
    }

    fn forget(&self, key: &SessionKey) {
        match &self.confinement {
            Confinement::Sandboxed { pool, .. } => {
                let ended = pool.end_session(key);
                if ended > 0 {
                    tracing::debug!(session = %key, sandboxes = ended, "ended the session's bash sandboxes");
                }
            }
            Confinement::Unsandboxed { groups, .. } => {
                let guards = groups
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(key)
                    .unwrap_or_default();
                if !guards.is_empty() {
                    tracing::info!(session = %key, commands = guards.len(), "killed what commands left running in the session");
                }
            }
        }
    }
}

/// An unsandboxed command's guard (see [`guard`]), as the host holds it: while held, what
/// the command started may live; dropped, the guard kills it all.
struct Guarded {
    guard: tokio::process::Child,
    /// Until dropped.
    control: Option<tokio::net::UnixStream>,
}

impl Guarded {
    /// Starts `command` (the guard's) with its end of the socket as its stdin: the
    /// guard, and the command's stdout and stderr.
    fn start(
        mut command: std::process::Command,
    ) -> std::io::Result<(
        Guarded,
        tokio::process::ChildStdout,
        tokio::process::ChildStderr,
    )> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        command.stdin(Stdio::from(OwnedFd::from(theirs)));
        // Not killed when dropped: closing the socket ends it, and it ends what the command
        // left (a kill would leave those); tokio reaps it.
        let mut guard = Command::from(command).kill_on_drop(false).spawn()?;
        ours.set_nonblocking(true)?;
        let control = tokio::net::UnixStream::from_std(ours)?;
        let stdout = guard.stdout.take().expect("piped");
        let stderr = guard.stderr.take().expect("piped");
        let control = Some(control);
        Ok((Guarded { guard, control }, stdout, stderr))
    }

    /// How bash ended, as the guard says.
    async fn ended(&mut self) -> std::io::Result<guard::Ended> {
        use tokio::io::AsyncBufReadExt;
        let mut line = Vec::new();
        if let Some(control) = &mut self.control {
            tokio::io::BufReader::new(control)
                .read_until(b'\n', &mut line)
                .await?;
        }
        serde_json::from_slice(&line).map_err(std::io::Error::other)
    }
}

/// Dropped, the command ends: the socket closes, its guard kills what the command
/// started and exits. This waits for that (well under a millisecond), at most
/// [`GUARD_END_GRACE`] (a guard the command stopped), then kills the guard's process group:
/// nothing the command started is left when it returns, and a session's files are deleted
/// next.
impl Drop for Guarded {
    fn drop(&mut self) {
        drop(self.control.take());
        // None once reaped: it ended.
        let Some(pid) = self.guard.id().and_then(|id| Pid::from_raw(id as i32)) else {
            return;
        };
        let ended = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .is_ok_and(|exited| {
                let mut fds = [rustix::event::PollFd::new(
                    &exited,
                    rustix::event::PollFlags::IN,
                )];
                let grace = rustix::event::Timespec::try_from(GUARD_END_GRACE).ok();
                rustix::event::poll(&mut fds, grace.as_ref()).is_ok_and(|ready| ready > 0)
            });
        if !ended {
            let _ = kill_process_group(pid, Signal::KILL);
        }
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

/// An unsandboxed command: `hookhost command-guard -- bash -c command` (see [`guard`]) as
/// the host's user in `dir`, with `PATH`, `HOME` (`dir`) and `LANG`, in a process group of
/// its own.
fn unsandboxed(guard: &Path, bash: &Path, dir: &Path, command: &str) -> std::process::Command {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut child = std::process::Command::new(guard);
    child
        .arg("command-guard")
        .arg("--")
        .arg(bash)
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
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
