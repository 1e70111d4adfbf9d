//! The `read_file` tool: reads a file from the mounts granted to it, a page at a time.
//!
//! Arguments: `{"path": string, "offset"?: bytes (default 0), "limit"?: bytes (default
//! 4096)}`. A relative path is taken inside `/workspace`. Reading past the end is not an
//! error: the output says so. When more of the file remains, the page ends with a line
//! naming the offset to continue from. Pages end on a whole UTF-8 character, so the pages
//! of a text file put together are the file, byte for byte.
//!
//! The sandbox, not this code, is what keeps reads inside the grants: paths outside the
//! preopened mounts, `..` above a mount and symlinks leading out are refused by WASI.

mod page;

pub use page::{DEFAULT_LIMIT, MAX_LIMIT, Request, page_text};

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use tool_support::{CallContext, Guest, ToolCall, ToolDescriptor, ToolResult};

struct ReadFile;

fn schema() -> String {
    format!(
        r#"{{
  "type": "object",
  "properties": {{
    "path": {{"type": "string", "description": "File to read: an absolute path such as /artifacts/tool-results/bash/<id>.txt, or a path relative to /workspace"}},
    "offset": {{"type": "integer", "minimum": 0, "description": "Byte offset to start at (default 0)"}},
    "limit": {{"type": "integer", "minimum": 1, "maximum": {MAX_LIMIT}, "description": "Bytes to read at most (default {DEFAULT_LIMIT})"}}
  }},
  "required": ["path"],
  "additionalProperties": false
}}"#
    )
}

impl Guest for ReadFile {
    fn describe() -> ToolDescriptor {
        ToolDescriptor {
            name: "read_file".into(),
            description: "Read a file a page at a time, by byte offset and limit. Use it to \
                          page through outputs that were offloaded to /artifacts."
                .into(),
            input_schema: schema(),
        }
    }

    fn execute(_ctx: CallContext, call: ToolCall) -> ToolResult {
        tool_support::from(Request::parse(&call.arguments).and_then(|r| read(&r)))
    }
}

fn read(req: &Request) -> Result<String, String> {
    let path = &req.path;
    let fail = |what: &str, e: std::io::Error| tool_support::io_error("read_file", what, path, &e);
    let mut file = File::open(path).map_err(|e| fail("open", e))?;
    let meta = file.metadata().map_err(|e| fail("stat", e))?;
    if meta.is_dir() {
        return Err(format!("read_file: {path} is a directory"));
    }
    let size = meta.len();
    let mut buf = Vec::new();
    if req.offset < size {
        file.seek(SeekFrom::Start(req.offset))
            .map_err(|e| fail("seek in", e))?;
        file.take(req.limit)
            .read_to_end(&mut buf)
            .map_err(|e| fail("read", e))?;
    }
    Ok(page_text(req.offset, size, &buf))
}

tool_support::export!(ReadFile);
