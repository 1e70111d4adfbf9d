//! A `pids` cgroup per `bash` sandbox, where the host lets hookhost make one.
//!
//! `RLIMIT_NPROC` bounds a sandbox's processes only when hookhost does not run as root
//! (the kernel exempts root's processes, and a sandbox's processes are root's outside
//! their user namespace when the host is root). So a host running as root also bounds
//! them with a cgroup (only then: joining one costs about 3 ms here, the migration
//! waiting for an RCU grace period, and stalls other forks meanwhile): each sandbox gets
//! `<hookhost's pids cgroup>/hookhost-bash/<host pid>.<n>` with `pids.max`, joined by its
//! launcher before it starts any command (a sandbox runs one command at a time), and
//! removed when the sandbox ends. Found through `/proc/self/cgroup` and `/proc/self/mountinfo`: the cgroup v1
//! `pids` hierarchy, when this process may make directories in its cgroup there.
//! (Under cgroup v2 a process may move only into a cgroup it was delegated, which a
//! service manager sets up; that is not done here, and commands are then bounded by
//! `RLIMIT_NPROC` alone.)

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

/// Where sandboxes' `pids` cgroups are made.
pub struct PidsCgroups {
    parent: PathBuf,
    /// This host's process id, which names its sandboxes' cgroups.
    host: u32,
    next: AtomicU64,
}

impl PidsCgroups {
    /// The `pids` cgroups this process may make, if any; removes those a dead hookhost
    /// left behind.
    pub fn find() -> Option<PidsCgroups> {
        let own = own_v1_pids_dir()?;
        let parent = own.join(PARENT);
        match std::fs::create_dir(&parent) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                tracing::debug!(dir = %parent.display(), error = %e, "no pids cgroup for bash commands");
                return None;
            }
        }
        let cgroups = PidsCgroups {
            parent,
            host: std::process::id(),
            next: AtomicU64::new(0),
        };
        cgroups.remove_stale();
        Some(cgroups)
    }

    /// How the number of a sandbox's processes is bounded.
    pub fn describe(&self) -> &'static str {
        "a pids cgroup per sandbox (cgroup v1), and RLIMIT_NPROC"
    }

    /// A new cgroup for one sandbox, holding at most `max` processes.
    ///
    /// # Errors
    ///
    /// When the directory or its limit cannot be written.
    pub fn create(&self, max: u64) -> io::Result<SandboxCgroup> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.parent.join(format!("{}.{n}", self.host));
        std::fs::create_dir(&dir)?;
        let cgroup = SandboxCgroup { dir };
        std::fs::write(cgroup.dir.join("pids.max"), max.to_string())?;
        Ok(cgroup)
    }

    /// Removes the cgroups of hookhost processes that are gone (killed mid-command).
    fn remove_stale(&self) {
        let Ok(entries) = std::fs::read_dir(&self.parent) else {
            return;
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

/// One sandbox's cgroup; removed when dropped, once empty.
pub struct SandboxCgroup {
    dir: PathBuf,
}

impl SandboxCgroup {
    /// The file a process writes `0` to, to join the cgroup.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Kills every process in the cgroup: the sandbox's launcher, its command and their
    /// children (the sandbox's PID 1 stays outside and dies with its launcher).
    pub fn kill_all(&self) {
        kill_all(&self.dir);
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

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        // The kernel is still reaping the sandbox's last processes.
        self.kill_all();
        let dir = std::mem::take(&mut self.dir);
        std::thread::spawn(move || remove_when_empty(&dir));
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
    tracing::warn!(dir = %dir.display(), "a bash sandbox's pids cgroup did not empty; a later start removes it");
}

/// This process's directory in the cgroup v1 `pids` hierarchy, when it is mounted.
fn own_v1_pids_dir() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| path.to_string())
    })?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS… - TYPE SOURCE SUPER-OPTIONS
        let (mount, fs) = line.split_once(" - ")?;
        let mut fs = fs.split(' ');
        let (kind, _, options) = (fs.next()?, fs.next()?, fs.next()?);
        if kind != "cgroup" || !options.split(',').any(|o| o == "pids") {
            return None;
        }
        let mut fields = mount.split(' ');
        let root = fields.nth(3)?;
        let point = fields.next()?;
        let below = own.strip_prefix(root)?.trim_start_matches('/');
        Some(Path::new(point).join(below))
    })
}
