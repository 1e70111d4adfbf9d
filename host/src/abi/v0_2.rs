//! `harness:hooks@0.2.0`: its bindings, and how a hook or tool of that version is called.
//!
//! It is the latest version: its `types` are the host's own (see [`super::latest`]), which
//! 0.1.0's bindings reuse. A 0.2.0 `after-execute` is told how
//! the call went as a `call-outcome` and answers `keep`, `replace` or `fail`; a hook of the
//! `described-hook` world also says what it is and which settings it takes (`hook-info`).

use super::latest::{CallContext, Proceed, ToolCall, ToolDescriptor, ToolResult};
use super::{After, Outcome, Record, SettingType};
use crate::failure::{Failure, FailureKind};
use crate::limits::{LimitOverrides, Limits};
use crate::sandbox::{Sandbox, Settings, StoreState};
use wasmtime::Store;
use wasmtime::component::InstancePre;

/// The `hook` world.
pub mod hook {
    wasmtime::component::bindgen!({
        path: "../wit/hooks@0.2.0",
        world: "hook",
        exports: { default: async },
        additional_derives: [serde::Serialize, PartialEq, Eq],
    });
}

/// The `described-hook` world: a hook that exports `hook-info`.
pub mod described {
    wasmtime::component::bindgen!({
        path: "../wit/hooks@0.2.0",
        world: "described-hook",
        exports: { default: async },
        with: {
            "harness:hooks/types": super::hook::harness::hooks::types,
            "harness:hooks/outcomes": super::hook::harness::hooks::outcomes,
        },
    });
}

/// The `tool` world.
pub mod tool {
    wasmtime::component::bindgen!({
        path: "../wit/hooks@0.2.0",
        world: "tool",
        exports: { default: async },
        with: {
            "harness:hooks/types": super::hook::harness::hooks::types,
        },
    });
}

pub use described::exports::harness::hooks::hook_info::{HookDescription, Setting};
use hook::harness::hooks::outcomes;

/// The export a 0.2.x hook has (any 0.2 minor: semver-compatible).
pub const HOOK_EXPORT: &str = "harness:hooks/tool-hook@0.2.";
/// The export of a hook that describes itself.
pub const INFO_EXPORT: &str = "harness:hooks/hook-info@0.2.";
/// The export a 0.2.x tool has.
pub const TOOL_EXPORT: &str = "harness:hooks/tool-provider@0.2.";

/// A 0.2.0 hook ready to instantiate.
pub struct HookPre {
    pub(super) pre: hook::HookPre<StoreState>,
    /// Set when it exports `hook-info` (the `described-hook` world).
    pub(super) describe: Option<described::DescribedHookPre<StoreState>>,
}

impl HookPre {
    pub(super) fn new(pre: InstancePre<StoreState>, described: bool) -> wasmtime::Result<HookPre> {
        let describe = match described {
            true => Some(described::DescribedHookPre::new(pre.clone())?),
            false => None,
        };
        Ok(HookPre {
            pre: hook::HookPre::new(pre)?,
            describe,
        })
    }
}

pub(super) async fn before(
    hook: &hook::Hook,
    store: &mut Store<StoreState>,
    limits: &Limits,
    ctx: &CallContext,
    call: &ToolCall,
) -> Result<Result<Proceed, String>, Failure> {
    let proceed = Failure::bounded(store, limits, async |store| {
        hook.harness_hooks_tool_hook()
            .call_before_execute(store, ctx, call)
            .await
    })
    .await?;
    Ok(proceed)
}

/// `after-execute`, told `record` as a `call-outcome`. Its `fail` is a
/// [`FailureKind::Declared`] failure, with what it wrote to stderr.
pub(super) async fn after(
    hook: &hook::Hook,
    store: &mut Store<StoreState>,
    limits: &Limits,
    ctx: &CallContext,
    call: &ToolCall,
    record: &Record,
    result: &ToolResult,
) -> Result<After, Failure> {
    let outcome = call_outcome(record);
    let after = Failure::bounded(store, limits, async |store| {
        hook.harness_hooks_tool_hook()
            .call_after_execute(store, ctx, call, &outcome, result)
            .await
    })
    .await?;
    use hook::exports::harness::hooks::tool_hook::After as Answer;
    match after {
        Answer::Keep => Ok(After::Keep),
        Answer::Replace(replaced) => Ok(After::Replace(replaced)),
        Answer::Fail(message) => {
            Err(Failure::new(FailureKind::Declared, message).with_stderr(&store.data().stderr()))
        }
    }
}

/// `record` as 0.2.0's `call-outcome`.
fn call_outcome(record: &Record) -> outcomes::CallOutcome {
    use outcomes::{FailureKind as K, OutcomeKind, Phase};
    outcomes::CallOutcome {
        kind: match record.outcome {
            Outcome::Done if record.tool_error => OutcomeKind::ToolError,
            Outcome::Done => OutcomeKind::Done,
            Outcome::Refused => OutcomeKind::Refused,
            Outcome::Failed => OutcomeKind::Failed,
        },
        refused_by: record.refused_by.clone(),
        failures: record
            .failures
            .iter()
            .map(|f| outcomes::Failure {
                layer: f.layer.clone(),
                phase: match f.phase {
                    "before-execute" => Phase::BeforeExecute,
                    "after-execute" => Phase::AfterExecute,
                    _ => Phase::Execute,
                },
                kind: match f.kind {
                    FailureKind::Timeout => K::Timeout,
                    FailureKind::Fuel => K::Fuel,
                    FailureKind::Memory => K::Memory,
                    FailureKind::OutputTooLarge => K::OutputTooLarge,
                    FailureKind::InvalidOutput => K::InvalidOutput,
                    FailureKind::Trap => K::Trap,
                    FailureKind::Setup => K::Setup,
                    FailureKind::Declared => K::Declared,
                    // 0.2.0 (never edited) has no kind for it: the call wrote more than
                    // its tenant may keep, the nearest of its kinds.
                    FailureKind::DiskQuota => K::OutputTooLarge,
                },
            })
            .collect(),
    }
}

/// What a hook exporting `hook-info` says of itself: instantiated once, with no grants,
/// within the default limits under its own.
///
/// # Errors
///
/// A [`Failure`] when `describe` traps, times out or returns too much.
pub async fn describe_hook(
    pre: &described::DescribedHookPre<StoreState>,
    sandbox: &Sandbox,
    settings: &Settings,
    limits: &LimitOverrides,
) -> Result<HookDescription, Failure> {
    let (mut store, limits) = sandbox.describe_store(settings, limits)?;
    let bindings = Failure::bounded(&mut store, &limits, async |store| {
        pre.instantiate_async(store).await
    })
    .await?;
    let description = Failure::bounded(&mut store, &limits, async |store| {
        bindings
            .harness_hooks_hook_info()
            .call_describe(store)
            .await
    })
    .await?;
    let size = description.summary.len()
        + description.tools.iter().map(String::len).sum::<usize>()
        + description
            .settings
            .iter()
            .map(|s| s.name.len() + s.description.len() + s.default.as_ref().map_or(0, String::len))
            .sum::<usize>();
    Failure::check_output(size, &limits)?;
    Ok(description)
}

impl Setting {
    /// The setting's type, as the host checks a config's value.
    pub fn setting_type(&self) -> SettingType {
        use described::exports::harness::hooks::hook_info::SettingType as T;
        match self.type_ {
            T::Count => SettingType::Count,
            T::Text => SettingType::Text,
            T::Names => SettingType::Names,
            T::Flag => SettingType::Flag,
        }
    }
}

pub(super) async fn describe_tool(
    tool: &tool::Tool,
    store: &mut Store<StoreState>,
    limits: &Limits,
) -> Result<ToolDescriptor, Failure> {
    Failure::bounded(store, limits, async |store| {
        tool.harness_hooks_tool_provider()
            .call_describe(store)
            .await
    })
    .await
}

pub(super) async fn execute(
    tool: &tool::Tool,
    store: &mut Store<StoreState>,
    limits: &Limits,
    ctx: &CallContext,
    call: &ToolCall,
) -> Result<ToolResult, Failure> {
    Failure::bounded(store, limits, async |store| {
        tool.harness_hooks_tool_provider()
            .call_execute(store, ctx, call)
            .await
    })
    .await
}
