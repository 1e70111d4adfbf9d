//! A `pids` and a `memory` cgroup per `bash` sandbox, where the host lets hookhost make
//! them.
//!
//! Why: `RLIMIT_NPROC` bounds a sandbox's processes only when hookhost does not run as
//! root (the kernel exempts root's processes, and a sandbox's processes are root's
//! outside their user namespace when the host is root); `RLIMIT_DATA` bounds each
//! process's own memory, not what a sandbox's processes hold together, nor pages of
//! `tmpfs`, System V or POSIX shared memory and `memfd`s, which belong to no process's
//! data segment. A memory cgroup charges all of these to the sandbox.
//!
//! Each sandbox gets `<hookhost's cgroup>/hookhost-bash/<host pid>.<n>` in each hierarchy
//! found, with `pids.max` and `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`,
//! swap included, where the kernel has it). bubblewrap is moved into them before it runs
//! (see `shell.rs`), so the sandbox's launcher (its PID 1) and every command are inside;
//! nothing inside can see or write the cgroup files. They are removed when the sandbox
//! ends. Moving a process costs about 3 ms here per hierarchy (the migration waits for an
//! RCU grace period, and stalls other forks meanwhile), once per sandbox, not per command.
//!
//! Found through `/proc/self/cgroup` and `/proc/self/mountinfo`: the cgroup v1 `pids` and
//! `memory` hierarchies, when this process may make directories in its cgroup there.
//! (Under cgroup v2 a process may move only into a cgroup it was delegated, and must leave
//! its own for a leaf first; that is not done here, and commands are then bounded by the
//! resource limits alone, which `hookhost config check` says.)

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The directory under hookhost's own cgroup that holds the sandboxes' cgroups.
const PARENT: &str = "hookhost-bash";

/// How long a sandbox's cgroup may take to empty once the sandbox is gone (its processes
/// are being killed by the kernel) before hookhost gives up removing it; a
/// later start of hookhost removes what is left.
const EMPTY_WAIT: Duration = Duration::from_secs(2);

/// The controllers a sandbox gets a cgroup of, when the host has their hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// Where sandboxes' cgroups are made: one parent directory per controller found.
pub struct SandboxCgroups {
    parents: Vec<(Controller, PathBuf)>,
    /// This host's process id, which names its sandboxes' cgroups.
    host: u32,
    next: AtomicU64,
}

impl SandboxCgroups {
    /// The cgroups this process may make, if any; removes those a dead hookhost left
    /// behind.
    pub fn find() -> SandboxCgroups {
        let parents = [Controller::Pids, Controller::Memory]
            .into_iter()
            .filter_map(|controller| {
                let parent = own_v1_dir(controller.name())?.join(PARENT);
                // Made by another hookhost (of another user) maybe: this one must be able to
                // make its sandboxes' cgroups in it.
                let made = match std::fs::create_dir(&parent) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        rustix::fs::access(&parent, rustix::fs::Access::WRITE_OK)
                            .map_err(io::Error::from)
                    }
                    made => made,
                };
                match made {
                    Ok(()) => {}
                    Err(e) => {
                        tracing::debug!(dir = %parent.display(), error = %e, "no {} cgroup for bash commands", controller.name());
                        return None;
                    }
                }
                Some((controller, parent))
            })
            .collect();
        let cgroups = SandboxCgroups {
            parents,
            host: std::process::id(),
            next: AtomicU64::new(0),
        };
        cgroups.remove_stale();
        cgroups
    }

    /// Whether sandboxes get a cgroup of `controller`.
    pub fn has(&self, controller: Controller) -> bool {
        self.parents.iter().any(|(c, _)| *c == controller)
    }

    /// New cgroups for one sandbox, holding at most `processes` processes and
    /// `memory_bytes` of memory together; `None` where the host has no hierarchy for them.
    ///
    /// # Errors
    ///
    /// When a directory or a limit cannot be written.
    pub fn create(&self, processes: u64, memory_bytes: u64) -> io::Result<Option<SandboxCgroup>> {
        if self.parents.is_empty() {
            return Ok(None);
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut cgroup = SandboxCgroup { dirs: Vec::new() };
        for (controller, parent) in &self.parents {
            let dir = parent.join(format!("{}.{n}", self.host));
            std::fs::create_dir(&dir)?;
            cgroup.dirs.push(dir.clone());
            match controller {
                Controller::Pids => std::fs::write(dir.join("pids.max"), processes.to_string())?,
                Controller::Memory => {
                    // memsw must be at least the plain limit: set after it, and only where the
                    // kernel counts swap.
                    std::fs::write(dir.join("memory.limit_in_bytes"), memory_bytes.to_string())?;
                    let swap = dir.join("memory.memsw.limit_in_bytes");
                    if swap.exists() {
                        std::fs::write(swap, memory_bytes.to_string())?;
                    }
                }
            }
        }
        Ok(Some(cgroup))
    }

    /// Removes the cgroups of hookhost processes that are gone (killed mid-command).
    fn remove_stale(&self) {
        for (_, parent) in &self.parents {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(pid) = name
                    .to_str()
                    .and_then(|n| n.split_once('.'))
                    .and_then(|(pid, _)| pid.parse::<i32>().ok())
                else {
                    continue;
                };
                let alive = rustix::process::Pid::from_raw(pid)
                    .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
                if !alive {
                    kill_all(&entry.path());
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
    }
}

/// One sandbox's cgroups, one per hierarchy; removed when dropped, once empty.
pub struct SandboxCgroup {
    dirs: Vec<PathBuf>,
}

impl SandboxCgroup {
    /// The files a process writes `0` to, to join the cgroups, as C strings for a child
    /// process to open between `fork` and `exec`.
    pub fn procs_files(&self) -> Vec<CString> {
        use std::os::unix::ffi::OsStrExt;
        self.dirs
            .iter()
            .filter_map(|dir| CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).ok())
            .collect()
    }

    /// Kills every process in the cgroups: the whole sandbox.
    pub fn kill_all(&self) {
        for dir in &self.dirs {
            kill_all(dir);
        }
    }
}

fn kill_all(dir: &Path) {
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Joins the cgroups whose `cgroup.procs` files are `procs`: to be called in a child
/// between `fork` and `exec`, so only async-signal-safe calls (`open`, `write`, `close`).
pub fn join(procs: &[CString]) -> io::Result<()> {
    for file in procs {
        // SAFETY: `file` is a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe { libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: writes one byte from a static buffer to the descriptor opened above.
        let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        let error = io::Error::last_os_error();
        // SAFETY: closes the descriptor opened above.
        unsafe { libc::close(fd) };
        if written != 1 {
            return Err(error);
        }
    }
    Ok(())
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        self.dirs.retain(|dir| std::fs::remove_dir(dir).is_err());
        if self.dirs.is_empty() {
            return;
        }
        // The kernel is still reaping the sandbox's last processes.
        self.kill_all();
        let dirs = std::mem::take(&mut self.dirs);
        std::thread::spawn(move || dirs.iter().for_each(|dir| remove_when_empty(dir)));
    }
}

fn remove_when_empty(dir: &Path) {
    let step = Duration::from_millis(20);
    for _ in 0..EMPTY_WAIT.as_millis() / step.as_millis() {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(step),
        }
    }
    tracing::warn!(dir = %dir.display(), "a bash sandbox's cgroup did not empty; a later start removes it");
}

/// This process's directory in the cgroup v1 hierarchy of `controller`, when it is
/// mounted.
fn own_v1_dir(controller: &str) -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS… - TYPE SOURCE SUPER-OPTIONS
        let (mount, fs) = line.split_once(" - ")?;
        let mut fs = fs.split(' ');
        let (kind, _, options) = (fs.next()?, fs.next()?, fs.next()?);
        if kind != "cgroup" || !options.split(',').any(|o| o == controller) {
            return None;
        }
        let mut fields = mount.split(' ');
        let root = fields.nth(3)?;
        let point = fields.next()?;
        let below = own.strip_prefix(root)?.trim_start_matches('/');
        Some(Path::new(point).join(below))
    })
}
