//! The sandboxed `bash`, through the real binary: two tenants (`alpha`, `beta`) whose
//! shells see only their own session's mounts at their virtual paths, no network unless
//! the config opens it, and bounded resources; commands that die with their call and host.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const ALPHA: &str = "alpha-token-0123456789abcdef";
const BETA: &str = "beta-token-0123456789abcdef0123";

/// A data directory and in it the built-in config with two tenants; `extra` is appended.
struct Host {
    dir: tempfile::TempDir,
    config: PathBuf,
}

/// The admin token of [`Host::with_admin_token`].
const ADMIN: &str = "admin-token-0123456789abcdef0123";

impl Host {
    /// This host with [`ADMIN`] as its `[serve] admin_token`.
    fn with_admin_token(self) -> Host {
        let config = std::fs::read_to_string(&self.config).unwrap().replace(
            "[serve]\n",
            &format!("[serve]\nadmin_token = \"{ADMIN}\"\n"),
        );
        std::fs::write(&self.config, config).unwrap();
        self
    }

    fn new(extra: &str) -> Host {
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
        Host { dir, config }
    }

    fn data(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(self.data())
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .output()
            .expect("hookhost runs")
    }

    /// `hookhost serve` with `args`, its stdio piped (stderr as `stderr` says); killed
    /// when dropped, also when a test fails.
    fn serve(&self, args: &[&str], stderr: Stdio) -> Server {
        let child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(self.data())
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Server(child)
    }

    fn session(&self, tenant: &str, workdir: Option<&Path>) -> String {
        let mut args = vec!["session", "new", "--tenant", tenant];
        if let Some(dir) = workdir {
            args.extend(["--workdir", dir.to_str().unwrap()]);
        }
        let out = self.run(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    }

    /// `bash` in `session` of `tenant`: (output, is_error).
    fn bash(&self, tenant: &str, session: &str, command: &str) -> (String, bool) {
        let args = serde_json::json!({ "command": command }).to_string();
        let out = self.run(&[
            "call",
            "--json",
            "--tenant",
            tenant,
            "--session",
            session,
            "bash",
            &args,
        ]);
        let result: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}\n{}", text(&out.stdout), text(&out.stderr)));
        (
            result["output"].as_str().unwrap().to_string(),
            result["is_error"].as_bool().unwrap(),
        )
    }

    /// The host directory of `session`'s `mount` (`workspace`, `artifacts`).
    fn dir(&self, tenant: &str, session: &str, mount: &str) -> PathBuf {
        self.data()
            .join("tenants")
            .join(tenant)
            .join("sessions")
            .join(session)
            .join(mount)
    }
}

/// A server, killed (by its process id) when dropped.
struct Server(std::process::Child);

impl std::ops::Deref for Server {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_shell_sees_its_mounts_at_their_virtual_paths_and_nothing_else() {
    let host = Host::new("");
    let alpha = host.session("alpha", None);
    let (pwd, _) = host.bash("alpha", &alpha, "pwd; echo $HOME; id -un");
    assert_eq!(pwd, "/workspace\n/workspace\nagent\n");
    let (root, _) = host.bash("alpha", &alpha, "ls /");
    let root: Vec<&str> = root.lines().collect();
    for entry in &root {
        assert!(
            [
                "artifacts",
                "bin",
                "dev",
                "etc",
                "lib",
                "lib32",
                "lib64",
                "libx32",
                "proc",
                "run",
                "sbin",
                "tmp",
                "usr",
                "workspace"
            ]
            .contains(entry),
            "{entry} is in the sandbox's /: {root:?}"
        );
    }
    // The host's /etc is not there: only what programs need, and a generated passwd.
    let (etc, _) = host.bash(
        "alpha",
        &alpha,
        "cat /etc/passwd; ls /etc/shadow /etc/ssl/private 2>&1",
    );
    assert!(etc.contains("agent:x:1000"), "{etc}");
    assert!(
        !etc.contains("daemon:") && etc.contains("No such file"),
        "{etc}"
    );
    // Paths resolve to virtual ones: no host path in what the model receives.
    let (paths, _) = host.bash(
        "alpha",
        &alpha,
        "touch f; readlink -f f /proc/self/cwd; ls -d /artifacts/*; cd /nope",
    );
    assert!(!paths.contains(host.data().to_str().unwrap()), "{paths}");
    assert!(
        paths.starts_with("/workspace/f\n/workspace\n/artifacts/trace\n"),
        "{paths}"
    );
}

#[test]
fn no_path_trick_reaches_the_config_the_database_or_another_tenant() {
    let host = Host::new("");
    let alpha = host.session("alpha", None);
    let beta = host.session("beta", None);
    let other = host.session("alpha", None);
    let (_, failed) = host.bash("beta", &beta, "echo beta-secret > mine.txt");
    assert!(!failed);
    let (_, failed) = host.bash("alpha", &other, "echo other-session > mine.txt");
    assert!(!failed);
    let beta_file = host.dir("beta", &beta, "workspace").join("mine.txt");
    let other_file = host.dir("alpha", &other, "workspace").join("mine.txt");
    // A link the user's project might hold, pointing out of it: planted on the host side.
    let workspace = host.dir("alpha", &alpha, "workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::os::unix::fs::symlink(&host.config, workspace.join("config-link")).unwrap();
    std::os::unix::fs::symlink(&beta_file, workspace.join("beta-link")).unwrap();
    let targets = [
        host.config.display().to_string(),
        host.data().join("sessions.db").display().to_string(),
        beta_file.display().to_string(),
        other_file.display().to_string(),
    ];
    let mut tricks: Vec<String> = targets.iter().map(|t| format!("cat {t}")).collect();
    tricks.extend(targets.iter().map(|t| format!("cat /proc/1/root{t}")));
    tricks.extend(
        targets
            .iter()
            .map(|t| format!("cat /proc/self/cwd/../../../../..{t}")),
    );
    tricks.extend(
        targets
            .iter()
            .map(|t| format!("cat ../../../../../../..{t}")),
    );
    tricks.extend(
        targets
            .iter()
            .map(|t| format!("ln -s {t} planted && cat planted; rm -f planted")),
    );
    tricks.extend(targets.iter().map(|t| format!("ln {t} hard && cat hard")));
    tricks.extend([
        "cat config-link".to_string(),
        "cat beta-link".to_string(),
        "grep -rsl -e beta-secret -e other-session -e token / --exclude-dir=proc".to_string(),
        "cat /proc/*/environ | tr '\\0' '\\n' | grep -i token".to_string(),
    ]);
    for trick in &tricks {
        let (output, _) = host.bash("alpha", &alpha, trick);
        for secret in ["beta-secret", "other-session", BETA, ALPHA, "SQLite"] {
            assert!(!output.contains(secret), "{trick} found {secret}: {output}");
        }
    }
    // The files are there, for their own sessions.
    assert_eq!(host.bash("beta", &beta, "cat mine.txt").0, "beta-secret\n");
}

#[test]
fn an_offloaded_output_is_read_in_bash_at_its_reference_and_read_only_mounts_refuse_writes() {
    let host = Host::new("");
    let alpha = host.session("alpha", None);
    let (offloaded, _) = host.bash("alpha", &alpha, "seq 1 5000");
    let path = offloaded
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .unwrap_or_else(|| panic!("not offloaded: {offloaded}"))
        .to_string();
    assert!(path.starts_with("/artifacts/tool-results/bash/"), "{path}");
    let (lines, failed) = host.bash("alpha", &alpha, &format!("wc -l < {path}; tail -1 {path}"));
    assert!(!failed, "{lines}");
    assert_eq!(lines, "5000\n5000\n");
    let (refused, failed) = host.bash("alpha", &alpha, &format!("echo x >> {path}"));
    assert!(
        failed && refused.contains("Read-only file system"),
        "{refused}"
    );
    let (refused, failed) = host.bash("alpha", &alpha, "touch /usr/x /etc/x /x");
    assert!(
        failed && refused.matches("Read-only file system").count() == 3,
        "{refused}"
    );
    // The quota and the trace see what bash wrote in its writable mount.
    host.bash("alpha", &alpha, "echo traced > t.txt");
    let trace = host.run(&[
        "session", "trace", &alpha, "--tenant", "alpha", "--kind", "file.*",
    ]);
    let trace = text(&trace.stdout);
    assert!(
        trace
            .lines()
            .any(|l| l.contains("\"file.created\"") && l.contains("t.txt")),
        "{trace}"
    );
}

/// A listener on the host's outward address (a sandbox's open network never reaches its
/// loopback); counts the connections it accepted.
fn listener() -> (
    std::net::IpAddr,
    u16,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let listener = std::net::TcpListener::bind((common::outward_address(), 0)).unwrap();
    let ip = listener.local_addr().unwrap().ip();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    (ip, port, accepted)
}

#[test]
fn the_network_is_closed_unless_the_config_opens_it_for_a_tenant() {
    let host = Host::new("\n[tenants.beta.bash]\nnetwork = true\n");
    let (ip, port, accepted) = listener();
    let connect = format!("echo hi > /dev/tcp/{ip}/{port} && echo connected");
    let alpha = host.session("alpha", None);
    let (closed, failed) = host.bash("alpha", &alpha, &connect);
    assert!(failed && !closed.contains("connected"), "{closed}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    let beta = host.session("beta", None);
    let (open, failed) = host.bash("beta", &beta, &connect);
    assert!(!failed && open.contains("connected"), "{open}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_large_file_stops_at_the_file_size_limit() {
    let host = Host::new("\n[bash.limits]\nfile_bytes = 10485760\n");
    let alpha = host.session("alpha", None);
    let (said, failed) = host.bash(
        "alpha",
        &alpha,
        "dd if=/dev/zero of=big bs=1M count=10240 status=none; stat -c %s big",
    );
    assert!(failed || said.contains("10485760"), "{said}");
    let size = std::fs::metadata(host.dir("alpha", &alpha, "workspace").join("big"))
        .unwrap()
        .len();
    assert_eq!(size, 10 * 1024 * 1024, "{said}");
}

/// `kill -9` of the host mid-command ends the command, what it started in the background
/// and what it started in a session of its own: sandboxed (the sandbox dies with the host)
/// and not (the command's guard sees the host go).
#[test]
fn kill_9_of_the_server_mid_command_leaves_no_process() {
    for sandbox in [true, false] {
        let host = Host::new("");
        if !sandbox {
            let config = std::fs::read_to_string(&host.config).unwrap().replace(
                "[bash]\nenabled = true",
                "[bash]\nenabled = true\nsandbox = false\nunsandboxed_with_tenants = true",
            );
            std::fs::write(&host.config, config).unwrap();
        }
        let mut server = host.serve(&["--tenant", "alpha"], Stdio::null());
        let marker = common::marker(&format!("orphan-{sandbox}"));
        let command = format!(
            "({}) & (setsid bash -c '{}' &) ; {}",
            common::marked_sleep(&marker, 300),
            common::marked_sleep(&marker, 302),
            common::marked_sleep(&marker, 301)
        );
        let mut stdin = server.stdin.take().unwrap();
        use std::io::Write;
        for message in [
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "bash", "arguments": {"command": command}}}),
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
        stdin.flush().unwrap();
        let mut first = String::new();
        BufReader::new(server.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.contains("\"id\":1"), "{first}");
        // The three sleeps (and, unsandboxed, the guard, whose command line names them).
        let started = (0..400).any(|_| {
            std::thread::sleep(Duration::from_millis(25));
            common::processes_with(&marker).len() >= 3
        });
        assert!(started, "sandbox: {sandbox}");
        server.kill().unwrap(); // SIGKILL
        server.wait().unwrap();
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(25));
            common::processes_with(&marker).is_empty()
        });
        assert!(
            gone,
            "commands outlived their host (sandbox: {sandbox}): {:?}",
            common::processes_with(&marker)
        );
    }
}

fn git(repo: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn in_a_git_workdir_the_shell_runs_git_status_and_commits() {
    let host = Host::new("");
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    std::fs::write(repo.path().join("a.txt"), "a\n").unwrap();
    git(repo.path(), &["add", "a.txt"]);
    git(repo.path(), &["commit", "-qm", "first"]);
    let alpha = host.session("alpha", Some(repo.path()));
    let (status, failed) = host.bash(
        "alpha",
        &alpha,
        "echo b > b.txt && git status --short && git add b.txt && \
         git -c user.name=agent -c user.email=agent@example.com commit -qm second && git log --oneline | wc -l",
    );
    assert!(!failed, "{status}");
    assert_eq!(status, "?? b.txt\n2\n");
    let log = git(repo.path(), &["log", "--format=%s"]);
    assert_eq!(text(&log.stdout), "second\nfirst\n");
}

#[test]
fn two_tenants_shells_over_mcp_see_nothing_of_each_other() {
    let host = Host::new("");
    let mut server = host.serve(&["--http", "127.0.0.1:0"], Stdio::piped());
    let url = common::announced_url(&mut server);
    let said = python_client(&[
        "bash-tenants",
        &url,
        ALPHA,
        BETA,
        host.data().to_str().unwrap(),
    ]);
    assert!(said.contains("bash tenants ok"), "{said}");
}

/// A tenant over its quota may look and delete, not write, and `rm` gets it back under;
/// over again, it is let in once another process (the CLI) deleted its sessions: the
/// server measures it afresh on its tick (and before each call), instead of counting files
/// that are gone until it restarts.
#[test]
fn a_tenant_over_its_quota_deletes_its_way_back_or_is_let_in_once_the_cli_deleted_its_sessions() {
    // `[tenants.beta]` is the last table: this is its quota.
    let host = Host::new("disk_quota_bytes = 200000\n");
    let mut server = host.serve(
        &["--http", "127.0.0.1:0", "--keep-session", "--idle", "8s"],
        Stdio::piped(),
    );
    let url = common::announced_url(&mut server);
    let said = python_client(&[
        "quota",
        &url,
        BETA,
        env!("CARGO_BIN_EXE_hookhost"),
        host.data().to_str().unwrap(),
        host.config.to_str().unwrap(),
    ]);
    assert!(said.contains("quota ok"), "{said}");
}

/// Per-tenant rate limits through the real binary and the Python MCP SDK: a burst, then
/// MCP's error with when to retry; a bound on calls at once; the refusals counted in
/// `/metrics`; and one tenant's flood of refused calls does not hold the other back.
#[test]
fn each_tenant_has_its_own_rate_and_concurrency_limits() {
    let host = Host::new("rate = { concurrent = 1 }\n");
    let config = std::fs::read_to_string(&host.config).unwrap().replace(
        "[tenants.alpha]\n",
        "[tenants.alpha]\nrate = { calls_per_second = 1, burst = 3 }\n",
    );
    std::fs::write(&host.config, config).unwrap();
    let mut server = host.serve(&["--http", "127.0.0.1:0", "-v"], Stdio::piped());
    let (url, log) = common::announced_url_and_log(&mut server);
    let said = python_client(&["rates", &url, ALPHA, BETA]);
    assert!(said.contains("rates ok"), "{said}");
    // Each refusal said once, by hookhost at info; not again by rmcp at warn.
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("call refused"), "{log}");
    assert!(!log.contains("response error"), "{log}");
    // The figure, for whoever runs it with --nocapture.
    eprintln!("{}", said.lines().next().unwrap_or_default());
}

/// A config reloaded by SIGHUP while MCP sessions stay open (the Python MCP SDK drives
/// it, see `reload` in tests/mcp/client.py): a running call ends on the old config;
/// a tenant added gets in with its own chain; a tenant's new allow-list binds its open
/// session; an upstream added starts, and removed stops. A broken config and one that
/// changes what only a restart changes are refused, with the reason in the log.
#[test]
fn a_reload_puts_a_new_config_in_effect_while_sessions_stay_open() {
    const GAMMA: &str = "gamma-token-0123456789abcdef01234";
    let host = Host::new("");
    let mut server = host.serve(&["--http", "127.0.0.1:0", "-v"], Stdio::piped());
    let (url, log) = common::announced_url_and_log(&mut server);
    let upstream = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/upstream.py");
    let counter = host.data().join("upstream-starts");
    let said = python_client(&[
        "reload",
        &url,
        ALPHA,
        BETA,
        GAMMA,
        host.config.to_str().unwrap(),
        &server.id().to_string(),
        upstream.to_str().unwrap(),
        counter.to_str().unwrap(),
    ]);
    assert!(said.contains("reload ok"), "{said}");
    let log = log.lock().unwrap().join("\n");
    let lines = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    // Two, then five while calls run (signals that come together may be one).
    assert!((4..=7).contains(&lines("config reloaded")), "{log}");
    assert_eq!(lines("config reload refused"), 2, "{log}");
    assert!(log.contains("[mounts] changed: only a restart"), "{log}");
    assert!(log.contains("upstream stopped"), "{log}");
    for token in [ALPHA, BETA, GAMMA] {
        assert!(!log.contains(token), "a token in the log: {log}");
    }
    // The server is still the one started, serving.
    assert!(
        server.try_wait().unwrap().is_none(),
        "the server ended: {log}"
    );
}

/// Bearer JWTs naming tenants, with keys, a JWKS and a token endpoint the test makes on
/// 127.0.0.1 (see tests/mcp/oauth.py): valid ones open their tenant's sessions, forged,
/// expired and misdirected ones are refused, a rotated key is fetched, tenants' own tokens
/// still work, and the MCP Python SDK's OAuth client finds its way from the 401.
#[test]
fn jwts_name_tenants_and_an_oauth_client_finds_where_to_get_one() {
    let host = Host::new("");
    let hookhost = Path::new(env!("CARGO_BIN_EXE_hookhost"));
    let said = python_script(
        "tests/mcp/oauth.py",
        &[hookhost, host.data(), &host.config, Path::new(ALPHA)],
    );
    assert!(said.contains("oauth ok"), "{said}");
}

/// `serve --http` over TLS, with a certificate the test made, through the Python MCP SDK
/// (see `tls` in tests/mcp/client.py): served, renewed by a reload, a broken key refused.
#[test]
fn tls_serves_mcp_and_a_reload_picks_up_a_renewed_certificate() {
    let host = Host::new("");
    let certs = host.data().join("certs");
    std::fs::create_dir(&certs).unwrap();
    common::leaf_certificate(&certs, "first");
    common::leaf_certificate(&certs, "renewed");
    let (cert, key) = (certs.join("served.pem"), certs.join("served.key"));
    std::fs::copy(certs.join("first.pem"), &cert).unwrap();
    std::fs::copy(certs.join("first.key"), &key).unwrap();
    let config = std::fs::read_to_string(&host.config).unwrap().replace(
        "[serve]\n",
        &format!("[serve]\ntls_cert = {cert:?}\ntls_key = {key:?}\n"),
    );
    std::fs::write(&host.config, config).unwrap();
    let mut server = host.serve(&["--http", "127.0.0.1:0", "-v"], Stdio::piped());
    let (url, log) = common::announced_url_and_log(&mut server);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(
        docker_healthcheck(&url),
        "the image's health check passes over TLS"
    );
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let said = python_client(&[
        "tls",
        &url,
        &path(&certs.join("ca.pem")),
        ALPHA,
        &path(&cert),
        &path(&key),
        &path(&certs.join("renewed.pem")),
        &path(&certs.join("renewed.key")),
        &server.id().to_string(),
    ]);
    assert!(said.contains("tls ok"), "{said}");
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("config reload refused"), "{log}");
    assert!(log.contains("serve.tls_key"), "{log}");
    // The renewal is said, though the config's own keys did not change.
    assert!(
        log.contains("TLS certificate and key read again and put in effect"),
        "{log}"
    );
    assert!(
        !log.contains("not a key"),
        "the key's text in the log: {log}"
    );
}

/// Runs deploy/Dockerfile's `HEALTHCHECK` command against the server at `url` (its port
/// for the image's 8080): whether it passes.
fn docker_healthcheck(url: &str) -> bool {
    let dockerfile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/Dockerfile");
    let dockerfile = std::fs::read_to_string(dockerfile).unwrap();
    let check = dockerfile
        .split("HEALTHCHECK")
        .nth(1)
        .and_then(|rest| rest.split_once(" CMD "))
        .map(|(_, cmd)| {
            cmd.split("\nENTRYPOINT")
                .next()
                .unwrap()
                .replace("\\\n", " ")
        })
        .expect("a HEALTHCHECK CMD");
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/mcp");
    Command::new("/bin/sh")
        .args(["-c", &check.replace(":8080/", &format!(":{port}/"))])
        .status()
        .unwrap()
        .success()
}

/// The admin page in a real headless browser (Chromium through Playwright, see
/// tests/admin/browser.py): a wrong token refused; a session an MCP client made listed,
/// its timeline with the file it wrote (a name made like HTML shown as text), deleted
/// from the page and gone on disk; the config reloaded from the page.
#[test]
fn the_admin_page_shows_a_sessions_timeline_and_deletes_it_in_a_browser() {
    let host = Host::new("").with_admin_token();
    let mut server = host.serve(&["--http", "127.0.0.1:0"], Stdio::piped());
    let url = common::announced_url(&mut server);
    let chromium = std::env::var("HOOKHOST_TEST_CHROMIUM").unwrap_or("/usr/bin/chromium".into());
    let data = host.data().to_str().unwrap();
    let said = python_script(
        "tests/admin/browser.py",
        &[url.as_str(), ADMIN, "alpha", ALPHA, data, &chromium],
    );
    assert!(said.contains("admin page ok"), "{said}");
}

/// Refused credentials are logged at `info` with their reason and source, counted in
/// `/metrics` by reason, answered with RFC 6750's `error="invalid_token"`, and a source
/// that keeps guessing — MCP tokens and the admin token alike — is held (429) for the rest
/// of its minute (see `auth_throttle` in tests/mcp/client.py).
#[test]
fn wrong_tokens_are_logged_counted_and_throttled_per_source_address() {
    let host = Host::new("").with_admin_token();
    let mut server = host.serve(&["--http", "127.0.0.1:0", "-v"], Stdio::piped());
    let (url, log) = common::announced_url_and_log(&mut server);
    let said = python_client(&["auth-throttle", &url, ALPHA, ADMIN]);
    assert!(said.contains("auth throttle ok"), "{said}");
    let log = log.lock().unwrap().join("\n");
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("authentication failed") && l.contains("127.0.0.1"))
        .collect();
    assert_eq!(refusals.len(), 21, "{log}");
    assert!(
        refusals.iter().all(|l| l.contains(" INFO ")),
        "at info: {refusals:?}"
    );
    assert!(log.contains("reason=\"admin_token\""), "{log}");
    assert!(
        !log.contains("wrong-token-"),
        "a presented token in the log: {log}"
    );
}

/// Without `[serve] admin_token` there is no admin page; with one, the API refuses
/// tenants' tokens, and a tenant's token cannot be the admin token.
#[test]
fn the_admin_page_is_off_by_default_and_never_opens_to_a_tenants_token() {
    let host = Host::new("");
    let status = |base: &str, path: &str, token: &str| common::http_get(base, path, Some(token)).0;
    let mut server = host.serve(&["--http", "127.0.0.1:0"], Stdio::piped());
    let url = common::announced_url(&mut server);
    assert!(
        docker_healthcheck(&url),
        "the image's health check passes over HTTP"
    );
    let base = url.replace("/mcp", "");
    assert_eq!(status(&base, "/admin", ALPHA), 404);
    assert_eq!(status(&base, "/admin/api/overview", ALPHA), 404);
    drop(server);

    let config = std::fs::read_to_string(&host.config).unwrap();
    let with_admin = |token: &str| {
        config.replace(
            "[serve]\n",
            &format!("[serve]\nadmin_token = \"{token}\"\n"),
        )
    };
    std::fs::write(&host.config, with_admin(ALPHA)).unwrap();
    let out = host.run(&["config", "check"]);
    assert!(!out.status.success());
    let said = text(&out.stderr);
    assert!(said.contains("tenant 'alpha' has this token"), "{said}");
    assert!(!said.contains(ALPHA), "{said}");

    std::fs::write(&host.config, with_admin(ADMIN)).unwrap();
    let mut server = host.serve(&["--http", "127.0.0.1:0"], Stdio::piped());
    let base = common::announced_url(&mut server).replace("/mcp", "");
    assert_eq!(status(&base, "/admin", ALPHA), 200);
    assert_eq!(status(&base, "/admin/api/overview", ALPHA), 401);
    assert_eq!(status(&base, "/admin/api/overview", BETA), 401);
    assert_eq!(status(&base, "/admin/api/overview", ADMIN), 200);
}

/// `[serve] admin_listen` puts the admin page and API on an address of their own (MCP's
/// has none), and every action and every refusal of the API is a JSON line of the audit
/// log, which only the server's user reads; looking is not logged.
#[test]
fn the_admin_api_listens_apart_and_writes_each_action_to_an_audit_log() {
    use common::http_request;
    let host = Host::new("").with_admin_token();
    let config = std::fs::read_to_string(&host.config)
        .unwrap()
        .replace("[serve]\n", "[serve]\nadmin_listen = \"127.0.0.1:0\"\n");
    std::fs::write(&host.config, config).unwrap();
    let mut server = host.serve(&["--http", "127.0.0.1:0"], Stdio::piped());
    let (url, log) = common::announced_url_and_log(&mut server);
    let base = url.replace("/mcp", "");
    let announced = "serving the admin page at ";
    let admin = (0..200)
        .find_map(|_| {
            let found = log.lock().unwrap().iter().find_map(|l| {
                let at = l.find(announced)? + announced.len();
                Some(l[at..].trim().trim_end_matches("/admin").to_string())
            });
            found.or_else(|| {
                std::thread::sleep(Duration::from_millis(50));
                None
            })
        })
        .expect("the admin address is announced");
    assert_ne!(admin, base);
    assert_eq!(
        http_request(&base, "GET", "/admin/api/overview", Some(ADMIN)).0,
        404
    );
    assert_eq!(http_request(&base, "GET", "/admin", None).0, 404);
    assert_eq!(http_request(&admin, "GET", "/admin", None).0, 200);
    assert_eq!(
        http_request(&admin, "GET", "/admin/api/overview", Some(ADMIN)).0,
        200
    );
    assert_eq!(
        http_request(&admin, "GET", "/admin/api/overview", Some(ALPHA)).0,
        401
    );
    let session = host.session("alpha", None);
    let path = format!("/admin/api/sessions/alpha/{session}");
    assert_eq!(http_request(&admin, "DELETE", &path, Some(ADMIN)).0, 200);
    assert_eq!(
        http_request(&admin, "POST", "/admin/api/reload", Some(ADMIN)).0,
        200
    );

    let audit = host.data().join("admin-audit.jsonl");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&audit).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(!text.contains(ADMIN) && !text.contains(ALPHA), "{text}");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(&str, &str, u64, Option<&str>)> = lines
        .iter()
        .map(|l| {
            (
                l["method"].as_str().unwrap(),
                l["path"].as_str().unwrap(),
                l["status"].as_u64().unwrap(),
                l["refused"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("GET", "/admin/api/overview", 401, Some("admin_token")),
            ("DELETE", path.as_str(), 200, None),
            ("POST", "/admin/api/reload", 200, None),
        ],
        "{text}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l["source"] == "127.0.0.1" && l["time"].is_string())
    );
}

/// The README's Python client (`examples/clients/bearer.py`) reaches its tenant's shell
/// with its bearer token.
#[test]
fn the_readme_python_client_works_with_a_tenants_token() {
    let host = Host::new("");
    let mut server = host.serve(&["--http", "127.0.0.1:0"], Stdio::piped());
    let url = common::announced_url(&mut server);
    let out = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/clients/bearer.py"))
        .arg(&url)
        .env("HOOKHOST_TOKEN", ALPHA)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("tools: ") && said.contains("bash"), "{said}");
    assert!(said.contains("hello from /workspace"), "{said}");
}

/// The Python with the MCP SDK (`bash .ci/run` installs it).
fn python() -> PathBuf {
    std::env::var_os("HOOKHOST_TEST_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-venv/bin/python"),
        PathBuf::from,
    )
}

/// Runs `tests/mcp/client.py` (the Python MCP SDK) with `args`: what it printed, once it
/// succeeded.
fn python_client(args: &[&str]) -> String {
    python_script("tests/mcp/client.py", args)
}

/// Runs the Python script `script` (a path in the repository) with `args`: what it
/// printed, once it succeeded.
fn python_script<A: AsRef<std::ffi::OsStr>>(script: &str, args: &[A]) -> String {
    let out = Command::new(python())
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(script),
        )
        .args(args)
        .output()
        .expect("the Python test peers run (bash .ci/run installs them)");
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}\n{}", text(&out.stderr));
    said
}

#[test]
fn a_session_keeps_its_sandbox_and_each_command_starts_clean() {
    let host = Host::new("");
    let mut server = host.serve(&["--http", "127.0.0.1:0"], Stdio::piped());
    let url = common::announced_url(&mut server);
    let marker = common::marker("kept");
    let said = python_client(&[
        "bash-sessions",
        &url,
        ALPHA,
        host.data().to_str().unwrap(),
        &marker,
    ]);
    assert!(said.contains("bash sessions ok"), "{said}");
}

#[test]
fn the_launcher_refuses_to_run_outside_a_sandbox() {
    // Started by hand with a socket on descriptor 3, it must neither serve nor kill: its
    // last act in a sandbox is `kill(-1)`.
    let (_ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let sentinel = common::marked_sleep(&common::marker("sentinel"), 60);
    let mut sentinel = Command::new("bash")
        .arg("-c")
        .arg(sentinel)
        .spawn()
        .unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_hookhost"));
    launcher.args(["sandbox-shell", "{}"]);
    // SAFETY: dup2 is async-signal-safe; `theirs` is open until the child ran.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut launcher, move || {
            if libc::dup2(fd, 3) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = launcher.output().unwrap();
    drop(theirs);
    let alive = sentinel.try_wait().unwrap().is_none();
    sentinel.kill().unwrap();
    sentinel.wait().unwrap();
    assert!(alive, "the launcher killed a process outside any sandbox");
    assert_eq!(out.status.code(), Some(126));
    assert!(
        text(&out.stderr).contains("only inside a sandbox"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn without_a_sandbox_bash_refuses_to_start_and_says_which_setting_accepts_that() {
    let dir = tempfile::tempdir().unwrap();
    let run = |config: &str, args: &[&str]| {
        let file = dir.path().join("c.toml");
        std::fs::write(&file, config).unwrap();
        Command::new(env!("CARGO_BIN_EXE_hookhost"))
            .arg("--data")
            .arg(dir.path())
            .arg("--config")
            .arg(&file)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let missing = "[bash]\nenabled = true\nbwrap = \"/nonexistent/bwrap\"\n";
    for args in [
        &["config", "check"][..],
        &["serve"],
        &["call", "bash", r#"{"command":"true"}"#],
    ] {
        let out = run(missing, args);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(
            said.contains("cannot run /nonexistent/bwrap") && said.contains("sandbox = false"),
            "{args:?}: {said}"
        );
    }
    let unsandboxed = "[bash]\nenabled = true\nsandbox = false\n[tenants.a]\n";
    let out = run(unsandboxed, &["tools"]);
    assert!(
        text(&out.stderr).contains("unsandboxed_with_tenants = true"),
        "{}",
        text(&out.stderr)
    );
    let accepted = run(
        &unsandboxed.replace(
            "sandbox = false\n",
            "sandbox = false\nunsandboxed_with_tenants = true\n",
        ),
        &["config", "check"],
    );
    assert!(accepted.status.success(), "{}", text(&accepted.stderr));
    assert!(
        text(&accepted.stdout).contains("UNSANDBOXED"),
        "{}",
        text(&accepted.stdout)
    );
}
