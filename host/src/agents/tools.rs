//! The agents' tools in hookhost's terms: their canonical names, and their responses as
//! tool results.

use super::Agent;
use crate::abi::ToolResult;
use crate::limits::MAX_HOOK_INPUT_BYTES;
use serde_json::{Value, json};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// hookhost's name for each agent's tool, where it has one: a layer's `tools` pattern
/// matches the canonical name or the agent's own. One row per tool an agent has:
/// (agent, its tool's name, hookhost's name).
pub const ALIASES: &[(Agent, &str, &str)] = &[
    (Agent::ClaudeCode, "Bash", "bash"),
    (Agent::ClaudeCode, "Read", "read_file"),
    (Agent::ClaudeCode, "Write", "write_file"),
    (Agent::ClaudeCode, "Edit", "edit_file"),
    (Agent::ClaudeCode, "MultiEdit", "edit_file"),
    (Agent::ClaudeCode, "TodoWrite", "todo_write"),
    (Agent::ClaudeCode, "TaskCreate", "todo_write"),
    (Agent::ClaudeCode, "TaskUpdate", "todo_write"),
    (Agent::Codex, "Bash", "bash"),
    (Agent::Codex, "shell", "bash"),
    (Agent::Codex, "apply_patch", "edit_file"),
    (Agent::Codex, "update_plan", "todo_write"),
    (Agent::Gemini, "run_shell_command", "bash"),
    (Agent::Gemini, "read_file", "read_file"),
    (Agent::Gemini, "write_file", "write_file"),
    (Agent::Gemini, "replace", "edit_file"),
    (Agent::Gemini, "write_todos", "todo_write"),
    (Agent::Cursor, "Shell", "bash"),
    (Agent::Cursor, "Read", "read_file"),
    (Agent::Cursor, "Write", "write_file"),
    (Agent::Cursor, "StrReplace", "edit_file"),
    (Agent::Cursor, "TodoWrite", "todo_write"),
    (Agent::Copilot, "bash", "bash"),
    (Agent::Copilot, "view", "read_file"),
    (Agent::Copilot, "create", "write_file"),
    (Agent::Copilot, "edit", "edit_file"),
];

/// hookhost's name for `agent`'s tool `tool`, if it has one.
pub fn canonical(agent: Agent, tool: &str) -> Option<&'static str> {
    ALIASES
        .iter()
        .find(|(a, name, _)| *a == agent && *name == tool)
        .map(|(_, _, canonical)| *canonical)
}

/// An agent's tool response as the result hooks see (`canonical`: hookhost's name of the
/// tool, `input`: its input). The shapes read:
/// - text (Codex's responses): the output;
/// - `{stdout, stderr, interrupted, …}` (Claude Code's Bash): stdout, then `[stderr]` and
///   stderr as hookhost's own `bash` shows it; an error when interrupted;
/// - `{llmContent, returnDisplay}` (Gemini): `llmContent` (text, or its parts' texts); for
///   its shell, the command's output alone (see [`gemini_shell`]);
/// - `{resultType, textResultForLlm}` (Copilot): the text; an error unless `success`;
/// - MCP content (`[{type: "text", text}]`, or `{content: […], isError}`): the texts;
/// - for a todo tool, whatever its response: `{"todos": [{content, status}]}` from its
///   input, the shape hookhost's `todo_write` returns (so plan-writer writes the plan);
/// - anything else: its JSON text.
pub fn result(canonical: Option<&str>, input: &Value, response: &Value) -> ToolResult {
    if canonical == Some("todo_write")
        && let Some(todos) = todos(input)
    {
        return ToolResult {
            output: json!({ "todos": todos }).to_string(),
            is_error: false,
            media_type: None,
        };
    }
    let (output, is_error) = match response {
        Value::String(text) => (text.clone(), false),
        Value::Object(o) if o.contains_key("stdout") => {
            let text = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or_default();
            // Claude Code keeps an output over 30,000 characters in a file of its own and
            // sends only its start: the whole is in that file.
            let mut output = o
                .get("persistedOutputPath")
                .and_then(Value::as_str)
                .and_then(|path| read_bounded(Path::new(path)))
                .unwrap_or_else(|| text("stdout").to_string());
            if !text("stderr").is_empty() {
                if !output.is_empty() && !output.ends_with('\n') {
                    output.push('\n');
                }
                output.push_str("[stderr]\n");
                output.push_str(text("stderr"));
            }
            let interrupted = o.get("interrupted").and_then(Value::as_bool) == Some(true);
            (output, interrupted)
        }
        Value::Object(o) if o.contains_key("llmContent") && canonical == Some("bash") => {
            gemini_shell(&texts(&o["llmContent"]))
        }
        Value::Object(o) if o.contains_key("llmContent") => (texts(&o["llmContent"]), false),
        Value::Object(o) if o.contains_key("textResultForLlm") => (
            texts(&o["textResultForLlm"]),
            o.get("resultType").and_then(Value::as_str) != Some("success"),
        ),
        Value::Object(o) if o.get("content").is_some_and(Value::is_array) => (
            texts(&o["content"]),
            o.get("isError").and_then(Value::as_bool) == Some(true),
        ),
        Value::Array(_) => (texts(response), false),
        Value::Null => (String::new(), false),
        other => (other.to_string(), false),
    };
    ToolResult {
        output,
        is_error,
        media_type: None,
    }
}

/// What the command printed, of what Gemini CLI's shell tool tells the model (0.x, as in
/// its `shell.ts`): `<untrusted_context>` around `Output: OUTPUT` (`(empty)` for none),
/// then a line for each of `Error:`, `Exit Code:`, `Signal:`, `Background PIDs:`,
/// `Process Group PGID:` that applies; an error when it names an exit code or a signal. A
/// text of another shape (a cancelled command) is kept whole.
pub fn gemini_shell(content: &str) -> (String, bool) {
    const TRAILERS: [&str; 5] = [
        "Process Group PGID: ",
        "Background PIDs: ",
        "Signal: ",
        "Exit Code: ",
        "Error: ",
    ];
    let unwrapped = content
        .strip_prefix("<untrusted_context>\n")
        .and_then(|c| c.strip_suffix("\n</untrusted_context>"))
        .map(|c| c.replace("&lt;/untrusted_context&gt;", "</untrusted_context>"))
        .unwrap_or_else(|| content.to_string());
    let Some(mut output) = unwrapped.strip_prefix("Output: ") else {
        return (content.to_string(), false);
    };
    let mut failed = false;
    // From the end, each section at most once and in Gemini's order.
    for trailer in TRAILERS {
        if let Some((rest, last)) = output.rsplit_once('\n')
            && last.starts_with(trailer)
        {
            failed |= matches!(trailer, "Exit Code: " | "Signal: ");
            output = rest;
        }
    }
    let output = if output == "(empty)" { "" } else { output };
    (output.to_string(), failed)
}

/// The text of the file at `path`, if it can be read and holds at most
/// [`MAX_HOOK_INPUT_BYTES`].
fn read_bounded(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_HOOK_INPUT_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    (text.len() as u64 <= MAX_HOOK_INPUT_BYTES).then_some(text)
}

/// Claude Code's task list, which its `TaskCreate` and `TaskUpdate` change one task at a
/// time (they replace `TodoWrite` from 2.1): kept per session in `dir` (`tasks.json`,
/// under a lock, since the agent may run tools at once), and returned whole, as
/// `{content, status}` items, after applying the call `tool` made with `input`, which
/// returned `response`.
pub fn claude_tasks(
    dir: &Path,
    tool: &str,
    input: &Value,
    response: &Value,
) -> std::io::Result<Vec<Value>> {
    std::fs::create_dir_all(dir)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("tasks.json"))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    let mut text = String::new();
    (&file).read_to_string(&mut text)?;
    let mut tasks: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    match tool {
        "TaskCreate" => {
            let id = response
                .get("task")
                .and_then(|t| field(t, "id"))
                .unwrap_or_else(|| (tasks.len() + 1).to_string());
            let subject = field(input, "subject").unwrap_or_default();
            tasks.push(json!({"id": id, "content": subject, "status": "pending"}));
        }
        "TaskUpdate" => {
            let id = field(input, "taskId").unwrap_or_default();
            if field(input, "status").as_deref() == Some("deleted") {
                tasks.retain(|t| field(t, "id").as_deref() != Some(&id));
            } else if let Some(task) = tasks
                .iter_mut()
                .find(|t| field(t, "id").as_deref() == Some(&id))
            {
                for (from, to) in [("subject", "content"), ("status", "status")] {
                    if let Some(value) = field(input, from) {
                        task[to] = value.into();
                    }
                }
            }
        }
        _ => {}
    }
    let written = serde_json::to_vec(&tasks).map_err(std::io::Error::other)?;
    (&file).seek(std::io::SeekFrom::Start(0))?;
    file.set_len(0)?;
    (&file).write_all(&written)?;
    Ok(tasks
        .iter()
        .map(|t| json!({"content": t["content"], "status": t["status"]}))
        .collect())
}

/// Text, or the texts of a list of parts (`{text}` or `{type: "text", text}`).
fn texts(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or(p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// The todo items of a todo tool's input, as `{content, status}`: Claude Code's and
/// Cursor's `todos[].content`, Gemini's `todos[].description`, Codex's `plan[].step`.
fn todos(input: &Value) -> Option<Vec<Value>> {
    let items = input
        .get("todos")
        .or_else(|| input.get("plan"))?
        .as_array()?;
    Some(
        items
            .iter()
            .filter_map(|item| {
                let content = ["content", "description", "step"]
                    .iter()
                    .find_map(|k| item.get(*k).and_then(Value::as_str))?;
                let status = item
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("pending");
                Some(json!({"content": content, "status": status}))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_bash_keeps_stderr_apart() {
        let r = result(
            Some("bash"),
            &json!({}),
            &json!({"stdout": "out", "stderr": "err", "interrupted": false, "isImage": false}),
        );
        assert_eq!(r.output, "out\n[stderr]\nerr");
        assert!(!r.is_error);
    }

    #[test]
    fn geminis_shell_output_is_the_commands_alone() {
        let said = "<untrusted_context>\nOutput: 1\n2\nExit Code: 3 is a line of it\nExit Code: 1\nProcess Group PGID: 42\n</untrusted_context>";
        assert_eq!(
            gemini_shell(said),
            ("1\n2\nExit Code: 3 is a line of it".to_string(), true)
        );
        let quiet =
            "<untrusted_context>\nOutput: (empty)\nProcess Group PGID: 7\n</untrusted_context>";
        assert_eq!(gemini_shell(quiet), (String::new(), false));
        let escaped =
            "<untrusted_context>\nOutput: a &lt;/untrusted_context&gt; b\n</untrusted_context>";
        assert_eq!(gemini_shell(escaped).0, "a </untrusted_context> b");
        let cancelled = "Command was cancelled by user before it could complete.";
        assert_eq!(gemini_shell(cancelled), (cancelled.to_string(), false));
    }

    #[test]
    fn every_agents_todo_tool_becomes_todo_writes_result() {
        for input in [
            json!({"todos": [{"content": "a", "status": "pending", "activeForm": "A"}]}),
            json!({"todos": [{"description": "a", "status": "pending"}]}),
            json!({"plan": [{"step": "a", "status": "pending"}]}),
        ] {
            let r = result(Some("todo_write"), &input, &Value::Null);
            assert_eq!(
                r.output,
                r#"{"todos":[{"content":"a","status":"pending"}]}"#
            );
        }
    }
}
