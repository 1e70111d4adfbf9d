//! `hookhost hook doctor AGENT`: whether the agent's settings will call hookhost, and
//! what hookhost then does — read back from the settings file, checked on this machine
//! (the program, the config and data directory the entries name, the daemons they reach),
//! and tried: one synthetic call of the agent's shell tool runs through the installed
//! pre-tool and post-tool entries the way the agent runs them (`sh -c` in the project,
//! its project variable set), and the session it made is then deleted. Each finding is a
//! line on stdout; the exit code is 1 when one is a problem.

use anyhow::{Context, Result};
use hookhost::agents::doctor::{Entry, Invocation, Run, entries};
use hookhost::agents::install::{self, Scope, Wrapped, shell_word};
use hookhost::agents::protocol::{self, Answer};
use hookhost::agents::{Agent, Daemon, Event, Forward, HookCommand, HookSettings};
use hookhost::limits::{DEFAULT_HOOK_DAEMON_TIMEOUT, DEFAULT_HOOK_DEADLINE, HOOK_DOCTOR_TIMEOUT};
use hookhost::{Config, TenantId};
use serde_json::Value;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The command the synthetic call runs, and what it printed.
const COMMAND: &str = "echo hookhost doctor";
const OUTPUT: &str = "hookhost doctor\n";

/// The findings, printed as they are made.
#[derive(Default)]
struct Report {
    problems: usize,
}

impl Report {
    fn ok(&mut self, text: impl Display) {
        Report::line("ok", text);
    }

    fn note(&mut self, text: impl Display) {
        Report::line("note", text);
    }

    fn problem(&mut self, text: impl Display) {
        self.problems += 1;
        Report::line("problem", text);
    }

    /// A finding on one line (an error quoting a TOML file spans several), with no
    /// control character of a settings file's text reaching the terminal.
    fn line(kind: &str, text: impl Display) {
        let text = text.to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        let line: String = words
            .join(" ")
            .chars()
            .flat_map(|c| match c.is_control() {
                true => c.escape_default().collect::<Vec<_>>(),
                false => vec![c],
            })
            .collect();
        println!("{kind:<8} {line}");
    }

    fn exit(&self) -> ExitCode {
        match self.problems {
            0 => ExitCode::SUCCESS,
            _ => ExitCode::FAILURE,
        }
    }
}

/// Runs the doctor for `agent`'s settings of `scope`.
pub async fn doctor(agent: Agent, scope: Scope) -> Result<ExitCode> {
    let mut report = Report::default();
    let file = install::settings_file(agent, &scope).map_err(anyhow::Error::msg)?;
    let project = match &scope {
        Scope::Project(dir) => dir.clone(),
        Scope::User { .. } => std::env::current_dir()?,
    };
    let reinstall = format!("`hookhost hook install {}`", agent.name());
    let Some(found) = read_entries(agent, &file, &mut report) else {
        return Ok(report.exit());
    };
    if found.is_empty() {
        report.problem(format!(
            "{} has no hookhost hooks: {} puts them there",
            file.display(),
            reinstall
        ));
        return Ok(report.exit());
    }
    list_entries(agent, &file, &found, &mut report);
    // Codex runs none of an untrusted project's hooks: neither does the doctor.
    let mut trusted = true;
    if let Scope::Project(dir) = &scope {
        also_in_user_settings(agent, &mut report);
        if agent == Agent::Codex {
            trusted = codex_trust(dir, &mut report);
        }
    }

    let session = format!(
        "hookhost-doctor-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let input = |event| {
        protocol::synthetic(agent, event, &session, &project, COMMAND, OUTPUT)
            .to_string()
            .into_bytes()
    };
    let pre = found.iter().find(|e| e.event == Event::PreTool);
    let invocation = match pre.map(|e| &e.run) {
        Some(Run::Command(line)) => {
            let invocation = Invocation::of(agent, line, &project);
            if invocation.is_none() {
                report.problem(format!(
                    "cannot read the pre-tool command as `hookhost hook {} pre-tool`: {line}",
                    agent.name()
                ));
            }
            invocation
        }
        Some(Run::Url(url)) => {
            report.note(format!(
                "events are posted to {url}: the daemon there has its own config and data \
                 directory"
            ));
            None
        }
        None => None,
    };
    if let Some(invocation) = &invocation {
        check_command(
            agent,
            invocation,
            pre,
            &project,
            &reinstall,
            &input,
            &mut report,
        )
        .await;
    }
    // What the settings run is run only when it is this hookhost: a project's settings
    // are anybody's who committed them.
    let runner = Runner {
        agent,
        project: &project,
    };
    if !trusted {
        return Ok(report.exit());
    }
    for event in [Event::PreTool, Event::PostTool] {
        let Some(entry) = found.iter().find(|e| e.event == event) else {
            continue;
        };
        let started = Instant::now();
        let Some(answer) = runner.run(&entry.run, &input(event), &mut report).await else {
            return Ok(report.exit());
        };
        let ms = started.elapsed().as_secs_f64() * 1e3;
        describe(agent, event, answer, ms, &mut report);
    }
    // The doctor's session goes; an agent without a session-end event ends it through
    // the same command.
    let end = found
        .iter()
        .find(|e| e.event == Event::SessionEnd)
        .map(|e| e.run.clone())
        .or_else(|| {
            let invocation = invocation.as_ref()?;
            let mut words = vec![shell_word(&invocation.program)];
            let hook = HookCommand {
                event: Event::SessionEnd,
                closed_tools: None,
                ..invocation.hook.clone()
            };
            words.extend(hook.args().iter().map(|w| shell_word(w)));
            Some(Run::Command(words.join(" ")))
        });
    if let Some(end) = end {
        let mut quiet = Report::default();
        let ended = runner
            .run(&end, &input(Event::SessionEnd), &mut quiet)
            .await;
        // After a problem, hookhost may never have made the session.
        if !matches!(ended, Some(Ok(Answer { exit: 0, .. }))) && report.problems == 0 {
            report.note(format!(
                "the doctor's session {session} was not deleted: `hookhost session delete \
                 {session}`"
            ));
        }
    }
    Ok(report.exit())
}

/// Runs installed entries as the agent would, when they run this hookhost.
struct Runner<'p> {
    agent: Agent,
    project: &'p Path,
}

impl Runner<'_> {
    /// The answer of `run` to `input`; `None` (and a line in the report) when the entry is
    /// not one the doctor runs: a command that is not this hookhost's, a URL off this
    /// machine (it would be sent the user's `HOOKHOST_TOKEN`).
    async fn run(&self, run: &Run, input: &[u8], report: &mut Report) -> Option<Result<Answer>> {
        match run {
            Run::Url(url) => {
                if !loopback(url) {
                    report.note(format!(
                        "{url} is not on this machine: the synthetic call is not sent there"
                    ));
                    return None;
                }
                let daemon = Daemon {
                    url: url.clone(),
                    token: std::env::var("HOOKHOST_TOKEN").ok(),
                };
                Some(daemon.post(url, input, HOOK_DOCTOR_TIMEOUT).await)
            }
            Run::Command(line) => {
                let Some(invocation) = Invocation::of(self.agent, line, self.project) else {
                    report.problem(format!("cannot read the command as hookhost's: {line}"));
                    return None;
                };
                let program = which(&invocation.program, self.project).filter(|p| this_hookhost(p));
                let Some(program) = program else {
                    report.note(format!(
                        "the entries run {:?}, not this hookhost: the synthetic call is left \
                         to it (`{} hook doctor {}`)",
                        invocation.program,
                        invocation.program,
                        self.agent.name()
                    ));
                    return None;
                };
                Some(self.spawn(&program, &invocation, input).await)
            }
        }
    }

    /// `program` with the invocation's arguments, as the agent runs a hook: in the
    /// project, its project variable set, `input` on stdin.
    async fn spawn(&self, program: &Path, invocation: &Invocation, input: &[u8]) -> Result<Answer> {
        use tokio::io::AsyncWriteExt;
        let mut command = tokio::process::Command::new(program);
        command
            .args(invocation.hook.args())
            .current_dir(self.project)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for (name, value) in &invocation.env {
            command.env(name, value);
        }
        if let Some(variable) = install::project_variable(self.agent) {
            command.env(variable, self.project);
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("running {}", program.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that reads no input closes its end: nothing is lost.
            let _ = stdin.write_all(input).await;
        }
        let out = tokio::time::timeout(HOOK_DOCTOR_TIMEOUT, child.wait_with_output())
            .await
            .with_context(|| format!("no answer within {} s", HOOK_DOCTOR_TIMEOUT.as_secs()))??;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Ok(Answer {
            stdout: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            // A signal is no exit code the agent knows: an error like any other.
            exit: out.status.code().map_or(u8::MAX, |c| c.clamp(0, 255) as u8),
            stderr: (!stderr.is_empty()).then_some(stderr),
        })
    }
}

/// Whether `url` names this machine (`127.0.0.0/8`, `::1`, `localhost`).
fn loopback(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    }
}

/// Whether `program` is this hookhost, or the `hookhost-agent` beside it.
fn this_hookhost(program: &Path) -> bool {
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let same = |a: &Path, b: &Path| {
        a.canonicalize()
            .ok()
            .is_some_and(|a| b.canonicalize().ok() == Some(a))
    };
    same(program, &exe) || same(program, &exe.with_file_name(install::FORWARDER))
}

/// hookhost's entries in `file`, or `None` once the report says why there are none.
fn read_entries(agent: Agent, file: &Path, report: &mut Report) -> Option<Vec<Entry>> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            report.problem(format!(
                "{} does not exist: `hookhost hook install {}` writes it",
                file.display(),
                agent.name()
            ));
            return None;
        }
        Err(e) => {
            report.problem(format!("cannot read {}: {e}", file.display()));
            return None;
        }
    };
    match entries(agent, &text) {
        Ok(found) => Some(found),
        Err(why) => {
            report.problem(format!(
                "{}: {why}; {} reads none of it",
                file.display(),
                agent.title()
            ));
            None
        }
    }
}

/// One line per event: what the agent runs for it, or that it runs nothing or twice.
fn list_entries(agent: Agent, file: &Path, found: &[Entry], report: &mut Report) {
    report.ok(format!(
        "{} calls hookhost from {}",
        agent.title(),
        file.display()
    ));
    for event in Event::ALL {
        let Some(name) = agent.event_name(event) else {
            continue;
        };
        let of_event: Vec<&Entry> = found.iter().filter(|e| e.event == event).collect();
        match of_event.as_slice() {
            [] => report.problem(format!(
                "{name}: no hookhost entry: `hookhost hook install {}` adds it",
                agent.name()
            )),
            [entry] => {
                let matcher = entry
                    .matcher
                    .as_ref()
                    .map(|m| format!(" for tools {m}"))
                    .unwrap_or_default();
                let runs = match &entry.run {
                    // The fallback after `||` is the same for every installation.
                    Run::Command(line) => {
                        format!("runs {}", line.split(" || ").next().unwrap_or(line))
                    }
                    Run::Url(url) => format!("posts to {url}"),
                };
                report.ok(format!("{name}{matcher}: {runs}"));
            }
            more => report.problem(format!(
                "{name}: {} hookhost entries: each event runs hookhost {} times",
                more.len(),
                more.len()
            )),
        }
    }
}

/// Claude Code and Gemini CLI run the user's hooks beside the project's: hookhost's in
/// both answer every event twice.
fn also_in_user_settings(agent: Agent, report: &mut Report) {
    let Some(home) = dirs::home_dir() else {
        return;
    };
    let Ok(user) = install::settings_file(agent, &Scope::User { home }) else {
        return;
    };
    let text = std::fs::read_to_string(&user).unwrap_or_default();
    if entries(agent, &text).is_ok_and(|found| !found.is_empty()) {
        report.problem(format!(
            "{} has hookhost hooks too: {} runs both, so hookhost answers each event twice \
             (`hookhost hook install {} --user --uninstall` removes the user's)",
            user.display(),
            agent.title(),
            agent.name()
        ));
    }
}

/// Whether Codex trusts the project: it reads a project's `.codex/config.toml` only then.
fn codex_trust(project: &Path, report: &mut Report) -> bool {
    let home = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".codex")));
    let Some(config) = home.map(|h| h.join("config.toml")) else {
        return false;
    };
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    let trusted = toml::from_str::<toml::Table>(&text).is_ok_and(|t| {
        t.get("projects")
            .and_then(|p| p.get(project.to_string_lossy().as_ref()))
            .and_then(|p| p.get("trust_level"))
            .and_then(|l| l.as_str())
            == Some("trusted")
    });
    if !trusted {
        report.problem(format!(
            "Codex ignores this project's hooks until it trusts the project: \
             [projects.\"{}\"] trust_level = \"trusted\" in {}",
            project.display(),
            config.display()
        ));
    }
    trusted
}

/// The program, config, data directory and daemons the pre-tool command names.
async fn check_command(
    agent: Agent,
    invocation: &Invocation,
    pre: Option<&Entry>,
    project: &Path,
    reinstall: &str,
    input: &dyn Fn(Event) -> Vec<u8>,
    report: &mut Report,
) {
    match which(&invocation.program, project) {
        Some(path) if this_hookhost(&path) => {
            report.ok(format!("program: {} (this hookhost)", path.display()));
        }
        Some(path) => report.note(format!(
            "program: {}, not this hookhost ({}): what it reads may differ",
            path.display(),
            std::env::current_exe().unwrap_or_default().display()
        )),
        None => report.problem(format!(
            "program {:?} cannot be found from the project: the agent then runs no hook \
             (tools a `closed` hook wraps are denied)",
            invocation.program
        )),
    }
    // Relative paths are the project's: the agent runs its hooks there.
    let mut hook = invocation.hook.clone();
    for path in [&mut hook.config, &mut hook.data].into_iter().flatten() {
        *path = project.join(&*path);
    }
    let config_path = hook
        .config
        .clone()
        .or_else(|| std::env::var_os("HOOKHOST_CONFIG").map(PathBuf::from));
    let loaded = match &config_path {
        Some(path) => Config::load(path),
        None => Ok(Config::builtin()),
    };
    let config_name = config_path
        .as_ref()
        .map_or("the built-in config".into(), |p| p.display().to_string());
    match &loaded {
        Err(e) => report.problem(format!(
            "config {config_name}: {}: every event is then the agent's non-blocking error, \
             and the tools in --closed-tools are denied",
            hookhost::error_line(e)
        )),
        Ok(loaded) => match TenantId::new(hook.tenant.clone()) {
            Err(e) => report.problem(format!("--tenant {:?}: {e}", hook.tenant)),
            Ok(tenant) => {
                let chain = loaded.plan.chain_of(&tenant);
                let layers: Vec<String> = chain
                    .iter()
                    .map(|h| {
                        let closed = match h.on_failure {
                            hookhost::chain::FailurePolicy::Closed => ", closed",
                            _ => "",
                        };
                        format!(
                            "{} ({}{closed})",
                            h.component.name,
                            h.tools.patterns().join(" ")
                        )
                    })
                    .collect();
                report.ok(format!(
                    "config: {config_name}, tenant {tenant}: {}",
                    match layers.is_empty() {
                        true => "no hooks".to_string(),
                        false => layers.join(", "),
                    }
                ));
                let wrapped = Wrapped::of(
                    agent,
                    chain.iter().map(|h| {
                        let closed = h.on_failure == hookhost::chain::FailurePolicy::Closed;
                        (&h.tools, closed)
                    }),
                );
                let closed = (!wrapped.closed.is_empty()).then(|| wrapped.closed.join(","));
                let matcher = wrapped.written_matcher(agent);
                let installed = hook.closed_tools.as_ref().map(|tools| tools.join(","));
                if pre.map(|e| &e.matcher) != Some(&matcher) || installed != closed {
                    report.problem(format!(
                        "the entries were installed for another chain: this one wraps {} \
                         ({} closed): {reinstall} again",
                        matcher.unwrap_or_else(|| "every tool".into()),
                        closed.unwrap_or_else(|| "none".into()),
                    ));
                }
            }
        },
    }
    let Some(data) = hook.data_dir(|name| std::env::var_os(name)) else {
        report.problem(
            "no data directory: HOOKHOST_DATA or HOOKHOST_CONFIG is set but empty, or this \
             user has none",
        );
        return;
    };
    report.ok(format!("data: {}", data.display()));
    let mut forward = Forward::new(&data, DEFAULT_HOOK_DAEMON_TIMEOUT);
    // Only the daemon the command names is asked, and only on this machine: it would be
    // sent the user's token.
    forward.url = None;
    if let Some((_, url)) = invocation.env.iter().find(|(k, _)| k == "HOOKHOST_URL") {
        match loopback(url) {
            true => {
                forward.url = Some(Daemon {
                    url: url.clone(),
                    token: std::env::var("HOOKHOST_TOKEN").ok(),
                })
            }
            false => report.note(format!(
                "the command forwards to {url}, which is not on this machine: not asked"
            )),
        }
    }
    let settings = hook.settings().unwrap_or(HookSettings {
        tenant: TenantId::default_tenant(),
        subject: None,
        options: Default::default(),
        trust_cwd: true,
        closed_tools: None,
    });
    check_daemons(agent, &forward, &settings, input, report).await;
}

/// Whether the daemons a hook process would forward to answer.
async fn check_daemons(
    agent: Agent,
    forward: &Forward,
    settings: &HookSettings,
    input: &dyn Fn(Event) -> Vec<u8>,
    report: &mut Report,
) {
    let socket = forward.socket.display();
    if !forward.socket.exists() {
        report.note(format!(
            "no `hookhost serve --hooks` on {socket}: each event starts hookhost, which \
             `serve --hooks` saves"
        ));
    } else if std::os::unix::net::UnixStream::connect(&forward.socket)
        .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    {
        report.note(format!(
            "nothing listens on {socket} (a daemon that was killed left it): each event \
             finds that at once and starts hookhost"
        ));
    } else if !forward.socket_answers() {
        report.problem(format!(
            "the daemon on {socket} did not answer within its timeout lately: hook processes \
             skip it for {} s and answer by themselves",
            hookhost::limits::HOOK_DAEMON_BREAKER.as_secs()
        ));
    } else {
        let started = Instant::now();
        let bytes = input(Event::SessionStart);
        match forward.ask_socket(
            agent,
            Event::SessionStart,
            settings,
            &bytes,
            DEFAULT_HOOK_DEADLINE,
        ) {
            Some(answer) if answer.exit == 0 => {
                report.ok(format!(
                    "daemon: `serve --hooks` answers on {socket} ({:.1} ms)",
                    started.elapsed().as_secs_f64() * 1e3
                ));
                // The probe's session goes at once, whatever the doctor does next.
                let end = input(Event::SessionEnd);
                let deadline = DEFAULT_HOOK_DEADLINE;
                forward.ask_socket(agent, Event::SessionEnd, settings, &end, deadline);
            }
            Some(answer) => report.problem(format!(
                "the daemon on {socket} answers with an error: {}",
                answer.stderr.unwrap_or_default()
            )),
            None => report.problem(format!(
                "the daemon on {socket} does not answer: hook processes answer by themselves"
            )),
        }
    }
    if let Some(daemon) = &forward.url {
        let started = Instant::now();
        let bytes = input(Event::SessionStart);
        match daemon
            .ask(agent, Event::SessionStart, &bytes, DEFAULT_HOOK_DEADLINE)
            .await
        {
            Ok(answer) if answer.exit == 0 => {
                report.ok(format!(
                    "daemon: {} answers ({:.1} ms)",
                    daemon.url,
                    started.elapsed().as_secs_f64() * 1e3
                ));
                let end = input(Event::SessionEnd);
                let _ = daemon
                    .ask(agent, Event::SessionEnd, &end, DEFAULT_HOOK_DEADLINE)
                    .await;
            }
            Ok(answer) => report.problem(format!(
                "the daemon at {} answers with an error: {}",
                daemon.url,
                answer.stderr.unwrap_or_default()
            )),
            Err(e) => report.problem(format!(
                "the daemon at {} does not answer ({e}): hook processes answer by themselves",
                daemon.url
            )),
        }
    }
}

/// `program` as the agent's shell finds it from `project`: a path as it is (relative to
/// the project), a name on `PATH`; `None` when it is no executable file.
fn which(program: &str, project: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = project.join(program);
        return executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
}

/// The finding of the synthetic call's `event`, answered `answer` in `ms`.
fn describe(agent: Agent, event: Event, answer: Result<Answer>, ms: f64, report: &mut Report) {
    let what = match event {
        Event::PreTool => format!("pre-tool `{COMMAND}`"),
        _ => format!("{} `{COMMAND}`", event.name()),
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => {
            report.problem(format!("{what}: {}", hookhost::error_line(e.as_ref())));
            return;
        }
    };
    let said: Value = serde_json::from_str(&answer.stdout).unwrap_or(Value::Null);
    let denied = ["permissionDecision", "decision", "permission"]
        .iter()
        .any(|key| find(&said, key).is_some_and(|v| v == "deny" || v == "block"));
    let reason = ["permissionDecisionReason", "reason", "user_message"]
        .iter()
        .find_map(|key| find(&said, key))
        .unwrap_or_default();
    match (answer.exit, event) {
        (0, Event::PreTool) if denied => {
            report.note(format!("{what}: denied ({ms:.0} ms): {reason}"))
        }
        (0, Event::PreTool) => report.ok(format!("{what}: hookhost let it run ({ms:.0} ms)")),
        (0, _) => report.ok(format!(
            "{what}: hookhost answered, {} ({ms:.0} ms)",
            match said.is_null() || said == serde_json::json!({}) {
                true => "the output as it was",
                false => "with its own text",
            }
        )),
        (exit, _) => report.problem(format!(
            "{what}: exit {exit} — {} shows the user: {}",
            agent.title(),
            answer.stderr.unwrap_or_default()
        )),
    }
}

/// The text at `key` anywhere in `value`.
fn find<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    match value {
        Value::Object(map) => map
            .get(key)
            .and_then(Value::as_str)
            .or_else(|| map.values().find_map(|v| find(v, key))),
        _ => None,
    }
}
