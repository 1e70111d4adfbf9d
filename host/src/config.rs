//! The operator's config file (TOML): mounts, tools, the hook chain, their grants,
//! settings and limits. The built-in default is `default.toml` beside this file.
//!
//! Every table refuses unknown keys, so a typo is an error, not a silently ignored line.

use crate::chain::FailurePolicy;
use crate::component::ComponentRef;
use crate::limits::{Limits, MAX_ID_BYTES};
use crate::mounts::MountSpec;
use crate::sandbox::{Grants, Settings};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The text of the built-in configuration.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// Why a config was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read it: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Parse {
        file: String,
        source: Box<toml::de::Error>,
    },
    #[error("{file}: {what}")]
    Invalid { file: String, what: String },
}

/// A whole config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The data directory (`{data}`); the `--data` flag overrides it.
    #[serde(default)]
    pub data: Option<PathBuf>,
    /// Virtual path → host directory template and scope. Leaving the table out keeps the
    /// built-in mounts; giving it replaces them.
    #[serde(default)]
    pub mounts: Option<BTreeMap<String, MountSpec>>,
    /// The host-native `bash` tool.
    #[serde(default)]
    pub bash: BashConfig,
    /// Tool components by the name agents call them.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
    /// The hook chain, outermost first.
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
}

/// The `[bash]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashConfig {
    /// Off unless set: bash is not sandboxed by WebAssembly.
    #[serde(default)]
    pub enabled: bool,
    /// The mount it runs in; `/workspace` when left out.
    #[serde(default)]
    pub mount: Option<String>,
    /// Its time limit when a call gives none.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// A `[tools.NAME]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// `builtin:NAME` or a path to a `.wasm` component of the `tool` world.
    pub component: String,
    /// Mounts it may use: virtual path → `ro` or `rw`.
    #[serde(default)]
    pub grants: Grants,
    /// Handed to it through `wasi:config/store`.
    #[serde(default)]
    pub settings: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub limits: Limits,
}

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// Unique in the chain; names the hook in logs and error messages.
    pub name: String,
    /// `builtin:NAME` or a path to a `.wasm` component of the `hook` world.
    pub component: String,
    /// `open` (default): a failing hook is skipped. `closed`: it refuses the call or
    /// withholds the output.
    #[serde(default)]
    pub on_failure: FailurePolicy,
    /// The tools it applies to, with `*` wildcards; every tool when left out.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub grants: Grants,
    #[serde(default)]
    pub settings: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub limits: Limits,
}

impl Config {
    /// The built-in configuration.
    pub fn builtin() -> Config {
        Config::parse(DEFAULT_CONFIG, "<built-in config>").expect("the built-in config is valid")
    }

    /// Reads and validates a config file.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file and what to fix.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        Config::parse(&text, &file)
    }

    /// Parses and validates config text; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file and what to fix.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            file: file.to_string(),
            source: Box::new(source),
        })?;
        config.validate().map_err(|what| ConfigError::Invalid {
            file: file.to_string(),
            what,
        })?;
        Ok(config)
    }

    /// The mounts in force: the file's, or the built-in ones.
    pub fn mounts(&self) -> BTreeMap<String, MountSpec> {
        match &self.mounts {
            Some(m) => m.clone(),
            None => crate::mounts::MountTable::builtin()
                .iter()
                .map(|(p, s)| (p.to_string(), s.clone()))
                .collect(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        let mounts = self.mounts();
        let check_grants = |owner: &str, grants: &Grants| {
            for path in grants.keys() {
                if !mounts.contains_key(path) {
                    return Err(format!(
                        "{owner}: grants {path:?}, which is not a declared mount (declared: {})",
                        mounts.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
            Ok(())
        };
        for (name, tool) in &self.tools {
            let owner = format!("tools.{name}");
            if !is_tool_name(name) {
                return Err(format!(
                    "{owner}: a tool name is 1 to {MAX_ID_BYTES} letters, digits, '_' and '-'"
                ));
            }
            if self.bash.enabled && name == "bash" {
                return Err(format!("{owner}: the name `bash` is taken by [bash]"));
            }
            check_component(&owner, &tool.component)?;
            check_grants(&owner, &tool.grants)?;
        }
        let mut names = BTreeSet::new();
        for (i, hook) in self.hooks.iter().enumerate() {
            let owner = format!("hooks[{i}] ({:?})", hook.name);
            if hook.name.is_empty() {
                return Err(format!("hooks[{i}]: `name` is empty"));
            }
            if !names.insert(hook.name.as_str()) {
                return Err(format!(
                    "{owner}: duplicate hook name; each hook needs its own `name`"
                ));
            }
            check_component(&owner, &hook.component)?;
            check_grants(&owner, &hook.grants)?;
        }
        if self.bash.enabled {
            let mount = self.bash.mount.as_deref().unwrap_or("/workspace");
            if !mounts.contains_key(mount) {
                return Err(format!(
                    "bash: runs in {mount:?}, which is not a declared mount"
                ));
            }
        }
        crate::mounts::MountTable::new(mounts)
            .map(|_| ())
            .map_err(|e| format!("mounts: {e}"))
    }
}

/// Tool names reach the model and, through hooks, file names: keep them plain.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_ID_BYTES
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_component(owner: &str, component: &str) -> Result<(), String> {
    match ComponentRef::parse(component) {
        ComponentRef::Builtin(name) if !ComponentRef::builtin_names().any(|n| n == name) => {
            Err(format!(
                "{owner}: component {component:?} is not a built-in (built-ins: {})",
                ComponentRef::builtin_names().collect::<Vec<_>>().join(", ")
            ))
        }
        ComponentRef::File(path) if !path.is_file() => Err(format!(
            "{owner}: component file {} does not exist",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// Settings as `wasi:config/store` hands them over: strings as they are, anything else as
/// its JSON text (so `exclude_tools = ["a", "b"]` arrives as `["a","b"]`).
pub fn settings_to_strings(settings: &BTreeMap<String, toml::Value>) -> Settings {
    settings
        .iter()
        .map(|(k, v)| {
            let text = match v {
                toml::Value::String(s) => s.clone(),
                other => serde_json::to_string(other).unwrap_or_else(|_| other.to_string()),
            };
            (k.clone(), text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_config_is_valid() {
        let c = Config::builtin();
        assert!(c.bash.enabled);
        assert_eq!(c.hooks[0].name, "offload");
        let s = settings_to_strings(&c.hooks[0].settings);
        assert_eq!(
            s["exclude_tools"],
            r#"["read_file","write_file","edit_file"]"#
        );
        assert_eq!(s["threshold"], "10000");
    }

    #[test]
    fn unknown_keys_are_refused_with_their_line() {
        let e = Config::parse("[bash]\nenabled = true\ntypo = 1\n", "x.toml").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("x.toml") && msg.contains("typo") && msg.contains("line 3"),
            "{msg}"
        );
    }

    #[test]
    fn grants_must_name_declared_mounts() {
        let e = Config::parse(
            "[[hooks]]\nname = \"h\"\ncomponent = \"builtin:offload\"\ngrants = { \"/nope\" = \"rw\" }\n",
            "x.toml",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("\"/nope\", which is not a declared mount"),
            "{e}"
        );
    }
}
