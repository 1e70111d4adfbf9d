//! A session's sandbox, alive across its commands, as the host holds it: the bubblewrap
//! process, the control socket to its launcher (see [`super::launcher`]) and its `pids`
//! cgroup; and the [`ShellPool`] of sandboxes waiting for their session's next command.

use super::cgroup::SandboxCgroup;
use super::launcher::{self, CONTROL_FD, MAX_MESSAGE, Reply, Request};
use crate::limits::{MAX_IDLE_SHELLS, SHELL_START_TIMEOUT};
use crate::sessions::SessionKey;
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::process::{Pid, Signal};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Instant;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::unix::pipe::Receiver;
use tokio::process::{Child, ChildStderr, Command};

/// One sandbox and its launcher. Dropping it kills the sandbox: bubblewrap is killed, its
/// PID 1 dies with it (`--die-with-parent`), and the kernel kills the rest.
pub struct Shell {
    /// Killed when dropped (`kill_on_drop`), then reaped by tokio.
    _bwrap: Child,
    pid: Pid,
    control: AsyncFd<OwnedFd>,
    /// Removed once the sandbox is gone.
    cgroup: Option<SandboxCgroup>,
}

impl Shell {
    /// Starts `bwrap args… -- launcher sandbox-shell LIMITS` and waits for its launcher.
    pub async fn start(
        bwrap: &Path,
        args: Vec<OsString>,
        cgroup: Option<SandboxCgroup>,
    ) -> Result<Shell, String> {
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| format!("cannot make the sandbox's control socket: {e}"))?;
        let mut command = Command::new(bwrap);
        command
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let raw = theirs.as_raw_fd();
        // SAFETY: dup2 and fcntl are async-signal-safe; `raw` stays open until the spawn
        // returned (`theirs` is dropped after it). The launcher's end becomes its
        // descriptor 3, the only one it inherits besides stdio.
        unsafe {
            command.pre_exec(move || {
                let done = if raw == CONTROL_FD {
                    libc::fcntl(raw, libc::F_SETFD, 0)
                } else {
                    libc::dup2(raw, CONTROL_FD)
                };
                if done == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
        drop(theirs);
        let stderr = child.stderr.take().expect("piped");
        let pid = child
            .id()
            .and_then(|id| Pid::from_raw(id as i32))
            .ok_or("the sandbox ended as it started")?;
        let set_nonblocking = rustix::io::ioctl_fionbio(&ours, true);
        // SAFETY: `ours` is an open socket owned by the `AsyncFd` until the shell is dropped.
        let control = set_nonblocking
            .map_err(io::Error::from)
            .and_then(|()| unsafe { Ok(AsyncFd::register(ours)?) })
            .map_err(|e| format!("cannot watch the sandbox's control socket: {e}"))?;
        let shell = Shell {
            _bwrap: child,
            pid,
            control,
            cgroup,
        };
        let ready = tokio::time::timeout(SHELL_START_TIMEOUT, shell.reply()).await;
        match ready {
            Ok(Ok(Reply::Ready)) => {
                tokio::spawn(log_lines(stderr));
                Ok(shell)
            }
            Ok(Ok(other)) => Err(format!("the sandbox's launcher said {other:?} at start")),
            Ok(Err(_)) => {
                drop(shell);
                Err(said(stderr).await)
            }
            Err(_) => Err(format!(
                "the sandbox did not start within {} s",
                SHELL_START_TIMEOUT.as_secs()
            )),
        }
    }

    /// Sends `command` to run in `workdir`; its stdout and stderr are read from the pipes
    /// returned.
    ///
    /// # Errors
    ///
    /// When the sandbox is gone (its launcher was killed).
    pub async fn send(&self, command: &str, workdir: &str) -> io::Result<(Receiver, Receiver)> {
        let request = serde_json::to_vec(&Request {
            command: command.to_string(),
            workdir: workdir.to_string(),
        })?;
        if request.len() > MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the command is longer than 128 KiB",
            ));
        }
        let flags = rustix::pipe::PipeFlags::CLOEXEC;
        let (out, out_w) = rustix::pipe::pipe_with(flags)?;
        let (err, err_w) = rustix::pipe::pipe_with(flags)?;
        loop {
            let mut ready = self.control.writable().await?;
            let sent = ready.try_io(|fd| {
                launcher::send_with(fd.as_fd(), &request, &[out_w.as_fd(), err_w.as_fd()])
            });
            match sent {
                Ok(result) => result?,
                Err(_would_block) => continue,
            }
            break;
        }
        Ok((Receiver::from_owned_fd(out)?, Receiver::from_owned_fd(err)?))
    }

    /// The launcher's next reply.
    ///
    /// # Errors
    ///
    /// When the sandbox ended (the socket closed) or said something unreadable.
    pub async fn reply(&self) -> io::Result<Reply> {
        let mut buf = vec![0u8; 4096];
        loop {
            let mut ready = self.control.readable().await?;
            match ready.try_io(|fd| {
                rustix::net::recv(fd.as_fd(), &mut buf, rustix::net::RecvFlags::empty())
                    .map_err(io::Error::from)
            }) {
                Ok(Ok((0, _))) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the sandbox ended",
                    ));
                }
                Ok(Ok((n, _))) => return Ok(serde_json::from_slice(&buf[..n.min(buf.len())])?),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Kills every process of the sandbox now (the drop that follows tidies up).
    pub fn kill(&self) {
        let _ = rustix::process::kill_process(self.pid, Signal::KILL);
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill_all();
        }
    }
}

/// Logs what the sandbox writes on stderr (bubblewrap's and the launcher's complaints).
async fn log_lines(stderr: ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::warn!(said = %line, "bash sandbox");
    }
}

/// What a sandbox that failed to start said, as the error.
async fn said(mut stderr: ChildStderr) -> String {
    let mut text = String::new();
    let read = stderr.read_to_string(&mut text);
    let _ = tokio::time::timeout(SHELL_START_TIMEOUT, read).await;
    let text = text.trim();
    if text.is_empty() {
        "the sandbox ended before its launcher was ready".to_string()
    } else {
        format!("the sandbox ended at start: {text}")
    }
}

/// The sandboxes of each session waiting for a command, and those running one.
///
/// A session's sandbox is taken for a command and given back when it ended cleanly
/// (see [`super::launcher`]); one that timed out, was cancelled or could not be emptied is
/// dropped, and the next command starts a new one. A session running commands at once
/// has a sandbox for each. At most [`MAX_IDLE_SHELLS`] wait across all sessions (the
/// longest waiting is dropped first); all of a session's go when it ends.
#[derive(Default)]
pub struct ShellPool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    sessions: HashMap<SessionKey, SessionShells>,
    next: u64,
}

#[derive(Default)]
struct SessionShells {
    idle: Vec<(Instant, Shell)>,
    /// The bubblewrap process of each sandbox running a command, by lease.
    busy: HashMap<u64, Pid>,
}

/// A sandbox lent to one command: killed when dropped, unless given back.
pub struct Lease<'a> {
    pool: &'a ShellPool,
    key: SessionKey,
    id: u64,
    shell: Option<Shell>,
}

impl ShellPool {
    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A waiting sandbox of the session, if any.
    pub fn take(&self, key: &SessionKey) -> Option<Shell> {
        let mut state = self.state();
        let shells = state.sessions.get_mut(key)?;
        shells.idle.pop().map(|(_, shell)| shell)
    }

    /// Lends `shell` to a command of the session.
    pub fn lend(&self, key: &SessionKey, shell: Shell) -> Lease<'_> {
        let mut state = self.state();
        let id = state.next;
        state.next += 1;
        let shells = state.sessions.entry(key.clone()).or_default();
        shells.busy.insert(id, shell.pid);
        Lease {
            pool: self,
            key: key.clone(),
            id,
            shell: Some(shell),
        }
    }

    /// The sessions with sandboxes, waiting or running a command.
    pub fn sessions(&self) -> Vec<SessionKey> {
        self.state().sessions.keys().cloned().collect()
    }

    /// Kills the session's sandboxes, waiting or running a command.
    pub fn end_session(&self, key: &SessionKey) -> usize {
        let Some(shells) = self.state().sessions.remove(key) else {
            return 0;
        };
        for pid in shells.busy.values() {
            let _ = rustix::process::kill_process(*pid, Signal::KILL);
        }
        shells.busy.len() + shells.idle.len()
    }

    fn give_back(&self, key: &SessionKey, id: u64, shell: Option<Shell>) {
        let mut state = self.state();
        let Some(shells) = state.sessions.get_mut(key) else {
            return; // The session ended meanwhile; `shell` is dropped, killing it.
        };
        shells.busy.remove(&id);
        if let Some(shell) = shell {
            shells.idle.push((Instant::now(), shell));
        }
        let waiting: usize = state.sessions.values().map(|s| s.idle.len()).sum();
        if waiting > MAX_IDLE_SHELLS {
            let oldest = state
                .sessions
                .iter()
                .filter_map(|(key, s)| s.idle.first().map(|(at, _)| (*at, key.clone())))
                .min();
            if let Some((_, key)) = oldest
                && let Some(shells) = state.sessions.get_mut(&key)
            {
                shells.idle.remove(0);
            }
        }
        state
            .sessions
            .retain(|_, s| !s.idle.is_empty() || !s.busy.is_empty());
    }
}

impl Lease<'_> {
    pub fn shell(&self) -> &Shell {
        self.shell.as_ref().expect("lent until given back")
    }

    /// Gives the sandbox back for the session's next command.
    pub fn give_back(mut self) {
        let shell = self.shell.take();
        self.pool.give_back(&self.key, self.id, shell);
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(shell) = self.shell.take() {
            shell.kill();
            self.pool.give_back(&self.key, self.id, None);
        }
    }
}
