//! `hookhost session …`: the sessions of a data directory, opened without a runtime —
//! no engine, no component, no upstream (see [`Sessions::at`]).

use anyhow::{Context, Result};
use hookhost::config::Plan;
use hookhost::persistent::OnConflict;
use hookhost::sessions::{SessionError, Sessions, Tenants};
use hookhost::trace::TraceSettings;
use hookhost::{SessionId, TenantId};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum SessionCommand {
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
    /// Print a session's trace: one JSON event per line, in order (see the book's
    /// "Observability").
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
    /// Delete a session and every session-scoped directory of it, after publishing its
    /// persistent directories (a conflict keeps the session).
    Delete {
        id: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Drop its persistent directories' changes instead of publishing them.
        #[arg(long)]
        discard: bool,
    },
    /// Publish a session's persistent directories now: each all or nothing, a conflict
    /// naming its files. Prints what each published.
    Commit {
        id: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Settle files changed both in the store and by the session this once: `ours`
        /// publishes the session's version, `theirs` keeps the store's [default: each
        /// directory's `on_conflict`].
        #[arg(long)]
        resolve: Option<Resolve>,
    },
    /// Delete idle sessions, and session directories that have no session.
    Gc {
        /// Delete sessions idle for longer than this (e.g. 30m, 12h, 7d) [default: only
        /// the sessions their agents ended, once idle for `[agents] keep_artifacts`, 7d,
        /// and directories that have no session].
        #[arg(long, value_parser = humantime::parse_duration)]
        idle: Option<std::time::Duration>,
    },
}

/// How `session commit --resolve` settles a conflict.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Resolve {
    Ours,
    Theirs,
}

/// Runs `command` on the sessions under `data`; through a runtime of only the store
/// components of persistent directories when the config has any (a commit, or a delete
/// that commits, calls them), or when the command commits persistent directories (the
/// runtime traces the commit in the session's trace, as a server's would).
pub async fn run(command: SessionCommand, plan: Plan, data: &Path) -> Result<()> {
    let stores = plan
        .mounts
        .iter()
        .any(|(_, m)| m.persistent.as_ref().is_some_and(|p| p.store.is_some()));
    let persistent = plan.mounts.iter().any(|(_, m)| m.persistent.is_some());
    let commits = matches!(
        command,
        SessionCommand::Delete { .. } | SessionCommand::Commit { .. }
    );
    if stores || (persistent && commits) {
        let (trace, keep) = (plan.trace.clone(), plan.keep_artifacts);
        let runtime = super::start(plan, data, hookhost::OneShot::Stores).await?;
        let sessions = runtime.sessions();
        return session_command(sessions, Some(&runtime), &trace, keep, command).await;
    }
    let sessions = Sessions::at(
        data,
        plan.session_store.as_ref(),
        plan.mounts,
        Tenants::new(plan.tenants, plan.serve_workdir),
    )
    .await
    .context("opening the sessions")?;
    session_command(&sessions, None, &plan.trace, plan.keep_artifacts, command).await
}

/// `command` on `sessions`; commits through `runtime`, traced, when there is one.
async fn session_command(
    sessions: &Sessions,
    runtime: Option<&hookhost::Runtime>,
    trace: &TraceSettings,
    keep_artifacts: std::time::Duration,
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
        SessionCommand::Delete {
            id: i,
            tenant: t,
            discard,
        } => {
            let (t, i) = (tenant(t)?, id(i)?);
            let ended = match (runtime, discard) {
                (Some(runtime), _) => runtime.end_session(&t, &i, discard).await,
                (None, true) => sessions.discard(&t, &i).await,
                (None, false) => sessions.delete(&t, &i).await,
            };
            ended.map_err(|e| settle_hint(e, &t, &i, !discard))?;
        }
        SessionCommand::Commit {
            id: i,
            tenant: t,
            resolve,
        } => {
            let (t, i) = (tenant(t)?, id(i)?);
            let session = sessions.resolve(&sessions.record(&t, &i).await?)?;
            let resolve = resolve.map(|r| match r {
                Resolve::Ours => OnConflict::Ours,
                Resolve::Theirs => OnConflict::Theirs,
            });
            let committed = match runtime {
                Some(runtime) => runtime.commit(&session, None, resolve).await,
                None => sessions.commit_resolving(&session, resolve, None).await,
            };
            let committed = committed.map_err(|e| settle_hint(e, &t, &i, false))?;
            for (mount, report) in committed {
                println!(
                    "{mount}: {} created, {} updated, {} deleted, {} left as the store has them ({} bytes)",
                    report.created.len(),
                    report.updated.len(),
                    report.deleted.len(),
                    report.kept_theirs.len(),
                    report.bytes
                );
            }
        }
        SessionCommand::Gc { idle } => {
            let before = |age| {
                std::time::SystemTime::now()
                    .checked_sub(age)
                    .unwrap_or(std::time::UNIX_EPOCH)
            };
            let report = sessions
                .gc(idle.map(before), before(keep_artifacts))
                .await?;
            println!(
                "deleted {} idle sessions; removed {} orphaned session directories and {} stale temporary files",
                report.sessions, report.orphans, report.partials
            );
        }
    }
    Ok(())
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

/// A failed commit, with how to settle it when a conflict stopped it: the session is kept
/// until its changes are published or dropped.
fn settle_hint(
    e: SessionError,
    tenant: &TenantId,
    id: &SessionId,
    deleting: bool,
) -> anyhow::Error {
    let Some((mount, _)) = e.conflict() else {
        return e.into();
    };
    let tenant = match tenant.as_str() {
        "default" => String::new(),
        other => format!(" --tenant {other}"),
    };
    let mut how = format!(
        "{e}. The session is kept: `hookhost session commit{tenant} --resolve ours {id}` \
         publishes its version of each file of {mount}, `--resolve theirs` keeps the store's"
    );
    if deleting {
        how.push_str(&format!(
            "; `hookhost session delete{tenant} --discard {id}` drops its changes"
        ));
    }
    anyhow::anyhow!(how)
}
