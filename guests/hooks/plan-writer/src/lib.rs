//! The `plan-writer` hook: after each successful `todo_write`, writes the session's todo
//! list as a markdown plan to its granted `/plans` mount — one file per session, named
//! `<UTC timestamp of the first write>-<session id[:8]>.md` and rewritten in place:
//!
//! ```text
//! # Execution Plan
//!
//! session: <id>
//! updated: <RFC 3339 time>
//!
//! ## Task List
//!
//! - [ ] pending   - [>] in_progress   - [x] completed   - [-] cancelled
//! ```
//!
//! Settings: `tool` (default `todo_write`), `dir` (default `/plans`). The result passes
//! through unchanged; a plan that cannot be written fails the hook with the reason, so the
//! operator's `on_failure` policy decides.

use hookhost_hook::{
    After, CallContext, CallOutcome, Describe, Hook, HookDescription, ToolCall, ToolResult, files,
    settings,
};
use serde_json::Value;
use std::fs;
use std::time::SystemTime;

/// The tool whose calls carry the todo list, unless the setting `tool` says otherwise.
const DEFAULT_TOOL: &str = "todo_write";
/// Where plans go unless the setting `dir` says otherwise.
const DEFAULT_DIR: &str = "/plans";

struct PlanWriter;

impl Hook for PlanWriter {
    fn after_execute(
        ctx: CallContext,
        call: ToolCall,
        _outcome: CallOutcome,
        result: ToolResult,
    ) -> After {
        if call.name != settings::text_or("tool", DEFAULT_TOOL) || result.is_error {
            return After::Keep;
        }
        let Some(todos) = parse_todos(&result.output) else {
            eprintln!("plan-writer: the {} result is not a todo list", call.name);
            return After::Keep;
        };
        match write_plan(
            &settings::text_or("dir", DEFAULT_DIR),
            &ctx.session_id,
            &call.id,
            &todos,
        ) {
            Ok(()) => After::Keep,
            Err(e) => After::Fail(format!("plan-writer: cannot write the plan: {e}")),
        }
    }
}

/// `(status, content)` of each item of a `{"todos": [...]}` result.
pub fn parse_todos(output: &str) -> Option<Vec<(String, String)>> {
    let value: Value = serde_json::from_str(output).ok()?;
    value
        .get("todos")?
        .as_array()?
        .iter()
        .map(|item| {
            Some((
                item.get("status")?.as_str()?.to_string(),
                item.get("content")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

/// The markdown of a plan.
pub fn render(session: &str, updated: &str, todos: &[(String, String)]) -> String {
    let mut md =
        format!("# Execution Plan\n\nsession: {session}\nupdated: {updated}\n\n## Task List\n\n");
    for (status, content) in todos {
        let marker = match status.as_str() {
            "in_progress" => "[>]",
            "completed" => "[x]",
            "cancelled" => "[-]",
            _ => "[ ]",
        };
        // One item, one line: a newline in the content would start a new list item.
        let content = content.replace(['\r', '\n'], " ");
        md.push_str(&format!("- {marker} {content}\n"));
    }
    md
}

/// The first eight characters of the session id, made safe as part of a file name.
pub fn short_id(session: &str) -> String {
    session
        .chars()
        .take(8)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn write_plan(
    dir: &str,
    session: &str,
    call_id: &str,
    todos: &[(String, String)],
) -> std::io::Result<()> {
    let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let path = plan_path(dir, session, call_id, &now)?;
    // Write beside it and rename, so a reader never sees half a plan. The temporary name
    // is the call's, so concurrent calls of one session do not write over each other's.
    let partial = format!("{path}.{}.partial", encode(call_id));
    files::write(&partial, render(session, &now, todos).as_bytes())?;
    fs::rename(&partial, &path)
}

/// The session's plan file. Its name is decided once, by the first call to get there: a
/// pointer file `.SESSION.plan` (the whole session id, encoded) names it, created
/// exclusively (a hard link of a finished temporary file), so concurrent first calls agree
/// on one plan and later calls find it without listing the directory.
fn plan_path(dir: &str, session: &str, call_id: &str, now: &str) -> std::io::Result<String> {
    use std::io::ErrorKind;
    let pointer = format!("{dir}/.{}.plan", encode(session));
    let read = |pointer: &str| -> std::io::Result<Option<String>> {
        match fs::read_to_string(pointer) {
            Ok(name) => Ok(Some(format!("{dir}/{}", name.trim()))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    };
    if let Some(path) = read(&pointer)? {
        return Ok(path);
    }
    // A plan written before pointers existed.
    let name = match existing_plan(dir, session)? {
        Some(path) => path.rsplit('/').next().unwrap_or_default().to_string(),
        None => {
            let stamp: String = now.chars().filter(|c| !matches!(c, '-' | ':')).collect();
            format!("{stamp}-{}.md", short_id(session))
        }
    };
    let temp = format!("{pointer}.{}.partial", encode(call_id));
    files::write(&temp, name.as_bytes())?;
    let linked = fs::hard_link(&temp, &pointer);
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(format!("{dir}/{name}")),
        // Another call of this session decided first: its name it is.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            read(&pointer)?.ok_or_else(|| std::io::Error::other("the plan pointer vanished"))
        }
        Err(e) => Err(e),
    }
}

/// `session` as one file name: `[A-Za-z0-9_-]` kept, every other byte `%XX`, so distinct
/// ids never share a name.
pub fn encode(session: &str) -> String {
    session
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// This session's plan file, if one was written: its name ends in the short id and its
/// `session:` line names the whole id (two sessions may share a short id). A directory
/// that cannot be listed is an error, not "no plan yet".
fn existing_plan(dir: &str, session: &str) -> std::io::Result<Option<String>> {
    let suffix = format!("-{}.md", short_id(session));
    let marker = format!("\nsession: {session}\n");
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        // An entry that vanished while listing (another session's rename) is not ours.
        let Ok(entry) = entry else { continue };
        if let Ok(name) = entry.file_name().into_string()
            && name.ends_with(&suffix)
        {
            names.push(name);
        }
    }
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| format!("{dir}/{name}"))
        .find(|path| fs::read_to_string(path).is_ok_and(|text| text.contains(&marker))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_layout() {
        let todos = [
            ("pending", "a"),
            ("in_progress", "b"),
            ("completed", "c"),
            ("cancelled", "d\ne"),
        ]
        .map(|(s, c)| (s.to_string(), c.to_string()));
        assert_eq!(
            render("s1", "2026-01-01T00:00:00Z", &todos),
            "# Execution Plan\n\nsession: s1\nupdated: 2026-01-01T00:00:00Z\n\n## Task List\n\n\
             - [ ] a\n- [>] b\n- [x] c\n- [-] d e\n"
        );
    }

    #[test]
    fn session_ids_encode_injectively() {
        assert_eq!(encode("a/b"), "a%2Fb");
        assert_eq!(encode("a_b"), "a_b");
        assert_ne!(encode("a.b"), encode("a_b"));
    }

    #[test]
    fn short_ids_are_file_name_safe() {
        assert_eq!(short_id("0b5c1d2e-aaaa"), "0b5c1d2e");
        assert_eq!(short_id("../../x"), "______x");
    }
}

impl Describe for PlanWriter {
    fn describe() -> HookDescription {
        HookDescription::new(
            "Writes the session's todo list as a markdown plan after each successful todo_write",
        )
        .text(
            "tool",
            Some(DEFAULT_TOOL),
            "the tool whose calls carry the todo list",
        )
        .text(
            "dir",
            Some(DEFAULT_DIR),
            "where plans go, in a granted mount",
        )
    }
}

hookhost_hook::export_described!(PlanWriter);
