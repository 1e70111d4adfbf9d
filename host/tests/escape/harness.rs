//! The escape suite's host: `hookhost` with the built-in config, two tenants and bash,
//! run through the real binary as the user the tests run as and, when that is root, again
//! as an ordinary user (`nobody`, through `setpriv`), since what a sandbox can reach
//! depends on it: a sandbox of a root host maps its user to host uid 0.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const ALPHA: &str = "alpha-token-0123456789abcdef";
pub const BETA: &str = "beta-token-0123456789abcdef0123";

/// The ordinary user a root test run also runs hookhost as.
pub const ORDINARY_UID: u32 = 65534;

/// Who hookhost runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum As {
    /// The user the tests run as (root in `.ci/run` on a fresh machine).
    Invoker,
    /// [`ORDINARY_UID`], when the tests run as root.
    Ordinary,
}

/// The users to run an attack as: the invoker, and an ordinary user too when the invoker
/// is root.
pub fn users() -> Vec<As> {
    if rustix::process::geteuid().is_root() {
        vec![As::Invoker, As::Ordinary]
    } else {
        vec![As::Invoker]
    }
}

/// A data directory holding the built-in config with tenants `alpha` and `beta`, and
/// `extra` appended to it.
pub struct Host {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub who: As,
}

impl Host {
    pub fn new(who: As, extra: &str) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("hookhost.toml");
        let builtin = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/default.toml"),
        )
        .unwrap();
        std::fs::write(
            &config,
            format!(
                "{builtin}\n[tenants.alpha]\ntoken = \"{ALPHA}\"\n\n\
                 [tenants.beta]\ntoken = \"{BETA}\"\n{extra}"
            ),
        )
        .unwrap();
        if who == As::Ordinary {
            give_to_ordinary(dir.path());
        }
        Host { dir, config, who }
    }

    pub fn data(&self) -> &Path {
        self.dir.path()
    }

    /// `hookhost --data D --config C ARGS…`, as [`Host::who`].
    pub fn command(&self, args: &[&str]) -> Command {
        let program = program();
        let mut command = match self.who {
            As::Invoker => Command::new(program),
            As::Ordinary => {
                let mut c = Command::new("setpriv");
                let id = ORDINARY_UID.to_string();
                c.args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"])
                    .arg(program);
                c
            }
        };
        command
            .arg("--data")
            .arg(self.data())
            .arg("--config")
            .arg(&self.config)
            .args(args);
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("hookhost runs")
    }

    /// A new session of `tenant`.
    pub fn session(&self, tenant: &str) -> String {
        let out = self.run(&["session", "new", "--tenant", tenant]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    }

    /// `hookhost call --json … bash` of `command` in `session` of `tenant`, to run.
    pub fn bash_call(&self, tenant: &str, session: &str, command: &str) -> Command {
        let args = serde_json::json!({ "command": command }).to_string();
        let call = ["call", "--json", "--tenant", tenant, "--session", session];
        self.command(&[&call[..], &["bash", &args]].concat())
    }

    /// `bash` in `session` of `tenant`: (output, is_error).
    pub fn bash(&self, tenant: &str, session: &str, command: &str) -> (String, bool) {
        let out = self
            .bash_call(tenant, session, command)
            .output()
            .expect("hookhost runs");
        let result: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}\n{}", text(&out.stdout), text(&out.stderr)));
        (
            result["output"].as_str().unwrap().to_string(),
            result["is_error"].as_bool().unwrap(),
        )
    }

    /// The host directory of `session`'s `mount` (`workspace`, `artifacts`).
    pub fn dir(&self, tenant: &str, session: &str, mount: &str) -> PathBuf {
        self.data()
            .join("tenants")
            .join(tenant)
            .join("sessions")
            .join(session)
            .join(mount)
    }
}

/// The hookhost program under test: this build's, or `HOOKHOST_ESCAPE_BIN` (to see an
/// attack succeed against an older build).
pub fn program() -> String {
    std::env::var("HOOKHOST_ESCAPE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_hookhost").into())
}

/// Makes `dir` (a fresh temporary directory) the ordinary user's, and the way to it
/// passable.
fn give_to_ordinary(dir: &Path) {
    for entry in [dir.to_path_buf(), dir.join("hookhost.toml")] {
        std::os::unix::fs::chown(&entry, Some(ORDINARY_UID), Some(ORDINARY_UID)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// A directory outside every data directory, standing for the host's own files: an
/// attack that writes or reads there has escaped. Readable and writable by both users.
pub fn host_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The system-call prober (`probe.py`), run in `session`'s sandbox for `calls` (all when
/// empty): each call's name, return value and error name (`-` when it succeeded).
pub fn probe(host: &Host, tenant: &str, session: &str, calls: &[&str]) -> Vec<[String; 3]> {
    let script = include_str!("probe.py");
    let command = format!("python3 - {} <<'PROBE'\n{script}\nPROBE", calls.join(" "));
    let (output, failed) = host.bash(tenant, session, &command);
    assert!(!failed, "the prober failed: {output}");
    output
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace().map(str::to_string);
            let mut next = || words.next().unwrap_or_default();
            [next(), next(), next()]
        })
        .collect()
}

/// The lines of `host`'s stderr (its log) that `run` produced, for tests of what reaches it.
pub fn log_of(output: &Output) -> Vec<String> {
    text(&output.stderr).lines().map(str::to_string).collect()
}
