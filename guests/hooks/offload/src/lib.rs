//! The `offload` hook: when a tool's output is too large for the model's context window,
//! write it whole to a file under the granted `/artifacts` mount and hand the model a
//! reference instead — the file's path, its size, how to page it with `read_file`, and a
//! preview (plus a structure summary when the output is JSON).
//!
//! Settings (from `wasi:config/store`; all optional):
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `threshold` | offload outputs longer than this many characters | 10000 |
//! | `preview_lines` | lines of the output shown in the reference | 20 |
//! | `exclude_tools` | tools never offloaded: a JSON array or a comma-separated list | `read_file`, `write_file`, `edit_file` |
//! | `dir` | where files go, as the model sees it | `/artifacts/tool-results` |
//!
//! A call that reads a file it wrote (a page of an offloaded output, by the path its
//! reference gave) is never offloaded: see [`Settings::reads_own_file`].
//!
//! Fail-open: when the file cannot be written, the original output passes through. The
//! file appears whole or not at all (written beside it, then renamed into place).

mod reference;

pub use reference::{Offloaded, Settings, Shape};

use reference::{DEFAULT_DIR, DEFAULT_EXCLUDED, DEFAULT_PREVIEW_LINES, DEFAULT_THRESHOLD};

use hookhost_hook::{
    After, CallContext, CallOutcome, Describe, Hook, HookDescription, ToolCall, ToolResult, files,
    settings,
};
use std::fs;

struct Offload;

impl Hook for Offload {
    fn after_execute(
        _ctx: CallContext,
        call: ToolCall,
        _outcome: CallOutcome,
        result: ToolResult,
    ) -> After {
        let settings = Settings::from_lookup(settings::text);
        let Some(shape) = settings.offloads(&call.name, &result.output) else {
            return After::Keep;
        };
        if settings.reads_own_file(&call.arguments, |path| fs::metadata(path).is_ok()) {
            return After::Keep;
        }
        let offloaded = Offloaded::new(&settings, &call.name, &call.id, &result.output);
        match write_exclusive(&offloaded.path, &result.output) {
            Ok(()) => After::Replace(ToolResult {
                output: offloaded.reference(&settings, &result.output, shape),
                is_error: result.is_error,
                media_type: None,
            }),
            Err(e) => {
                eprintln!("offload: could not write {}: {e}", offloaded.path);
                After::Keep
            }
        }
    }
}

impl Describe for Offload {
    fn describe() -> HookDescription {
        HookDescription::new(
            "Writes a tool output too large for the context window to a file and hands the model its path, size and a preview",
        )
        .count(
            "threshold",
            DEFAULT_THRESHOLD as u64,
            "offload outputs longer than this many characters",
        )
        .count(
            "preview_lines",
            DEFAULT_PREVIEW_LINES as u64,
            "lines of the output shown in the reference",
        )
        .names(
            "exclude_tools",
            DEFAULT_EXCLUDED,
            "tools whose output is never offloaded",
        )
        .text(
            "dir",
            Some(DEFAULT_DIR),
            "where offloaded files go, as the model sees the path",
        )
    }
}

/// Publishes `contents` at `path` whole or not at all: writes a temporary file beside it
/// (`.NAME.partial`, exclusive), then renames it into place — the rename is what makes
/// the reference true, so a reader never finds a torn file, even if this hook is stopped
/// mid-write (the host's `session gc` removes stale temporaries). Never replaces a file.
///
/// Modes come from the host: it runs guests under a umask of 077, so the directory is
/// created 0700 and the file 0600.
fn write_exclusive(path: &str, contents: &str) -> std::io::Result<()> {
    let (dir, name) = path.rsplit_once('/').unwrap_or((".", path));
    fs::create_dir_all(dir)?;
    if fs::symlink_metadata(path).is_ok() {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    let partial = format!("{dir}/.{name}.partial");
    // One write on the host's calling thread, however large (see `hookhost_hook::files`).
    files::write_new(&partial, contents.as_bytes())?;
    let renamed = fs::rename(&partial, path);
    if renamed.is_err() {
        let _ = fs::remove_file(&partial);
    }
    renamed
}

hookhost_hook::export_described!(Offload);
