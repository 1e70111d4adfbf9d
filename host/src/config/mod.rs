//! The operator's config file (TOML): mounts, tools, the hook chain, tenants, upstream
//! servers, their grants, settings and limits. The built-in default is `default.toml`
//! beside this file, and every key is documented there and in the book (docs/configuration.md).
//!
//! Every table refuses unknown keys, so a typo is an error, not a silently ignored line;
//! every error names the file, the line and the key. A config is read and checked once
//! ([`Config::load`], [`Config::parse`]): what the checks find is kept as a [`Plan`]
//! (typed: component references, grants, settings, tool matches, tenants, templates),
//! which the runtime is built from.
//!
//! | file | what it holds |
//! |---|---|
//! | `file.rs` | the file's tables, as written ([`Config`] and one struct per table) |
//! | `validate.rs` | the checks, one function per table, each adding its part to the plan |
//! | `plan.rs` | the [`Plan`]: the config checked and typed |

mod file;
pub mod keys;
mod plan;
pub mod reference;
#[cfg(test)]
mod tests;
mod validate;

pub use file::*;
pub use plan::*;
pub use validate::{is_tool_name, setting_problem, setting_text};

use crate::limits::DEFAULT_BASH_MOUNT;
use crate::mounts::MountSpec;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;
use validate::Invalid;

/// The data directory: `--data` (`flag`), else the config's `data` (`written`), else
/// `hookhost` under the user's data directory (`None` when the user has none).
pub fn data_dir(flag: Option<&Path>, written: Option<&Path>) -> Option<std::path::PathBuf> {
    flag.or(written)
        .map(Path::to_path_buf)
        .or_else(|| Some(dirs::data_dir()?.join("hookhost")))
}

/// The text of the built-in configuration.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// A value of the file with where it was written, so that an error about it names its
/// line; reads as the value.
#[derive(Debug, Clone, Default)]
pub struct Located<T> {
    pub value: T,
    span: Range<usize>,
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<T>::deserialize(deserializer)?;
        Ok(Located {
            span: spanned.span(),
            value: spanned.into_inner(),
        })
    }
}

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
    #[error("{file}:{line}: {what}")]
    Invalid {
        file: String,
        line: usize,
        what: String,
    },
}

/// The line of `text` that holds byte `offset`, counted from 1.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// A config file read and checked, once: its values as written and the [`Plan`] made of
/// them.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub plan: Plan,
}

impl Config {
    /// The built-in configuration.
    pub fn builtin() -> Loaded {
        Config::parse(DEFAULT_CONFIG, "<built-in config>").expect("the built-in config is valid")
    }

    /// Reads and validates a config file.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file, line and key to fix.
    pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        Config::parse_in(&text, &file, path.parent())
    }

    /// A relative `component` path names a file beside the config, wherever hookhost is
    /// started from.
    fn resolve_components_in(&mut self, dir: &Path) {
        let components = self
            .hooks
            .iter_mut()
            .map(|h| &mut h.component)
            .chain(self.tools.values_mut().map(|t| &mut t.component));
        let named = |c: &str| c.starts_with("builtin:") || c.starts_with(crate::registry::SCHEME);
        for component in components {
            let path = Path::new(component.get_ref());
            if named(component.get_ref()) || path.is_absolute() {
                continue;
            }
            let resolved = dir.join(path).display().to_string();
            *component = Spanned::new(component.span(), resolved);
        }
        let stores = self
            .persistent
            .values_mut()
            .filter_map(|p| p.store.as_mut());
        for store in stores {
            if !named(store) && Path::new(store.as_str()).is_relative() {
                *store = dir.join(store.as_str()).display().to_string();
            }
        }
    }

    /// Parses and validates config text; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file, line and key to fix.
    pub fn parse(text: &str, file: &str) -> Result<Loaded, ConfigError> {
        Config::parse_in(text, file, None)
    }

    /// [`Config::parse`], with relative component paths resolved in `dir` (the config
    /// file's directory) when given.
    fn parse_in(text: &str, file: &str, dir: Option<&Path>) -> Result<Loaded, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            file: file.to_string(),
            source: Box::new(source),
        })?;
        if let Some(dir) = dir.filter(|d| !d.as_os_str().is_empty()) {
            config.resolve_components_in(dir);
        }
        config.source = file.to_string();
        let plan =
            config
                .validate(text)
                .map_err(|Invalid { span, what }| ConfigError::Invalid {
                    file: file.to_string(),
                    line: line_at(text, span.start),
                    what,
                })?;
        Ok(Loaded { config, plan })
    }

    /// The mounts in force: the file's, or the built-in ones.
    pub fn mounts(&self) -> BTreeMap<String, MountSpec> {
        let mut mounts = match &self.mounts {
            Some(mounts) => mounts
                .iter()
                .map(|(p, s)| (p.get_ref().clone(), s.clone()))
                .collect(),
            None => Config::builtin().config.mounts(),
        };
        for (path, spec) in &self.persistent {
            let path = path.get_ref();
            mounts.insert(path.clone(), MountSpec::checkout(path, spec.clone()));
        }
        mounts
    }

    /// The mount `bash` runs in.
    pub fn bash_mount(&self) -> &str {
        self.bash
            .mount
            .as_ref()
            .map_or(DEFAULT_BASH_MOUNT, |m| m.get_ref())
    }
}
