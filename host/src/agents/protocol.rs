//! Each agent's command-hook protocol: what it writes on a hook's stdin, and what it reads
//! from its stdout and exit code. The versions and sources followed are in
//! `docs/agents.md`; every field name of the agents' protocols is in this file.

use super::{Agent, Event};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// What an agent's hook input says, in hookhost's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    /// The agent's session (conversation) id, or one derived from what identifies it.
    pub session: String,
    /// The directory the agent works in: the session's working directory.
    pub cwd: Option<PathBuf>,
    /// The tool call, for tool events.
    pub tool: Option<AgentCall>,
    /// Why the session ended (`reason`, at its end: `clear` when the conversation is gone).
    pub reason: Option<String>,
}

/// One tool call as the agent describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentCall {
    /// The agent's name for the tool (`Bash`, `run_shell_command`, …).
    pub name: String,
    /// Its input object.
    pub input: Value,
    /// The agent's id of the call; derived from the session, tool and input when the agent
    /// gives none, so that its pre-tool and post-tool events name the same call.
    pub id: String,
    /// What the tool returned (post-tool events).
    pub response: Option<Value>,
}

/// What hookhost tells the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing to say: the agent goes on as it would without hookhost.
    Pass,
    /// Pre-tool: the call must not run; the reason is shown to the model.
    Deny { reason: String },
    /// Pre-tool: the call runs with this input instead.
    Rewrite { input: Value },
    /// Post-tool: the model gets this instead of the tool's output.
    Replace { output: String },
}

/// The answer, as the agent reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub stdout: String,
    pub exit: u8,
    /// One line for the agent's log (and the user's terminal), if any.
    pub stderr: Option<String>,
}

impl Answer {
    /// Writes the answer as the agent reads it (stdout, a line on stderr) and gives the
    /// exit code.
    pub fn emit(&self) -> std::process::ExitCode {
        use std::io::Write;
        if let Some(line) = &self.stderr {
            eprintln!("{line}");
        }
        if !self.stdout.is_empty() {
            let mut out = std::io::stdout().lock();
            // The agent gone before reading its answer: nothing is left to tell it.
            let _ = writeln!(out, "{}", self.stdout);
        }
        std::process::ExitCode::from(self.exit)
    }
}

/// How an agent's settings let a rewrite through (see [`answer`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// A rewritten call is also approved (`permissionDecision: "allow"`), for agents that
    /// apply a rewrite only with an approval. Off by default: hookhost never widens what
    /// the agent would otherwise allow.
    pub rewrite_allows: bool,
}

/// Reads the agent's stdin JSON for `event`.
///
/// # Errors
///
/// A one-line description of what is missing or malformed.
pub fn parse(agent: Agent, event: Event, stdin: &[u8]) -> Result<HookInput, String> {
    let value: Value =
        serde_json::from_slice(stdin).map_err(|e| format!("the hook input is not JSON: {e}"))?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let cwd = match agent {
        Agent::Cursor => value
            .get("workspace_roots")
            .and_then(|r| r.get(0))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| text("cwd")),
        _ => text("cwd"),
    }
    .map(PathBuf::from);
    let session = match agent {
        Agent::Cursor => text("conversation_id").or_else(|| text("session_id")),
        Agent::Copilot => text("sessionId"),
        _ => text("session_id"),
    };
    // Copilot CLI names no session: its sessions are those of a working directory.
    let session = match (session, &cwd) {
        (Some(id), _) => id,
        (None, Some(cwd)) if agent == Agent::Copilot => {
            format!("{}-{}", agent.name(), short_hash(&cwd.to_string_lossy()))
        }
        _ => return Err(format!("the hook input has no {}", agent.session_field())),
    };
    let tool = match event {
        Event::PreTool | Event::PostTool | Event::PostToolFailure => {
            Some(call(agent, event, &value, &session)?)
        }
        Event::SessionStart | Event::SessionEnd | Event::TurnEnd => None,
    };
    Ok(HookInput {
        session,
        cwd,
        tool,
        reason: text("reason"),
    })
}

fn call(agent: Agent, event: Event, value: &Value, session: &str) -> Result<AgentCall, String> {
    let (name_key, input_key, id_key, response_key) = tool_keys(agent);
    let name = value
        .get(name_key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the hook input has no {name_key}"))?
        .to_string();
    let input = match value.get(input_key) {
        // Copilot CLI sends the arguments as JSON text.
        Some(Value::String(text)) => serde_json::from_str(text)
            .map_err(|e| format!("{input_key} is not a JSON object: {e}"))?,
        Some(input @ Value::Object(_)) => input.clone(),
        Some(Value::Null) | None => json!({}),
        Some(_) => return Err(format!("{input_key} is not an object")),
    };
    let response = match event {
        // Claude Code's `PostToolUseFailure`: the failure as text.
        Event::PostToolFailure => Some(value.get("error").cloned().unwrap_or(Value::Null)),
        Event::PostTool => Some(
            value
                .get(response_key)
                .or_else(|| value.get("tool_response"))
                .cloned()
                .unwrap_or(Value::Null),
        ),
        _ => None,
    };
    let id = value
        .get(id_key)
        .or_else(|| value.get("tool_call_id"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| short_hash(&format!("{session}\n{name}\n{input}")));
    Ok(AgentCall {
        name,
        input,
        id,
        response,
    })
}

/// The keys of a tool call's name, input, id and response in `agent`'s hook input.
fn tool_keys(agent: Agent) -> (&'static str, &'static str, &'static str, &'static str) {
    match agent {
        Agent::Copilot => ("toolName", "toolArgs", "toolCallId", "toolResult"),
        Agent::Cursor => ("tool_name", "tool_input", "tool_use_id", "tool_output"),
        _ => ("tool_name", "tool_input", "tool_use_id", "tool_response"),
    }
}

/// Hook input for `event` as `agent` writes it, of a call of its shell tool running
/// `command` whose output was `output` (for `hook doctor`): in `session`, working in `cwd`;
/// a session's end says the conversation is gone (`reason: "clear"`).
pub fn synthetic(
    agent: Agent,
    event: Event,
    session: &str,
    cwd: &std::path::Path,
    command: &str,
    output: &str,
) -> Value {
    let mut input = json!({});
    let (session_key, cwd_key) = match agent {
        Agent::Cursor => ("conversation_id", "workspace_roots"),
        Agent::Copilot => ("sessionId", "cwd"),
        _ => ("session_id", "cwd"),
    };
    input[session_key] = session.into();
    let cwd = cwd.to_string_lossy();
    input[cwd_key] = match agent {
        Agent::Cursor => json!([cwd]),
        _ => json!(cwd),
    };
    // Copilot CLI names no event in its input.
    if let (Some(name), false) = (agent.event_name(event), agent == Agent::Copilot) {
        input["hook_event_name"] = name.into();
    }
    if event == Event::SessionEnd {
        input["reason"] = "clear".into();
    }
    if !event.is_tool() {
        return input;
    }
    let (name_key, input_key, id_key, response_key) = tool_keys(agent);
    let shell = super::tools::ALIASES
        .iter()
        .find(|(a, _, canonical)| *a == agent && *canonical == "bash")
        .map_or("bash", |(_, name, _)| *name);
    let arguments = json!({ "command": command });
    input[name_key] = shell.into();
    input[input_key] = match agent {
        Agent::Copilot => arguments.to_string().into(),
        _ => arguments,
    };
    input[id_key] = format!("{session}-call").into();
    if event.is_post_tool() {
        input[response_key] = match agent {
            Agent::ClaudeCode => json!({"stdout": output, "stderr": "", "interrupted": false}),
            Agent::Gemini => json!({"llmContent": output, "returnDisplay": output}),
            Agent::Copilot => json!({"resultType": "success", "textResultForLlm": output}),
            Agent::Codex | Agent::Cursor => output.into(),
        };
    }
    input
}

/// 16 hex digits of the SHA-256 of `text`.
pub fn short_hash(text: &str) -> String {
    crate::ids::hex(&Sha256::digest(text.as_bytes())[..8])
}

/// The answer to `event` for a call of the agent's tool `tool` (its own name).
pub fn answer(
    agent: Agent,
    event: Event,
    tool: &str,
    decision: Decision,
    options: Options,
) -> Answer {
    let stdout = match (event, decision) {
        (_, Decision::Pass) => pass(agent),
        (Event::PreTool, Decision::Deny { reason }) => deny(agent, &reason),
        (Event::PreTool, Decision::Rewrite { input }) => match rewrite(agent, input, options) {
            Some(answer) => answer,
            None => deny(
                agent,
                &format!(
                    "hookhost's chain rewrote this call's input, which {} applies only with an \
                     approval hookhost does not give unless told to (`--rewrite-allows`); the \
                     call was refused instead",
                    agent.title()
                ),
            ),
        },
        (Event::PostTool, Decision::Replace { output }) => replace(agent, tool, output),
        (Event::PostToolFailure, Decision::Replace { output }) => json!({"hookSpecificOutput": {
            "hookEventName": "PostToolUseFailure",
            "additionalContext": output,
        }})
        .to_string(),
        // Nothing else is asked of an event: say nothing.
        _ => pass(agent),
    };
    Answer {
        stdout,
        exit: 0,
        stderr: None,
    }
}

/// What hookhost says when it has nothing to say; Cursor wants JSON on every path.
fn pass(agent: Agent) -> String {
    match agent {
        Agent::Cursor => "{}".into(),
        _ => String::new(),
    }
}

fn deny(agent: Agent, reason: &str) -> String {
    let answer = match agent {
        Agent::ClaudeCode | Agent::Codex => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }}),
        Agent::Gemini => json!({"decision": "deny", "reason": reason}),
        Agent::Cursor => {
            json!({"permission": "deny", "user_message": reason, "agent_message": reason})
        }
        Agent::Copilot => json!({"permissionDecision": "deny", "permissionDecisionReason": reason}),
    };
    answer.to_string()
}

/// A rewrite in the agent's terms; `None` where the agent would apply it only with an
/// approval the operator did not allow, or cannot apply one at all.
fn rewrite(agent: Agent, input: Value, options: Options) -> Option<String> {
    let answer = match agent {
        Agent::ClaudeCode => {
            let mut out = json!({"hookEventName": "PreToolUse", "updatedInput": input});
            if options.rewrite_allows {
                out["permissionDecision"] = "allow".into();
            }
            json!({ "hookSpecificOutput": out })
        }
        // Codex applies `updatedInput` only with `permissionDecision: "allow"`.
        Agent::Codex if options.rewrite_allows => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": input,
        }}),
        Agent::Codex => return None,
        Agent::Gemini => {
            json!({"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": input}})
        }
        Agent::Cursor => {
            let mut out = json!({ "updated_input": input });
            if options.rewrite_allows {
                out["permission"] = "allow".into();
            }
            out
        }
        // Copilot CLI's preToolUse reads only a denial.
        Agent::Copilot => return None,
    };
    Some(answer.to_string())
}

/// Whether what a hook answers to `event` for the agent's tool `tool` takes the place of
/// the tool's output (see [`replace`]); where it does not, the model gets the output and
/// the hook's text beside it.
pub fn replaces(agent: Agent, event: Event, tool: &str) -> bool {
    match (agent, event) {
        (_, Event::PostToolFailure) => false,
        (Agent::ClaudeCode, _) => tool == "Bash" || tool.starts_with("mcp__"),
        (Agent::Codex | Agent::Gemini, _) => true,
        (Agent::Cursor | Agent::Copilot, _) => false,
    }
}

/// The output replaced, as far as the agent lets a hook replace it: Claude Code replaces
/// Bash's and MCP tools' output (in their own shapes), and takes other text as added
/// context; Codex and Gemini show a blocking reason instead of the output; Cursor takes
/// added context; Copilot CLI ignores what a postToolUse hook says.
fn replace(agent: Agent, tool: &str, output: String) -> String {
    let answer = match agent {
        Agent::ClaudeCode if tool == "Bash" => json!({"hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "updatedToolOutput": {"stdout": output, "stderr": "", "interrupted": false, "isImage": false},
        }}),
        Agent::ClaudeCode if tool.starts_with("mcp__") => json!({"hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "updatedMCPToolOutput": [{"type": "text", "text": output}],
        }}),
        Agent::ClaudeCode => json!({"hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": output,
        }}),
        Agent::Codex => json!({"decision": "block", "reason": output}),
        Agent::Gemini => json!({"decision": "deny", "reason": output}),
        Agent::Cursor => json!({ "additional_context": output }),
        Agent::Copilot => return String::new(),
    };
    answer.to_string()
}

/// The answer to input hookhost could not read: the agent's non-blocking error (the call
/// goes on as without hookhost), with `why` as one line on stderr.
pub fn unreadable(agent: Agent, why: &str) -> Answer {
    Answer {
        stdout: pass(agent),
        exit: 1,
        stderr: Some(format!("hookhost hook {}: {why}", agent.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_an_id_gets_the_same_one_in_both_events() {
        let pre = br#"{"timestamp": 1, "cwd": "/p", "toolName": "bash", "toolArgs": "{\"command\":\"ls\"}"}"#;
        let post = br#"{"timestamp": 2, "cwd": "/p", "toolName": "bash", "toolArgs": "{\"command\":\"ls\"}",
            "toolResult": {"resultType": "success", "textResultForLlm": "a"}}"#;
        let pre = parse(Agent::Copilot, Event::PreTool, pre).unwrap();
        let post = parse(Agent::Copilot, Event::PostTool, post).unwrap();
        assert_eq!(pre.session, post.session);
        assert_eq!(pre.tool.unwrap().id, post.tool.unwrap().id);
    }

    #[test]
    fn synthetic_input_reads_back_as_the_call_it_describes() {
        for agent in [
            Agent::ClaudeCode,
            Agent::Codex,
            Agent::Gemini,
            Agent::Cursor,
            Agent::Copilot,
        ] {
            for event in [Event::PreTool, Event::PostTool, Event::SessionEnd] {
                let input = synthetic(agent, event, "s1", "/p".as_ref(), "echo hi", "hi\n");
                let read = parse(agent, event, input.to_string().as_bytes()).unwrap();
                assert_eq!(read.session, "s1", "{agent:?} {event:?}");
                assert_eq!(read.cwd.as_deref(), Some("/p".as_ref()));
                if event == Event::SessionEnd {
                    assert_eq!(read.reason.as_deref(), Some("clear"));
                    continue;
                }
                let call = read.tool.unwrap();
                assert_eq!(
                    super::super::tools::canonical(agent, &call.name),
                    Some("bash")
                );
                assert_eq!(call.input["command"], "echo hi");
                assert_eq!(call.response.is_some(), event == Event::PostTool);
            }
        }
    }

    #[test]
    fn no_rewrite_becomes_an_approval_unless_allowed() {
        let input = json!({"command": "ls"});
        let plain = answer(
            Agent::ClaudeCode,
            Event::PreTool,
            "Bash",
            Decision::Rewrite {
                input: input.clone(),
            },
            Options::default(),
        );
        assert!(!plain.stdout.contains("allow"), "{}", plain.stdout);
        let codex = answer(
            Agent::Codex,
            Event::PreTool,
            "Bash",
            Decision::Rewrite { input },
            Options::default(),
        );
        assert!(codex.stdout.contains("\"deny\""), "{}", codex.stdout);
    }
}
