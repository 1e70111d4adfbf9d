//! The `todo_write` tool: keeps the session's todo list and returns it whole.
//!
//! `{"todos": [{"id", "content", "status"}], "merge"?: bool}`. Without `merge` the list
//! given replaces the session's list; with it, items update the list by `id` and new ids are
//! appended. `status` is `pending`, `in_progress`, `completed` or `cancelled`. The list is
//! kept in the session's private mount (`/session/todos.json`, setting `file`), and the
//! result is `{"todos": [...]}`, the whole current list, as JSON.

use serde_json::{Value, json};
use std::fs;
use tool_support::{Args, CallContext, Guest, ToolCall, ToolDescriptor, ToolResult, files};

/// Where the list is kept unless the setting `file` says otherwise.
pub const DEFAULT_FILE: &str = "/session/todos.json";
/// The statuses an item may have.
pub const STATUSES: &[&str] = &["pending", "in_progress", "completed", "cancelled"];

struct TodoWrite;

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "todos": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "string"},
          "content": {"type": "string"},
          "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "cancelled"]}
        },
        "required": ["id", "content", "status"]
      }
    },
    "merge": {"type": "boolean", "description": "Update items by id instead of replacing the list (default false)"}
  },
  "required": ["todos"],
  "additionalProperties": false
}"#;

/// One item of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Todo {
    pub id: String,
    pub content: String,
    pub status: String,
}

impl Guest for TodoWrite {
    fn describe() -> ToolDescriptor {
        ToolDescriptor {
            name: "todo_write".into(),
            description: "Write the session's todo list (the plan): each item has an id, \
                          content and a status (pending, in_progress, completed, \
                          cancelled). Returns the whole list."
                .into(),
            input_schema: SCHEMA.into(),
        }
    }

    fn execute(_ctx: CallContext, call: ToolCall) -> ToolResult {
        match write(&call.arguments, &call.id) {
            Ok(list) => ToolResult {
                output: list,
                is_error: false,
                media_type: Some("application/json".into()),
            },
            Err(message) => tool_support::error(message),
        }
    }
}

fn write(arguments: &str, call_id: &str) -> Result<String, String> {
    let args = Args::parse("todo_write", arguments)?;
    let given = match args.value("todos") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_item(i, item))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("todo_write: `todos` (an array of items) is required".into()),
    };
    if let Some(dup) = given
        .iter()
        .enumerate()
        .find(|(i, t)| given[..*i].iter().any(|u| u.id == t.id))
    {
        return Err(format!("todo_write: id {:?} appears twice", dup.1.id));
    }
    let file = tool_support::setting("file").unwrap_or_else(|| DEFAULT_FILE.to_string());
    let list = if args.flag("merge")? {
        merge(load(&file)?, given)
    } else {
        given
    };
    let text = to_json(&list).to_string();
    // Beside it (under this call's name), then renamed: a list is replaced whole, never
    // left half-written, and concurrent calls each replace it whole.
    let unique: String = call_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(32)
        .collect();
    let partial = format!("{file}.{unique}.partial");
    files::write(&partial, text.as_bytes())
        .and_then(|()| fs::rename(&partial, &file))
        .map_err(|e| tool_support::io_error("todo_write", "save the list to", &file, &e))?;
    Ok(text)
}

fn parse_item(i: usize, item: &Value) -> Result<Todo, String> {
    let field = |key: &str| -> Result<String, String> {
        match item.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(Value::Number(n)) if key == "id" => Ok(n.to_string()),
            _ => Err(format!(
                "todo_write: todos[{i}].{key} (a non-empty string) is required"
            )),
        }
    };
    let status = field("status")?;
    if !STATUSES.contains(&status.as_str()) {
        return Err(format!(
            "todo_write: todos[{i}].status {status:?} is not one of {}",
            STATUSES.join(", ")
        ));
    }
    Ok(Todo {
        id: field("id")?,
        content: field("content")?,
        status,
    })
}

/// The saved list; empty when none was saved yet.
fn load(file: &str) -> Result<Vec<Todo>, String> {
    let text = match fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(tool_support::io_error(
                "todo_write",
                "read the saved list",
                file,
                &e,
            ));
        }
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("todo_write: the saved list is corrupt: {e}"))?;
    match value.get("todos") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_item(i, v))
            .collect(),
        _ => Err("todo_write: the saved list is corrupt".into()),
    }
}

/// `list` updated by `given`: same ids replaced in place, new ids appended in order.
pub fn merge(mut list: Vec<Todo>, given: Vec<Todo>) -> Vec<Todo> {
    for todo in given {
        match list.iter_mut().find(|t| t.id == todo.id) {
            Some(existing) => *existing = todo,
            None => list.push(todo),
        }
    }
    list
}

fn to_json(list: &[Todo]) -> Value {
    let items: Vec<Value> = list
        .iter()
        .map(|t| json!({"id": t.id, "content": t.content, "status": t.status}))
        .collect();
    json!({ "todos": items })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(id: &str, status: &str) -> Todo {
        Todo {
            id: id.into(),
            content: format!("task {id}"),
            status: status.into(),
        }
    }

    #[test]
    fn merge_updates_by_id_and_appends() {
        let merged = merge(
            vec![todo("1", "pending"), todo("2", "pending")],
            vec![todo("2", "completed"), todo("3", "pending")],
        );
        assert_eq!(
            merged,
            vec![
                todo("1", "pending"),
                todo("2", "completed"),
                todo("3", "pending")
            ]
        );
    }

    #[test]
    fn bad_status_is_refused() {
        let e = parse_item(0, &json!({"id": "1", "content": "x", "status": "done"})).unwrap_err();
        assert!(e.contains("\"done\" is not one of pending, in_progress, completed, cancelled"));
    }
}

tool_support::export!(TodoWrite);
