//! The `hookhost` command line.

mod demo;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use hookhost::config::{Loaded, Plan};
use hookhost::sessions::{Sessions, Tenants};
use hookhost::trace::TraceSettings;
use hookhost::{Config, OneShot, Runtime, SessionId, TenantId};
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::collections::BTreeMap;
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
enum HookCommand {
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
        /// The new session's working directory ({workdir} in mount templates; with the
        /// built-in config, /workspace is this directory). Only without --session.
        #[arg(long, conflicts_with = "session")]
        workdir: Option<PathBuf>,
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
    /// Components: check one before a config uses it.
    #[command(subcommand)]
    Component(ComponentCommand),
    /// Show the main job: a large bash output offloaded, then paged back with read_file.
    Demo,
    /// Answer a coding agent's hook: its JSON on stdin, its answer on stdout (`hook AGENT
    /// EVENT`); or write hookhost's hooks into the agent's settings (`hook install AGENT`).
    /// EVENT: pre-tool, post-tool, session-start, session-end (or the agent's own name for
    /// it: PreToolUse, BeforeTool, preToolUse, …). What each agent can and cannot take from
    /// a hook (Copilot CLI cannot have a tool's output replaced; Codex CLI cuts an output
    /// before its hooks see it): docs/agents.md.
    #[command(args_conflicts_with_subcommands = true)]
    Hook {
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
    },
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
    Serve {
        /// Serve Streamable HTTP at this address (e.g. 127.0.0.1:8080 or localhost:8080),
        /// path /mcp.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// Also serve Prometheus metrics at http://ADDR/metrics (with --http they are at
        /// /metrics on its address already).
        #[arg(long, value_name = "ADDR", conflicts_with = "http")]
        metrics: Option<String>,
        /// stdio: the tenant of the session.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// The working directory of the sessions served ({workdir}; with the built-in
        /// config, /workspace is this directory): the user's project [default: the
        /// config's `[serve] workdir` or the tenant's `workdir`, else none].
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// Keep sessions (and their files) when they end by disconnect or shutdown.
        #[arg(long)]
        keep_session: bool,
        /// HTTP: end MCP sessions idle this long, deleting their files.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "30m")]
        idle: std::time::Duration,
        /// HTTP: serve `bash` although no tenant has a token, so that anyone who can reach
        /// the address (every local user) can run commands as you.
        #[arg(long)]
        unauthenticated_bash: bool,
    },
}

#[derive(Subcommand)]
enum SessionCommand {
    /// Create a session and print its id.
    New {
        #[arg(long, default_value = "default")]
        tenant: String,
        /// The id to give it [default: a new UUID].
        #[arg(long)]
        id: Option<String>,
        /// The agent's working directory ({workdir} in mount templates).
        #[arg(long)]
        workdir: Option<PathBuf>,
    },
    /// List sessions: id, tenant, created, last active, workdir (tab-separated).
    List {
        /// Only this tenant's [default: every tenant's].
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Show a session and where its mounts live.
    Show {
        id: String,
        #[arg(long, default_value = "default")]
        tenant: String,
    },
    /// Print a session's trace: one JSON event per line, in order (see the README's
    /// "Tracing").
    Trace {
        id: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Only events of this kind, with `*` wildcards: `file.*`, `hook.failed`.
        #[arg(long)]
        kind: Option<String>,
        /// Keep printing events as they come, until the session is deleted (or Ctrl-C).
        #[arg(long)]
        follow: bool,
    },
    /// Delete a session and every session-scoped directory of it.
    Delete {
        id: String,
        #[arg(long, default_value = "default")]
        tenant: String,
    },
    /// Delete idle sessions, and session directories that have no session.
    Gc {
        /// Delete sessions idle for longer than this (e.g. 30m, 12h, 7d) [default: delete
        /// no session, only directories that have none].
        #[arg(long, value_parser = humantime::parse_duration)]
        idle: Option<std::time::Duration>,
    },
}

#[derive(Subcommand)]
enum ComponentCommand {
    /// Check that a component conforms: its world, WIT version and imports, then a run in
    /// the real sandbox through the cases a chain will give it (one line per finding; exit
    /// 0 only if it conforms). Compiled code is cached in the data directory.
    Check {
        /// A `.wasm` component, or `builtin:NAME`.
        component: String,
        /// The world it must implement [default: either].
        #[arg(long)]
        world: Option<hookhost::check::World>,
        /// A setting, as the config would give it: `threshold=100`, `deny=["rm *"]`,
        /// `file=/audit/x.jsonl` (a value that is not TOML is a string).
        #[arg(long = "settings", value_name = "KEY=VALUE", num_args = 1..)]
        settings: Vec<String>,
        /// The arguments of the call (a JSON object) [default: `{"command":"echo hello"}`
        /// for a hook, `{}` for a tool].
        #[arg(long, value_name = "JSON")]
        call: Option<String>,
        /// A hook: the tool its calls are for.
        #[arg(long, default_value = "bash")]
        tool: String,
        /// A hook: one more output its after-execute is given, `TEXT` or `@FILE` — one
        /// your hook changes, so that check runs its `replace`.
        #[arg(long, value_name = "TEXT|@FILE")]
        output: Option<String>,
        /// Grant this virtual path too (read-write, scratch), besides
        /// /workspace, /artifacts, /audit, /plans and /session.
        #[arg(long, value_name = "PATH")]
        grant: Vec<String>,
        /// The deadline of each phase in milliseconds [default: the host's, 10 s].
        #[arg(long, value_name = "MS")]
        deadline: Option<u64>,
        /// Imports the host does not provide are allowed (they trap when called), as
        /// `allow_unknown_imports = true` in a config.
        #[arg(long)]
        allow_unknown_imports: bool,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the built-in config, as a file to start from.
    Show,
    /// Validate a config file (by default --config, else the built-in one), load its
    /// components, and print the resolved chain.
    Check { file: Option<PathBuf> },
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
    let plan = loaded.plan.clone();
    match cli.command {
        Command::Call {
            session,
            tenant,
            json,
            workdir,
            tool,
            arguments,
        } => {
            let tenant = TenantId::new(tenant).context("--tenant")?;
            let session_id = session
                .map(SessionId::new)
                .transpose()
                .context("--session")?;
            let runtime = start(&plan, &data, OneShot::Calls).await?;
            let kept: Vec<&str> = plan
                .hooks
                .iter()
                .filter(|h| h.instance == hookhost::chain::InstanceMode::PerSession)
                .map(|h| h.component.name.as_str())
                .collect();
            if session_id.is_some() && !kept.is_empty() {
                eprintln!(
                    "hookhost: note: {} kept per session start afresh in each `hookhost call`; \
                     a session's instance (and what it holds in memory) lives in a serving \
                     process, `hookhost serve`",
                    kept.join(", ")
                );
            }
            let session = match &session_id {
                Some(id) => runtime.sessions().open(&tenant, id).await?,
                None => {
                    runtime
                        .sessions()
                        .create(tenant, None, workdir.as_deref())
                        .await?
                }
            };
            let result = runtime.call(&session, &tool, &arguments).await?;
            if session_id.is_none() {
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
        Command::Session(command) => {
            // The table, the directories and the tenants: no component, no upstream.
            let sessions = Sessions::at(
                &data,
                plan.session_store.as_ref(),
                plan.mounts,
                Tenants::new(plan.tenants, plan.serve_workdir),
            )
            .await
            .context("opening the sessions")?;
            session_command(&sessions, &plan.trace, command).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools => {
            let runtime = start(&plan, &data, OneShot::Calls).await?;
            for tool in runtime.tools() {
                println!("{}\t{}", tool.name, tool.description);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(ConfigCommand::Show) => {
            print!("{}", hookhost::config::DEFAULT_CONFIG);
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(ConfigCommand::Check { file }) => {
            // The file hookhost was started with is loaded already.
            let loaded = match file.filter(|f| Some(f) != cli.config.as_ref()) {
                Some(other) => Config::load(&other)?,
                None => loaded,
            };
            check_config(loaded, &data).await
        }
        Command::Component(ComponentCommand::Check {
            component,
            world,
            settings,
            call,
            tool,
            output,
            grant,
            deadline,
            allow_unknown_imports,
        }) => {
            let output = match output {
                Some(text) => Some(match text.strip_prefix('@') {
                    Some(file) => std::fs::read_to_string(file)
                        .with_context(|| format!("--output: reading {file}"))?,
                    None => text,
                }),
                None => None,
            };
            let options = hookhost::check::CheckOptions {
                world,
                settings: parse_settings(&settings)?,
                grants: grant,
                call,
                tool,
                deadline_ms: deadline,
                allow_unknown_imports,
                output,
            };
            let component = hookhost::component::ComponentRef::parse(&component);
            let report = hookhost::check::check(&component, &options, &data)
                .await
                .with_context(|| format!("checking {component}"))?;
            println!("{component}");
            for finding in &report.findings {
                println!("  {finding}");
            }
            Ok(if report.conforms() {
                println!("conforms");
                ExitCode::SUCCESS
            } else {
                println!("does not conform");
                ExitCode::FAILURE
            })
        }
        Command::SandboxShell { .. } => unreachable!("served before the runtime starts"),
        Command::Hook {
            install:
                Some(HookCommand::Install {
                    agent,
                    project,
                    user,
                    uninstall,
                    print,
                    tenant,
                    url,
                }),
            ..
        } => {
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
            if let Some(config) = &cli.config {
                words.extend([
                    "--config".into(),
                    std::path::absolute(config)?.to_string_lossy().into_owned(),
                ]);
            }
            if let Some(data) = &cli.data {
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
                std::fs::write(&file, merged)
                    .with_context(|| format!("writing {}", file.display()))?;
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
        Command::Hook {
            agent,
            event,
            tenant,
            rewrite_allows,
            deadline_ms,
            ..
        } => {
            use hookhost::agents::{self, Event, HookSettings, protocol::Options};
            let (Some(agent), Some(event)) = (agent, event) else {
                bail!("`hookhost hook` needs AGENT and EVENT, or `install AGENT`");
            };
            let event = Event::parse(&event).with_context(|| {
                format!(
                    "unknown event {event:?}: pre-tool, post-tool, session-start or session-end"
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
                || start(&plan, &data, OneShot::Hooks),
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
        Command::Demo => {
            let runtime = start(&plan, &data, OneShot::Calls).await?;
            demo::run(&runtime).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve {
            http,
            metrics,
            tenant,
            workdir,
            keep_session,
            idle,
            unauthenticated_bash,
        } => {
            let mut runtime = Runtime::new(plan, &data)
                .await
                .context("starting the runtime")?;
            if let Some(Err(unavailable)) = runtime.bash_readiness().await {
                return Err(unavailable).context("serve: the bash tool is enabled");
            }
            let server = hookhost::sessions::Server::this();
            runtime.sessions_mut().set_owner(if http.is_some() {
                hookhost::sessions::Owner::Http(server)
            } else {
                hookhost::sessions::Owner::Stdio(server)
            });
            let runtime = std::sync::Arc::new(runtime);
            if let Some(addr) = &metrics {
                hookhost::mcp::serve_metrics(runtime.clone(), addr).await?;
            }
            let options = hookhost::mcp::ServeOptions {
                workdir,
                keep_session,
            };
            match http {
                Some(addr) => {
                    let http = hookhost::mcp::HttpOptions {
                        addr,
                        idle,
                        unauthenticated_bash,
                    };
                    hookhost::mcp::serve_http(runtime, http, options).await?;
                }
                None => {
                    let tenant = TenantId::new(tenant).context("--tenant")?;
                    hookhost::mcp::serve_stdio(runtime, tenant, options).await?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn session_command(
    sessions: &Sessions,
    trace: &TraceSettings,
    command: SessionCommand,
) -> Result<()> {
    let tenant = |t: String| TenantId::new(t).context("--tenant");
    let id = |s: String| SessionId::new(s).context("session id");
    match command {
        SessionCommand::New {
            tenant: t,
            id: i,
            workdir,
        } => {
            let session = sessions
                .create(tenant(t)?, i.map(id).transpose()?, workdir.as_deref())
                .await?;
            println!("{}", session.id);
        }
        SessionCommand::List { tenant: t } => {
            let t = t.map(tenant).transpose()?;
            for s in sessions.list(t.as_ref()).await? {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    s.id,
                    s.tenant,
                    humantime::format_rfc3339_seconds(s.created),
                    humantime::format_rfc3339_seconds(s.last_active),
                    s.workdir
                        .as_deref()
                        .map_or(String::new(), |w| w.display().to_string())
                );
            }
        }
        SessionCommand::Trace {
            id: i,
            tenant: t,
            kind,
            follow,
        } => {
            let (t, i) = (tenant(t)?, id(i)?);
            let record = sessions.record(&t, &i).await?;
            let session = sessions.resolve(&record)?;
            print_trace(sessions, trace, &session, kind.as_deref(), follow).await?;
        }
        SessionCommand::Show { id: i, tenant: t } => {
            let (t, i) = (tenant(t)?, id(i)?);
            let record = sessions.record(&t, &i).await?;
            let session = sessions.resolve(&record)?;
            println!("session: {}", record.id);
            println!("tenant: {}", record.tenant);
            println!(
                "created: {}",
                humantime::format_rfc3339_seconds(record.created)
            );
            println!(
                "last active: {}",
                humantime::format_rfc3339_seconds(record.last_active)
            );
            if let Some(w) = &record.workdir {
                println!("workdir: {}", w.display());
            }
            let usage = sessions.usage(&session).await?;
            println!(
                "disk: {} bytes, {} files in this session",
                usage.session.bytes, usage.session.entries
            );
            let of = |used: u64, max: Option<u64>, what: &str| match max {
                Some(max) => format!(
                    "{used} of {max} {what} ({:.1}% of its quota)",
                    used as f64 * 100.0 / max.max(1) as f64
                ),
                None => format!("{used} {what} (no quota)"),
            };
            println!(
                "tenant disk: {}; {}",
                of(usage.tenant.bytes, usage.quota.bytes, "bytes"),
                of(usage.tenant.entries, usage.quota.entries, "files")
            );
            println!("mounts:");
            for m in session.mounts() {
                println!(
                    "  {}\t{}\t({})",
                    m.virtual_path,
                    m.host.display(),
                    format!("{:?}", m.scope).to_lowercase()
                );
            }
        }
        SessionCommand::Delete { id: i, tenant: t } => {
            sessions.delete(&tenant(t)?, &id(i)?).await?;
        }
        SessionCommand::Gc { idle } => {
            let cutoff = idle.map(|idle| {
                std::time::SystemTime::now()
                    .checked_sub(idle)
                    .unwrap_or(std::time::UNIX_EPOCH)
            });
            let report = sessions.gc(cutoff).await?;
            println!(
                "deleted {} idle sessions; removed {} orphaned session directories and {} stale temporary files",
                report.sessions, report.orphans, report.partials
            );
        }
    }
    Ok(())
}

/// Validates a config, loads its components in a scratch data directory (compiled code
/// cached in `data`), and prints the mounts, the tools and the chain as they will run,
/// with each component's size, compile time and imports.
async fn check_config(loaded: Loaded, data: &Path) -> Result<ExitCode> {
    let Loaded { config, plan } = loaded;
    let name = plan.source.clone();
    let scratch = hookhost::check::Scratch::new(data).context("checking the config")?;
    let components = inspect_components(&plan, scratch.path())?;
    let runtime = Runtime::new(plan.clone(), scratch.path())
        .await
        .with_context(|| format!("{name}: loading the components"))?;
    let component_lines = |component: &str| {
        components
            .iter()
            .find(|(c, _)| c == component)
            .map(|(_, lines)| lines.join(""))
            .unwrap_or_default()
    };
    println!("{name}: valid\n");
    println!("mounts:");
    for (path, spec) in config.mounts() {
        let inside = spec
            .in_workdir
            .map_or(String::new(), |w| format!(" (with a workdir: {w})"));
        let git = spec
            .in_git_workdir
            .map_or(String::new(), |g| format!(" (in a git workdir: {g})"));
        let scope = format!("{:?}", spec.scope).to_lowercase();
        println!("  {path}\t{}{inside}{git}\t[{scope}]", spec.host);
    }
    println!("\ntools:");
    for tool in runtime.tools() {
        let upstream = tool
            .name
            .split_once(hookhost::tools::upstream::SEPARATOR)
            .filter(|(u, _)| plan.upstreams.iter().any(|(name, _)| name == u));
        let configured = plan.tools.iter().find(|t| t.name == tool.name);
        let detail = match (configured, upstream, &plan.bash) {
            (Some(spec), _, _) => format!(
                "{}{}{}",
                spec.component,
                grants_text(&spec.grants),
                component_lines(&spec.component.to_string())
            ),
            (None, Some((name, remote)), _) => format!("upstream {name}, its tool {remote}"),
            (None, None, Some(bash)) if tool.name == "bash" => {
                bash_text(bash, &plan.tenants, runtime.bash_readiness().await)
            }
            (None, None, _) => "host-native".to_string(),
        };
        println!("  {}\t{detail}", tool.name);
    }
    let down: Vec<String> = runtime
        .upstream_states()
        .into_iter()
        .filter(|(_, state)| *state != "up")
        .map(|(name, state)| format!("{name} ({state})"))
        .collect();
    if !down.is_empty() {
        println!("\nupstreams that did not start: {}", down.join(", "));
    }
    println!("\nchain (before-execute top to bottom, after-execute bottom to top):");
    for (i, hook) in plan.hooks.iter().enumerate() {
        let spec = &hook.component;
        println!(
            "  {}. {}\t{}\ton_failure={}\ttools={}{}",
            i + 1,
            spec.name,
            spec.component,
            hook.on_failure,
            hook.tools,
            grants_text(&spec.grants)
        );
        for (key, value) in &spec.settings {
            println!("       {key} = {value}");
        }
        print!("{}", component_lines(&spec.component.to_string()));
    }
    if let Some(Err(unavailable)) = runtime.bash_readiness().await {
        eprintln!("hookhost: error: {name}: {unavailable}");
        return Ok(ExitCode::FAILURE);
    }
    if !down.is_empty() {
        eprintln!(
            "hookhost: error: {name}: upstreams did not start: {} (see the log above)",
            down.join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `config check` says of `bash`: where it runs, and how it is confined.
fn bash_text(
    bash: &hookhost::config::BashPlan,
    tenants: &BTreeMap<TenantId, hookhost::sessions::Tenant>,
    readiness: Option<
        Result<Option<&hookhost::tools::bash::Readiness>, hookhost::tools::bash::Unavailable>,
    >,
) -> String {
    let Some(shell) = &bash.sandbox else {
        return format!(
            "host-native, runs in {} UNSANDBOXED: as hookhost's user, with every file it can reach",
            bash.mount
        );
    };
    let ready = match readiness {
        Some(Ok(Some(ready))) => ready,
        Some(Err(unavailable)) => return format!("host-native, CANNOT RUN: {unavailable}"),
        _ => return "host-native".into(),
    };
    let open: Vec<String> = tenants
        .iter()
        .filter(|(_, t)| t.shell_network.is_some_and(|n| n != shell.policy.network))
        .map(|(id, _)| id.to_string())
        .collect();
    let network = match (shell.policy.network, open.is_empty()) {
        (false, true) => "off".to_string(),
        (true, true) => "ON".to_string(),
        (false, false) => format!("off (on for {})", open.join(", ")),
        (true, false) => format!("ON (off for {})", open.join(", ")),
    };
    let limits = shell.policy.limits;
    format!(
        "host-native, runs in {} sandboxed by {}{}\n       network: {network}; processes: {} ({}); \
         memory: {} bytes a process; cpu: {} s a process; files up to {} bytes; /tmp: {} bytes",
        bash.mount,
        ready.bwrap,
        grants_text(&bash.grants),
        limits.processes,
        ready.processes,
        limits.memory_bytes,
        limits.cpu_secs,
        limits.file_bytes,
        limits.tmp_bytes
    )
}

/// Compiles every component of `config` once (into the cache of `data`, so that the
/// runtime then loads them from it) and describes each: `(component, lines to print)`.
fn inspect_components(
    plan: &hookhost::config::Plan,
    data: &Path,
) -> Result<Vec<(String, Vec<String>)>> {
    let loader = hookhost::check::inspector(data)?;
    let mut described: Vec<(String, Vec<String>)> = Vec::new();
    let refs = plan
        .hooks
        .iter()
        .map(|h| &h.component.component)
        .chain(plan.tools.iter().map(|t| &t.component));
    for component in refs {
        let name = component.to_string();
        if described.iter().any(|(c, _)| *c == name) {
            continue;
        }
        // A component that does not load is reported by the runtime, with its place.
        let Ok(inspection) = hookhost::check::inspect(&loader, component) else {
            continue;
        };
        let mut lines = vec![format!("       {}\n", inspection.summary())];
        lines.extend(
            inspection
                .import_lines()
                .map(|line| format!("       imports {line}\n")),
        );
        described.push((name, lines));
    }
    Ok(described)
}

/// `KEY=VALUE` settings: the value as TOML when it is TOML (`10`, `["a"]`, `"x"`), else
/// the text itself.
fn parse_settings(pairs: &[String]) -> Result<toml::Table> {
    let mut settings = toml::Table::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--settings {pair:?}: expected KEY=VALUE");
        };
        let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        settings.insert(key.trim().to_string(), value);
    }
    Ok(settings)
}

fn grants_text(grants: &hookhost::sandbox::Grants) -> String {
    grants
        .iter()
        .map(|(path, access)| format!("\t{path} {}", access.word()))
        .collect()
}

/// The runtime of a one-shot command (every command but `serve`), with `part` of the
/// config.
async fn start(plan: &Plan, data: &Path, part: OneShot) -> Result<Runtime> {
    Runtime::new(plan.clone().one_shot(part), data)
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

/// How often `session trace --follow` looks for new events, and how many looks between
/// checks that the session still exists.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(200);
const FOLLOW_CHECKS_EVERY: u32 = 10;

/// Prints `session`'s trace events of `kind`; with `follow`, new ones as they come until
/// the session is deleted or Ctrl-C.
async fn print_trace(
    sessions: &Sessions,
    settings: &TraceSettings,
    session: &hookhost::Session,
    kind: Option<&str>,
    follow: bool,
) -> Result<()> {
    use std::io::Read;
    let kind = kind.map(wildmatch::WildMatch::new);
    let mut file = None;
    let mut pending = String::new();
    let mut looks = 0u32;
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        if file.is_none() {
            match hookhost::trace::open_events(settings, session) {
                Ok(f) => file = Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && follow => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e).context("cannot open the session's trace file"),
            }
        }
        if let Some(f) = &mut file {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)
                .context("cannot read the trace file")?;
            pending.push_str(&String::from_utf8_lossy(&bytes));
            // Only whole lines: the last may still be being written.
            if let Some(end) = pending.rfind('\n') {
                let whole: String = pending.drain(..=end).collect();
                let mut out = std::io::stdout().lock();
                for event in hookhost::trace::events(&whole, kind.as_ref()) {
                    writeln!(out, "{event}")?;
                }
                out.flush()?;
            }
        }
        if !follow {
            return Ok(());
        }
        looks += 1;
        if looks.is_multiple_of(FOLLOW_CHECKS_EVERY)
            && sessions.record(&session.tenant, &session.id).await.is_err()
        {
            return Ok(());
        }
        tokio::select! {
            _ = &mut stop => return Ok(()),
            () = tokio::time::sleep(FOLLOW_POLL) => {}
        }
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
