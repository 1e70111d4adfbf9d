//! The `hookhost` command line.

mod cli;
mod demo;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use hookhost::config::{Loaded, Plan};
use hookhost::{Config, OneShot};
use opentelemetry_sdk::trace::SdkTracerProvider;
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
    Call(cli::call::CallArgs),
    /// Sessions.
    #[command(subcommand)]
    Session(cli::session::SessionCommand),
    /// List the configured tools.
    Tools,
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
    /// EVENT: pre-tool, post-tool, session-start, session-end (or the agent's own name for
    /// it: PreToolUse, BeforeTool, preToolUse, …). What each agent can and cannot take from
    /// a hook (Copilot CLI cannot have a tool's output replaced; Codex CLI cuts an output
    /// before its hooks see it): docs/agents.md.
    Hook(cli::hook::HookArgs),
    /// Inside a bash sandbox: start its commands (hookhost starts this itself).
    #[command(hide = true)]
    SandboxShell {
        /// The commands' limits, as JSON.
        limits: String,
        /// A `cgroup.procs` file to join first.
        #[arg(long)]
        cgroup: Option<PathBuf>,
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
    let cli = Cli::parse();
    if let Command::SandboxShell { limits, cgroup } = &cli.command {
        // Before anything else: no config, logging or runtime inside a sandbox.
        return hookhost::tools::bash::launcher::main(limits, cgroup.as_deref());
    }
    if matches!(cli.command, Command::Serve { .. }) {
        // A server outlives whoever reads its stderr: a closed log pipe must not kill it
        // (write errors are ignored instead).
        // SAFETY: as above.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    }
    if matches!(cli.command, Command::Serve { .. }) {
        raise_open_files_limit();
    }
    // Read once, before logging starts: it may say where spans go.
    let config = match &cli.config {
        Some(path) => Config::load(path),
        None => Ok(Config::builtin()),
    };
    let spans = init_logging(
        cli.verbose,
        otlp_endpoint(config.as_ref().ok().map(|c| &c.plan)).as_deref(),
    );
    hookhost::component::announce_compiles(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A server runs on every core; a one-shot command does one thing at a time, and
    // starting worker threads would cost it more than they give.
    let runtime = if matches!(cli.command, Command::Serve { .. }) {
        tokio::runtime::Runtime::new()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hookhost: error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(run(cli, config));
    // Do not wait for blocking threads: one may sit in a read of stdin (a stdio server
    // ended by a signal) that would never return.
    runtime.shutdown_background();
    if let Some(provider) = spans
        && let Err(e) = provider.shutdown()
    {
        eprintln!("hookhost: warning: the last spans may not have been exported: {e}");
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hookhost: error: {}", hookhost::error_line(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli, loaded: Result<Loaded, hookhost::config::ConfigError>) -> Result<ExitCode> {
    let loaded = loaded?;
    let data = data_dir(cli.data.as_deref(), &loaded.config)?;
    // `config check` takes the config as written too; every other command only its plan.
    if let Command::Config(command) = cli.command {
        return cli::config::run(command, loaded, cli.config.as_deref(), &data).await;
    }
    let plan = loaded.plan;
    match cli.command {
        Command::Call(args) => cli::call::call(args, plan, &data).await,
        Command::Session(command) => {
            cli::session::run(command, plan, &data).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools => cli::call::tools(plan, &data).await,
        Command::Config(_) => unreachable!("answered above"),
        Command::Component(cli::component::ComponentCommand::Check(args)) => {
            cli::component::check(args, &data).await
        }
        Command::SandboxShell { .. } => unreachable!("served before the runtime starts"),
        Command::Hook(args) => {
            cli::hook::hook(
                args,
                plan,
                &data,
                cli.config.as_deref(),
                cli.data.as_deref(),
            )
            .await
        }
        Command::Demo => {
            let runtime = cli::start(plan, &data, OneShot::Calls).await?;
            demo::run(&runtime).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => cli::serve::serve(args, plan, &data).await,
    }
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

/// Logs to stderr: warnings by default, hookhost's own info (`-v`) or debug (`-vv`) events
/// with other crates' warnings (wasmtime and cranelift are noisy below that); colours only
/// on a terminal. With an OTLP endpoint, hookhost's spans (a call, each layer phase) are
/// exported too, whatever the log level: the provider returned must be shut down at exit
/// to send the last ones.
fn init_logging(verbose: u8, otlp: Option<&str>) -> Option<SdkTracerProvider> {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let default = match verbose {
        0 => "warn",
        1 => "warn,hookhost=info",
        _ => "warn,hookhost=debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    let provider = otlp.and_then(|endpoint| match otlp_provider(endpoint) {
        Ok(provider) => Some(provider),
        Err(e) => {
            eprintln!("hookhost: warning: spans will not be exported: {e:#}");
            None
        }
    });
    let otel = provider.as_ref().map(|provider| {
        use opentelemetry::trace::TracerProvider;
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("hookhost"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("hookhost", tracing::Level::INFO),
            )
    });
    tracing_subscriber::registry().with(fmt).with(otel).init();
    provider
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

/// Where spans go: `[telemetry] otlp_endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`; both
/// are base URLs (`http://collector:4318`) to which `/v1/traces` is added.
fn otlp_endpoint(plan: Option<&Plan>) -> Option<String> {
    plan.and_then(|p| p.otlp_endpoint.clone())
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
        .filter(|e| !e.is_empty())
}

/// A tracer provider exporting spans over OTLP/HTTP (protobuf) to `endpoint`, in batches
/// from its own thread.
fn otlp_provider(endpoint: &str) -> Result<SdkTracerProvider> {
    use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()
        .context("cannot build the OTLP exporter")?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("hookhost")
                .build(),
        )
        .build())
}
