//! What the built-in tools share: the `tool` world's bindings (so each tool is a few lines
//! around its own logic), JSON argument parsing with messages written for the model, and
//! the rule for relative paths.

wit_bindgen::generate!({
    path: "../../../wit/hooks@0.2.0",
    world: "tool",
    generate_all,
    pub_export_macro: true,
    default_bindings_module: "tool_support",
});

pub use exports::harness::hooks::tool_provider::Guest;
pub use harness::hooks::types::{CallContext, ToolCall, ToolDescriptor, ToolResult};
/// Writing files without a thread hop per write: tools write through it, not `std::fs`.
pub use hookhost_fs as files;

use serde_json::{Map, Value};

/// A tool's arguments, parsed; every accessor's error is the message the model sees,
/// prefixed by the tool's name.
pub struct Args {
    tool: &'static str,
    map: Map<String, Value>,
}

impl Args {
    /// Parses `arguments`, which must be a JSON object.
    pub fn parse(tool: &'static str, arguments: &str) -> Result<Args, String> {
        match serde_json::from_str(arguments) {
            Ok(Value::Object(map)) => Ok(Args { tool, map }),
            Ok(_) => Err(format!("{tool}: arguments must be a JSON object")),
            Err(e) => Err(format!("{tool}: arguments are not JSON: {e}")),
        }
    }

    /// The raw value of `key`, if present and not null.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A required string (may be empty only if `allow_empty`).
    pub fn string(&self, key: &str, allow_empty: bool) -> Result<&str, String> {
        match self.value(key) {
            Some(Value::String(s)) if allow_empty || !s.is_empty() => Ok(s),
            _ => Err(format!(
                "{}: `{key}` ({}string) is required",
                self.tool,
                if allow_empty { "a " } else { "a non-empty " }
            )),
        }
    }

    /// An optional non-negative integer.
    pub fn uint(&self, key: &str) -> Result<Option<u64>, String> {
        match self.value(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("{}: `{key}` must be a non-negative integer", self.tool)),
        }
    }

    /// An optional boolean, `false` when absent.
    pub fn flag(&self, key: &str) -> Result<bool, String> {
        match self.value(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("{}: `{key}` must be true or false", self.tool)),
        }
    }
}

/// The path a tool opens: absolute paths as given (they name a mount such as
/// `/artifacts`), relative ones inside `/workspace`.
pub fn resolve_path(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/workspace/{path}")
    }
}

/// A failed file operation as the model should read it: `TOOL: cannot ACTION PATH: why`,
/// where `why` is words (never a WASI error number), and a path in a mount not granted to
/// this tool says so (a granted mount's root always exists: it is preopened).
pub fn io_error(tool: &str, action: &str, path: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    // A mount is one name, or two under `/persistent/`.
    let names = if path.starts_with("/persistent/") {
        2
    } else {
        1
    };
    if let Some(mount) = path.strip_prefix('/').map(|p| {
        let names: Vec<&str> = p.split('/').take(names).collect();
        format!("/{}", names.join("/"))
    }) && std::fs::metadata(&mount).is_err()
    {
        return format!("{tool}: cannot {action} {path}: {mount} is not a mount this tool may use");
    }
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && !(meta.is_file() || meta.is_dir() || meta.is_symlink())
    {
        return format!(
            "{tool}: cannot {action} {path}: it is not a regular file (a FIFO, socket or device), which tools do not open"
        );
    }
    let why = match e.kind() {
        ErrorKind::NotFound => "no such file or directory".to_string(),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
            "permission denied (the mount may be read-only for this tool)".to_string()
        }
        ErrorKind::AlreadyExists => "it already exists".to_string(),
        ErrorKind::NotADirectory => "a part of the path is not a directory".to_string(),
        ErrorKind::IsADirectory => "it is a directory".to_string(),
        ErrorKind::DirectoryNotEmpty => "the directory is not empty".to_string(),
        ErrorKind::InvalidInput | ErrorKind::InvalidFilename => {
            "the path is not allowed (outside the mount, or through a symlink)".to_string()
        }
        ErrorKind::InvalidData => "it is not valid UTF-8 text".to_string(),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => "no space left".to_string(),
        _ => {
            // std's text with its "(os error N)" suffix removed: N is a WASI number.
            let text = e.to_string();
            text.split(" (os error")
                .next()
                .unwrap_or(&text)
                .to_lowercase()
        }
    };
    format!("{tool}: cannot {action} {path}: {why}")
}

/// A plain-text result.
pub fn text(output: impl Into<String>) -> ToolResult {
    ToolResult {
        output: output.into(),
        is_error: false,
        media_type: None,
    }
}

/// An error result.
pub fn error(output: impl Into<String>) -> ToolResult {
    ToolResult {
        output: output.into(),
        is_error: true,
        media_type: None,
    }
}

/// A result from `Ok(text)` or `Err(message)`.
pub fn from(outcome: Result<String, String>) -> ToolResult {
    outcome.map_or_else(error, text)
}

/// The operator's setting `key` for this tool, from `wasi:config/store`.
pub fn setting(key: &str) -> Option<String> {
    wasi::config::store::get(key).ok().flatten()
}
