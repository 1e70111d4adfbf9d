//! A real PostgreSQL server for a test: `initdb` into a temporary directory, `postgres`
//! on a free loopback port, stopped (by its process id) when dropped. Run as the
//! `postgres` user when the tests run as root, since PostgreSQL refuses root.
//!
//! Needs the PostgreSQL server binaries (Debian's `postgresql` package, which `.ci/run`
//! installs); a test that asks for a server without them fails and says so. Included by
//! path in `host/tests/fleet.rs` as well, so it uses only `std` and `libc`.

use std::net::TcpListener;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

pub struct PgServer {
    child: Child,
    port: u16,
    bin: PathBuf,
    /// Holds the cluster's files; removed after the server stopped.
    _dir: tempfile::TempDir,
}

/// The directory of the server binaries: that of the `initdb` on `PATH` (links
/// followed), else the newest `/usr/lib/postgresql/*/bin` (Debian keeps them off `PATH`).
fn bin_dir() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("initdb"))
            .find(|initdb| initdb.is_file())
            .and_then(|initdb| initdb.canonicalize().ok())
            .and_then(|initdb| initdb.parent().map(Path::to_path_buf))
    });
    if let Some(dir) = on_path {
        return dir;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop().expect(
        "PostgreSQL server binaries not found (no initdb on PATH or in /usr/lib/postgresql/*/bin): \
         install Debian's `postgresql` package, as .ci/run does",
    )
}

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}

/// `program` from the server binaries, run in `dir`, as the `postgres` user when running
/// as root (set in the child itself, so the child is the server and its pid is ours).
fn pg_command(bin: &Path, program: &str, dir: &Path) -> Command {
    let mut command = Command::new(bin.join(program));
    command.current_dir(dir);
    if is_root() {
        let (uid, gid) = postgres_user();
        command.uid(uid).gid(gid);
    }
    command
}

impl PgServer {
    /// Makes a cluster and starts its server.
    ///
    /// # Panics
    ///
    /// When the binaries are missing or the server does not start within a minute.
    pub fn start() -> PgServer {
        PgServer::start_with(None)
    }

    /// As [`PgServer::start`], a server that takes TCP connections over TLS only, with
    /// the certificate `cert` and its key `key` (PEM files).
    pub fn start_tls(cert: &Path, key: &Path) -> PgServer {
        PgServer::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(&Path, &Path)>) -> PgServer {
        let bin = bin_dir();
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let socket = dir.path().join("socket");
        std::fs::create_dir(&socket).unwrap();
        if is_root() {
            let (uid, gid) = postgres_user();
            for path in [dir.path(), socket.as_path()] {
                chown(path, Some(uid), Some(gid)).unwrap();
            }
        }
        let init = pg_command(&bin, "initdb", dir.path())
            .args(["--auth=trust", "--username=postgres", "--no-sync", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .output()
            .expect("initdb runs");
        assert!(
            init.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let mut settings = vec!["fsync=off".to_string(), "max_connections=200".to_string()];
        if let Some((cert, key)) = tls {
            // The key must be the server's own and private; TCP only with TLS.
            for (from, to) in [(cert, "server.crt"), (key, "server.key")] {
                let to = data.join(to);
                std::fs::copy(from, &to).unwrap();
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
                if is_root() {
                    let (uid, gid) = postgres_user();
                    chown(&to, Some(uid), Some(gid)).unwrap();
                }
            }
            std::fs::write(
                data.join("pg_hba.conf"),
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
            )
            .unwrap();
            settings.push("ssl=on".into());
        }
        let port = free_port();
        let mut postgres = pg_command(&bin, "postgres", dir.path());
        postgres
            .arg("-D")
            .arg(&data)
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-k"])
            .arg(&socket);
        for setting in &settings {
            postgres.args(["-c", setting]);
        }
        let child = postgres
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("postgres starts");
        let server = PgServer {
            child,
            port,
            bin,
            _dir: dir,
        };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("PostgreSQL did not accept connections within {START_TIMEOUT:?}");
    }

    /// Makes a database named `name` and returns its URL.
    pub fn database(&self, name: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
            ])
            .arg(format!("CREATE DATABASE \"{name}\""))
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "CREATE DATABASE failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// An interactive `psql` on database `name` (unaligned, tuples only), reading its
    /// statements from stdin: for what must stay held across statements, such as a lock.
    /// Its connection ends with it.
    pub fn psql(&self, name: &str) -> Child {
        Command::new(self.bin.join("psql"))
            .args(["-At", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("psql runs")
    }

    /// Runs `sql` in database `name` and returns what `psql` printed (unaligned, tuples
    /// only).
    pub fn query(&self, name: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-At", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", name, "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // SIGINT is PostgreSQL's fast shutdown.
        // SAFETY: signalling the child this struct started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn postgres_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("a `postgres` user (made by Debian's postgresql package)");
    let fields: Vec<&str> = line.split(':').collect();
    (fields[2].parse().unwrap(), fields[3].parse().unwrap())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
