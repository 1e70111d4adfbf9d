//! `hookhost hook install AGENT`: hookhost's entries in an agent's own hook settings,
//! merged with what is there. Installing twice changes nothing; `--uninstall` removes only
//! hookhost's entries (those whose command runs a program named `hookhost` with
//! `hook AGENT`), never the user's other hooks.

use super::{Agent, Event};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// Where the settings go.
#[derive(Debug, Clone)]
pub enum Scope {
    /// The project in this directory.
    Project(PathBuf),
    /// The user's own settings, in `home`.
    User { home: PathBuf },
}

/// The settings file of `agent` for `scope`.
///
/// # Errors
///
/// When the agent has no settings file for that scope here.
pub fn settings_file(agent: Agent, scope: &Scope) -> Result<PathBuf, String> {
    let (base, relative) = match scope {
        Scope::Project(dir) => (
            dir,
            match agent {
                Agent::ClaudeCode => ".claude/settings.json",
                Agent::Codex => ".codex/config.toml",
                Agent::Gemini => ".gemini/settings.json",
                Agent::Cursor => ".cursor/hooks.json",
                Agent::Copilot => ".github/hooks/hookhost.json",
            },
        ),
        Scope::User { home } => (
            home,
            match agent {
                Agent::ClaudeCode => ".claude/settings.json",
                Agent::Codex => ".codex/config.toml",
                Agent::Gemini => ".gemini/settings.json",
                Agent::Cursor => ".cursor/hooks.json",
                Agent::Copilot => {
                    return Err(
                        "Copilot CLI reads hooks from a repository's .github/hooks: \
                                install with --project"
                            .into(),
                    );
                }
            },
        ),
    };
    Ok(base.join(relative))
}

/// What hookhost's entries run.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A command line, to which each entry appends its event's name.
    Command(&'a str),
    /// A warm daemon (`serve --http`) at this URL (its base, or the MCP endpoint it
    /// announces), which the agent posts each event to itself (`BASE/hooks/AGENT/EVENT`),
    /// with `$HOOKHOST_TOKEN` as its bearer token. Only Claude Code has such hooks.
    Url(&'a str),
}

/// The settings text with hookhost's entries for `agent`, running `target`, or without
/// them when `uninstall`; `current` is what the file holds (empty when it does not exist).
///
/// # Errors
///
/// When `current` is not what the agent reads (not JSON, not an object), or the agent
/// cannot call a URL.
pub fn merged(
    agent: Agent,
    current: &str,
    target: Target,
    uninstall: bool,
) -> Result<String, String> {
    if matches!(target, Target::Url(_)) && agent != Agent::ClaudeCode {
        return Err(format!(
            "{} has no URL hooks: install the command form, which forwards to the daemon \
             when HOOKHOST_URL names it",
            agent.title()
        ));
    }
    if agent == Agent::Codex {
        let Target::Command(command) = target else {
            unreachable!("checked above")
        };
        return Ok(codex(current, command, uninstall));
    }
    let mut settings: Value = if current.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(current).map_err(|e| format!("the settings are not JSON: {e}"))?
    };
    let root = settings
        .as_object_mut()
        .ok_or("the settings are not a JSON object")?;
    if matches!(agent, Agent::Cursor | Agent::Copilot) {
        root.entry("version").or_insert(json!(1));
    }
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("`hooks` is not a JSON object")?;
    for event in Event::ALL {
        let Some(name) = agent.event_name(event) else {
            continue;
        };
        let list = hooks.entry(name).or_insert_with(|| json!([]));
        let entries = list
            .as_array_mut()
            .ok_or_else(|| format!("`hooks.{name}` is not a list"))?;
        entries.retain(|entry| !is_ours(agent, entry));
        if !uninstall {
            entries.push(entry(agent, event, target));
        }
        if entries.is_empty() {
            hooks.remove(name);
        }
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    Ok(serde_json::to_string_pretty(&settings).expect("JSON") + "\n")
}

/// One hook entry as `agent`'s settings spell it.
fn entry(agent: Agent, event: Event, target: Target) -> Value {
    let tool_event = event.is_tool();
    let command = match target {
        Target::Command(command) => format!("{command} {}", event.name()),
        Target::Url(url) => {
            let mut entry = json!({"hooks": [{
                "type": "http",
                "url": super::hook_url(url, agent, event),
                "headers": {"Authorization": "Bearer $HOOKHOST_TOKEN"},
                "allowedEnvVars": ["HOOKHOST_TOKEN"],
            }]});
            if tool_event {
                entry["matcher"] = "*".into();
            }
            return entry;
        }
    };
    match agent {
        Agent::ClaudeCode | Agent::Gemini | Agent::Codex => {
            let mut entry = Map::new();
            if tool_event {
                let every = if agent == Agent::ClaudeCode {
                    "*"
                } else {
                    ".*"
                };
                entry.insert("matcher".into(), every.into());
            }
            entry.insert(
                "hooks".into(),
                json!([{"type": "command", "command": command}]),
            );
            Value::Object(entry)
        }
        Agent::Cursor => json!({ "command": command }),
        Agent::Copilot => json!({"type": "command", "bash": command, "timeoutSec": 30}),
    }
}

/// Whether an entry is hookhost's: its command (or one of its commands) runs a program
/// named `hookhost` with `hook AGENT`, or its URL is a daemon's `/hooks/AGENT/`.
fn is_ours(agent: Agent, entry: &Value) -> bool {
    let mut commands: Vec<&str> = ["command", "bash"]
        .iter()
        .filter_map(|k| entry.get(*k).and_then(Value::as_str))
        .collect();
    let mut urls = Vec::new();
    if let Some(hooks) = entry.get("hooks").and_then(Value::as_array) {
        for hook in hooks {
            commands.extend(hook.get("command").and_then(Value::as_str));
            urls.extend(hook.get("url").and_then(Value::as_str));
        }
    }
    let route = format!("/hooks/{}/", agent.name());
    commands.iter().any(|c| runs_hookhost(agent, c)) || urls.iter().any(|u| u.contains(&route))
}

fn runs_hookhost(agent: Agent, command: &str) -> bool {
    let program = command
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_matches('\'');
    Path::new(program)
        .file_name()
        .is_some_and(|n| n == "hookhost")
        && command.contains(&format!(" hook {} ", agent.name()))
}

const CODEX_BEGIN: &str =
    "# hookhost: begin (`hookhost hook install codex` wrote this; `--uninstall` removes it)";
const CODEX_END: &str = "# hookhost: end";

/// Codex's `config.toml` with hookhost's block of hooks (between two marker comments, so
/// that the rest of the file, its comments included, stays as it is).
fn codex(current: &str, command: &str, uninstall: bool) -> String {
    let mut kept = String::new();
    let mut inside = false;
    for line in current.lines() {
        if line == CODEX_BEGIN {
            inside = true;
        } else if inside && line == CODEX_END {
            inside = false;
        } else if !inside {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    if uninstall {
        return kept;
    }
    let mut block = format!("{CODEX_BEGIN}\n");
    for event in Event::ALL {
        let Some(name) = Agent::Codex.event_name(event) else {
            continue;
        };
        let quoted = toml_string(&format!("{command} {}", event.name()));
        block.push_str(&format!("[[hooks.{name}]]\n"));
        if event.is_tool() {
            block.push_str("matcher = \".*\"\n");
        }
        block.push_str(&format!(
            "[[hooks.{name}.hooks]]\ntype = \"command\"\ncommand = {quoted}\n\n"
        ));
    }
    block.push_str(CODEX_END);
    block.push('\n');
    if !kept.is_empty() && !kept.ends_with("\n\n") {
        kept.push('\n');
    }
    kept + &block
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// `word` as one word of a POSIX shell command line.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "/usr/bin/hookhost --config /etc/hh.toml hook claude-code";

    #[test]
    fn installing_keeps_the_users_hooks_and_twice_is_once() {
        let mine = r#"{"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}]}, "env": {}}"#;
        let once = merged(Agent::ClaudeCode, mine, Target::Command(COMMAND), false).unwrap();
        // The user's keys keep their order.
        let model = once.find("\"model\"").unwrap();
        assert!(
            model < once.find("\"hooks\"").unwrap()
                && once.find("\"hooks\"") < once.find("\"env\""),
            "{once}"
        );
        let twice = merged(Agent::ClaudeCode, &once, Target::Command(COMMAND), false).unwrap();
        assert_eq!(once, twice);
        let settings: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(settings["model"], "x");
        let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "./check.sh");
        assert_eq!(pre[1]["hooks"][0]["command"], format!("{COMMAND} pre-tool"));
        let removed: Value = serde_json::from_str(
            &merged(Agent::ClaudeCode, &once, Target::Command(COMMAND), true).unwrap(),
        )
        .unwrap();
        assert_eq!(removed, serde_json::from_str::<Value>(mine).unwrap());
    }

    #[test]
    fn a_url_replaces_the_command_and_uninstalls_alike() {
        let command = merged(Agent::ClaudeCode, "", Target::Command(COMMAND), false).unwrap();
        let url = Target::Url("http://127.0.0.1:8080/");
        let daemon = merged(Agent::ClaudeCode, &command, url, false).unwrap();
        let settings: Value = serde_json::from_str(&daemon).unwrap();
        let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 1, "{daemon}");
        assert_eq!(
            pre[0]["hooks"][0]["url"],
            "http://127.0.0.1:8080/hooks/claude-code/pre-tool"
        );
        assert_eq!(
            merged(Agent::ClaudeCode, &daemon, url, true).unwrap(),
            "{}\n"
        );
        assert!(merged(Agent::Gemini, "", url, false).is_err());
    }

    #[test]
    fn codex_gets_a_marked_block_that_uninstall_takes_out() {
        let mine = "model = \"o3\" # my model\n";
        let command = "/usr/bin/hookhost hook codex";
        let once = codex(mine, command, false);
        assert_eq!(codex(&once, command, false), once);
        let parsed: toml::Table = once.parse().unwrap();
        assert_eq!(
            parsed["hooks"]["PreToolUse"][0]["hooks"][0]["command"].as_str(),
            Some("/usr/bin/hookhost hook codex pre-tool")
        );
        assert_eq!(codex(&once, command, true).trim_end(), mine.trim_end());
    }

    #[test]
    fn words_with_spaces_are_quoted() {
        assert_eq!(shell_word("/a b/it's"), r"'/a b/it'\''s'");
        assert_eq!(shell_word("/usr/bin/hookhost"), "/usr/bin/hookhost");
    }
}
