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
