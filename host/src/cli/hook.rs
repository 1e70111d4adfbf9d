//! `hookhost hook`: answer a coding agent's own hook protocol (see [`hookhost::agents`]),
//! or write hookhost's hooks into the agent's settings (`hook install`).

use super::start;
use anyhow::{Context, Result, bail};
use hookhost::config::Plan;
use hookhost::{OneShot, TenantId};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `hookhost hook`'s arguments.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HookArgs {
    #[command(subcommand)]
    install: Option<HookCommand>,
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
}

#[derive(clap::Subcommand)]
pub enum HookCommand {
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
}

/// Runs `hook install`, or answers one hook event; `config` and `data` are the flags the
/// installed command repeats.
pub async fn hook(
    args: HookArgs,
    plan: Plan,
    data: &Path,
    config: Option<&Path>,
    data_flag: Option<&Path>,
) -> Result<ExitCode> {
    let HookArgs {
        install,
        agent,
        event,
        tenant,
        rewrite_allows,
        deadline_ms,
    } = args;
    if let Some(HookCommand::Install {
        agent,
        project,
        user,
        uninstall,
        print,
        tenant,
        url,
    }) = install
    {
        return install_hooks(
            agent, project, user, uninstall, print, tenant, url, config, data_flag,
        );
    }
    use hookhost::agents::{self, Event, HookSettings, protocol::Options};
    let (Some(agent), Some(event)) = (agent, event) else {
        bail!("`hookhost hook` needs AGENT and EVENT, or `install AGENT`");
    };
    let event = Event::parse(&event).with_context(|| {
        format!(
            "unknown event {event:?}: pre-tool, post-tool, session-start, session-end or turn-end"
        )
    })?;
    let settings = HookSettings {
        tenant: TenantId::new(tenant).context("--tenant")?,
        options: Options { rewrite_allows },
        trust_cwd: true,
    };
    let deadline = std::time::Duration::from_millis(deadline_ms);
    let daemon = agents::Daemon::from_env();
    let answer = agents::answer_hook(
        agent,
        event,
        &settings,
        deadline,
        tokio::io::stdin(),
        daemon.as_ref(),
        || start(plan, data, OneShot::Hooks),
    )
    .await;
    if let Some(line) = &answer.stderr {
        eprintln!("{line}");
    }
    let mut out = std::io::stdout().lock();
    if !answer.stdout.is_empty() {
        writeln!(out, "{}", answer.stdout)?;
    }
    Ok(ExitCode::from(answer.exit))
}

/// `hook install`: hookhost's entries merged into the agent's settings file.
#[allow(clippy::too_many_arguments)]
fn install_hooks(
    agent: hookhost::agents::Agent,
    project: Option<PathBuf>,
    user: bool,
    uninstall: bool,
    print: bool,
    tenant: String,
    url: Option<String>,
    config: Option<&Path>,
    data: Option<&Path>,
) -> Result<ExitCode> {
    use hookhost::agents::install::{self, Scope, shell_word};
    let scope = if user {
        Scope::User {
            home: dirs::home_dir().context("no home directory for --user")?,
        }
    } else {
        let dir = match project {
            Some(dir) => dir,
            None => std::env::current_dir()?,
        };
        Scope::Project(std::path::absolute(dir)?)
    };
    let file = install::settings_file(agent, &scope).map_err(anyhow::Error::msg)?;
    let exe = std::env::current_exe().context("finding this program")?;
    let mut words = vec![exe.to_string_lossy().into_owned()];
    if let Some(config) = config {
        words.extend([
            "--config".into(),
            std::path::absolute(config)?.to_string_lossy().into_owned(),
        ]);
    }
    if let Some(data) = data {
        words.extend([
            "--data".into(),
            std::path::absolute(data)?.to_string_lossy().into_owned(),
        ]);
    }
    words.extend(["hook".into(), agent.name().into()]);
    if tenant != "default" {
        words.extend(["--tenant".into(), tenant]);
    }
    let command = words
        .iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ");
    let current = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let target = match &url {
        Some(url) => install::Target::Url(url),
        None => install::Target::Command(&command),
    };
    let merged = install::merged(agent, &current, target, uninstall)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("in {}", file.display()))?;
    if print {
        print!("{merged}");
    } else if merged != current {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&file, merged).with_context(|| format!("writing {}", file.display()))?;
        eprintln!(
            "hookhost: {} {}",
            if uninstall {
                "removed hookhost's hooks from"
            } else {
                "installed hookhost's hooks in"
            },
            file.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
