//! `hookhost serve`: MCP on stdio or Streamable HTTP (see [`hookhost::mcp`]).

use anyhow::{Context, Result};
use hookhost::config::Plan;
use hookhost::{Runtime, TenantId};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `hookhost serve`'s arguments.
#[derive(clap::Args)]
pub struct ServeArgs {
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
    /// Answer coding agents' hooks on a socket in the data directory (DATA/run/hooks.sock,
    /// yours alone), which `hookhost hook` forwards to: the chain stays warm across the
    /// agent's hook processes. Alone, hookhost serves only that (no MCP, no tools).
    #[arg(long)]
    hooks: bool,
}

/// Serves until the client leaves (stdio) or a signal (HTTP); `config` is read again on
/// SIGHUP.
pub async fn serve(
    args: ServeArgs,
    plan: Plan,
    data: &Path,
    config: hookhost::mcp::ConfigSource,
) -> Result<ExitCode> {
    let ServeArgs {
        http,
        metrics,
        tenant,
        workdir,
        keep_session,
        idle,
        unauthenticated_bash,
        hooks,
    } = args;
    if hooks && http.is_none() {
        return serve_hooks(plan.hooks_only(), data).await;
    }
    let (tls, shutdown_grace) = (plan.tls.clone(), plan.shutdown_grace);
    let admin_listen = plan.admin_listen.clone();
    let mut runtime = Runtime::new(plan, data)
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
    if hooks {
        let (listener, path) = hookhost::agents::daemon::listen(data).await?;
        let stop = hookhost::mcp::shutdown_signal()?;
        tokio::spawn(hookhost::agents::daemon::serve(
            runtime.clone(),
            listener,
            path,
            stop,
        ));
    }
    let options = hookhost::mcp::ServeOptions {
        workdir,
        keep_session,
        config,
        shutdown_grace,
    };
    match http {
        Some(addr) => {
            let http = hookhost::mcp::HttpOptions {
                addr,
                idle,
                unauthenticated_bash,
                tls,
                admin_listen,
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

/// `serve --hooks` alone: the chain, answering hooks on the data directory's socket until
/// SIGTERM or SIGINT, then the answers under way.
async fn serve_hooks(plan: Plan, data: &Path) -> Result<ExitCode> {
    let mut runtime = Runtime::new(plan, data)
        .await
        .context("starting the runtime")?;
    runtime
        .sessions_mut()
        .set_owner(hookhost::sessions::Owner::Http(
            hookhost::sessions::Server::this(),
        ));
    let (listener, path) = hookhost::agents::daemon::listen(data).await?;
    let stop = hookhost::mcp::shutdown_signal()?;
    tracing::info!(socket = %path.display(), "answering agents' hooks");
    hookhost::agents::daemon::serve(std::sync::Arc::new(runtime), listener, path, stop).await;
    Ok(ExitCode::SUCCESS)
}
