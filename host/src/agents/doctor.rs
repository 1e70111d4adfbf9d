//! `hookhost hook doctor AGENT` reads an agent's settings back: hookhost's entries in them
//! ([`entries`]) and what an entry's command runs ([`Invocation`]), as the agent's shell
//! would see it. The checks that need the machine (the program on `PATH`, the config, the
//! daemon, the events run through the entries) are the command's.

use super::install::{is_ours, runs_hookhost};
use super::invocation::HookCommand;
use super::{Agent, Event};
use serde_json::{Value, json};
use std::path::Path;

/// One of hookhost's entries in an agent's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub event: Event,
    /// The tools it is sent for (`None`: the agent's entries have no matcher).
    pub matcher: Option<String>,
    pub run: Run,
}

/// What the agent does for an entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Run {
    /// Runs this shell command.
    Command(String),
    /// Posts the event to this URL (Claude Code's `http` hooks).
    Url(String),
}

/// hookhost's entries in `text`, `agent`'s settings, in the order of [`Event::ALL`].
///
/// # Errors
///
/// When `text` is not what the agent reads (JSON; TOML for Codex).
pub fn entries(agent: Agent, text: &str) -> Result<Vec<Entry>, String> {
    let settings: Value = match agent {
        Agent::Codex => {
            toml::from_str(text).map_err(|e| format!("the settings are not TOML: {e}"))?
        }
        _ if text.trim().is_empty() => json!({}),
        _ => serde_json::from_str(text).map_err(|e| format!("the settings are not JSON: {e}"))?,
    };
    let route = format!("/hooks/{}/", agent.name());
    let mut found = Vec::new();
    for event in Event::ALL {
        let Some(list) = agent
            .event_name(event)
            .and_then(|name| settings.get("hooks")?.get(name)?.as_array())
        else {
            continue;
        };
        for entry in list.iter().filter(|entry| is_ours(agent, entry)) {
            let hooks = entry.get("hooks").and_then(Value::as_array);
            // Cursor's and Copilot's entries are the hook itself.
            let runs = hooks.map_or_else(|| vec![entry], |hooks| hooks.iter().collect());
            let run = runs.iter().find_map(|hook| {
                let command = ["command", "bash"]
                    .iter()
                    .find_map(|key| hook.get(*key).and_then(Value::as_str));
                match (command, hook.get("url").and_then(Value::as_str)) {
                    (Some(command), _) if runs_hookhost(agent, command) => {
                        Some(Run::Command(command.to_string()))
                    }
                    (_, Some(url)) if url.contains(&route) => Some(Run::Url(url.to_string())),
                    _ => None,
                }
            });
            if let Some(run) = run {
                found.push(Entry {
                    event,
                    matcher: entry
                        .get("matcher")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    run,
                });
            }
        }
    }
    Ok(found)
}

/// What an entry's command runs, its words as the agent's shell passes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// `NAME=value` words before the program (`HOOKHOST_URL`).
    pub env: Vec<(String, String)>,
    /// The program as written: a name looked up on `PATH`, or a path.
    pub program: String,
    /// The hook event its arguments name (up to the first shell operator: `||` starts
    /// the fallback `install` writes), as `hookhost` reads them.
    pub hook: HookCommand,
}

impl Invocation {
    /// The invocation `command` (an entry's) makes, with the agent's project variable
    /// (`$CLAUDE_PROJECT_DIR`) standing for `project` as the agent sets it; `None` when it
    /// is not a command line that runs `hookhost hook AGENT EVENT` in a form `hookhost`
    /// reads (see [`HookCommand::parse`]).
    pub fn of(agent: Agent, command: &str, project: &Path) -> Option<Invocation> {
        let words = shlex::split(command)?;
        let program_at = words.iter().position(|w| !w.contains('='))?;
        let end = words
            .iter()
            .position(|w| ["||", "&&", ";", "|", "&"].contains(&w.as_str()))
            .unwrap_or(words.len());
        let variable = super::install::project_variable(agent);
        let project = project.to_string_lossy();
        let expand = |word: &String| match variable {
            Some(name) => word
                .replace(&format!("${{{name}}}"), &project)
                .replace(&format!("${name}"), &project),
            None => word.clone(),
        };
        let words: Vec<String> = words.get(..end)?.iter().map(expand).collect();
        let args = words.get(program_at + 1..)?;
        let hook = HookCommand::parse(args).filter(|hook| hook.agent == agent)?;
        Some(Invocation {
            env: words[..program_at]
                .iter()
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            program: words[program_at].clone(),
            hook,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::install::{Target, Wrapped, merged};

    fn wrapped() -> Wrapped {
        Wrapped {
            tools: Some(vec!["Bash".into(), "bash".into()]),
            closed: vec!["Bash".into(), "bash".into()],
        }
    }

    /// What `install` writes reads back: every event's entry, its matcher, and the
    /// flags of its command, the project variable standing for the project.
    #[test]
    fn installed_entries_read_back() {
        let command = "hookhost --config \"$CLAUDE_PROJECT_DIR\"/'my hh.toml' --data /d hook \
                       claude-code --tenant t1";
        let target = Target { command, url: None };
        let text = merged(Agent::ClaudeCode, "", target, &wrapped(), false).unwrap();
        let found = entries(Agent::ClaudeCode, &text).unwrap();
        let events: Vec<Event> = found.iter().map(|e| e.event).collect();
        assert_eq!(events, Event::ALL);
        let pre = &found[0];
        assert_eq!(pre.matcher.as_deref(), Some("^(?:Bash|bash)$"));
        let Run::Command(line) = &pre.run else {
            panic!("{pre:?}")
        };
        let at = Invocation::of(Agent::ClaudeCode, line, "/p q".as_ref()).unwrap();
        assert_eq!(at.program, "hookhost");
        assert_eq!(at.hook.config.as_deref(), Some("/p q/my hh.toml".as_ref()));
        assert_eq!(at.hook.data.as_deref(), Some("/d".as_ref()));
        assert_eq!(at.hook.tenant, "t1");
        assert_eq!(
            at.hook.closed_tools,
            Some(vec!["Bash".to_string(), "bash".to_string()])
        );
        let end = HookCommand {
            event: Event::SessionEnd,
            closed_tools: None,
            ..at.hook.clone()
        };
        assert_eq!(
            end.args().join(" "),
            "--config /p q/my hh.toml --data /d hook claude-code session-end --tenant t1"
        );
        // A project whose path has a `=` in it, and another agent's command.
        assert!(Invocation::of(Agent::ClaudeCode, line, "/a=b".as_ref()).is_some());
        assert!(Invocation::of(Agent::Codex, line, "/p".as_ref()).is_none());
    }

    #[test]
    fn codex_entries_and_urls_read_back() {
        let target = Target {
            command: "/opt/hookhost hook codex",
            url: None,
        };
        let text = merged(Agent::Codex, "model = \"x\"\n", target, &wrapped(), false).unwrap();
        let found = entries(Agent::Codex, &text).unwrap();
        assert_eq!(found.len(), 4, "{found:?}");
        assert_eq!(found[0].event, Event::PreTool);

        let target = Target {
            command: "hookhost hook claude-code",
            url: Some("http://127.0.0.1:9/"),
        };
        let every = Wrapped::default();
        let text = merged(Agent::ClaudeCode, "", target, &every, false).unwrap();
        let found = entries(Agent::ClaudeCode, &text).unwrap();
        assert_eq!(
            found[1].run,
            Run::Url("http://127.0.0.1:9/hooks/claude-code/post-tool".into())
        );
        assert!(
            entries(Agent::ClaudeCode, "{\"hooks\": {}}")
                .unwrap()
                .is_empty()
        );
        assert!(entries(Agent::ClaudeCode, "[").is_err());
    }
}
