//! The sandbox a session's `bash` commands run in: a bubblewrap (`bwrap`) container
//! made on the session's first command and kept for the next ones (see [`super::shell`]),
//! whose launcher starts each command as if in a new sandbox (see [`super::launcher`]).
//!
//! Why bubblewrap: it is the sandbox of Flatpak and of Claude Code's sandbox runtime on
//! Linux, small and audited, and it runs as a program of its own, so that the namespaces
//! and mounts are made in a fresh single-threaded process rather than in a fork of this
//! multi-threaded host (where only async-signal-safe calls are allowed). Its price,
//! measured here: 7.5 ms of CPU per sandbox with the kernel's work (1.9 ms of it the
//! network namespace), which capped a sandbox per command at about 270 commands/s on two
//! cores; so a sandbox is made once per session (11 ms, with the launcher's start and its
//! cgroup) and each command then costs a fork in it: see the bash rows of the book's
//! Performance chapter (docs/performance.md).
//!
//! Security rules, all made here:
//! - new user, mount, PID, IPC, UTS, cgroup and network namespaces; the network
//!   namespace has only its loopback unless the policy opens the network, and then a
//!   device routed by slirp4netns, never the host's namespace (see [`super::network`]);
//!   with an allow-list it has only its loopback, on which the host's proxy listens
//!   (see [`super::proxy`]);
//! - inside, the command is the unprivileged user [`SANDBOX_USER`] (uid [`SANDBOX_UID`]),
//!   with no capabilities and no way to make user namespaces of its own. Outside it is
//!   hookhost's user — host root when hookhost runs as root — so that what it writes in
//!   its mounts is hookhost's and the user's project stays writable to it; hence nothing
//!   of the host's global state is visible writable inside: `/proc`'s kernel entries are
//!   read-only ([`PROC_READ_ONLY`]) or hidden ([`PROC_HIDDEN`]), and the launcher's
//!   system-call filter (see [`super::seccomp`]) and new session keyring close `ptrace`,
//!   keyrings, mounts and the rest;
//! - the root is an empty file system, read-only: the system comes from the host read-only
//!   (`/usr`, the `/bin`, `/lib*` links or directories), and of the host's `/etc` only
//!   [`HOST_ETC`] (never `shadow`, keys, `ssl/private` or the operator's files); `passwd`,
//!   `group`, `hosts`, `hostname` and `nsswitch.conf` are generated (see [`ETC_FILES`]),
//!   all in one directory bound as `/etc` (see `etc.rs`);
//! - a `/proc` of its own PID namespace (so `/proc/1/root` is the sandbox's root), a
//!   minimal `/dev`, a `/dev/mqueue` of its IPC namespace, a private `/tmp` and `/dev/shm`
//!   of bounded size;
//! - exactly the granted mounts, bound at their virtual paths, read-only or read-write; the
//!   working directory is the bash mount. Nothing else of the data directory, the config,
//!   other sessions or other tenants exists inside;
//! - the environment is [`ENVIRONMENT`] plus `HOME` (the working mount), nothing of the
//!   host's;
//! - the hookhost program, read-only at `LAUNCHER`, runs as the sandbox's PID 1 and
//!   starts its commands; when one ends, it kills every other process of the sandbox,
//!   empties `/tmp`, `/dev/shm` and `/dev/mqueue` and removes System V IPC objects (see
//!   [`super::launcher`]);
//! - when a command times out or is cancelled, its session ends, or hookhost dies, the
//!   sandbox is killed: bubblewrap is, its PID 1 (the launcher) dies with it
//!   (`--die-with-parent`) and the kernel kills every process left in its namespace;
//! - every command runs under [`ShellLimits`], set as hard limits before it starts, and
//!   the whole sandbox (bubblewrap, the launcher, every command) in its `pids`
//!   and `memory` cgroups where the host has them (see [`super::cgroup`]);
//! - bubblewrap reads its options from a memory file, so no command line inside names a
//!   host path (`/proc/self/mountinfo` still shows the binds' host directories).

use super::cgroup::{Controller, SandboxCgroups};
use super::shell::Shell;
use crate::limits::{SHELL_PROXY_PORT, ShellLimits, ShellPolicy};
use crate::mounts::ResolvedMount;
use crate::sandbox::Access;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

/// The user a command runs as inside the sandbox (mapped to the host's user outside, so
/// files it writes belong to hookhost's user).
pub const SANDBOX_USER: &str = "agent";
pub const SANDBOX_UID: u32 = 1000;

/// Entries of the host's `/etc` a command sees, read-only: what programs need to find
/// their libraries (`ld.so.*`), Debian's program links (`alternatives`), certificates
/// (never `ssl/private`), time zone, MIME and `file` databases. Missing ones are skipped.
/// They are copied once per hookhost process (see `etc.rs`): a change the host makes
/// later (new certificates) reaches commands after a restart.
pub const HOST_ETC: &[&str] = &[
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "os-release",
    "protocols",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "timezone",
];

/// Entries of the host's `/etc` a command also sees when it may use the network: how
/// names are resolved (the `resolv.conf` is [`super::network::RESOLV_CONF`]). Empty files
/// in the `/etc` of a closed sandbox.
pub const NETWORK_ETC: &[&str] = &["gai.conf", "host.conf"];

/// The files of `/etc` the sandbox generates: name and content.
pub const ETC_FILES: &[(&str, &str)] = &[
    (
        "passwd",
        "root:x:0:0:root:/root:/usr/sbin/nologin\n\
         agent:x:1000:1000:agent:/workspace:/bin/bash\n\
         nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    ),
    ("group", "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"),
    ("hostname", "hookhost\n"),
    ("hosts", "127.0.0.1\tlocalhost hookhost\n::1\tlocalhost\n"),
    (
        "nsswitch.conf",
        "passwd: files\ngroup: files\nhosts: files dns\n",
    ),
];

/// Entries of a sandbox's `/proc` that are the host's kernel state, not the sandbox's,
/// made read-only: sysctls (`core_pattern` would run a program as the host's user, outside
/// every namespace), the SysRq trigger, IRQ affinities, PCI and USB buses, file system
/// statistics, MTRRs, pressure triggers, ACPI, drivers, terminals. Bound from the host's
/// `/proc`, which shows the same: what of them is per namespace (`net.*`, `kernel.shm*`…)
/// is the reading process's own. Docker's default covers the same list.
///
/// Needed because the sandbox's user is the host's user outside: when hookhost runs as
/// root, those files' owner. (bubblewrap covers `sys`, `sysrq-trigger`, `irq` and `bus`
/// only when it can write their directories, which as root in a user namespace it
/// cannot, although their files are writable.)
pub const PROC_READ_ONLY: &[&str] = &[
    "sys",
    "sysrq-trigger",
    "irq",
    "bus",
    "fs",
    "mtrr",
    "pressure",
    "acpi",
    "driver",
    "tty",
    "scsi",
    "asound",
];

/// Entries of a sandbox's `/proc` hidden (`/dev/null` bound over them): what they show is
/// the host's (kernel memory, timers, key serial numbers, kernel addresses, the slab and
/// vmalloc layouts a kernel exploit would aim with), not the sandbox's; a host running as
/// root would let the sandbox's user read them all. Those the host's kernel does not have are skipped.
pub const PROC_HIDDEN: &[&str] = &[
    "kcore",
    "keys",
    "key-users",
    "kallsyms",
    "kmsg",
    "timer_list",
    "sched_debug",
    "latency_stats",
    "kpagecount",
    "kpageflags",
    "kpagecgroup",
    "config.gz",
    "slabinfo",
    "vmallocinfo",
    "pagetypeinfo",
    "iomem",
    "ioports",
];

/// The bubblewrap arguments that cover `/proc`'s entries in [`PROC_READ_ONLY`] and
/// [`PROC_HIDDEN`] which `proc` (the host's `/proc`) has.
fn proc_covers(proc: &Path) -> Vec<OsString> {
    let mut args = Vec::new();
    for name in PROC_READ_ONLY.iter().filter(|n| proc.join(n).exists()) {
        let path = format!("/proc/{name}");
        args.extend(["--ro-bind".into(), path.clone().into(), path.into()]);
    }
    for name in PROC_HIDDEN.iter().filter(|n| proc.join(n).exists()) {
        args.extend([
            "--ro-bind".into(),
            "/dev/null".into(),
            format!("/proc/{name}").into(),
        ]);
    }
    args
}

/// The environment of every command, besides `HOME`.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ),
    ("LANG", "C.UTF-8"),
    ("USER", SANDBOX_USER),
    ("LOGNAME", SANDBOX_USER),
    ("SHELL", "/bin/bash"),
    ("TMPDIR", "/tmp"),
];

/// The environment added for a sandbox with an allow-list (`PORT` stands for
/// [`SHELL_PROXY_PORT`]): both spellings of the proxy variables, since programs read one
/// or the other (curl only the lowercase `http_proxy`), SOCKS5 with names resolved by the
/// proxy (`socks5h`) for programs that speak no HTTP proxy, and no exceptions: every
/// connection goes through the proxy, whose answer says what it refused.
pub const PROXY_ENVIRONMENT: &[(&str, &str)] = &[
    ("HTTP_PROXY", "http://127.0.0.1:PORT"),
    ("HTTPS_PROXY", "http://127.0.0.1:PORT"),
    ("http_proxy", "http://127.0.0.1:PORT"),
    ("https_proxy", "http://127.0.0.1:PORT"),
    ("ALL_PROXY", "socks5h://127.0.0.1:PORT"),
    ("all_proxy", "socks5h://127.0.0.1:PORT"),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
];

/// Where the hookhost program is bound inside the sandbox, to run as its launcher
/// (`sandbox-shell`, see [`super::launcher`]).
const LAUNCHER: &str = "/run/hookhost/launcher";

/// Why commands cannot be sandboxed here.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "bash: commands cannot be sandboxed on this machine: {cause}. Install bubblewrap (Debian: `apt-get install bubblewrap`) with user namespaces allowed, name it with `[bash] bwrap = \"/path/to/bwrap\"`, or set `[bash] sandbox = false` to run commands unsandboxed, as the host's user (refused when tenants are declared unless `unsandboxed_with_tenants = true`)"
)]
pub struct Unavailable {
    pub cause: String,
}

/// What was found when the sandbox was first made.
#[derive(Debug, Clone)]
pub struct Readiness {
    /// `bubblewrap 0.8.0`, with its path.
    pub bwrap: String,
    /// How the number of processes is bounded.
    pub processes: &'static str,
    /// How memory is bounded.
    pub memory: &'static str,
    /// What routes an open network, or why none can be.
    pub network: String,
}

/// The sandbox of one runtime's `bash`: bubblewrap's path and where its `/etc` is made
/// (see `etc.rs`). Nothing is looked up or written until the first command ([`ShellSandbox::ready`]),
/// so a process that never runs one (`hookhost tools`, `session list`) pays nothing.
pub struct ShellSandbox {
    bwrap: PathBuf,
    /// `{data}/sandbox`, where the sandbox's `/etc` is made.
    dir: PathBuf,
    ready: tokio::sync::OnceCell<Result<Ready, Unavailable>>,
}

/// A sandbox known to work here, and what every command's sandbox shares.
pub struct Ready {
    pub readiness: Readiness,
    bwrap: PathBuf,
    /// The `/etc` of a closed sandbox, and of one whose network is open.
    etc: PathBuf,
    network_etc: PathBuf,
    /// The slirp4netns program, or why an open network cannot be made.
    slirp: Result<PathBuf, String>,
    /// The arguments every sandbox starts with: namespaces, user, environment, the system.
    base: Vec<OsString>,
    /// The hard limits of this process: a limit the sandbox sets is never above them.
    host_hard: ShellLimits,
    cgroups: SandboxCgroups,
    /// The hookhost program, run inside as the launcher.
    launcher: PathBuf,
}

impl ShellSandbox {
    /// The sandbox for commands of the host whose data directory is `data` (the sandbox's
    /// `/etc` is made in `{data}/sandbox`). `bwrap`: the configured program, else
    /// `bwrap` in `PATH`.
    pub fn new(bwrap: Option<&Path>, data: &Path) -> ShellSandbox {
        let bwrap = bwrap
            .map(Path::to_path_buf)
            .or_else(|| find_in_path("bwrap"))
            .unwrap_or_else(|| "bwrap".into());
        ShellSandbox {
            bwrap,
            dir: data.join("sandbox"),
            ready: tokio::sync::OnceCell::new(),
        }
    }

    /// The sandbox, made once per process: its `/etc` made, the `pids`
    /// cgroups found, the shared arguments built, and `true` run in an empty sandbox.
    ///
    /// # Errors
    ///
    /// [`Unavailable`], naming the cause and the settings that change it.
    pub async fn ready(&self) -> Result<&Ready, Unavailable> {
        self.ready
            .get_or_init(|| self.probe())
            .await
            .as_ref()
            .map_err(Clone::clone)
    }

    async fn probe(&self) -> Result<Ready, Unavailable> {
        let fail = |cause: String| Unavailable { cause };
        let closed_etc: Vec<&str> = NETWORK_ETC
            .iter()
            .chain(["resolv.conf"].iter())
            .copied()
            .collect();
        let open_etc: Vec<&str> = HOST_ETC.iter().chain(NETWORK_ETC).copied().collect();
        let mut open_files = ETC_FILES.to_vec();
        open_files.push(("resolv.conf", super::network::RESOLV_CONF));
        let etc =
            super::etc::make(&self.dir, HOST_ETC, &closed_etc, ETC_FILES).and_then(|closed| {
                Ok((
                    closed,
                    super::etc::make(&self.dir, &open_etc, &[], &open_files)?,
                ))
            });
        let (etc, network_etc) = etc.map_err(|e| {
            fail(format!(
                "cannot make the sandbox's /etc in {}: {e}",
                self.dir.display()
            ))
        })?;
        let version = Command::new(&self.bwrap)
            .arg("--version")
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| fail(format!("cannot run {}: {e}", self.bwrap.display())))?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let root = rustix::process::getuid().is_root();
        let cgroups = SandboxCgroups::find();
        let processes = match (cgroups.has(Controller::Pids), root) {
            (true, _) => "a pids cgroup per sandbox (cgroup v1), and RLIMIT_NPROC",
            (false, false) => "RLIMIT_NPROC, counted per sandbox",
            (false, true) => {
                "not bounded: the host runs as root (RLIMIT_NPROC does not apply) and has no pids cgroup hookhost may use"
            }
        };
        let memory = if cgroups.has(Controller::Memory) {
            "a memory cgroup per sandbox (cgroup v1): its processes, /tmp, /dev/shm, shared memory and memfds together"
        } else {
            "per process only (RLIMIT_DATA): no memory cgroup hookhost may use; /tmp and /dev/shm bounded by their size, memfds not bounded"
        };
        let launcher = launcher_program().map_err(fail)?;
        let slirp = find_in_path("slirp4netns").ok_or_else(|| {
            "slirp4netns is not in PATH (Debian: `apt-get install slirp4netns`); commands of a tenant with `network = true` cannot run".to_string()
        });
        let network = match &slirp {
            Ok(path) => format!(
                "a network namespace per sandbox, routed by slirp4netns ({}) when open, with no way to the host's loopback or abstract sockets",
                path.display()
            ),
            Err(why) => why.clone(),
        };
        let ready = Ready {
            readiness: Readiness {
                bwrap: format!("{version} ({})", self.bwrap.display()),
                processes,
                memory,
                network,
            },
            bwrap: self.bwrap.clone(),
            etc,
            network_etc,
            slirp,
            base: base_args(),
            host_hard: host_hard_limits(),
            cgroups,
            launcher,
        };
        let policy = ShellPolicy {
            network: false,
            limits: ShellLimits::default(),
        };
        let trial = ready
            .start(&[], "/", &policy, "(trial)")
            .await
            .map_err(|e| {
                fail(format!(
                    "{} could not make a sandbox: {e}",
                    self.bwrap.display()
                ))
            })?;
        let (mut out, mut err) = trial
            .send("true", "/")
            .await
            .map_err(|e| fail(format!("the first sandbox failed: {e}")))?;
        match trial.reply().await {
            Ok(super::launcher::Reply::Ended { code: Some(0), .. }) => Ok(ready),
            other => {
                let mut said = String::new();
                let _ = tokio::io::AsyncReadExt::read_to_string(&mut err, &mut said).await;
                let _ = tokio::io::AsyncReadExt::read_to_string(&mut out, &mut said).await;
                Err(fail(format!(
                    "`true` failed in the first sandbox ({other:?}): {}",
                    said.trim()
                )))
            }
        }
    }
}

impl Ready {
    /// Starts a sandbox for commands that see `mounts` (each with its access) at their
    /// virtual paths, in `workdir` (a virtual path, also `HOME`), under `policy`; `label`
    /// names it in the log (its session).
    ///
    /// # Errors
    ///
    /// Why it did not start, as the command's error.
    pub async fn start(
        &self,
        mounts: &[(&ResolvedMount, Access)],
        workdir: &str,
        policy: &ShellPolicy,
        label: &str,
    ) -> Result<Shell, String> {
        self.start_with(mounts, workdir, policy, false, label).await
    }

    /// As [`Self::start`]; with `proxied`, a closed sandbox whose commands reach out through
    /// the host's proxy on 127.0.0.1:[`SHELL_PROXY_PORT`] (see [`super::proxy`]): its
    /// launcher listens there before any command runs, and [`PROXY_ENVIRONMENT`] names it.
    ///
    /// # Errors
    ///
    /// Why it did not start, as the command's error.
    pub async fn start_with(
        &self,
        mounts: &[(&ResolvedMount, Access)],
        workdir: &str,
        policy: &ShellPolicy,
        proxied: bool,
        label: &str,
    ) -> Result<Shell, String> {
        let limits = clamp(policy.limits, self.host_hard);
        let network = match (&self.slirp, policy.network) {
            (Ok(slirp), true) => Some(slirp.as_path()),
            (Err(why), true) => return Err(why.clone()),
            (_, false) => None,
        };
        // bubblewrap and the launcher are in it too, and slirp4netns (which forks once).
        let helpers = if network.is_some() { 4 } else { 2 };
        let cgroup = self
            .cgroups
            .create(limits.processes.saturating_add(helpers), limits.memory_bytes)
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "bash: cannot make the cgroups of a sandbox; it is bounded by resource limits alone");
                None
            });
        let mut args = self.base.clone();
        let etc = if network.is_some() {
            &self.network_etc
        } else {
            &self.etc
        };
        args.extend(["--ro-bind".into(), etc.as_os_str().into(), "/etc".into()]);
        args.extend(["--setenv".into(), "HOME".into(), workdir.into()]);
        if proxied {
            for (name, value) in PROXY_ENVIRONMENT {
                let value = value.replace("PORT", &SHELL_PROXY_PORT.to_string());
                args.extend(["--setenv".into(), (*name).into(), value.into()]);
            }
        }
        let tmp_bytes = limits.tmp_bytes.to_string();
        for tmp in ["/tmp", "/dev/shm"] {
            args.extend(["--size", &tmp_bytes, "--tmpfs", tmp].map(OsString::from));
        }
        for (mount, access) in mounts {
            let flag = match access {
                _ if mount.read_only() => "--ro-bind",
                Access::ReadOnly => "--ro-bind",
                Access::ReadWrite => "--bind",
            };
            args.extend([
                flag.into(),
                mount.host.clone().into_os_string(),
                mount.virtual_path.as_str().into(),
            ]);
        }
        args.extend([
            "--ro-bind".into(),
            self.launcher.clone().into_os_string(),
            LAUNCHER.into(),
        ]);
        // The root, /dev and what was made in them stay as they are: commands write only
        // in their mounts, /tmp and /dev/shm.
        args.extend(
            [
                "--remount-ro",
                "/",
                "--remount-ro",
                "/dev",
                "--chdir",
                workdir,
                "--",
                LAUNCHER,
                "sandbox-shell",
            ]
            .map(OsString::from),
        );
        let setup = super::launcher::Setup {
            limits,
            proxy_port: proxied.then_some(SHELL_PROXY_PORT),
        };
        let setup = serde_json::to_string(&setup).map_err(|e| e.to_string())?;
        args.push(setup.into());
        Shell::start(
            &self.bwrap,
            args,
            cgroup,
            network,
            proxied,
            label.to_string(),
        )
        .await
    }
}

/// The arguments every command's sandbox starts with: the namespaces, the user, the
/// environment but `HOME`, and the system read-only: `/usr`, the top-level program and
/// library directories as the host has them (links on a merged-`/usr` system), and the
/// sandbox's own `/proc` (its kernel entries covered: see [`proc_covers`]), `/dev` and
/// `/dev/mqueue`. Its `/etc` depends on the network (see [`Ready::start`]).
fn base_args() -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-user",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--as-pid-1",
        "--new-session",
        "--clearenv",
        "--hostname",
        "hookhost",
    ]
    .map(OsString::from)
    .into();
    let uid = SANDBOX_UID.to_string();
    args.extend(["--uid", &uid, "--gid", &uid].map(OsString::from));
    if rustix::process::geteuid().is_root() {
        // A privileged bwrap keeps root's capabilities inside unless told otherwise.
        args.extend(["--cap-drop", "ALL"].map(OsString::from));
    }
    for (name, value) in ENVIRONMENT {
        args.extend(["--setenv", name, value].map(OsString::from));
    }
    args.extend(["--ro-bind", "/usr", "/usr"].map(OsString::from));
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        let Ok(meta) = std::fs::symlink_metadata(top) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            if let Ok(target) = std::fs::read_link(top) {
                args.extend(["--symlink".into(), target.into_os_string(), top.into()]);
            }
        } else if meta.is_dir() {
            args.extend(["--ro-bind", top, top].map(OsString::from));
        }
    }
    args.extend(
        [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--mqueue",
            "/dev/mqueue",
        ]
        .map(OsString::from),
    );
    args.extend(proc_covers(Path::new("/proc")));
    args
}

/// `limits`, none above the host's own hard limit (which an unprivileged process cannot
/// raise, so asking for more would fail the command).
fn clamp(limits: ShellLimits, hard: ShellLimits) -> ShellLimits {
    ShellLimits {
        processes: limits.processes.min(hard.processes),
        memory_bytes: limits.memory_bytes.min(hard.memory_bytes),
        cpu_secs: limits.cpu_secs.min(hard.cpu_secs),
        file_bytes: limits.file_bytes.min(hard.file_bytes),
        open_files: limits.open_files.min(hard.open_files),
        tmp_bytes: limits.tmp_bytes,
    }
}

/// This process's hard limits, as [`ShellLimits`] (`u64::MAX` for unlimited).
fn host_hard_limits() -> ShellLimits {
    use rustix::process::{Resource, getrlimit};
    let hard = |r| getrlimit(r).maximum.unwrap_or(u64::MAX);
    ShellLimits {
        processes: hard(Resource::Nproc),
        memory_bytes: hard(Resource::Data),
        cpu_secs: hard(Resource::Cpu),
        file_bytes: hard(Resource::Fsize),
        open_files: hard(Resource::Nofile),
        tmp_bytes: u64::MAX,
    }
}

/// The hookhost program, to run inside each sandbox as its launcher: this process's own
/// program, or, for a process that is not `hookhost` (a test or a benchmark of the
/// library, in `target/*/deps`), the `hookhost` beside it or one directory up.
pub(super) fn launcher_program() -> Result<PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the hookhost program to run in sandboxes: {e}"))?;
    if exe.file_stem().is_some_and(|n| n == "hookhost") {
        return Ok(exe);
    }
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("hookhost"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "{} is not hookhost, and no hookhost program is beside it to run in sandboxes",
                exe.display()
            )
        })
}

/// `program` as a path found in the host's `PATH`. Spawning a program by its path, with an
/// environment of our own, lets the standard library use `posix_spawn` (a vfork-like
/// spawn) instead of `fork()`: a `fork()` of a host holding the pooling allocator's large
/// address-space reservation costs milliseconds.
pub fn find_in_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_asks_more_than_the_host_allows() {
        let hard = ShellLimits {
            open_files: 512,
            ..ShellLimits::default()
        };
        assert_eq!(clamp(ShellLimits::default(), hard).open_files, 512);
    }

    #[test]
    fn no_secret_of_etc_is_bound() {
        for secret in [
            "shadow",
            "gshadow",
            "ssl/private",
            "ssh",
            "sudoers",
            "passwd",
        ] {
            assert!(!HOST_ETC.contains(&secret), "{secret}");
        }
    }
}
