//! `hookhost hook install AGENT`: hookhost's entries in an agent's own hook settings,
//! merged with what is there. Installing twice changes nothing; `--uninstall` removes only
//! hookhost's entries (those whose command runs a program named `hookhost` or `hookhost-agent` with
//! `hook AGENT`), never the user's other hooks.
//!
//! The entries follow the configured chain ([`Wrapped`]): a tool event's matcher names
//! only the agent's tools some layer wraps (the agent starts no process for the others),
//! and when a `closed` layer wraps some, the pre-tool command keeps them closed even when
//! hookhost cannot run: `--closed-tools` names them for a hookhost whose config is broken,
//! and a shell fallback denies them when the `hookhost` program is missing.

use super::protocol::{self, Decision, Options};
use super::{Agent, Event, tools::ALIASES};
use crate::ids::ToolMatch;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use wildmatch::WildMatch;

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

/// The agent's tools the configured chain wraps, as patterns (`*` wildcards) of the
/// agent's own tool names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wrapped {
    /// `None`: every tool (some layer wraps `*`).
    pub tools: Option<Vec<String>>,
    /// Those a `closed` layer wraps.
    pub closed: Vec<String>,
}

impl Wrapped {
    /// What a chain whose layers wrap these tools (and are `closed` or not) wraps of
    /// `agent`'s tools: each pattern's own names and the agent's tools it names by their
    /// canonical names ([`super::tools::canonical`]).
    pub fn of<'a>(
        agent: Agent,
        layers: impl IntoIterator<Item = (&'a ToolMatch, bool)>,
    ) -> Wrapped {
        let mut wrapped = Wrapped {
            tools: Some(Vec::new()),
            closed: Vec::new(),
        };
        for (tools, closed) in layers {
            for pattern in tools.patterns() {
                let names = agent_names(agent, &pattern);
                if closed {
                    wrapped.closed.extend(names.iter().cloned());
                }
                match (&mut wrapped.tools, every(&pattern)) {
                    (Some(_), true) => wrapped.tools = None,
                    (Some(all), false) => all.extend(names),
                    (None, _) => {}
                }
            }
        }
        for list in wrapped.tools.iter_mut().chain([&mut wrapped.closed]) {
            list.sort();
            list.dedup();
        }
        wrapped
    }

    /// The matcher of `agent`'s tool events: `None` for every tool (no matcher where the
    /// agent has none), else an anchored regular expression (JavaScript's for Claude Code
    /// and Gemini CLI, Rust's for Codex: the common part of both).
    fn matcher(&self, agent: Agent) -> Option<String> {
        let tools = self.tools.as_ref()?;
        if matches!(agent, Agent::Cursor | Agent::Copilot) {
            return None;
        }
        let alternatives: Vec<String> = tools.iter().map(|t| glob_regex(t, ".*")).collect();
        Some(format!("^(?:{})$", alternatives.join("|")))
    }

    /// The matcher written in `agent`'s settings for its tool events (`None`: the agent's
    /// entries have none).
    pub fn written_matcher(&self, agent: Agent) -> Option<String> {
        match agent {
            Agent::Cursor | Agent::Copilot => None,
            Agent::ClaudeCode => Some(self.matcher(agent).unwrap_or_else(|| "*".into())),
            Agent::Codex | Agent::Gemini => {
                Some(self.matcher(agent).unwrap_or_else(|| ".*".into()))
            }
        }
    }
}

/// Whether `pattern` matches every name.
fn every(pattern: &str) -> bool {
    !pattern.is_empty() && pattern.chars().all(|c| c == '*')
}

/// The names `pattern` (of a layer's `tools`) wraps of `agent`'s: itself, and the agent's
/// tools whose name or canonical name it matches.
fn agent_names(agent: Agent, pattern: &str) -> Vec<String> {
    let matcher = WildMatch::new(pattern);
    let mut names: Vec<String> = ALIASES
        .iter()
        .filter(|(a, name, canonical)| {
            *a == agent && (matcher.matches(canonical) || matcher.matches(name))
        })
        .map(|(_, name, _)| name.to_string())
        .collect();
    names.push(pattern.to_string());
    names
}

/// A `*`/`?` pattern as a regular expression (`*` becomes `star`), its other characters
/// literal.
fn glob_regex(pattern: &str, star: &str) -> String {
    let one = star.trim_end_matches('*');
    pattern
        .chars()
        .map(|c| match c {
            '*' => star.to_string(),
            '?' => one.to_string(),
            c if c.is_ascii_alphanumeric() || c == '_' || c == '-' => c.to_string(),
            c => format!("\\{c}"),
        })
        .collect()
}

/// What hookhost's entries run.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// A command line, to which each entry appends its event's name.
    pub command: &'a str,
    /// A warm daemon (`serve --http`) at this URL (its base, or the MCP endpoint it
    /// announces), which the agent posts each event to itself (`BASE/hooks/AGENT/EVENT`),
    /// with `$HOOKHOST_TOKEN` as its bearer token, instead of running the command. Only
    /// Claude Code has such hooks.
    pub url: Option<&'a str>,
}

/// The settings text with hookhost's entries for `agent`, running `target` around the
/// tools `wrapped` names, or without them when `uninstall`; `current` is what the file
/// holds (empty when it does not exist).
///
/// # Errors
///
/// When `current` is not what the agent reads (not JSON, not an object), or the agent
/// cannot call a URL.
pub fn merged(
    agent: Agent,
    current: &str,
    target: Target,
    wrapped: &Wrapped,
    uninstall: bool,
) -> Result<String, String> {
    if target.url.is_some() && agent != Agent::ClaudeCode {
        return Err(format!(
            "{} has no URL hooks: install the command form, which forwards to a daemon \
             (`serve --hooks`, or HOOKHOST_URL)",
            agent.title()
        ));
    }
    if agent == Agent::Codex {
        return Ok(codex(current, target.command, wrapped, uninstall));
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
            entries.push(entry(agent, event, target, wrapped));
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

/// The shell command of `event`: `command` with the event's name, and for a tool event
/// the tools a closed layer wraps; then a fallback for when the program cannot be run at
/// all (exit 126 or 127, or a signal). For a pre-tool event that closed tools wrap, the
/// agent's deny on stdout when the hook input names one of them, or when a signal killed
/// the program (which may have read the input: the matcher's tools are denied, which
/// only errs on the closed side); otherwise, and for every
/// other event, the agent's non-blocking error (a line on stderr, exit 1), not the shell's
/// status, which an agent may take for something else (Gemini CLI calls its `AfterAgent`
/// again and again when the hook exits 127, until its stack overflows).
fn event_command(agent: Agent, event: Event, command: &str, wrapped: &Wrapped) -> String {
    let mut line = format!("{command} {}", event.name());
    let unwrapped = |line: String| {
        let error = protocol::unreadable(agent, "hookhost could not be run");
        let stdout = match error.stdout.as_str() {
            "" => String::new(),
            said => format!("printf '%s\\n' {}; ", shell_word(said)),
        };
        format!(
            "{line} || {{ s=$?; [ \"$s\" -ge 126 ] || exit \"$s\"; {stdout}echo {} >&2; exit {}; }}",
            shell_word(error.stderr.as_deref().unwrap_or_default()),
            error.exit
        )
    };
    if !event.is_tool() || wrapped.closed.is_empty() {
        return unwrapped(line);
    }
    line.push_str(" --closed-tools ");
    line.push_str(&shell_word(&wrapped.closed.join(",")));
    if event != Event::PreTool {
        return unwrapped(line);
    }
    let names: Vec<String> = wrapped
        .closed
        .iter()
        .map(|t| glob_regex(t, "[^\"]*"))
        .collect();
    let named = format!("\"tool_?[Nn]ame\" *: *\"({})\"", names.join("|"));
    let deny = protocol::answer(
        agent,
        event,
        "",
        Decision::Deny {
            reason: "hookhost could not be run, and a `closed` hook wraps this tool: the call \
                     was refused"
                .into(),
        },
        Options::default(),
    );
    format!(
        "{line} || {{ s=$?; [ \"$s\" -ge 126 ] || exit \"$s\"; \
         [ \"$s\" -ge 128 ] || grep -Eq {} || exit 0; printf '%s\\n' {}; exit {}; }}",
        shell_word(&named),
        shell_word(&deny.stdout),
        deny.exit
    )
}

/// One hook entry as `agent`'s settings spell it.
fn entry(agent: Agent, event: Event, target: Target, wrapped: &Wrapped) -> Value {
    let matcher = event
        .is_tool()
        .then(|| wrapped.written_matcher(agent))
        .flatten();
    let command = |command: &str| event_command(agent, event, command, wrapped);
    let hook = match target.url {
        // An `http` hook the daemon does not answer lets the call through: a pre-tool
        // event a closed layer wraps runs the command, which forwards to the same daemon.
        Some(url) if event == Event::PreTool && !wrapped.closed.is_empty() => {
            let forwarding = format!("HOOKHOST_URL={} {}", shell_word(url), target.command);
            json!({"type": "command", "command": command(&forwarding)})
        }
        Some(url) => json!({
            "type": "http",
            "url": super::hook_url(url, agent, event),
            "headers": {"Authorization": "Bearer $HOOKHOST_TOKEN"},
            "allowedEnvVars": ["HOOKHOST_TOKEN"],
        }),
        None => match agent {
            Agent::ClaudeCode | Agent::Gemini | Agent::Codex => {
                json!({"type": "command", "command": command(target.command)})
            }
            Agent::Cursor => return json!({ "command": command(target.command) }),
            Agent::Copilot => {
                return json!({"type": "command", "bash": command(target.command), "timeoutSec": 30});
            }
        },
    };
    let mut entry = Map::new();
    if let Some(matcher) = matcher {
        entry.insert("matcher".into(), matcher.into());
    }
    entry.insert("hooks".into(), json!([hook]));
    Value::Object(entry)
}

/// Whether an entry is hookhost's: its command (or one of its commands) runs a program
/// named `hookhost` or `hookhost-agent` with `hook AGENT`, or its URL is a daemon's `/hooks/AGENT/`.
pub(super) fn is_ours(agent: Agent, entry: &Value) -> bool {
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

/// The small program that answers hook events through `serve --hooks` and runs `hookhost`
/// otherwise (`src/bin/hookhost-agent.rs`).
pub const FORWARDER: &str = "hookhost-agent";

/// Whether a shell command runs a program named `hookhost` or `hookhost-agent` (after any
/// `NAME=value` words) with `hook AGENT`, its words unquoted as the shell would.
pub(super) fn runs_hookhost(agent: Agent, command: &str) -> bool {
    let words = shlex::split(command).unwrap_or_default();
    let mut words = words.iter().skip_while(|w| w.contains('='));
    let is_hookhost = words.next().is_some_and(|program| {
        Path::new(program)
            .file_name()
            .is_some_and(|n| n == "hookhost" || n == FORWARDER)
    });
    let rest: Vec<&String> = words.collect();
    is_hookhost
        && rest
            .windows(2)
            .any(|w| w[0] == "hook" && w[1] == agent.name())
}

const CODEX_BEGIN: &str =
    "# hookhost: begin (`hookhost hook install codex` wrote this; `--uninstall` removes it)";
const CODEX_END: &str = "# hookhost: end";

/// Codex's `config.toml` with hookhost's block of hooks (between two marker comments, so
/// that the rest of the file, its comments included, stays as it is).
fn codex(current: &str, command: &str, wrapped: &Wrapped, uninstall: bool) -> String {
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
        let line = event_command(Agent::Codex, event, command, wrapped);
        block.push_str(&format!("[[hooks.{name}]]\n"));
        if event.is_tool() {
            let matcher = wrapped.written_matcher(Agent::Codex).unwrap_or_default();
            block.push_str(&format!("matcher = {}\n", toml_string(&matcher)));
        }
        block.push_str(&format!(
            "[[hooks.{name}.hooks]]\ntype = \"command\"\ncommand = {}\n\n",
            toml_string(&line)
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

/// The words of the installed command, as portable as the agent lets them be: a
/// project's settings are committed and read on teammates' machines.
#[derive(Debug)]
pub struct Words {
    /// The variable the agent sets to the project's directory for its hook commands.
    project_variable: Option<&'static str>,
    project: Option<PathBuf>,
    /// The paths written that hold only on this machine.
    pub machine: Vec<String>,
}

impl Words {
    /// Words for `agent`'s settings of `project` (`None`: the user's own settings).
    pub fn new(agent: Agent, project: Option<&Path>) -> Words {
        Words {
            project_variable: project_variable(agent),
            project: project.map(Path::to_path_buf),
            machine: Vec::new(),
        }
    }

    /// The program of the hook command, for the `hookhost` at `exe`: `hookhost-agent` when
    /// it is installed beside it (a small program that forwards to `serve --hooks` and
    /// runs `hookhost` otherwise), else `hookhost` itself; by its name when the `PATH`
    /// finds that file by it, else by its path.
    pub fn program(&mut self, exe: &Path) -> String {
        let forwarder = exe.with_file_name(FORWARDER);
        let (name, program) = match forwarder.is_file() {
            true => (FORWARDER, forwarder.as_path()),
            false => ("hookhost", exe),
        };
        let this = program.canonicalize().ok();
        let on_path = std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path)
                .any(|dir| this.is_some() && dir.join(name).canonicalize().ok() == this)
        });
        if on_path {
            name.into()
        } else {
            self.path(program)
        }
    }

    /// The absolute `path`: under the project, from the agent's variable of its
    /// directory where it sets one; else as it is (and noted as this machine's).
    pub fn path(&mut self, path: &Path) -> String {
        let within = self
            .project
            .as_deref()
            .and_then(|project| path.strip_prefix(project).ok());
        if let (Some(rest), Some(variable)) = (within, self.project_variable) {
            let rest = rest.to_string_lossy();
            return match rest.is_empty() {
                true => format!("\"${variable}\""),
                false => format!("\"${variable}\"/{}", shell_word(&rest)),
            };
        }
        if self.project.is_some() {
            self.machine.push(path.display().to_string());
        }
        shell_word(&path.to_string_lossy())
    }
}

/// The variable `agent` sets to the project's directory for its hook commands.
pub fn project_variable(agent: Agent) -> Option<&'static str> {
    match agent {
        Agent::ClaudeCode => Some("CLAUDE_PROJECT_DIR"),
        Agent::Gemini => Some("GEMINI_PROJECT_DIR"),
        Agent::Codex | Agent::Cursor | Agent::Copilot => None,
    }
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
    const COMMAND_ONLY: Target = Target {
        command: COMMAND,
        url: None,
    };
    const EVERY: &Wrapped = &Wrapped {
        tools: None,
        closed: Vec::new(),
    };

    #[test]
    fn installing_keeps_the_users_hooks_and_twice_is_once() {
        let mine = r#"{"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}]}, "env": {}}"#;
        let once = merged(Agent::ClaudeCode, mine, COMMAND_ONLY, EVERY, false).unwrap();
        // The user's keys keep their order.
        let model = once.find("\"model\"").unwrap();
        assert!(
            model < once.find("\"hooks\"").unwrap()
                && once.find("\"hooks\"") < once.find("\"env\""),
            "{once}"
        );
        let twice = merged(Agent::ClaudeCode, &once, COMMAND_ONLY, EVERY, false).unwrap();
        assert_eq!(once, twice);
        let settings: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(settings["model"], "x");
        let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "./check.sh");
        let ours = pre[1]["hooks"][0]["command"].as_str().unwrap();
        assert!(
            ours.starts_with(&format!("{COMMAND} pre-tool || ")),
            "{ours}"
        );
        let removed: Value = serde_json::from_str(
            &merged(Agent::ClaudeCode, &once, COMMAND_ONLY, EVERY, true).unwrap(),
        )
        .unwrap();
        assert_eq!(removed, serde_json::from_str::<Value>(mine).unwrap());
    }

    #[test]
    fn a_url_replaces_the_command_and_uninstalls_alike() {
        let command = merged(Agent::ClaudeCode, "", COMMAND_ONLY, EVERY, false).unwrap();
        let url = Target {
            command: COMMAND,
            url: Some("http://127.0.0.1:8080/"),
        };
        let daemon = merged(Agent::ClaudeCode, &command, url, EVERY, false).unwrap();
        let settings: Value = serde_json::from_str(&daemon).unwrap();
        let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 1, "{daemon}");
        assert_eq!(
            pre[0]["hooks"][0]["url"],
            "http://127.0.0.1:8080/hooks/claude-code/pre-tool"
        );
        assert_eq!(
            merged(Agent::ClaudeCode, &daemon, url, EVERY, true).unwrap(),
            "{}\n"
        );
        assert!(merged(Agent::Gemini, "", url, EVERY, false).is_err());
    }

    /// The fallback of every installed command, run by `sh` as the agents run it: the
    /// program's own exit passes through, and a program that cannot run is the agent's
    /// non-blocking error (Cursor's with its `{}`), not the shell's 127.
    #[test]
    fn a_program_that_cannot_run_is_the_agents_non_blocking_error() {
        let run = |agent: Agent, program: &str| {
            let command = event_command(agent, Event::TurnEnd, program, &Wrapped::default());
            let out = std::process::Command::new("sh")
                .args(["-c", &command])
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let said = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
            (out.status.code(), said(&out.stdout), said(&out.stderr))
        };
        let (code, stdout, stderr) = run(Agent::Gemini, "/nonexistent/hookhost hook gemini");
        assert_eq!((code, stdout.as_str()), (Some(1), ""), "{stderr}");
        assert!(stderr.ends_with("hookhost could not be run"), "{stderr}");
        let (code, stdout, _) = run(Agent::Cursor, "/nonexistent/hookhost hook cursor");
        assert_eq!((code, stdout.as_str()), (Some(1), "{}"));
        for (program, code) in [("true", 0), ("sh -c 'exit 2'", 2)] {
            assert_eq!(run(Agent::ClaudeCode, program).0, Some(code), "{program}");
        }
    }

    #[test]
    fn codex_gets_a_marked_block_that_uninstall_takes_out() {
        let mine = "model = \"o3\" # my model\n";
        let command = "/usr/bin/hookhost hook codex";
        let once = codex(mine, command, EVERY, false);
        assert_eq!(codex(&once, command, EVERY, false), once);
        let parsed: toml::Table = once.parse().unwrap();
        let ours = parsed["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert!(
            ours.starts_with("/usr/bin/hookhost hook codex pre-tool || "),
            "{ours}"
        );
        assert_eq!(
            codex(&once, command, EVERY, true).trim_end(),
            mine.trim_end()
        );
    }

    #[test]
    fn words_with_spaces_are_quoted() {
        assert_eq!(shell_word("/a b/it's"), r"'/a b/it'\''s'");
        assert_eq!(shell_word("/usr/bin/hookhost"), "/usr/bin/hookhost");
    }

    #[test]
    fn matchers_name_only_the_wrapped_tools() {
        let bash = ToolMatch::new(&["bash"]);
        let todo = ToolMatch::new(&["todo_write", "mcp__fs__*"]);
        let wrapped = Wrapped::of(Agent::ClaudeCode, [(&bash, true), (&todo, false)]);
        assert_eq!(wrapped.closed, ["Bash", "bash"]);
        let matcher = wrapped.matcher(Agent::ClaudeCode).unwrap();
        assert_eq!(
            matcher,
            "^(?:Bash|TaskCreate|TaskUpdate|TodoWrite|bash|mcp__fs__.*|todo_write)$"
        );
        let every = ToolMatch::all();
        assert_eq!(
            Wrapped::of(Agent::Gemini, [(&every, false), (&bash, true)]).tools,
            None
        );
        // Cursor's and Copilot's hooks have no matcher: hookhost sees every tool.
        assert_eq!(wrapped.matcher(Agent::Cursor), None);
    }

    /// The closed pre-tool command, run by `sh` as the agent runs it, with a `hookhost`
    /// that is not there: the closed tool is denied, any other let through.
    #[test]
    fn a_missing_program_denies_only_the_closed_tools() {
        let bash = ToolMatch::new(&["bash"]);
        let wrapped = Wrapped::of(Agent::ClaudeCode, [(&bash, true)]);
        let command = "'/nowhere/a b/hookhost' hook claude-code";
        let line = event_command(Agent::ClaudeCode, Event::PreTool, command, &wrapped);
        let run = |input: &str| {
            let mut child = std::process::Command::new("sh")
                .args(["-c", &line])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            (out.status.code(), String::from_utf8(out.stdout).unwrap())
        };
        let (code, out) = run(r#"{"session_id": "s", "tool_name": "Bash", "tool_input": {}}"#);
        assert_eq!(code, Some(0));
        let answer: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
        let (code, out) = run(
            r#"{"session_id": "s", "tool_name": "Read", "tool_input": {"p": "\"tool_name\": \"Bash\""}}"#,
        );
        assert_eq!(
            (code, out.as_str()),
            (Some(0), ""),
            "a tool merely mentioned is not it"
        );
        // What hookhost itself answers passes through.
        let present = event_command(
            Agent::ClaudeCode,
            Event::PreTool,
            "sh -c 'exit 1' hookhost hook claude-code",
            &wrapped,
        );
        let status = std::process::Command::new("sh")
            .args(["-c", &present])
            .stdin(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(1));
    }

    #[test]
    fn a_path_with_spaces_installs_once_and_uninstalls() {
        let command = format!("{} hook claude-code", shell_word("/opt/my tools/hookhost"));
        let target = Target {
            command: &command,
            url: None,
        };
        let once = merged(Agent::ClaudeCode, "", target, EVERY, false).unwrap();
        assert_eq!(
            merged(Agent::ClaudeCode, &once, target, EVERY, false).unwrap(),
            once
        );
        assert_eq!(
            merged(Agent::ClaudeCode, &once, target, EVERY, true).unwrap(),
            "{}\n"
        );
    }
}
