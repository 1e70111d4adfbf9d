//! `hookhost-agent`: the command `hookhost hook install` writes into an agent's settings
//! when it is installed beside `hookhost`. It takes `hookhost`'s own arguments
//! (`[--config FILE] [--data DIR] hook AGENT EVENT [flags]`) and answers the event through
//! `serve --hooks`' socket when a daemon listens in that data directory; otherwise — no
//! daemon, one that did not answer, or arguments it does not know — it runs `hookhost`
//! with the same arguments in its place (`exec`), the hook input it already read given as
//! stdin. It links none of wasmtime, so it starts in about a millisecond where `hookhost`
//! takes three or four (see docs/performance.md).

use hookhost::agents::{Agent, Event, Forward, HookSettings, Offered, protocol::Options};
use hookhost::ids::{TenantId, ToolMatch};
use hookhost::limits::{DEFAULT_HOOK_DAEMON_TIMEOUT, DEFAULT_HOOK_DEADLINE};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A hook event as `hookhost`'s arguments name it.
#[derive(Debug, PartialEq)]
struct Hook {
    config: Option<PathBuf>,
    data: Option<PathBuf>,
    agent: Agent,
    event: Event,
    tenant: String,
    rewrite_allows: bool,
    deadline: Duration,
    daemon_timeout: Duration,
    closed_tools: Option<Vec<String>>,
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let input = match parse(&args) {
        Some(hook) => match offer(&hook) {
            Offered::Answered(answer) => return answer.emit(),
            Offered::Unanswered(bytes) => Some(bytes),
            Offered::NotAsked => None,
        },
        None => None,
    };
    hookhost(&args, input)
}

/// Offers the event to `serve --hooks` in the data directory `hookhost` would use.
fn offer(hook: &Hook) -> Offered {
    let Ok(tenant) = TenantId::new(hook.tenant.clone()) else {
        return Offered::NotAsked;
    };
    let settings = HookSettings {
        tenant,
        options: Options {
            rewrite_allows: hook.rewrite_allows,
        },
        trust_cwd: true,
        closed_tools: hook.closed_tools.as_deref().map(ToolMatch::new),
    };
    let Some(data) = data_dir(hook) else {
        return Offered::NotAsked;
    };
    Forward::new(&data, hook.daemon_timeout).offer(hook.agent, hook.event, &settings, hook.deadline)
}

/// The data directory as `hookhost` finds it: `--data`, `HOOKHOST_DATA`, the config's
/// `data`, the user's data directory.
fn data_dir(hook: &Hook) -> Option<PathBuf> {
    let env = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(data) = hook
        .data
        .clone()
        .or_else(|| env("HOOKHOST_DATA").map(PathBuf::from))
    {
        return Some(data);
    }
    let config = hook
        .config
        .clone()
        .or_else(|| env("HOOKHOST_CONFIG").map(PathBuf::from));
    if let Some(config) = config {
        // A config hookhost cannot read is hookhost's to report.
        let text = std::fs::read_to_string(config).ok()?;
        let table: toml::Table = toml::from_str(&text).ok()?;
        if let Some(data) = table.get("data") {
            return data.as_str().map(PathBuf::from);
        }
    }
    Some(dirs::data_dir()?.join("hookhost"))
}

/// The hook event `args` name, when they are arguments this program knows in full;
/// `None` leaves them to `hookhost`.
fn parse(args: &[OsString]) -> Option<Hook> {
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let mut words = args.iter().copied();
    let (mut config, mut data) = (None, None);
    loop {
        match words.next()? {
            "--config" => config = Some(PathBuf::from(words.next()?)),
            "--data" => data = Some(PathBuf::from(words.next()?)),
            "hook" => break,
            _ => return None,
        }
    }
    let agent = <Agent as clap::ValueEnum>::from_str(words.next()?, false).ok()?;
    let mut hook = Hook {
        config,
        data,
        agent,
        event: Event::PreTool,
        tenant: "default".into(),
        rewrite_allows: false,
        deadline: DEFAULT_HOOK_DEADLINE,
        daemon_timeout: DEFAULT_HOOK_DAEMON_TIMEOUT,
        closed_tools: None,
    };
    let mut event = None;
    let millis = |word: Option<&str>| word?.parse().ok().map(Duration::from_millis);
    while let Some(word) = words.next() {
        match word {
            "--tenant" => hook.tenant = words.next()?.to_string(),
            "--rewrite-allows" => hook.rewrite_allows = true,
            "--deadline-ms" => hook.deadline = millis(words.next())?,
            "--daemon-timeout-ms" => hook.daemon_timeout = millis(words.next())?,
            "--closed-tools" => {
                hook.closed_tools = Some(words.next()?.split(',').map(str::to_string).collect());
            }
            word if !word.starts_with('-') && event.is_none() => event = Some(Event::parse(word)?),
            _ => return None,
        }
    }
    hook.event = event?;
    Some(hook)
}

/// Runs `hookhost` (beside this program, else on `PATH`) with `args` in this process's
/// place, with `input` as its stdin when this process read the hook input already.
fn hookhost(args: &[OsString], input: Option<Vec<u8>>) -> ExitCode {
    let beside = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("hookhost"))
        .filter(|path| path.is_file());
    let mut command = std::process::Command::new(beside.unwrap_or_else(|| "hookhost".into()));
    command.args(args);
    if let Some(bytes) = input {
        match unnamed_file(&bytes) {
            Ok(file) => {
                command.stdin(file);
            }
            Err(e) => {
                eprintln!("hookhost-agent: cannot keep the hook input for hookhost: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let e = command.exec();
    eprintln!("hookhost-agent: cannot run hookhost: {e}");
    // The shell's "cannot run": `hook install`'s fallback then denies closed tools.
    ExitCode::from(127)
}

/// An unnamed file holding `bytes`, read from its start.
fn unnamed_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::{Seek, Write};
    let mut file = tempfile::tempfile()?;
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn the_installed_commands_arguments_are_read_and_others_left_to_hookhost() {
        let hook = parse(&args(
            "--config /p/h.toml --data /d hook claude-code pre-tool --closed-tools Bash,bash",
        ))
        .unwrap();
        assert_eq!(hook.config.as_deref(), Some("/p/h.toml".as_ref()));
        assert_eq!(hook.data.as_deref(), Some("/d".as_ref()));
        assert_eq!(
            (hook.agent, hook.event),
            (Agent::ClaudeCode, Event::PreTool)
        );
        assert_eq!(hook.closed_tools, Some(vec!["Bash".into(), "bash".into()]));
        let codex = parse(&args("hook codex post-tool --tenant t1 --deadline-ms 500")).unwrap();
        assert_eq!(
            (codex.tenant.as_str(), codex.deadline),
            ("t1", Duration::from_millis(500))
        );
        for other in [
            "--version",
            "-v hook claude-code pre-tool",
            "hook install claude-code",
            "hook doctor claude-code",
            "hook claude-code pre-tool --no-such-flag",
            "hook claude-code",
            "session list",
        ] {
            assert_eq!(parse(&args(other)), None, "{other}");
        }
    }
}
