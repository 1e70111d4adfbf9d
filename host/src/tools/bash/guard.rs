//! `hookhost command-guard`: what an unsandboxed command (`[bash] sandbox = false`) runs
//! under, so that it dies with the host.
//!
//! Outside a sandbox nothing ends a command's processes when hookhost dies: they are its
//! children's children, and a `kill -9` of the host runs no code of it. So each command
//! runs as `hookhost command-guard -- bash -c COMMAND`. The guard, in the command's
//! process group and its child subreaper (every process the command leaves behind becomes
//! its child), starts bash and holds one end of a socket whose other end the host holds,
//! as its stdin (so the host spawns it without `fork`: a `pre_exec` to put it elsewhere
//! would cost a `fork` of the host, 7.5 ms a command measured here against 2.5 ms). It
//! tells the host how bash ended ([`Ended`]), then lives on while the command's
//! background processes do (they may, until the session ends); when the host's end
//! closes — the host let the command go (timeout, cancellation, the session ended) or
//! died, even by `kill -9` — it kills every process the command left and exits.

use super::launcher::child_or_host;
use crate::limits::{GUARD_KILL_ROUNDS, GUARD_REAP_INTERVAL};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, Stdio};

/// How bash ended: what the guard sends the host, as one line of JSON.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ended {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Whether processes the command started live on (the guard stays with them).
    pub lingering: bool,
}

/// `hookhost command-guard -- PROGRAM ARGS…`: runs the command as [the module](self)
/// says. Started by hookhost only, with its socket as stdin.
pub fn main(command: &[OsString]) -> ExitCode {
    match guard(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hookhost command-guard: {e}");
            ExitCode::from(126)
        }
    }
}

fn guard(command: &[OsString]) -> io::Result<()> {
    let control = control()?;
    let control = control.as_fd();
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| io::Error::other("no command to run"))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .spawn()?;
    // The command's output is read by the host to its end, which our copies would hold
    // back: from here on the guard's own stdout and stderr go nowhere.
    let null = std::fs::File::options().write(true).open("/dev/null")?;
    rustix::stdio::dup2_stdout(&null)?;
    rustix::stdio::dup2_stderr(&null)?;
    if !child_or_host(control, &child)? {
        end_all();
        return Ok(());
    }
    let status = child.wait()?;
    let lingering = !reap();
    let mut line = serde_json::to_vec(&Ended {
        code: status.code(),
        signal: status.signal(),
        lingering,
    })?;
    line.push(b'\n');
    if std::fs::File::from(control.try_clone_to_owned()?)
        .write_all(&line)
        .is_err()
    {
        end_all();
        return Ok(());
    }
    // What the command left running: until it ends, or the host goes.
    while !reap() {
        let mut fds = [PollFd::new(&control, PollFlags::IN)];
        let timeout =
            rustix::event::Timespec::try_from(GUARD_REAP_INTERVAL).map_err(io::Error::other)?;
        match poll(&mut fds, Some(&timeout)) {
            Err(Errno::INTR) | Ok(0) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        // The host sends nothing: anything readable is its end of file.
        if !fds[0].revents().is_empty() {
            end_all();
            return Ok(());
        }
    }
    Ok(())
}

/// The host's socket, on stdin, checked to be one; the command inherits it not, nor any
/// other descriptor but stdout and stderr.
fn control() -> io::Result<OwnedFd> {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let stat = rustix::fs::fstat(fd)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return Err(io::Error::other(
            "stdin is not hookhost's socket: this is started by hookhost",
        ));
    }
    let control = rustix::io::fcntl_dupfd_cloexec(fd, 3)?;
    // SAFETY: close_range(2) closes descriptors this process does not use (what the
    // host's spawn may have passed on without close-on-exec), past its socket's copy.
    if unsafe { libc::syscall(libc::SYS_close_range, control.as_raw_fd() + 1, u32::MAX, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(control)
}

/// Reaps the children that exited: whether none is left.
fn reap() -> bool {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(Errno::INTR) => continue,
            Ok(None) => return false,
            // ECHILD: no child left.
            Err(_) => return true,
        }
    }
}

/// Kills every process the command left, and reaps them: each round kills the guard's
/// children, whose own children then become the guard's, until none is left (or
/// [`GUARD_KILL_ROUNDS`]).
fn end_all() {
    for _ in 0..GUARD_KILL_ROUNDS {
        let children = children();
        if children.is_empty() {
            return;
        }
        for pid in &children {
            let _ = rustix::process::kill_process(*pid, Signal::KILL);
        }
        for _ in &children {
            match rustix::process::wait(WaitOptions::empty()) {
                Ok(Some(_)) | Err(Errno::INTR) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
}

/// The guard's children, from `/proc/thread-self/children` (it has one thread).
fn children() -> Vec<Pid> {
    std::fs::read_to_string("/proc/thread-self/children")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .filter_map(Pid::from_raw)
        .collect()
}
