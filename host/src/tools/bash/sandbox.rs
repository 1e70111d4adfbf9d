//! The sandbox each `bash` command runs in: a bubblewrap (`bwrap`) container of its own.
//!
//! Why bubblewrap: it is the sandbox of Flatpak and of Claude Code's sandbox runtime on
//! Linux, small and audited, and it runs as a program of its own, so that the namespaces
//! and mounts are made in a fresh single-threaded process rather than in a fork of this
//! multi-threaded host (where only async-signal-safe calls are allowed and a `fork()` of
//! the pooling allocator's reservation costs milliseconds). Its price, measured here: a
//! sandbox's start takes 5.7 ms from hookhost against 1.3 ms for `bash -c true`, and 7.5 ms
//! of CPU with the kernel's work (1.9 ms of it the network namespace): see the README's
//! bash rows.
//!
//! Security rules, all made here:
//! - new user, mount, PID, IPC, UTS and cgroup namespaces; no network namespace is shared
//!   unless the policy opens the network (then only the network is shared);
//! - inside, the command is the unprivileged user [`SANDBOX_USER`] (uid [`SANDBOX_UID`]),
//!   with no capabilities and no way to make user namespaces of its own;
//! - the root is an empty file system, read-only: the system comes from the host read-only
//!   (`/usr`, the `/bin`, `/lib*` links or directories), and of the host's `/etc` only
//!   [`HOST_ETC`] (never `shadow`, keys, `ssl/private` or the operator's files); `passwd`,
//!   `group`, `hosts`, `hostname` and `nsswitch.conf` are generated (see [`ETC_FILES`]),
//!   all in one directory bound as `/etc` (see [`super::etc`]);
//! - a `/proc` of its own PID namespace (so `/proc/1/root` is the sandbox's root), a
//!   minimal `/dev`, a private `/tmp` and `/dev/shm` of bounded size;
//! - exactly the granted mounts, bound at their virtual paths, read-only or read-write; the
//!   working directory is the bash mount. Nothing else of the data directory, the config,
//!   other sessions or other tenants exists inside;
//! - the environment is [`ENVIRONMENT`] plus `HOME` (the working mount), nothing of the
//!   host's;
//! - when the command ends, times out, is cancelled, or hookhost dies (`--die-with-parent`),
//!   the sandbox's PID 1 exits and the kernel kills every process left in its namespace;
//! - every process runs under [`ShellLimits`], set as hard limits before the command's
//!   first word, and in a `pids` cgroup of its own where the host has one (see
//!   [`super::cgroup`]).

use super::cgroup::{CommandCgroup, PidsCgroups};
use crate::config::ShellPolicy;
use crate::limits::ShellLimits;
use crate::mounts::ResolvedMount;
use crate::sandbox::Access;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

/// The paths where the sandbox keeps the system: no mount bash sees may be named so.
pub const SYSTEM_PATHS: &[&str] = &[
    "/bin", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
    "/sys", "/tmp", "/usr", "/var",
];

/// The user a command runs as inside the sandbox (mapped to the host's user outside, so
/// files it writes belong to hookhost's user).
pub const SANDBOX_USER: &str = "agent";
pub const SANDBOX_UID: u32 = 1000;

/// Entries of the host's `/etc` a command sees, read-only: what programs need to find
/// their libraries (`ld.so.*`), Debian's program links (`alternatives`), certificates
/// (never `ssl/private`), time zone, MIME and `file` databases. Missing ones are skipped.
/// They are copied once per hookhost process (see [`super::etc`]): a change the host makes
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
/// names are resolved. Bound at each start, over empty files otherwise.
pub const NETWORK_ETC: &[&str] = &["gai.conf", "host.conf", "resolv.conf"];

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

/// Where a command's `pids` cgroup membership file is bound inside the sandbox, so that
/// the command's shell joins it before it runs anything (see [`Prepared::prologue`]).
const CGROUP_PROCS: &str = "/run/hookhost/cgroup.procs";

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
}

/// The sandbox of one runtime's `bash`: bubblewrap's path and where its `/etc` is made
/// (see [`super::etc`]). Nothing is looked up or written until the first command ([`ShellSandbox::ready`]),
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
    /// The arguments every sandbox starts with: namespaces, user, environment, the system.
    base: Vec<OsString>,
    /// The hard limits of this process: a limit the sandbox sets is never above them.
    host_hard: ShellLimits,
    cgroups: Option<PidsCgroups>,
}

/// One command, ready to spawn.
pub struct Prepared {
    pub command: Command,
    /// Its `pids` cgroup, removed when dropped.
    pub cgroup: Option<CommandCgroup>,
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
        let etc = super::etc::make(&self.dir, HOST_ETC, NETWORK_ETC, ETC_FILES).map_err(|e| {
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
        // A host that is not root needs no cgroup: RLIMIT_NPROC holds, and joining a cgroup
        // costs a command 3 ms (see `cgroup`).
        let root = rustix::process::getuid().is_root();
        let cgroups = root.then(PidsCgroups::find).flatten();
        let processes = match (&cgroups, root) {
            (Some(c), _) => c.describe(),
            (None, false) => "RLIMIT_NPROC, counted per sandbox",
            (None, true) => {
                "not bounded: the host runs as root (RLIMIT_NPROC does not apply) and has no pids cgroup hookhost may use"
            }
        };
        let ready = Ready {
            readiness: Readiness {
                bwrap: format!("{version} ({})", self.bwrap.display()),
                processes,
            },
            bwrap: self.bwrap.clone(),
            base: base_args(&etc),
            host_hard: host_hard_limits(),
            cgroups,
        };
        let policy = ShellPolicy {
            network: false,
            limits: ShellLimits::default(),
        };
        let mut trial = ready.command(&[], "/", &policy, "true");
        let ran = trial
            .command
            .output()
            .await
            .map_err(|e| fail(format!("cannot run {}: {e}", self.bwrap.display())))?;
        if !ran.status.success() {
            let said = String::from_utf8_lossy(&ran.stderr);
            return Err(fail(format!(
                "{} could not make a sandbox ({}): {}",
                self.bwrap.display(),
                ran.status,
                said.trim()
            )));
        }
        Ok(ready)
    }
}

impl Ready {
    /// The bubblewrap command that runs `command` with `bash -c` in a new sandbox, seeing
    /// `mounts` (each with its access) at their virtual paths, in `workdir` (a virtual
    /// path), under `policy`. Its stdin is empty, stdout and stderr are piped, and it is
    /// killed when dropped.
    pub fn command(
        &self,
        mounts: &[(&ResolvedMount, Access)],
        workdir: &str,
        policy: &ShellPolicy,
        command: &str,
    ) -> Prepared {
        let cgroup = self.cgroups.as_ref().and_then(|c| {
            c.create(policy.limits.processes)
                .inspect_err(|e| {
                    tracing::warn!(error = %e, "bash: cannot make a pids cgroup for a command; its processes are bounded by RLIMIT_NPROC alone");
                })
                .ok()
        });
        let mut args = self.base.clone();
        if policy.network {
            for name in NETWORK_ETC {
                let path = format!("/etc/{name}");
                args.extend(["--ro-bind-try".into(), path.clone().into(), path.into()]);
            }
        } else {
            args.push("--unshare-net".into());
        }
        args.extend(["--setenv".into(), "HOME".into(), workdir.into()]);
        let tmp_bytes = policy.limits.tmp_bytes.to_string();
        args.extend(["--proc", "/proc", "--dev", "/dev"].map(OsString::from));
        for tmp in ["/tmp", "/dev/shm"] {
            args.extend(["--size", &tmp_bytes, "--tmpfs", tmp].map(OsString::from));
        }
        for (mount, access) in mounts {
            let flag = match access {
                Access::ReadOnly => "--ro-bind",
                Access::ReadWrite => "--bind",
            };
            args.extend([
                flag.into(),
                mount.host.clone().into_os_string(),
                mount.virtual_path.as_str().into(),
            ]);
        }
        if let Some(cgroup) = &cgroup {
            args.extend([
                "--bind".into(),
                cgroup.procs_file().into_os_string(),
                CGROUP_PROCS.into(),
            ]);
        }
        // The root, /dev and what was made in them stay as they are: the command writes
        // only in its mounts, /tmp and /dev/shm.
        args.extend(
            [
                "--remount-ro",
                "/",
                "--remount-ro",
                "/dev",
                "--chdir",
                workdir,
            ]
            .map(OsString::from),
        );
        let script = format!(
            "{}{command}",
            prologue(&clamp(policy.limits, self.host_hard), cgroup.is_some())
        );
        args.extend(["--".into(), "/bin/bash".into(), "-c".into(), script.into()]);

        let mut command = Command::new(&self.bwrap);
        command
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        Prepared { command, cgroup }
    }
}

/// The arguments every command's sandbox starts with: the namespaces (all but the
/// network's, which depends on the tenant), the user, the environment but `HOME`, and
/// the system read-only: `/usr`, the top-level program and library directories as the
/// host has them (links on a merged-`/usr` system), and `etc` as `/etc` (see
/// [`super::etc`]).
fn base_args(etc: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
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
    args.extend(["--ro-bind".into(), etc.as_os_str().into(), "/etc".into()]);
    args
}

/// The shell text run before the command, on the same line (so the command's line
/// numbers stay its own): it joins the command's `pids` cgroup, then sets the limits as
/// hard limits, which nothing in the sandbox may raise again. If either fails the command
/// does not run (exit 126).
fn prologue(limits: &ShellLimits, cgroup: bool) -> String {
    let join = if cgroup {
        format!("echo 0 > {CGROUP_PROCS} || exit 126; ")
    } else {
        String::new()
    };
    format!(
        "{join}ulimit -HS -u {} -d {} -t {} -f {} -n {} || exit 126; ",
        limits.processes,
        limits.memory_bytes / 1024,
        limits.cpu_secs,
        limits.file_bytes / 1024,
        limits.open_files
    )
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
    fn the_prologue_joins_the_cgroup_before_it_limits() {
        let text = prologue(&ShellLimits::default(), true);
        let join = text.find(CGROUP_PROCS).unwrap();
        let limit = text.find("ulimit").unwrap();
        assert!(join < limit, "{text}");
        assert!(text.ends_with("; "), "the command follows on the same line");
        assert!(!prologue(&ShellLimits::default(), false).contains(CGROUP_PROCS));
    }

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
