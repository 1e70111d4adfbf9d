//! The `hookhost` commands, a module each: `main.rs` parses the command line and hands
//! each command to its module.

pub mod call;
pub mod component;
pub mod config;
pub mod doctor;
pub mod hook;
pub mod logging;
pub mod persistent;
pub mod serve;
pub mod session;

use anyhow::{Context, Result};
use hookhost::config::Plan;
use hookhost::{OneShot, Runtime};
use std::path::Path;

/// The runtime of a one-shot command (every command but `serve`), with `part` of the
/// config.
pub async fn start(plan: Plan, data: &Path, part: OneShot) -> Result<Runtime> {
    Runtime::new(plan.one_shot(part), data)
        .await
        .context("starting the runtime")
}

/// Refuses to work as root in a data directory another user owns: what root would make
/// there (sessions' directories, 0700) the owner — a service's user, a `DynamicUser` —
/// could no longer open, and the service would fail with `Permission denied`. Says how to
/// run the command as the owner instead.
pub fn refuse_root_in_others_data(data: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let Ok(meta) = std::fs::metadata(data) else {
        return Ok(()); // made by this command, as root's
    };
    let (uid, gid) = (meta.uid(), meta.gid());
    if uid == 0 {
        return Ok(());
    }
    anyhow::bail!(
        "the data directory {} belongs to uid {uid}, and this command runs as root: what it \
         made there, its owner (the service) could not open. Run it as the owner: \
         `setpriv --reuid={uid} --regid={gid} --clear-groups hookhost …` (or `sudo -u \
         '#{uid}' hookhost …`)",
        data.display()
    )
}
