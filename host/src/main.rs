//! The `hookhost` command line.

mod demo;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use hookhost::{Config, Runtime, SessionId, TenantId};
use std::io::Write;
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

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Call a tool through the hook chain and print its output (exit 1 when it is an error).
    Call {
        /// Session to call in; a new one when left out (its id is printed on stderr).
        #[arg(long)]
        session: Option<String>,
        /// Tenant owning the session.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
        /// The tool's name.
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
    /// Sessions.
    #[command(subcommand)]
    Session(SessionCommand),
    /// List the configured tools.
    Tools,
    /// The configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Show the main job: a large bash output offloaded, then paged back with read_file.
    Demo,
}

#[derive(Subcommand)]
enum SessionCommand {
    /// Print a new session id.
    New,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the built-in config, as a file to start from.
    Show,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hookhost: error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hookhost: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::builtin(),
    };
    let data = data_dir(cli.data.as_deref(), &config)?;
    match cli.command {
        Command::Call {
            session,
            tenant,
            json,
            tool,
            arguments,
        } => {
            let tenant = TenantId::new(tenant).context("--tenant")?;
            let new_session = session.is_none();
            let session_id = match session {
                Some(id) => SessionId::new(id).context("--session")?,
                None => SessionId::generate(),
            };
            let runtime = start(&config, &data).await?;
            let session = runtime.session(tenant, session_id)?;
            let result = runtime.call(&session, &tool, &arguments).await?;
            if new_session {
                eprintln!("hookhost: session {}", session.id);
            }
            let mut out = std::io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &result)?;
                writeln!(out)?;
            } else {
                out.write_all(result.output.as_bytes())?;
                if !result.output.ends_with('\n') {
                    writeln!(out)?;
                }
            }
            Ok(if result.is_error {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Session(SessionCommand::New) => {
            println!("{}", SessionId::generate());
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools => {
            let runtime = start(&config, &data).await?;
            for tool in runtime.tools() {
                println!("{}\t{}", tool.name, tool.description);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(ConfigCommand::Show) => {
            print!("{}", hookhost::config::DEFAULT_CONFIG);
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo => {
            let runtime = start(&config, &data).await?;
            demo::run(&runtime).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn start(config: &Config, data: &Path) -> Result<Runtime> {
    Runtime::new(config, data)
        .await
        .context("starting the runtime")
}

/// `--data`, else the config's `data`, else `hookhost` under the user's data directory.
fn data_dir(flag: Option<&Path>, config: &Config) -> Result<PathBuf> {
    if let Some(dir) = flag.or(config.data.as_deref()) {
        return Ok(dir.to_path_buf());
    }
    match dirs::data_dir() {
        Some(dir) => Ok(dir.join("hookhost")),
        None => bail!("no data directory could be found for this user; pass --data DIR"),
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
