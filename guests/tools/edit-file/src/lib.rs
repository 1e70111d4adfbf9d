//! The `edit_file` tool: replaces an exact string in a file.
//!
//! `{"path", "old_string", "new_string", "replace_all"?}`. The match is exact (no patterns,
//! no whitespace folding). A missing match is refused, and so is one that occurs more than
//! once unless `replace_all` is true: an edit must say unambiguously what it changes.

use std::fs;
use tool_support::{
    Args, CallContext, Guest, ToolCall, ToolDescriptor, ToolResult, files, io_error, resolve_path,
};

struct EditFile;

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to edit: relative to /workspace, or absolute under a writable mount"},
    "old_string": {"type": "string", "description": "The exact text to replace; it must occur exactly once unless replace_all is true"},
    "new_string": {"type": "string", "description": "The text to put in its place"},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}"#;

impl Guest for EditFile {
    fn describe() -> ToolDescriptor {
        ToolDescriptor {
            name: "edit_file".into(),
            description: "Replace an exact string in a file. Refuses when the string is \
                          missing, or occurs more than once without replace_all."
                .into(),
            input_schema: SCHEMA.into(),
        }
    }

    fn execute(_ctx: CallContext, call: ToolCall) -> ToolResult {
        tool_support::from(edit(&call.arguments))
    }
}

fn edit(arguments: &str) -> Result<String, String> {
    let args = Args::parse("edit_file", arguments)?;
    let path = resolve_path(args.string("path", false)?);
    let old = args.string("old_string", false)?;
    let new = args.string("new_string", true)?;
    let all = args.flag("replace_all")?;
    let text = fs::read_to_string(&path).map_err(|e| io_error("edit_file", "read", &path, &e))?;
    let (edited, count) =
        replace(&text, old, new, all).map_err(|why| format!("edit_file: {path}: {why}"))?;
    files::write(&path, edited.as_bytes())
        .map_err(|e| io_error("edit_file", "write", &path, &e))?;
    let plural = if count == 1 { "" } else { "s" };
    Ok(format!("Edited {path}: {count} replacement{plural}"))
}

/// `text` with `old` replaced by `new`, and how many times; refuses a missing, an
/// ambiguous (unless `all`) or a no-op edit.
pub fn replace(text: &str, old: &str, new: &str, all: bool) -> Result<(String, usize), String> {
    if old == new {
        return Err("old_string and new_string are the same; nothing to change".into());
    }
    let count = text.matches(old).count();
    match count {
        0 => Err("old_string was not found; it must match the file exactly".into()),
        1 => Ok((text.replacen(old, new, 1), 1)),
        n if all => Ok((text.replace(old, new), n)),
        n => Err(format!(
            "old_string occurs {n} times; include more surrounding text to make it unique, \
             or set replace_all to replace every occurrence"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::replace;

    #[test]
    fn exact_unique_matches_only() {
        assert_eq!(
            replace("a b a", "b", "c", false).unwrap(),
            ("a c a".into(), 1)
        );
        assert!(
            replace("a b a", "a", "c", false)
                .unwrap_err()
                .contains("occurs 2 times")
        );
        assert_eq!(
            replace("a b a", "a", "c", true).unwrap(),
            ("c b c".into(), 2)
        );
        assert!(
            replace("a b a", "x", "c", false)
                .unwrap_err()
                .contains("not found")
        );
        assert!(replace("a", "a", "a", false).is_err());
    }
}

tool_support::export!(EditFile);
