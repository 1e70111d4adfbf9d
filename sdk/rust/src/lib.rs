//! Write a hookhost hook in Rust.
//!
//! ```ignore
//! use hookhost_hook::{CallContext, Hook, Proceed, ToolCall, settings};
//!
//! struct NoFriday;
//!
//! impl Hook for NoFriday {
//!     fn before_execute(_ctx: CallContext, call: ToolCall) -> Result<Proceed, String> {
//!         let tools = settings::names("tools")?;
//!         if tools.contains(&call.name) { return Err("not on a Friday".into()); }
//!         Ok(Proceed::unchanged())
//!     }
//! }
//!
//! hookhost_hook::export!(NoFriday);
//! ```
//!
//! Build with `cargo build --release --target wasm32-wasip2` in a `cdylib` crate: the
//! result is a component of the `hook` world of `harness:hooks@0.2.0`.

wit_bindgen::generate!({
    path: "../../wit/hooks@0.2.0",
    world: "hook",
    generate_all,
    pub_export_macro: true,
    export_macro_name: "export_bindings",
    default_bindings_module: "hookhost_hook",
});

pub use exports::harness::hooks::tool_hook::{After, Guest, Proceed};
pub use harness::hooks::outcomes::{CallOutcome, Failure, FailureKind, OutcomeKind, Phase};
pub use harness::hooks::types::{CallContext, ToolCall, ToolResult};
/// Writing files without a thread hop per write: use it rather than `std::fs` to write.
pub use hookhost_fs as files;

/// A hook: both phases have pass-through defaults, so a hook writes only the phase it needs.
pub trait Hook {
    /// Runs before the tool, outermost hook first: `Ok` lets the call through (see
    /// [`Proceed`]), `Err(message)` refuses it. To fail (rather than refuse), panic: the
    /// operator's `on_failure` policy then decides.
    fn before_execute(_ctx: CallContext, _call: ToolCall) -> Result<Proceed, String> {
        Ok(Proceed::unchanged())
    }

    /// Runs after the tool, innermost hook first; `outcome` says how the call went.
    /// Returns [`After::Keep`] to hand `result` on unchanged (nothing is copied back),
    /// [`After::Replace`] with a new result, or [`After::Fail`] when the hook cannot do
    /// its job.
    fn after_execute(
        _ctx: CallContext,
        _call: ToolCall,
        _outcome: CallOutcome,
        _result: ToolResult,
    ) -> After {
        After::Keep
    }
}

impl Proceed {
    /// Lets the call through with its arguments and context values as they are.
    pub fn unchanged() -> Proceed {
        Proceed {
            values: None,
            arguments: None,
        }
    }
}

impl FailureKind {
    /// The WIT name: `timeout`, `output-too-large`, …
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Fuel => "fuel",
            FailureKind::Memory => "memory",
            FailureKind::OutputTooLarge => "output-too-large",
            FailureKind::InvalidOutput => "invalid-output",
            FailureKind::Trap => "trap",
            FailureKind::Setup => "setup",
            FailureKind::Declared => "declared",
        }
    }
}

impl Phase {
    /// The WIT name: `before-execute`, `after-execute` or `execute`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::BeforeExecute => "before-execute",
            Phase::AfterExecute => "after-execute",
            Phase::Execute => "execute",
        }
    }
}

impl CallContext {
    /// The value of `key` set by an earlier layer.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Exports `$hook` (a type implementing [`Hook`]) as the component's `tool-hook`.
#[macro_export]
macro_rules! export {
    ($hook:ty) => {
        const _: () = {
            struct Exported;
            impl $crate::Guest for Exported {
                fn before_execute(
                    ctx: $crate::CallContext,
                    call: $crate::ToolCall,
                ) -> ::core::result::Result<$crate::Proceed, ::std::string::String> {
                    <$hook as $crate::Hook>::before_execute(ctx, call)
                }
                fn after_execute(
                    ctx: $crate::CallContext,
                    call: $crate::ToolCall,
                    outcome: $crate::CallOutcome,
                    result: $crate::ToolResult,
                ) -> $crate::After {
                    <$hook as $crate::Hook>::after_execute(ctx, call, outcome, result)
                }
            }
    $crate::export_bindings!(Exported with_types_in $crate);
        };
    };
}

/// The operator's settings for this hook (`wasi:config/store`), typed. TOML values that are
/// not strings arrive as their JSON text; each reader says what it expected when a value
/// has another type, so a hook can refuse the call (or trap) with that message.
pub mod settings {
    use crate::wasi::config::store;

    /// The setting's text, if it is set.
    pub fn text(key: &str) -> Option<String> {
        store::get(key).ok().flatten()
    }

    /// The setting's text, or `default` when it is not set.
    pub fn text_or(key: &str, default: &str) -> String {
        text(key).unwrap_or_else(|| default.to_string())
    }

    /// A non-negative integer, or `default` when it is not set.
    ///
    /// # Errors
    ///
    /// When it is set to something else.
    pub fn count(key: &str, default: u64) -> Result<u64, String> {
        match text(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("setting `{key}` must be a non-negative integer, not {v:?}")),
        }
    }

    /// A list of strings: a TOML list (it arrives as JSON) or one comma-separated string;
    /// empty when not set.
    ///
    /// # Errors
    ///
    /// When it is a list of something other than strings.
    pub fn names(key: &str) -> Result<Vec<String>, String> {
        let Some(v) = text(key) else {
            return Ok(Vec::new());
        };
        if v.trim_start().starts_with('[') {
            return serde_json::from_str(&v)
                .map_err(|_| format!("setting `{key}` must be a list of strings, not {v}"));
        }
        Ok(v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect())
    }
}
