//! The `write_file` tool: `{"path", "content"}` writes `content` to `path` (relative paths
//! are inside `/workspace`), creating parent directories and replacing an existing file.
//! Only mounts granted read-write accept writes; the sandbox refuses the rest.

use std::fs;
use tool_support::{
    Args, CallContext, Guest, ToolCall, ToolDescriptor, ToolResult, files, io_error, resolve_path,
};

struct WriteFile;

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to write: relative to /workspace, or absolute under a writable mount"},
    "content": {"type": "string", "description": "The whole new content of the file"}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}"#;

impl Guest for WriteFile {
    fn describe() -> ToolDescriptor {
        ToolDescriptor {
            name: "write_file".into(),
            description: "Write a file (creating it, or replacing its content).".into(),
            input_schema: SCHEMA.into(),
        }
    }

    fn execute(_ctx: CallContext, call: ToolCall) -> ToolResult {
        tool_support::from(write(&call.arguments))
    }
}

fn write(arguments: &str) -> Result<String, String> {
    let args = Args::parse("write_file", arguments)?;
    let path = resolve_path(args.string("path", false)?);
    let content = args.string("content", true)?;
    if let Some((dir, _)) = path.rsplit_once('/').filter(|(dir, _)| !dir.is_empty()) {
        fs::create_dir_all(dir).map_err(|e| io_error("write_file", "create", dir, &e))?;
    }
    files::write(&path, content.as_bytes())
        .map_err(|e| io_error("write_file", "write", &path, &e))?;
    Ok(format!("Wrote {} bytes to {path}", content.len()))
}

tool_support::export!(WriteFile);
