//! The network of a sandbox whose policy opens it. Every sandbox has a network namespace
//! of its own; an open one gets a `tap0` device (10.0.2.100, gateway 10.0.2.2) routed by
//! slirp4netns, the user-mode network stack of rootless Podman and Docker, which makes
//! each of the sandbox's connections from the host as hookhost's user. So a command
//! reaches what the host reaches, but never the host's namespace itself:
//! - not the host's loopback (`--disable-host-loopback`: 10.0.2.2 leads nowhere, and the
//!   sandbox's 127.0.0.1 is its own);
//! - not the host's abstract Unix sockets, which belong to a network namespace;
//! - not the host's interfaces, routes or firewall, which it cannot see or change.
//!
//! Names are resolved through slirp4netns's forwarder at 10.0.2.3 (the sandbox's
//! `resolv.conf` names it), which asks the host's resolvers. IPv4 only.
//!
//! slirp4netns parses what commands send, so it is confined itself: a system-call filter
//! (`--enable-seccomp`) and, when hookhost runs as root, an empty root and no capabilities
//! (`--enable-sandbox`, which needs a root it can become in the user namespace it joins,
//! so an ordinary user's slirp4netns keeps that user's view of the host). It runs in the
//! sandbox's cgroups (its buffers are the sandbox's memory) and ends with the sandbox:
//! when its exit pipe closes, and killed when the [`Network`] is dropped.
//!
//! Measured here: an open sandbox starts 0.6 ms later than a closed one (10.7 against
//! 10.2 ms; slirp4netns starts while bubblewrap makes the mounts); see the bash rows of
//! the book's Performance chapter (docs/performance.md).

use crate::limits::SHELL_START_TIMEOUT;
use rustix::fd::{AsRawFd, OwnedFd};
use std::ffi::CString;
use std::io;
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe::Receiver;
use tokio::process::{Child, Command};

/// The descriptor bubblewrap writes its `--info-fd` JSON to.
pub const INFO_FD: i32 = super::launcher::CONTROL_FD + 2;

/// The sandbox's `resolv.conf` when its network is open: slirp4netns's forwarder.
pub const RESOLV_CONF: &str = "nameserver 10.0.2.3\n";

/// slirp4netns's descriptors: readiness, exit, the user and network namespaces.
const READY_FD: i32 = 3;
const EXIT_FD: i32 = 4;
const USERNS_FD: i32 = 5;
const NETNS_FD: i32 = 6;

/// `NS_GET_USERNS` (`linux/nsfs.h`): the user namespace owning a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

/// slirp4netns routing one sandbox. Dropping it ends it.
pub struct Network {
    /// Killed when dropped (`kill_on_drop`), then reaped by tokio.
    _slirp: Child,
    /// slirp4netns exits when this closes (`--exit-fd`), even if it outlived a kill.
    _exit: OwnedFd,
}

/// What bubblewrap writes on `--info-fd`, of which the sandbox's first process and its
/// network namespace are read.
#[derive(serde::Deserialize)]
struct Info {
    #[serde(rename = "child-pid")]
    child_pid: i32,
    #[serde(rename = "net-namespace")]
    net_namespace: u64,
}

/// Routes the network namespace of the sandbox whose bubblewrap writes `info` (its
/// `--info-fd`) through slirp4netns (`slirp`), in the sandbox's cgroups (`cgroups`: their
/// `cgroup.procs` files), and waits until its device is configured.
///
/// # Errors
///
/// Why the network could not be made: bubblewrap said nothing, the namespace is not the
/// one it named, or slirp4netns failed (with what it said).
pub async fn attach(
    slirp: &Path,
    mut info: Receiver,
    cgroups: Vec<CString>,
) -> Result<Network, String> {
    let mut said = Vec::new();
    let mut info = (&mut info).take(4096);
    tokio::time::timeout(SHELL_START_TIMEOUT, info.read_to_end(&mut said))
        .await
        .map_err(|_| "bubblewrap did not say where the sandbox is".to_string())?
        .map_err(|e| format!("cannot read what bubblewrap said: {e}"))?;
    let info: Info = serde_json::from_slice(&said)
        .map_err(|e| format!("bubblewrap's --info-fd said something unreadable: {e}"))?;
    let netns = namespace(&info).map_err(|e| format!("cannot open the sandbox's network: {e}"))?;
    // Root joins the network namespace directly; an ordinary user first joins the user
    // namespace that owns it (bubblewrap's outer one, which hookhost's user owns).
    let userns = if rustix::process::geteuid().is_root() {
        None
    } else {
        // SAFETY: NS_GET_USERNS takes no argument and returns a new descriptor or -1.
        let fd = unsafe { libc::ioctl(netns.as_raw_fd(), NS_GET_USERNS) };
        if fd < 0 {
            return Err(format!(
                "cannot find the sandbox's user namespace: {}",
                io::Error::last_os_error()
            ));
        }
        // SAFETY: a descriptor the kernel just returned, owned by no one else.
        Some(unsafe { <OwnedFd as rustix::fd::FromRawFd>::from_raw_fd(fd) })
    };
    let flags = rustix::pipe::PipeFlags::CLOEXEC;
    let (ready, ready_w) = rustix::pipe::pipe_with(flags).map_err(|e| e.to_string())?;
    let (exit_r, exit) = rustix::pipe::pipe_with(flags).map_err(|e| e.to_string())?;
    let mut command = Command::new(slirp);
    command.args([
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--enable-seccomp",
    ]);
    command.arg(format!("--ready-fd={READY_FD}"));
    command.arg(format!("--exit-fd={EXIT_FD}"));
    match userns {
        Some(_) => command.arg(format!("--userns-path=/proc/self/fd/{USERNS_FD}")),
        None => command.arg("--enable-sandbox"),
    };
    command
        .args([
            "--netns-type=path".into(),
            format!("/proc/self/fd/{NETNS_FD}"),
        ])
        .arg("tap0")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let fds = [
        (ready_w.as_raw_fd(), READY_FD),
        (exit_r.as_raw_fd(), EXIT_FD),
        (userns.as_ref().map_or(-1, AsRawFd::as_raw_fd), USERNS_FD),
        (netns.as_raw_fd(), NETNS_FD),
    ];
    // SAFETY: fcntl, dup2 and the cgroup join's open/write/close are async-signal-safe;
    // every descriptor stays open until the spawn returned. Each is first copied above
    // every target, so no dup2 overwrites another's source.
    unsafe {
        command.pre_exec(move || {
            for (from, to) in fds {
                if from == -1 {
                    continue;
                }
                let high = libc::fcntl(from, libc::F_DUPFD_CLOEXEC, NETNS_FD + 1);
                if high == -1 || libc::dup2(high, to) == -1 {
                    return Err(io::Error::last_os_error());
                }
            }
            super::cgroup::join(&cgroups)
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", slirp.display()))?;
    drop((ready_w, exit_r, userns, netns));
    let mut stderr = child.stderr.take().expect("piped");
    let mut ready = Receiver::from_owned_fd(ready).map_err(|e| e.to_string())?;
    let mut byte = [0u8; 1];
    match tokio::time::timeout(SHELL_START_TIMEOUT, ready.read(&mut byte)).await {
        Ok(Ok(1)) => {
            // What it says from now on is about the sandbox's traffic, not a failure.
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            });
            Ok(Network {
                _slirp: child,
                _exit: exit,
            })
        }
        Ok(_) => {
            let _ = child.start_kill();
            let mut text = String::new();
            let mut stderr = (&mut stderr).take(4096);
            let _ =
                tokio::time::timeout(SHELL_START_TIMEOUT, stderr.read_to_string(&mut text)).await;
            Err(format!(
                "slirp4netns could not open the sandbox's network: {}",
                text.trim()
            ))
        }
        Err(_) => Err(format!(
            "slirp4netns did not open the sandbox's network within {} s",
            SHELL_START_TIMEOUT.as_secs()
        )),
    }
}

/// The network namespace of `info`'s process, checked to be the one bubblewrap named (not
/// a process that reused its number).
fn namespace(info: &Info) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let path = format!("/proc/{}/ns/net", info.child_pid);
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    if rustix::fs::fstat(&fd)?.st_ino != info.net_namespace {
        return Err(io::Error::other("the sandbox's process is gone"));
    }
    Ok(fd)
}
