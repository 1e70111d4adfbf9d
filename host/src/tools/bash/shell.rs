//! A session's sandbox, alive across its commands, as the host holds it: the bubblewrap
//! process, the control socket to its launcher (see [`super::launcher`]) and its `pids`
//! cgroup; and the [`ShellPool`] of sandboxes waiting for their session's next command.

use super::cgroup::SandboxCgroup;
use super::launcher::{self, CONTROL_FD, MAX_MESSAGE, Reply, Request};
use super::network::{INFO_FD, Network};
use crate::limits::{
    MAX_IDLE_SHELLS, MAX_SANDBOX_LOG_LINE, MAX_SANDBOX_LOG_LINES, SHELL_START_TIMEOUT,
};
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

/// The descriptor bubblewrap reads its arguments from.
const ARGS_FD: i32 = CONTROL_FD + 1;

/// One sandbox and its launcher. Dropping it kills the sandbox: bubblewrap is killed, its
/// PID 1 (the launcher) dies with it (`--die-with-parent`), and the kernel kills the rest.
pub struct Shell {
    /// Killed when dropped (`kill_on_drop`), then reaped by tokio.
    _bwrap: Child,
    pid: Pid,
    control: AsyncFd<OwnedFd>,
    /// Removed once the sandbox is gone.
    cgroup: Option<SandboxCgroup>,
    /// slirp4netns routing its network, when the policy opens it; ends with the sandbox.
    _network: Option<Network>,
    /// Whether slirp4netns routes it.
    open: bool,
    /// The listening socket its launcher made on 127.0.0.1 of its network namespace for
    /// the proxy (see [`super::proxy`]), when it has an allow-list.
    proxy: Option<tokio::net::TcpListener>,
}

impl Shell {
    /// Starts `bwrap args… -- launcher sandbox-shell SETUP` and waits for its launcher;
    /// with `network` (the slirp4netns program), routes its network namespace through it
    /// first (see [`super::network`]); with `proxy` (the launcher's setup asks for it),
    /// keeps the proxy's listening socket the launcher hands over with its `Ready`.
    /// `label` names the sandbox in the log (its session).
    ///
    /// The options reach bubblewrap through a memory file (`--args FD`), not its command
    /// line: `/proc/1/cmdline` inside shows no host path.
    pub async fn start(
        bwrap: &Path,
        mut args: Vec<OsString>,
        cgroup: Option<SandboxCgroup>,
        network: Option<&Path>,
        proxy: bool,
        label: String,
    ) -> Result<Shell, String> {
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| format!("cannot make the sandbox's control socket: {e}"))?;
        // bubblewrap takes options from the file, the command (`-- launcher …`, which
        // names no host path) from its command line.
        let mut split = args.iter().position(|a| a == "--").unwrap_or(args.len());
        let info = match network {
            Some(_) => {
                let option = ["--info-fd".into(), INFO_FD.to_string().into()];
                args.splice(split..split, option);
                split += 2;
                let (info, info_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                    .map_err(|e| format!("cannot make the sandbox's information pipe: {e}"))?;
                Some((info, info_w))
            }
            None => None,
        };
        let arguments = arguments_file(&args[..split])
            .map_err(|e| format!("cannot pass the sandbox its arguments: {e}"))?;
        let mut command = Command::new(bwrap);
        command
            .args(["--args".into(), ARGS_FD.to_string()])
            .args(&args[split..])
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let (control_raw, args_raw) = (theirs.as_raw_fd(), arguments.as_raw_fd());
        let info_raw = info.as_ref().map_or(-1, |(_, w)| w.as_raw_fd());
        let cgroups = cgroup
            .as_ref()
            .map(SandboxCgroup::procs_files)
            .unwrap_or_default();
        // slirp4netns joins them too.
        let network_cgroups = cgroups.clone();
        // SAFETY: fcntl and dup2 are async-signal-safe; the descriptors stay open until
        // the spawn returned. Each is first copied above every target, so no dup2
        // overwrites another's source. The copies made by dup2 are not close-on-exec: the
        // control socket becomes the launcher's descriptor 3, the arguments bubblewrap's 4
        // and the information pipe its 5 (it uses them, and the launcher closes all but 3).
        unsafe {
            command.pre_exec(move || {
                let high = |fd| libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, INFO_FD + 1);
                let (control, args) = (high(control_raw), high(args_raw));
                if control == -1
                    || args == -1
                    || libc::dup2(control, CONTROL_FD) == -1
                    || libc::dup2(args, ARGS_FD) == -1
                {
                    return Err(io::Error::last_os_error());
                }
                if info_raw != -1 {
                    let info = high(info_raw);
                    if info == -1 || libc::dup2(info, INFO_FD) == -1 {
                        return Err(io::Error::last_os_error());
                    }
                }
                // bubblewrap, and so the whole sandbox, in its cgroups before it runs.
                super::cgroup::join(&cgroups)
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
        drop((theirs, arguments));
        let stderr = child.stderr.take().expect("piped");
        let network = match (network, info) {
            (Some(slirp), Some((info, info_w))) => {
                drop(info_w);
                let info = Receiver::from_owned_fd(info).map_err(|e| e.to_string())?;
                match super::network::attach(slirp, info, network_cgroups).await {
                    Ok(network) => Some(network),
                    Err(e) => {
                        drop(child);
                        return Err(format!("{e} ({})", said(stderr).await));
                    }
                }
            }
            _ => None,
        };
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
        let mut shell = Shell {
            _bwrap: child,
            pid,
            control,
            cgroup,
            open: network.is_some(),
            _network: network,
            proxy: None,
        };
        let ready = tokio::time::timeout(SHELL_START_TIMEOUT, shell.receive()).await;
        match ready {
            Ok(Ok((Reply::Ready, fds))) => {
                if proxy {
                    let listener = fds
                        .into_iter()
                        .next()
                        .ok_or_else(|| {
                            io::Error::other("the launcher sent no listening socket for the proxy")
                        })
                        .and_then(|fd| {
                            let listener = std::net::TcpListener::from(fd);
                            listener.set_nonblocking(true)?;
                            tokio::net::TcpListener::from_std(listener)
                        })
                        .map_err(|e| format!("cannot serve the sandbox's proxy: {e}"))?;
                    shell.proxy = Some(listener);
                }
                tokio::spawn(log_lines(stderr, label));
                Ok(shell)
            }
            Ok(Ok((other, _))) => Err(format!("the sandbox's launcher said {other:?} at start")),
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
        self.receive().await.map(|(reply, _)| reply)
    }

    /// The launcher's next reply and the descriptors sent with it (close-on-exec).
    async fn receive(&self) -> io::Result<(Reply, Vec<OwnedFd>)> {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        let mut buf = vec![0u8; 4096];
        loop {
            let mut ready = self.control.readable().await?;
            let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut ancillary = RecvAncillaryBuffer::new(&mut space);
            let received = ready.try_io(|fd| {
                rustix::net::recvmsg(
                    fd.as_fd(),
                    &mut [io::IoSliceMut::new(&mut buf)],
                    &mut ancillary,
                    RecvFlags::CMSG_CLOEXEC,
                )
                .map_err(io::Error::from)
            });
            let fds: Vec<OwnedFd> = ancillary
                .drain()
                .filter_map(|message| match message {
                    RecvAncillaryMessage::ScmRights(fds) => Some(fds),
                    _ => None,
                })
                .flatten()
                .collect();
            match received {
                Ok(Ok(received)) if received.bytes == 0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the sandbox ended",
                    ));
                }
                Ok(Ok(received)) => {
                    let said = &buf[..received.bytes.min(buf.len())];
                    return Ok((serde_json::from_slice(said)?, fds));
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// The proxy's listening socket, when the sandbox has an allow-list.
    pub fn proxy(&self) -> Option<&tokio::net::TcpListener> {
        self.proxy.as_ref()
    }

    /// Whether it was made for a command whose network is `open` (slirp4netns) or
    /// `proxied` (an allow-list): a sandbox made under another config is not reused.
    pub fn fits(&self, open: bool, proxied: bool) -> bool {
        self.open == open && self.proxy.is_some() == proxied
    }

    /// Kills every process of the sandbox now (the drop that follows tidies up).
    pub fn kill(&self) {
        let _ = rustix::process::kill_process(self.pid, Signal::KILL);
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill_all();
        }
    }
}

/// Logs what the sandbox writes on stderr (bubblewrap's and the launcher's complaints), as
/// its session's, quoted and escaped: at most
/// [`MAX_SANDBOX_LOG_LINES`] lines of at most [`MAX_SANDBOX_LOG_LINE`] bytes, then one
/// line saying the rest is dropped. It reads on to the end, so no writer blocks.
async fn log_lines(stderr: ChildStderr, session: String) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut logged = 0;
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_SANDBOX_LOG_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) if logged < MAX_SANDBOX_LOG_LINES => {
                // Quoted and escaped: control characters never reach a terminal.
                let said = String::from_utf8_lossy(&line);
                tracing::warn!(%session, said = ?said.trim_end(), "bash sandbox");
            }
            Ok(_) if logged == MAX_SANDBOX_LOG_LINES => {
                tracing::warn!(%session, "bash sandbox: more on its stderr, not logged");
            }
            Ok(_) => {}
        }
        logged += 1;
        if !line.ends_with(b"\n") && skip_line(&mut reader).await.is_err() {
            return;
        }
    }
}

/// Reads past the end of the current line, keeping nothing of it.
async fn skip_line(reader: &mut BufReader<ChildStderr>) -> io::Result<()> {
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// The sandbox's arguments as bubblewrap's `--args` reads them: each followed by a NUL,
/// in a memory file read from its start.
fn arguments_file(args: &[OsString]) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = Vec::new();
    for arg in args {
        bytes.extend_from_slice(arg.as_bytes());
        bytes.push(0);
    }
    let file = rustix::fs::memfd_create("hookhost-sandbox-args", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(file);
    std::io::Write::write_all(&mut file, &bytes)?;
    std::io::Seek::rewind(&mut file)?;
    Ok(file.into())
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
