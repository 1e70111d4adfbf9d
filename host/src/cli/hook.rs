//! `hookhost hook`: answer a coding agent's own hook protocol (see [`hookhost::agents`]),
//! or write hookhost's hooks into the agent's settings (`hook install`).

use super::start;
use anyhow::{Context, Result, bail};
use hookhost::config::Plan;
use hookhost::{OneShot, TenantId};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `hookhost hook`'s arguments.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HookArgs {
    #[command(subcommand)]
    subcommand: Option<HookSubcommand>,
    agent: Option<hookhost::agents::Agent>,
    event: Option<String>,
    /// The tenant whose sessions the agent's sessions are.
    #[arg(long, default_value = "default")]
    tenant: String,
    /// A call the chain rewrote is also approved, for agents that apply a rewrite only
    /// with an approval (Codex; Claude Code and Cursor skip their own prompt then).
    #[arg(long)]
    rewrite_allows: bool,
    /// How long hookhost may take to answer, in milliseconds.
    #[arg(long, default_value_t = hookhost::limits::DEFAULT_HOOK_DEADLINE.as_millis() as u64)]
    deadline_ms: u64,
    /// How long a warm daemon (`serve --hooks`, or HOOKHOST_URL) may take before this
    /// process answers by itself and skips it for a while, in milliseconds.
    #[arg(long, default_value_t = hookhost::limits::DEFAULT_HOOK_DAEMON_TIMEOUT.as_millis() as u64)]
    daemon_timeout_ms: u64,
    /// The agent's tools a `closed` hook wraps (comma-separated names or `*` patterns), as
    /// `hook install` found them: denied when the chain cannot run at all (a broken config).
    #[arg(long, value_delimiter = ',', value_name = "TOOLS")]
    closed_tools: Option<Vec<String>>,
    /// The hook input, once read (by [`HookArgs::forward`]).
    #[arg(skip)]
    input: Option<Vec<u8>>,
}

impl HookArgs {
    /// Answers an event through `serve --hooks`' socket in `data` when a daemon listens
    /// there and answers — before logging and an async runtime start, which would cost the
    /// hook process more than the daemon's answer. `None` when the event is this
    /// process's to answer; the hook input it read is kept for [`hook`].
    pub fn forward(&mut self, data: &Path) -> Option<ExitCode> {
        use hookhost::agents::{self, Event};
        let (Some(agent), Some(event), None) =
            (self.agent, self.event.as_deref(), &self.subcommand)
        else {
            return None;
        };
        let event = Event::parse(event)?;
        if std::env::var_os(agents::daemon::ASKED_ENV).is_some() {
            return None;
        }
        let forward = agents::Forward::new(data, Duration::from_millis(self.daemon_timeout_ms));
        let settings = self.settings().ok()?;
        let deadline = Duration::from_millis(self.deadline_ms);
        match forward.offer(agent, event, &settings, deadline) {
            agents::Offered::NotAsked => None,
            agents::Offered::Answered(answer) => Some(answer.emit()),
            agents::Offered::Unanswered(bytes) => {
                self.input = Some(bytes);
                None
            }
        }
    }

    fn settings(&self) -> Result<hookhost::agents::HookSettings> {
        Ok(hookhost::agents::HookSettings {
            tenant: TenantId::new(self.tenant.clone()).context("--tenant")?,
            subject: None,
            options: hookhost::agents::protocol::Options {
                rewrite_allows: self.rewrite_allows,
            },
            trust_cwd: true,
            closed_tools: self
                .closed_tools
                .as_ref()
                .map(|tools| hookhost::ids::ToolMatch::new(tools)),
        })
    }
}

#[derive(clap::Subcommand)]
pub enum HookSubcommand {
    /// Write hookhost's hook entries into the agent's settings (merged with what is there;
    /// twice is once), for this process's --config, --data and --tenant.
    Install {
        agent: hookhost::agents::Agent,
        /// The project whose settings to change (default: the current directory).
        #[arg(long, conflicts_with = "user")]
        project: Option<PathBuf>,
        /// The user's own settings instead of a project's.
        #[arg(long)]
        user: bool,
        /// Remove hookhost's entries (only them).
        #[arg(long)]
        uninstall: bool,
        /// Print the settings as they would be written, and write nothing.
        #[arg(long)]
        print: bool,
        /// The tenant whose sessions the agent's sessions are.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Have the agent post its events to the warm daemon (`serve --http`) at this URL
        /// itself, with `$HOOKHOST_TOKEN` as its bearer token, instead of running a command
        /// (Claude Code only: the others run the command, which forwards to the daemon when
        /// HOOKHOST_URL names it).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
    /// Say whether the agent's settings will call hookhost: which events and matchers,
    /// which program, config and data directory, whether a daemon answers; then run one
    /// synthetic call of its shell tool through the installed entries (exit 1 on a
    /// problem).
    Doctor {
        agent: hookhost::agents::Agent,
        /// The project whose settings to read (default: the current directory).
        #[arg(long, conflicts_with = "user")]
        project: Option<PathBuf>,
        /// The user's own settings instead of a project's.
        #[arg(long)]
        user: bool,
    },
}

/// The settings `--project DIR` or `--user` name (default: the current directory's).
fn scope(project: Option<PathBuf>, user: bool) -> Result<hookhost::agents::install::Scope> {
    use hookhost::agents::install::Scope;
    if user {
        return Ok(Scope::User {
            home: dirs::home_dir().context("no home directory for --user")?,
        });
    }
    let dir = match project {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    Ok(Scope::Project(std::path::absolute(dir)?))
}

/// Runs `hook install`, or answers one hook event; `config` and `data` are the flags the
/// installed command repeats. A config that cannot be read is the event's answer (see
/// [`hookhost::agents::answer_hook`]), not this command's error: an agent would take an
/// error for a refusal of every tool.
pub async fn hook(
    args: HookArgs,
    plan: Result<Plan, hookhost::config::ConfigError>,
    data: &Path,
    config: Option<&Path>,
    data_flag: Option<&Path>,
) -> Result<ExitCode> {
    let settings = args.settings();
    let HookArgs {
        subcommand,
        agent,
        event,
        deadline_ms,
        daemon_timeout_ms,
        input,
        ..
    } = args;
    match subcommand {
        Some(HookSubcommand::Install {
            agent,
            project,
            user,
            uninstall,
            print,
            tenant,
            url,
        }) => {
            let scope = scope(project, user)?;
            return install_hooks(
                agent, scope, uninstall, print, tenant, url, &plan?, config, data_flag,
            );
        }
        Some(HookSubcommand::Doctor {
            agent,
            project,
            user,
        }) => return super::doctor::doctor(agent, scope(project, user)?).await,
        None => {}
    }
    let settings = settings?;
    use hookhost::agents::{self, Event};
    let (Some(agent), Some(event)) = (agent, event) else {
        bail!("`hookhost hook` needs AGENT and EVENT, or `install AGENT`");
    };
    let event = Event::parse(&event).with_context(|| {
        format!(
            "unknown event {event:?}: pre-tool, post-tool, post-tool-failure, session-start, \
             session-end or turn-end"
        )
    })?;
    let deadline = Duration::from_millis(deadline_ms);
    let started = std::time::Instant::now();
    // Read once, here or by `HookArgs::forward` before: the one reader of the hook input.
    let bytes = match input.map_or_else(|| agents::daemon::read_stdin(deadline), Ok) {
        Ok(bytes) => bytes,
        Err(why) => return Ok(agents::protocol::unreadable(agent, &why).emit()),
    };
    let forward = agents::Forward::new(data, Duration::from_millis(daemon_timeout_ms));
    let answer = agents::answer_hook(
        agent,
        event,
        &settings,
        deadline.saturating_sub(started.elapsed()),
        &bytes,
        Some(&forward),
        || async move { start(plan?, data, OneShot::Hooks).await },
    )
    .await;
    Ok(answer.emit())
}

/// `hook install`: hookhost's entries merged into the agent's settings file, around the
/// tools `plan`'s chain for `tenant` wraps.
#[allow(clippy::too_many_arguments)]
fn install_hooks(
    agent: hookhost::agents::Agent,
    scope: hookhost::agents::install::Scope,
    uninstall: bool,
    print: bool,
    tenant: String,
    url: Option<String>,
    plan: &Plan,
    config: Option<&Path>,
    data: Option<&Path>,
) -> Result<ExitCode> {
    use hookhost::agents::install::{self, Scope, Wrapped};
    let tenant_id = TenantId::new(tenant.clone()).context("--tenant")?;
    let file = install::settings_file(agent, &scope).map_err(anyhow::Error::msg)?;
    let exe = std::env::current_exe().context("finding this program")?;
    let project_dir = match &scope {
        Scope::Project(dir) => Some(dir.as_path()),
        Scope::User { .. } => None,
    };
    let mut words = install::Words::new(agent, project_dir);
    let mut command = vec![words.program(&exe)];
    for (flag, path) in [("--config", config), ("--data", data)] {
        if let Some(path) = path {
            command.extend([flag.to_string(), words.path(&std::path::absolute(path)?)]);
        }
    }
    command.extend(["hook".into(), agent.name().into()]);
    if tenant != "default" {
        command.extend(["--tenant".into(), install::shell_word(&tenant)]);
    }
    let command = command.join(" ");
    let wrapped = Wrapped::of(
        agent,
        plan.chain_of(&tenant_id).into_iter().map(|h| {
            (
                &h.tools,
                h.on_failure == hookhost::chain::FailurePolicy::Closed,
            )
        }),
    );
    let current = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let target = install::Target {
        command: &command,
        url: url.as_deref(),
    };
    let merged = install::merged(agent, &current, target, &wrapped, uninstall)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("in {}", file.display()))?;
    if print {
        print!("{merged}");
    } else if merged != current {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&file, merged).with_context(|| format!("writing {}", file.display()))?;
        hookhost::announce::note(&format!(
            "{} {}",
            if uninstall {
                "removed hookhost's hooks from"
            } else {
                "installed hookhost's hooks in"
            },
            file.display()
        ));
    }
    if !uninstall && project_dir.is_some() && !words.machine.is_empty() {
        hookhost::announce::note(&format!(
            "note: {} names paths of this machine ({}); a teammate needs the same, \
             or hookhost on PATH and the config in the project",
            file.display(),
            words.machine.join(", ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}
