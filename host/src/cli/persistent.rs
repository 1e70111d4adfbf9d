//! `hookhost persistent`: the versions of a persistent directory whose store component
//! keeps them (such as `builtin:snapshots`), listed and restored.

use anyhow::{Context, Result};
use hookhost::OneShot;
use hookhost::config::Plan;
use hookhost::ids::TenantId;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

#[derive(clap::Subcommand)]
pub enum PersistentCommand {
    /// List the versions a persistent directory's store keeps, oldest first: id, when it
    /// was made, how many files it held, what made it.
    History {
        /// The directory's virtual path (`/persistent/notes`).
        path: String,
        #[arg(long, default_value = "default")]
        tenant: String,
    },
    /// Make a past version of a persistent directory its newest (the versions after it are
    /// kept); prints the new version. Sessions that loaded it before find the files it
    /// changed in conflict at their next commit.
    Restore {
        /// The directory's virtual path (`/persistent/notes`).
        path: String,
        /// The version to restore, as `history` lists it.
        version: String,
        #[arg(long, default_value = "default")]
        tenant: String,
    },
}

/// Runs `command` on the persistent directories under `data`.
pub async fn run(command: PersistentCommand, plan: Plan, data: &Path) -> Result<()> {
    let runtime = super::start(plan, data, OneShot::Stores).await?;
    let (path, tenant) = match &command {
        PersistentCommand::History { path, tenant }
        | PersistentCommand::Restore { path, tenant, .. } => (path, tenant),
    };
    let tenant = TenantId::new(tenant.clone()).context("--tenant")?;
    let store = runtime.store(path).with_context(|| {
        format!("{path} is not a persistent directory kept by a store component (`store = …`)")
    })?;
    let sessions = runtime.sessions();
    let outside = sessions.outside_sessions(&tenant)?;
    let mount = outside
        .mounts()
        .iter()
        .find(|m| &m.virtual_path == path)
        .with_context(|| format!("{path} is not a mount"))?;
    // With no tenant declared any id names a tenant of its own: one that never committed
    // here has no history, which is said rather than made (the lock would make its tree).
    if let Some(kept) = mount.persistent.as_ref().filter(|p| !p.backing.exists()) {
        anyhow::bail!(
            "tenant \"{tenant}\" has nothing kept in {path}: {} does not exist (no session of \
             it committed there)",
            kept.backing.display()
        );
    }
    let tenants = runtime.tenants();
    let _lock = sessions.lock_backing(mount).await?;
    match command {
        PersistentCommand::History { .. } => {
            for version in store.history(mount, &outside.tenant, &tenants).await? {
                let made = UNIX_EPOCH + Duration::from_millis(version.made_ms);
                println!(
                    "{}\t{}\t{} files\t{}",
                    version.id,
                    humantime::format_rfc3339_seconds(made),
                    version.files,
                    version.summary
                );
            }
        }
        PersistentCommand::Restore { version, .. } => {
            println!(
                "{}",
                store
                    .restore(mount, &version, &outside.tenant, &tenants)
                    .await?
            );
        }
    }
    Ok(())
}
