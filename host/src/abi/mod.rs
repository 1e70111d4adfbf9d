//! The plugin ABI: the WIT package `harness:hooks`, one module per version — [`v0_1`] and
//! [`v0_2`] — each owning its bindings and its adaptor: how an instance of that version is
//! made, called, told how the call went and answered. One chain may mix both versions.
//! The rest of the host sees only this module's version-free face:
//!
//! - [`HookPre`] and [`Hook`]: a hook ready to instantiate, and instantiated;
//! - [`ToolPre`] and [`ToolExports`]: the same for a tool component;
//! - [`Record`]: what the host knows of a call so far, which each version is told its way;
//! - [`After`]: a hook's answer after the tool: keep, replace or fail;
//! - [`SettingType`]: the type of a setting a component declares.
//!
//! The host's own types are the latest version's ([`latest`]), as Zed's extension host
//! does: every older version's bindings reuse them where its interface is the same (a
//! [`ToolCall`] or [`ToolResult`] moves between hooks of either version and tools
//! unchanged, without a copy) and convert where it differs. A new version becomes
//! `latest`; the one before it converts.

pub mod store;
pub mod v0_1;
pub mod v0_2;

/// The latest version of the ABI: the types the host works with.
pub mod latest {
    pub use super::v0_2::hook::exports::harness::hooks::tool_hook::Proceed;
    pub use super::v0_2::hook::harness::hooks::types;
    pub use types::{CallContext, ToolCall, ToolDescriptor, ToolResult};
}

pub use latest::{CallContext, Proceed, ToolCall, ToolDescriptor, ToolResult};
/// Context values only the host sets (a hook's are dropped): see [`v0_1::RESERVED_PREFIX`].
pub use v0_1::RESERVED_PREFIX;

use crate::failure::{Failure, FailureKind};
use crate::limits::Limits;
use crate::sandbox::StoreState;
use std::fmt;
use wasmtime::component::InstancePre;
use wasmtime::{Engine, Store};

impl ToolResult {
    /// A plain-text result.
    pub fn text(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            is_error: false,
            media_type: None,
        }
    }

    /// A plain-text error result.
    pub fn error(output: impl Into<String>) -> ToolResult {
        ToolResult {
            output: output.into(),
            is_error: true,
            media_type: None,
        }
    }

    /// Fails with [`FailureKind::OutputTooLarge`] when the result, its media type
    /// included, exceeds the cap.
    ///
    /// # Errors
    ///
    /// The failure.
    pub fn check_size(&self, limits: &Limits) -> Result<(), Failure> {
        let media_type = self.media_type.as_deref().map_or(0, str::len);
        Failure::check_output(self.output.len().saturating_add(media_type), limits)
    }
}

/// Whether `pre`'s component exports an interface whose name starts with `prefix`.
fn exports(pre: &InstancePre<StoreState>, engine: &Engine, prefix: &str) -> bool {
    pre.component()
        .component_type()
        .exports(engine)
        .any(|(name, _)| name.starts_with(prefix))
}

/// A hook ready to instantiate, of the WIT version it was built for.
pub enum HookPre {
    V0_1(v0_1::hook::HookPre<StoreState>),
    V0_2(v0_2::HookPre),
}

impl HookPre {
    /// `pre` as a hook of the version it exports.
    ///
    /// # Errors
    ///
    /// When it lacks an export of its version's `hook` world.
    pub fn new(pre: InstancePre<StoreState>, engine: &Engine) -> wasmtime::Result<HookPre> {
        if exports(&pre, engine, v0_2::HOOK_EXPORT) {
            let described = exports(&pre, engine, v0_2::INFO_EXPORT);
            v0_2::HookPre::new(pre, described).map(HookPre::V0_2)
        } else {
            v0_1::hook::HookPre::new(pre).map(HookPre::V0_1)
        }
    }

    /// Its `hook-info` when it describes itself (0.2.0's `described-hook` world).
    pub fn describer(&self) -> Option<&v0_2::described::DescribedHookPre<StoreState>> {
        match self {
            HookPre::V0_2(pre) => pre.describe.as_ref(),
            HookPre::V0_1(_) => None,
        }
    }

    /// An instance in `store`, within `limits`.
    ///
    /// # Errors
    ///
    /// A [`Failure`] when instantiating traps or passes a limit.
    pub async fn instantiate(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
    ) -> Result<Hook, Failure> {
        match self {
            HookPre::V0_1(pre) => Failure::bounded(store, limits, async |store| {
                pre.instantiate_async(store).await
            })
            .await
            .map(Hook::V0_1),
            HookPre::V0_2(pre) => Failure::bounded(store, limits, async |store| {
                pre.pre.instantiate_async(store).await
            })
            .await
            .map(Hook::V0_2),
        }
    }
}

/// An instantiated hook's exports.
pub enum Hook {
    V0_1(v0_1::hook::Hook),
    V0_2(v0_2::hook::Hook),
}

impl Hook {
    /// `before-execute`: the outer `Err` is a failure of the hook, the inner one its
    /// refusal.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap or a limit.
    pub async fn before(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<Result<Proceed, String>, Failure> {
        match self {
            Hook::V0_1(hook) => v0_1::before(hook, store, limits, ctx, call).await,
            Hook::V0_2(hook) => v0_2::before(hook, store, limits, ctx, call).await,
        }
    }

    /// `after-execute`, told `record` as the hook's version tells it.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap, a limit, or the hook's own `fail`.
    pub async fn after(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        ctx: &CallContext,
        call: &ToolCall,
        record: &Record,
        result: &ToolResult,
    ) -> Result<After, Failure> {
        match self {
            Hook::V0_1(hook) => v0_1::after(hook, store, limits, ctx, call, record, result).await,
            Hook::V0_2(hook) => v0_2::after(hook, store, limits, ctx, call, record, result).await,
        }
    }
}

/// A hook's answer after the tool.
pub enum After {
    /// The result stays as it is (0.2.0's `keep`).
    Keep,
    /// The result becomes this one (what a 0.1.0 hook always answers).
    Replace(ToolResult),
}

/// A tool component ready to instantiate, of the WIT version it was built for (the `tool`
/// world is the same in both).
pub enum ToolPre {
    V0_1(v0_1::tool::ToolPre<StoreState>),
    V0_2(v0_2::tool::ToolPre<StoreState>),
}

impl ToolPre {
    /// `pre` as a tool of the version it exports.
    ///
    /// # Errors
    ///
    /// When it lacks an export of its version's `tool` world.
    pub fn new(pre: InstancePre<StoreState>, engine: &Engine) -> wasmtime::Result<ToolPre> {
        if exports(&pre, engine, v0_2::TOOL_EXPORT) {
            v0_2::tool::ToolPre::new(pre).map(ToolPre::V0_2)
        } else {
            v0_1::tool::ToolPre::new(pre).map(ToolPre::V0_1)
        }
    }

    /// An instance in `store`, within `limits`.
    ///
    /// # Errors
    ///
    /// A [`Failure`] when instantiating traps or passes a limit.
    pub async fn instantiate(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
    ) -> Result<ToolExports, Failure> {
        match self {
            ToolPre::V0_1(pre) => Failure::bounded(store, limits, async |store| {
                pre.instantiate_async(store).await
            })
            .await
            .map(ToolExports::V0_1),
            ToolPre::V0_2(pre) => Failure::bounded(store, limits, async |store| {
                pre.instantiate_async(store).await
            })
            .await
            .map(ToolExports::V0_2),
        }
    }
}

/// An instantiated tool's exports.
pub enum ToolExports {
    V0_1(v0_1::tool::Tool),
    V0_2(v0_2::tool::Tool),
}

impl ToolExports {
    /// `describe`.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap or a limit.
    pub async fn describe(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
    ) -> Result<ToolDescriptor, Failure> {
        match self {
            ToolExports::V0_1(tool) => v0_1::describe_tool(tool, store, limits).await,
            ToolExports::V0_2(tool) => v0_2::describe_tool(tool, store, limits).await,
        }
    }

    /// `execute`.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap or a limit.
    pub async fn execute(
        &self,
        store: &mut Store<StoreState>,
        limits: &Limits,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        match self {
            ToolExports::V0_1(tool) => v0_1::execute(tool, store, limits, ctx, call).await,
            ToolExports::V0_2(tool) => v0_2::execute(tool, store, limits, ctx, call).await,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Outcome {
    #[default]
    Done,
    Refused,
    Failed,
}

/// What the host knows of the call so far, told to the `after-execute` phases: as
/// `hookhost.*` context values to 0.1.0 hooks, as a `call-outcome` to 0.2.0 hooks.
#[derive(Default)]
pub struct Record {
    outcome: Outcome,
    /// The tool ran and returned an error.
    tool_error: bool,
    refused_by: Option<String>,
    failures: Vec<LayerFailure>,
}

/// One failure of a layer of the call.
struct LayerFailure {
    /// The hook's name, or the tool's.
    layer: String,
    /// `before-execute`, `after-execute` (a hook's), or `execute` (the tool's).
    phase: &'static str,
    kind: FailureKind,
}

impl Record {
    /// What `after-execute` is told when the tool ran: `done`, or for 0.2.0 hooks
    /// `tool-error` when its result is an error.
    pub fn tool_ran(is_error: bool) -> Record {
        Record {
            tool_error: is_error,
            ..Record::default()
        }
    }

    /// What `after-execute` is told when the hook `by` refused the call.
    pub fn refused(by: &str) -> Record {
        Record {
            outcome: Outcome::Refused,
            refused_by: Some(by.to_string()),
            ..Record::default()
        }
    }

    /// Records whether the tool's result is an error.
    pub fn set_tool_error(&mut self, is_error: bool) {
        self.tool_error = is_error;
    }

    /// Records that the hook `by` refused the call.
    pub fn refuse(&mut self, by: &str) {
        self.outcome = Outcome::Refused;
        self.refused_by = Some(by.to_string());
    }

    /// Records that `layer`'s `phase` failed with `kind`; the failure of a layer that
    /// fails `closed` fails the call.
    pub fn failed(&mut self, layer: &str, phase: &'static str, kind: FailureKind, closed: bool) {
        self.failures.push(LayerFailure {
            layer: layer.to_string(),
            phase,
            kind,
        });
        if closed {
            self.outcome = Outcome::Failed;
        }
    }

    /// The outcome so far: `done`, `tool-error`, `refused` or `failed`.
    pub fn outcome_name(&self) -> &'static str {
        match self.outcome {
            Outcome::Done if self.tool_error => "tool-error",
            Outcome::Done => "done",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }
}

/// The type of a setting a component declares (a built-in's, or a 0.2.0 hook's through
/// `hook-info`), as the config file writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SettingType {
    /// A non-negative integer: `threshold = 10000`.
    Count,
    /// A string: `file = "/audit/audit.jsonl"`.
    Text,
    /// A list of strings, or one comma-separated string: `exclude_tools = ["read_file"]`.
    Names,
    /// `true` or `false`.
    Flag,
}

impl SettingType {
    /// Whether `value` has this type.
    pub fn accepts(self, value: &toml::Value) -> bool {
        match (self, value) {
            (SettingType::Count, toml::Value::Integer(n)) => *n >= 0,
            (SettingType::Text, toml::Value::String(_)) => true,
            (SettingType::Names, toml::Value::Array(items)) => items.iter().all(|i| i.is_str()),
            (SettingType::Names, toml::Value::String(_)) => true,
            (SettingType::Flag, toml::Value::Boolean(_)) => true,
            _ => false,
        }
    }
}

impl fmt::Display for SettingType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SettingType::Count => "a non-negative integer",
            SettingType::Text => "a string",
            SettingType::Names => "a list of strings (or one comma-separated string)",
            SettingType::Flag => "true or false",
        })
    }
}
