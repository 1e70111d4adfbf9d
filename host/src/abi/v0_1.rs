//! `harness:hooks@0.1.0`: its bindings, and how a hook or tool of that version is called.
//!
//! Its `types` are the latest version's (the same interface: see [`super::latest`]); its
//! `proceed` is converted. A 0.1.0 `after-execute` always returns a result, and learns how
//! the call went from context values the host sets (`hookhost.*`, see [`RESERVED_PREFIX`]).

use super::latest::{CallContext, Proceed, ToolCall, ToolDescriptor, ToolResult};
use super::{After, Outcome, Record};
use crate::failure::Failure;
use crate::limits::Limits;
use crate::sandbox::StoreState;
use wasmtime::Store;

/// Bindings of the `hook` world.
pub mod hook {
    wasmtime::component::bindgen!({
        path: "../wit/hooks@0.1.0",
        world: "hook",
        exports: { default: async },
        with: {
            "harness:hooks/types": crate::abi::latest::types,
        },
    });
}

/// Bindings of the `tool` world.
pub mod tool {
    wasmtime::component::bindgen!({
        path: "../wit/hooks@0.1.0",
        world: "tool",
        exports: { default: async },
        with: {
            "harness:hooks/types": crate::abi::latest::types,
        },
    });
}

/// Context values the host sets for `after-execute`; a hook cannot set them itself.
pub const RESERVED_PREFIX: &str = "hookhost.";
/// `done`, `refused` or `failed`: how the call went so far.
pub const OUTCOME_KEY: &str = "hookhost.outcome";
/// The hook that refused the call.
pub const REFUSED_BY_KEY: &str = "hookhost.refused-by";
/// What failed so far, `; `-separated: `hook 'NAME' PHASE: KIND` or `tool 'NAME': KIND`.
pub const FAILURE_KEY: &str = "hookhost.failure";

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
    Ok(proceed.map(|p| Proceed {
        values: p.values,
        arguments: p.arguments,
    }))
}

/// `after-execute`, told `record` as `hookhost.*` context values (any the agent set under
/// that prefix are dropped first).
pub(super) async fn after(
    hook: &hook::Hook,
    store: &mut Store<StoreState>,
    limits: &Limits,
    ctx: &CallContext,
    call: &ToolCall,
    record: &Record,
    result: &ToolResult,
) -> Result<After, Failure> {
    let mut ctx = ctx.clone();
    write_record(record, &mut ctx.values);
    let ctx = &ctx;
    Failure::bounded(store, limits, async |store| {
        hook.harness_hooks_tool_hook()
            .call_after_execute(store, ctx, call, result)
            .await
    })
    .await
    .map(After::Replace)
}

fn write_record(record: &Record, values: &mut Vec<(String, String)>) {
    values.retain(|(k, _)| !k.starts_with(RESERVED_PREFIX));
    let outcome = match record.outcome {
        Outcome::Done => "done",
        Outcome::Refused => "refused",
        Outcome::Failed => "failed",
    };
    values.push((OUTCOME_KEY.into(), outcome.into()));
    if let Some(by) = &record.refused_by {
        values.push((REFUSED_BY_KEY.into(), by.clone()));
    }
    if !record.failures.is_empty() {
        let failures: Vec<String> = record
            .failures
            .iter()
            .map(|f| match f.phase {
                "execute" => format!("tool '{}': {}", f.layer, f.kind),
                phase => format!("hook '{}' {phase}: {}", f.layer, f.kind),
            })
            .collect();
        values.push((FAILURE_KEY.into(), failures.join("; ")));
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
