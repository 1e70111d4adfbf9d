//! The hook command's arguments as `hookhost` reads them — `[--config FILE] [--data DIR]
//! hook AGENT EVENT [--tenant T] [--rewrite-allows] [--deadline-ms MS]
//! [--daemon-timeout-ms MS] [--closed-tools TOOLS]` — for what reads them without
//! `hookhost`'s command line: `hookhost-agent`, and `hook doctor` reading an installed
//! command back. Only these forms are read, each flag once; anything else (another flag,
//! `--data=DIR`, an empty `HOOKHOST_DATA`) is `None`, left to `hookhost` itself.

use super::protocol::Options;
use super::{Agent, Event, HookSettings};
use crate::ids::{TenantId, ToolMatch};
use crate::limits::{DEFAULT_HOOK_DAEMON_TIMEOUT, DEFAULT_HOOK_DEADLINE};
use std::path::PathBuf;
use std::time::Duration;

/// One hook event as the command names it.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCommand {
    pub config: Option<PathBuf>,
    pub data: Option<PathBuf>,
    pub agent: Agent,
    pub event: Event,
    pub tenant: String,
    pub rewrite_allows: bool,
    pub deadline: Duration,
    pub daemon_timeout: Duration,
    pub closed_tools: Option<Vec<String>>,
}

impl HookCommand {
    /// The event `args` (the program's arguments) name, when they are in the forms read.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Option<HookCommand> {
        let mut words = args.iter().map(AsRef::as_ref);
        let (mut config, mut data) = (None, None);
        let once = |slot: &mut Option<PathBuf>, value: Option<&str>| {
            slot.is_none().then_some(())?;
            *slot = Some(PathBuf::from(value?));
            Some(())
        };
        loop {
            match words.next()? {
                "--config" => once(&mut config, words.next())?,
                "--data" => once(&mut data, words.next())?,
                "hook" => break,
                _ => return None,
            }
        }
        let agent = <Agent as clap::ValueEnum>::from_str(words.next()?, false).ok()?;
        let (mut event, mut tenant, mut rewrite_allows) = (None, None, false);
        let (mut deadline, mut daemon_timeout, mut closed_tools) = (None, None, None);
        let millis = |word: Option<&str>| word?.parse().ok().map(Duration::from_millis);
        while let Some(word) = words.next() {
            let fresh = match word {
                "--tenant" => tenant.replace(words.next()?.to_string()).is_none(),
                "--rewrite-allows" => !std::mem::replace(&mut rewrite_allows, true),
                "--deadline-ms" => deadline.replace(millis(words.next())?).is_none(),
                "--daemon-timeout-ms" => daemon_timeout.replace(millis(words.next())?).is_none(),
                "--closed-tools" => {
                    let tools = words.next()?.split(',').map(str::to_string).collect();
                    closed_tools.replace(tools).is_none()
                }
                word if !word.starts_with('-') => event.replace(Event::parse(word)?).is_none(),
                _ => false,
            };
            if !fresh {
                return None;
            }
        }
        Some(HookCommand {
            config,
            data,
            agent,
            event: event?,
            tenant: tenant.unwrap_or_else(|| "default".into()),
            rewrite_allows,
            deadline: deadline.unwrap_or(DEFAULT_HOOK_DEADLINE),
            daemon_timeout: daemon_timeout.unwrap_or(DEFAULT_HOOK_DAEMON_TIMEOUT),
            closed_tools,
        })
    }

    /// The arguments that name it (those it was read from, in `hook install`'s order).
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (flag, path) in [("--config", &self.config), ("--data", &self.data)] {
            if let Some(path) = path {
                args.extend([flag.to_string(), path.to_string_lossy().into_owned()]);
            }
        }
        let names = [self.agent.name(), self.event.name()];
        args.extend(
            ["hook".to_string()]
                .into_iter()
                .chain(names.map(String::from)),
        );
        if self.tenant != "default" {
            args.extend(["--tenant".to_string(), self.tenant.clone()]);
        }
        if self.rewrite_allows {
            args.push("--rewrite-allows".into());
        }
        let millis = |d: Duration| d.as_millis().to_string();
        if self.deadline != DEFAULT_HOOK_DEADLINE {
            args.extend(["--deadline-ms".into(), millis(self.deadline)]);
        }
        if self.daemon_timeout != DEFAULT_HOOK_DAEMON_TIMEOUT {
            args.extend(["--daemon-timeout-ms".into(), millis(self.daemon_timeout)]);
        }
        if let Some(tools) = &self.closed_tools {
            args.extend(["--closed-tools".to_string(), tools.join(",")]);
        }
        args
    }

    /// How `hookhost hook` runs it; `None` for a tenant id hookhost refuses.
    pub fn settings(&self) -> Option<HookSettings> {
        Some(HookSettings {
            tenant: TenantId::new(self.tenant.clone()).ok()?,
            subject: None,
            options: Options {
                rewrite_allows: self.rewrite_allows,
            },
            trust_cwd: true,
            closed_tools: self.closed_tools.as_deref().map(ToolMatch::new),
        })
    }

    /// The data directory `hookhost` uses for it, with `env` the environment it runs in:
    /// `--data` or `HOOKHOST_DATA`, else the `data` of the config (`--config` or
    /// `HOOKHOST_CONFIG`) when that config loads, else the user's (see
    /// [`crate::config::data_dir`]). `None` where `hookhost` would refuse the command line
    /// (a variable set but empty).
    pub fn data_dir(&self, env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
        let from_env = |name: &str| match env(name) {
            Some(value) if value.is_empty() => Err(()),
            value => Ok(value.map(PathBuf::from)),
        };
        let data = from_env("HOOKHOST_DATA").ok()?;
        let config = from_env("HOOKHOST_CONFIG").ok()?;
        let flag = self.data.clone().or(data);
        if flag.is_some() {
            return flag;
        }
        let written = match self.config.clone().or(config) {
            Some(path) => crate::Config::load(&path).ok().and_then(|l| l.config.data),
            None => None,
        };
        crate::config::data_dir(None, written.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Option<HookCommand> {
        HookCommand::parse(&line.split(' ').collect::<Vec<_>>())
    }

    #[test]
    fn the_installed_commands_arguments_are_read_and_others_left_to_hookhost() {
        let hook = parse(
            "--config /p/h.toml --data /d hook claude-code pre-tool --closed-tools Bash,bash",
        )
        .unwrap();
        assert_eq!(hook.config.as_deref(), Some("/p/h.toml".as_ref()));
        assert_eq!(hook.data.as_deref(), Some("/d".as_ref()));
        assert_eq!(
            (hook.agent, hook.event),
            (Agent::ClaudeCode, Event::PreTool)
        );
        assert_eq!(hook.closed_tools, Some(vec!["Bash".into(), "bash".into()]));
        assert_eq!(HookCommand::parse(&hook.args()), Some(hook.clone()));
        let codex = parse("hook codex post-tool --tenant t1 --deadline-ms 500").unwrap();
        assert_eq!(
            (codex.tenant.as_str(), codex.deadline),
            ("t1", Duration::from_millis(500))
        );
        for other in [
            "--version",
            "-v hook claude-code pre-tool",
            "--data=/d hook claude-code pre-tool",
            "--data /a --data /b hook claude-code pre-tool",
            "hook claude-code pre-tool --tenant a --tenant b",
            "hook claude-code pre-tool post-tool",
            "hook install claude-code",
            "hook doctor claude-code",
            "hook claude-code pre-tool --no-such-flag",
            "hook claude-code pre-tool --deadline-ms soon",
            "hook claude-code",
            "session list",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }

    #[test]
    fn the_data_directory_is_hookhosts() {
        let hook = parse("hook claude-code pre-tool").unwrap();
        let none = |_: &str| None;
        let data = hook.data_dir(|name| (name == "HOOKHOST_DATA").then(|| "/e".into()));
        assert_eq!(data.as_deref(), Some("/e".as_ref()));
        assert_eq!(
            hook.data_dir(|name| (name == "HOOKHOST_DATA").then(Default::default)),
            None
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("hh.toml");
        std::fs::write(&config, "data = \"/from-config\"\n").unwrap();
        let with = parse(&format!("--config {} hook codex stop", config.display())).unwrap();
        assert_eq!(
            with.data_dir(none).as_deref(),
            Some("/from-config".as_ref())
        );
        // A config hookhost cannot load does not name its data directory.
        std::fs::write(&config, "data = \"/from-config\"\nbogus = 1\n").unwrap();
        assert_ne!(
            with.data_dir(none).as_deref(),
            Some("/from-config".as_ref())
        );
    }
}
