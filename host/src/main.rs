//! The `hookhost` command line.

mod cli;
mod demo;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use hookhost::config::Loaded;
use hookhost::{Config, OneShot};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Sandboxed WebAssembly hooks around AI agent tool calls.
#[derive(Parser)]
#[command(name = "hookhost", version, about)]
struct Cli {
    /// Data directory: sessions' files live under it [default: the user's data directory,
    /// e.g. ~/.local/share/hookhost].
    #[arg(long, global = true, env = "HOOKHOST_DATA")]
    data: Option<PathBuf>,

    /// Config file (TOML) [default: the built-in config, see `hookhost config show`].
    #[arg(long, global = true, env = "HOOKHOST_CONFIG")]
    config: Option<PathBuf>,

    /// More log output on stderr (-v info, -vv debug). HOOKHOST_LOG takes a full filter.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    /// How log lines on stderr are written: text, or one JSON object per line.
    #[arg(
        long,
        global = true,
        env = "HOOKHOST_LOG_FORMAT",
        value_enum,
        default_value_t
    )]
    log_format: cli::logging::LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Call a tool through the hook chain and print its output (exit 1 when it is an error).
    Call(cli::call::CallArgs),
    /// Sessions.
    #[command(subcommand)]
    Session(cli::session::SessionCommand),
    /// Persistent directories: the versions their store keeps.
    #[command(subcommand)]
    Persistent(cli::persistent::PersistentCommand),
    /// List the configured tools.
    Tools {
        /// One JSON object a line, with each tool's input schema as the model sees it:
        /// `{"name", "description", "inputSchema"}`.
        #[arg(long)]
        json: bool,
    },
    /// The configuration.
    #[command(subcommand)]
    Config(cli::config::ConfigCommand),
    /// Components: check one before a config uses it.
    #[command(subcommand)]
    Component(cli::component::ComponentCommand),
    /// Show the main job: a large bash output offloaded, then paged back with read_file.
    Demo,
    /// Answer a coding agent's hook: its JSON on stdin, its answer on stdout (`hook AGENT
    /// EVENT`); or write hookhost's hooks into the agent's settings (`hook install AGENT`).
    /// EVENT: pre-tool, post-tool, session-start, session-end, turn-end (or the agent's own
    /// name for it: PreToolUse, BeforeTool, preToolUse, Stop, …). What each agent can and cannot take from
    /// a hook (Copilot CLI cannot have a tool's output replaced; Codex CLI cuts an output
    /// before its hooks see it): docs/agents.md.
    Hook(cli::hook::HookArgs),
    /// Inside a bash sandbox: start its commands (hookhost starts this itself).
    #[command(hide = true)]
    SandboxShell {
        /// The commands' limits, as JSON.
        limits: String,
    },
    /// Around an unsandboxed bash command: end it with hookhost (hookhost starts this).
    #[command(hide = true, name = "command-guard")]
    Guard {
        /// The command: program and arguments.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Serve MCP: on stdio (one session, deleted when the client disconnects), or over
    /// Streamable HTTP with --http.
    Serve(cli::serve::ServeArgs),
}

fn main() -> ExitCode {
    // Like other Unix filters, end quietly when the reader of stdout goes away
    // (`hookhost session list | head`) instead of panicking on a broken pipe.
    // SAFETY: called first thing, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let mut cli = Cli::parse();
    hookhost::install_crypto_provider();
    if let Command::SandboxShell { limits } = &cli.command {
        // Before anything else: no config, logging or runtime inside a sandbox.
        return hookhost::tools::bash::launcher::main(limits);
    }
    if let Command::Guard { command } = &cli.command {
        return hookhost::tools::bash::guard::main(command);
    }
    let serving = matches!(cli.command, Command::Serve { .. });
    if serving {
        // A server outlives whoever reads its stderr: a closed log pipe must not kill it
        // (write errors are ignored instead).
        // SAFETY: as above.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        raise_open_files_limit();
    }
    // Read once, before logging starts: it may say where spans go.
    let config = match &cli.config {
        Some(path) => Config::load(path),
        None => Ok(Config::builtin()),
    };
    if let Command::Hook(args) = &mut cli.command {
        // A warm daemon's answer, before anything else starts (see `HookArgs::forward`).
        let written = config.as_ref().ok().and_then(|c| c.config.data.as_deref());
        if let Ok(data) = data_dir(cli.data.as_deref(), written)
            && let Some(code) = args.forward(&data)
        {
            return code;
        }
    }
    let spans = cli::logging::init(
        cli.verbose,
        cli.log_format,
        cli::logging::otlp_endpoint(config.as_ref().ok().map(|c| &c.plan)).as_deref(),
    );
    hookhost::component::announce_compiles(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A server runs on every core; a one-shot command does one thing at a time, and
    // starting worker threads would cost it more than they give.
    let runtime = if serving {
        tokio::runtime::Runtime::new()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            hookhost::announce::error(&format!("cannot start the async runtime: {e}"));
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(run(cli, config));
    // Do not wait for blocking threads: one may sit in a read of stdin (a stdio server
    // ended by a signal) that would never return.
    runtime.shutdown_background();
    if let Some(spans) = spans {
        spans.finish(match serving {
            true => hookhost::limits::OTLP_FLUSH_AT_SHUTDOWN,
            false => hookhost::limits::OTLP_FLUSH_AT_EXIT,
        });
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            hookhost::announce::error(&hookhost::error_line(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli, loaded: Result<Loaded, hookhost::config::ConfigError>) -> Result<ExitCode> {
    if let Command::Hook(args) = cli.command {
        // An agent's hook answers even when the config cannot be read.
        let (plan, data) = match loaded {
            Ok(loaded) => {
                let data = data_dir(cli.data.as_deref(), loaded.config.data.as_deref())?;
                (Ok(loaded.plan), data)
            }
            Err(e) => (Err(e), data_dir(cli.data.as_deref(), None)?),
        };
        return cli::hook::hook(
            args,
            plan,
            &data,
            cli.config.as_deref(),
            cli.data.as_deref(),
        )
        .await;
    }
    let loaded = loaded?;
    let data = data_dir(cli.data.as_deref(), loaded.config.data.as_deref())?;
    cli::refuse_root_in_others_data(&data)?;
    // `config check` takes the config as written too; every other command only its plan.
    if let Command::Config(command) = cli.command {
        return cli::config::run(command, loaded, cli.config.as_deref(), &data, cli.verbose).await;
    }
    let source = hookhost::mcp::ConfigSource {
        file: cli.config.clone(),
        data: loaded.config.data.clone(),
    };
    let plan = loaded.plan;
    match cli.command {
        Command::Call(args) => cli::call::call(args, plan, &data).await,
        Command::Session(command) => {
            cli::session::run(command, plan, &data).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Persistent(command) => {
            cli::persistent::run(command, plan, &data).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools { json } => cli::call::tools(plan, &data, json).await,
        Command::Config(_) => unreachable!("answered above"),
        Command::Component(cli::component::ComponentCommand::Check(args)) => {
            cli::component::check(args, &data).await
        }
        Command::Component(cli::component::ComponentCommand::Push(args)) => {
            cli::component::push(args, &data).await
        }
        Command::Component(cli::component::ComponentCommand::Pull(args)) => {
            cli::component::pull(args, &data).await
        }
        Command::Component(cli::component::ComponentCommand::Sign(args)) => {
            cli::component::sign(args).await
        }
        Command::SandboxShell { .. } | Command::Guard { .. } => {
            unreachable!("served before the runtime starts")
        }
        Command::Hook(_) => unreachable!("answered above"),
        Command::Demo => {
            let runtime = cli::start(plan, &data, OneShot::Calls).await?;
            demo::run(&runtime).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => cli::serve::serve(args, plan, &data, source).await,
    }
}

/// The data directory (see [`hookhost::config::data_dir`]).
fn data_dir(flag: Option<&Path>, written: Option<&Path>) -> Result<PathBuf> {
    match hookhost::config::data_dir(flag, written) {
        Some(dir) => Ok(dir),
        None => bail!("no data directory could be found for this user; pass --data DIR"),
    }
}

/// Raises the soft limit of open files to the hard one: a server holds, per traced
/// session, a descriptor and an inotify watch queue for each writable mount (see
/// `hookhost::trace::watch`), beyond what its calls open.
fn raise_open_files_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::debug!(error = %e, "cannot raise the open files limit");
        }
    }
}
