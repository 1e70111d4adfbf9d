//! The program that runs inside a session's sandbox and starts its commands:
//! `hookhost sandbox-shell`, PID 1 of the sandbox (bubblewrap's `--as-pid-1`: bubblewrap
//! installs no init of its own, which would be a process inside without the system-call
//! filter, dumpable, whose memory a command could write through `/proc/1/mem`).
//!
//! Making a sandbox costs about 7.5 ms of CPU here (namespaces, mounts, `pivot_root`), a
//! `bash -c` about 1 ms; so a sandbox is made once per session (see `shell::ShellPool`) and
//! its launcher forks each command, which costs what an unsandboxed command costs.
//! The host talks to it over a `SOCK_SEQPACKET` socket on [`CONTROL_FD`], one message per
//! [`Request`] (with the command's stdout and stderr as `SCM_RIGHTS`) and per [`Reply`].
//!
//! Each command starts with what a new sandbox gave it, and nothing it leaves outlives it:
//! - it runs as `bash -c` in a session of its own, under the [`ShellLimits`] as hard
//!   limits, with the launcher's environment (the sandbox's);
//! - when it exits, every other process of the sandbox is killed (`kill(-1, SIGKILL)`,
//!   which the kernel applies atomically against `fork`) and reaped (the launcher is the
//!   namespace's init, to which orphans fall), `/tmp`, `/dev/shm` and `/dev/mqueue` are emptied and every System V
//!   IPC object (shared memory, message queue, semaphore) is removed, so nothing a
//!   command made holds memory or reaches the next one; if that fails, the reply says the
//!   sandbox is not to be used again;
//! - when the host closes the socket (it timed a command out, the session ended, the host
//!   died), the launcher kills everything and exits, and with it the sandbox;
//! - a command cannot trace the launcher, write its memory or open its descriptors (it is
//!   not dumpable, and the filter refuses `ptrace`), nor signal it: the kernel delivers a
//!   namespace's init only the signals it handles, and it handles none;
//! - before it starts any command, the launcher joins a new session keyring (the host's
//!   is never inherited) and installs the system-call filter (see [`super::seccomp`]),
//!   which every command inherits: no process of the sandbox is without it.

use crate::limits::ShellLimits;
use rustix::event::{PollFd, PollFlags, poll};
use rustix::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendFlags,
};
use rustix::process::{Resource, Rlimit, WaitOptions};
use serde::{Deserialize, Serialize};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

/// The launcher's end of the control socket.
pub const CONTROL_FD: i32 = 3;

/// The largest message: a request is a command line, which the kernel bounds at 128 KiB
/// (`MAX_ARG_STRLEN`) as one argument of `bash -c`.
pub const MAX_MESSAGE: usize = 256 * 1024;

/// The directories emptied after each command: scratch files, POSIX shared memory and
/// POSIX message queues (`/dev/mqueue`, the sandbox's own IPC namespace's).
const SCRATCH: &[&str] = &["/tmp", "/dev/shm", "/dev/mqueue"];

/// Removes the IPC object of an id: `0`, or `-1` and `errno`.
type RemoveIpc = fn(i32) -> i32;

/// The sandbox's System V IPC objects, by kind: the `/proc/sysvipc` file that lists them
/// (their id in the second column) and how one is removed.
const SYSV_IPC: &[(&str, RemoveIpc)] = &[
    // SAFETY (each): IPC_RMID takes no buffer.
    ("/proc/sysvipc/shm", |id| unsafe {
        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut())
    }),
    ("/proc/sysvipc/msg", |id| unsafe {
        libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut())
    }),
    ("/proc/sysvipc/sem", |id| unsafe {
        libc::semctl(id, 0, libc::IPC_RMID)
    }),
];

/// What the launcher is started with: its one argument, as JSON.
#[derive(Debug, Serialize, Deserialize)]
pub struct Setup {
    /// Every command's limits.
    pub limits: ShellLimits,
    /// The port of 127.0.0.1 to listen on for the host's proxy (see [`super::proxy`]): the
    /// listener is made before any command runs and handed to the host with
    /// [`Reply::Ready`]. `None`: no proxy.
    pub proxy_port: Option<u16>,
}

/// One command to run: `bash -c command` in `workdir`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub command: String,
    pub workdir: String,
}

/// What the launcher says.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// The sandbox is up (sent once, first), with the proxy's listening socket when the
    /// [`Setup`] asks for one.
    Ready,
    /// The command ended, with its exit code or the signal that killed it. `reusable`:
    /// the sandbox is as new and may run another command.
    Ended {
        code: Option<i32>,
        signal: Option<i32>,
        reusable: bool,
    },
    /// The command could not start.
    Failed { message: String },
}

/// `hookhost sandbox-shell`: serves the host on [`CONTROL_FD`] until it closes the socket.
/// `setup` is the JSON of its [`Setup`].
pub fn main(setup: &str) -> ExitCode {
    let outcome = in_sandbox().and_then(|()| {
        let control = control()?;
        let served = serve(control.as_fd(), setup);
        end_all();
        served
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hookhost sandbox-shell: {e}");
            ExitCode::from(126)
        }
    }
}

/// Whether this process is what a sandbox starts: PID 1 of a PID namespace, with no parent
/// in it. Nothing else may run the launcher: it ends by killing every process it may
/// signal (`kill(-1)`), which outside a sandbox would be every process of its user.
fn in_sandbox() -> io::Result<()> {
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    if pid == 1 && rustix::process::getppid().is_none() {
        Ok(())
    } else {
        Err(io::Error::other(
            "this runs only inside a sandbox hookhost makes for bash, as its PID 1",
        ))
    }
}

/// The control socket, checked to be one: this program is started by hookhost only.
pub(super) fn control() -> io::Result<OwnedFd> {
    // SAFETY: the descriptor is checked to be an open socket before it is owned.
    let fd = unsafe { BorrowedFd::borrow_raw(CONTROL_FD) };
    let stat = rustix::fs::fstat(fd).map_err(|_| {
        io::Error::other("no control socket on descriptor 3: this is started by hookhost")
    })?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return Err(io::Error::other(
            "descriptor 3 is not hookhost's control socket",
        ));
    }
    // Commands inherit neither the socket nor what hookhost's own parent may have left
    // open without close-on-exec (bubblewrap passes every inherited descriptor on).
    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC)?;
    // SAFETY: close_range(2) closes descriptors this process does not use.
    if unsafe { libc::syscall(libc::SYS_close_range, CONTROL_FD + 1, u32::MAX, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd 3 is open, and nothing else in this process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(CONTROL_FD) })
}

fn serve(control: BorrowedFd<'_>, setup: &str) -> io::Result<()> {
    let Setup { limits, proxy_port } = serde_json::from_str(setup).map_err(io::Error::other)?;
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    join_new_keyring()?;
    // Bound before any command runs, so none can take the port; kept open here as long as
    // the sandbox lives (close-on-exec: no command inherits it), so the port never frees
    // while the host serves it.
    let proxy = proxy_port
        .map(|port| {
            std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).map_err(|e| {
                io::Error::other(format!(
                    "cannot listen on 127.0.0.1:{port} for the proxy: {e}"
                ))
            })
        })
        .transpose()?;
    let filter = super::seccomp::program()
        .map_err(|e| io::Error::other(format!("cannot build the system-call filter: {e}")))?;
    seccompiler::apply_filter(&filter)
        .map_err(|e| io::Error::other(format!("cannot install the system-call filter: {e}")))?;
    let ready = serde_json::to_vec(&Reply::Ready)?;
    let listener: Vec<BorrowedFd<'_>> = proxy.iter().map(AsFd::as_fd).collect();
    send_with(control, &ready, &listener)?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    while let Some((request, [stdout, stderr])) = receive(control, &mut buf)? {
        let reply = run(control, &request, stdout, stderr, &limits)?;
        send(control, &reply)?;
    }
    Ok(())
}

/// Runs one command to its end; `Err` when the host closed the socket meanwhile.
fn run(
    control: BorrowedFd<'_>,
    request: &Request,
    stdout: OwnedFd,
    stderr: OwnedFd,
    limits: &ShellLimits,
) -> io::Result<Reply> {
    let limits = *limits;
    let mut command = Command::new("/bin/bash");
    command
        .arg("-c")
        .arg(&request.command)
        .current_dir(&request.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    // SAFETY: setsid and setrlimit are async-signal-safe system calls, and this process
    // has one thread.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            set_limits(&limits)?;
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Ok(Reply::Failed {
                message: format!("cannot start bash: {e}"),
            });
        }
    };
    drop(command);
    if !child_or_host(control, &child)? {
        return Err(io::Error::other("the host closed the control socket"));
    }
    let status = child.wait()?;
    end_all();
    Ok(Reply::Ended {
        code: status.code(),
        signal: status.signal(),
        reusable: SCRATCH.iter().all(|dir| empty(Path::new(dir)).is_ok()) && remove_sysv_ipc(),
    })
}

/// Makes this process (and what it starts) a member of a new, empty session keyring
/// instead of the one it inherited from the host.
fn join_new_keyring() -> io::Result<()> {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: a NULL name asks for a new anonymous keyring; nothing is read or written.
    let joined = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if joined == -1 {
        let e = io::Error::last_os_error();
        return Err(io::Error::other(format!(
            "cannot join a new session keyring: {e}"
        )));
    }
    Ok(())
}

/// Removes every System V IPC object of the sandbox; whether all are gone.
fn remove_sysv_ipc() -> bool {
    SYSV_IPC.iter().all(|(list, remove)| {
        let Ok(listed) = std::fs::read_to_string(list) else {
            return false;
        };
        listed
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().nth(1)?.parse::<i32>().ok())
            .all(|id| {
                remove(id) == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            })
    })
}

/// Waits until `child` exits (`true`) or the host closes `control` (`false`: the host
/// sends nothing while a command runs, so anything readable is its end of file).
pub(super) fn child_or_host(
    control: BorrowedFd<'_>,
    child: &std::process::Child,
) -> io::Result<bool> {
    let pid = rustix::process::Pid::from_child(child);
    let exited = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
    loop {
        let mut fds = [
            PollFd::new(&control, PollFlags::IN),
            PollFd::new(&exited, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        if !fds[0].revents().is_empty() {
            return Ok(false);
        }
        if !fds[1].revents().is_empty() {
            return Ok(true);
        }
    }
}

/// Sets each limit as both the soft and the hard limit.
fn set_limits(limits: &ShellLimits) -> io::Result<()> {
    for (resource, value) in [
        // Counted with the launcher, in the sandbox's user namespace.
        (Resource::Nproc, limits.processes.saturating_add(1)),
        (Resource::Data, limits.memory_bytes),
        (Resource::Cpu, limits.cpu_secs),
        (Resource::Fsize, limits.file_bytes),
        (Resource::Nofile, limits.open_files),
    ] {
        let limit = Some(value).filter(|v| *v != u64::MAX);
        rustix::process::setrlimit(
            resource,
            Rlimit {
                current: limit,
                maximum: limit,
            },
        )?;
    }
    Ok(())
}

/// Kills every process of the sandbox but the launcher, and reaps them.
fn end_all() {
    // SAFETY: kill(2) with pid -1 signals every process this one may signal; in the
    // sandbox's PID namespace those are the sandbox's, never the host's.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some(_)) | Err(Errno::INTR) => continue,
            Ok(None) | Err(_) => return,
        }
    }
}

/// Removes everything in `dir`, keeping `dir`.
fn empty(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Sends `message` as one packet with `fds` attached.
pub fn send_with(socket: BorrowedFd<'_>, message: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(rustix::net::SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many descriptors for one message"));
    }
    loop {
        match rustix::net::sendmsg(
            socket,
            &[IoSlice::new(message)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => return Ok(()),
        }
    }
}

fn send(socket: BorrowedFd<'_>, reply: &Reply) -> io::Result<()> {
    send_with(socket, &serde_json::to_vec(reply)?, &[])
}

/// The next request and its two descriptors; `None` when the host closed the socket.
fn receive(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<(Request, [OwnedFd; 2])>> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(Errno::INTR) => continue,
            other => break other?,
        }
    };
    if received.bytes == 0 {
        return Ok(None);
    }
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    let request: Request = serde_json::from_slice(&buf[..received.bytes])?;
    let fds: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|_| io::Error::other("a request needs exactly two descriptors"))?;
    Ok(Some((request, fds)))
}
