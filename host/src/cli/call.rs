//! `hookhost call` and `hookhost tools`: one tool call through the chain, from the
//! command line; the tools a config serves.

use super::start;
use anyhow::{Context, Result};
use hookhost::config::Plan;
use hookhost::{OneShot, SessionId, TenantId};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `hookhost call`'s arguments.
#[derive(clap::Args)]
pub struct CallArgs {
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
}

/// Calls the tool in a session (a new one unless `--session`) and prints its output; exit
/// 1 when it is an error.
pub async fn call(args: CallArgs, plan: Plan, data: &Path) -> Result<ExitCode> {
    let CallArgs {
        session,
        tenant,
        json,
        workdir,
        tool,
        arguments,
    } = args;
    let tenant = TenantId::new(tenant).context("--tenant")?;
    let session_id = session
        .map(SessionId::new)
        .transpose()
        .context("--session")?;
    let plan = plan.for_call(&tool);
    let kept: Vec<String> = plan
        .hooks
        .iter()
        .filter(|h| h.instance == hookhost::chain::InstanceMode::PerSession)
        .map(|h| h.component.name.clone())
        .collect();
    let runtime = start(plan, data, OneShot::Calls).await?;
    if session_id.is_some() && !kept.is_empty() {
        hookhost::announce::note(&format!(
            "note: {} kept per session start afresh in each `hookhost call`; \
             a session's instance (and what it holds in memory) lives in a serving \
             process, `hookhost serve`",
            kept.join(", ")
        ));
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
        hookhost::announce::note(&format!("session {}", session.id));
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

/// Prints the tools the config serves: name and description.
pub async fn tools(plan: Plan, data: &Path, json: bool) -> Result<ExitCode> {
    let runtime = start(plan, data, OneShot::Calls).await?;
    for tool in runtime.tools() {
        if json {
            let schema = serde_json::from_str::<serde_json::Value>(&tool.input_schema)
                .unwrap_or(serde_json::Value::String(tool.input_schema.clone()));
            let line = serde_json::json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": schema,
            });
            println!("{line}");
        } else {
            println!("{}\t{}", tool.name, tool.description);
        }
    }
    Ok(ExitCode::SUCCESS)
}
