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
//!
//! A hook that also says what it is and which settings it reads implements [`Describe`]
//! and is exported with [`export_described!`] instead: the component is then of the
//! `described-hook` world, and a host refuses a config that gives it a setting it does not
//! declare, or a value of another type, when it loads the hook.
//!
//! ```ignore
//! impl hookhost_hook::Describe for NoFriday {
//!     fn describe() -> HookDescription {
//!         HookDescription::new("Refuses the listed tools on Fridays")
//!             .names("tools", &[], "the tools refused")
//!     }
//! }
//!
//! hookhost_hook::export_described!(NoFriday);
//! ```

#[doc(hidden)]
pub use hookhost_hook_bindings as bindings;

/// The `described-hook` world: the `hook` world's imports and types (shared through `with`),
/// its own copy of `tool-hook`'s export types, and `hook-info`. Used by
/// [`export_described!`]; a hook names [`HookDescription`] and [`SettingType`] from the
/// crate root.
#[doc(hidden)]
pub mod described {
    wit_bindgen::generate!({
        path: "../../wit/hooks@0.2.0",
        world: "described-hook",
        with: {
            "harness:hooks/types@0.2.0": hookhost_hook_bindings::harness::hooks::types,
            "harness:hooks/outcomes@0.2.0": hookhost_hook_bindings::harness::hooks::outcomes,
            "wasi:config/store@0.2.0-rc.1": hookhost_hook_bindings::wasi::config::store,
        },
        pub_export_macro: true,
        export_macro_name: "export_described_bindings",
        default_bindings_module: "hookhost_hook::described",
    });

    use exports::harness::hooks::tool_hook as described;

    impl From<crate::Proceed> for described::Proceed {
        fn from(p: crate::Proceed) -> Self {
            described::Proceed {
                values: p.values,
                arguments: p.arguments,
            }
        }
    }

    impl From<crate::After> for described::After {
        fn from(after: crate::After) -> Self {
            match after {
                crate::After::Keep => described::After::Keep,
                crate::After::Replace(result) => described::After::Replace(result),
                crate::After::Fail(why) => described::After::Fail(why),
            }
        }
    }
}

pub use bindings::exports::harness::hooks::tool_hook::{After, Guest, Proceed};
pub use bindings::harness::hooks::outcomes::{
    CallOutcome, Failure, FailureKind, OutcomeKind, Phase,
};
pub use bindings::harness::hooks::types::{CallContext, ToolCall, ToolResult};
pub use described::exports::harness::hooks::hook_info::{HookDescription, Setting, SettingType};
/// Writing files without a thread hop per write: use it rather than `std::fs` to write.
pub use hookhost_fs as files;

/// Outgoing HTTP to the hosts the operator granted the hook (`network = { allow = [...] }`).
pub use hookhost_http as http;

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

/// A hook that says what it is: exported with [`export_described!`], it lets a host list it
/// and refuse a setting it does not read.
pub trait Describe: Hook {
    /// What the hook is and every setting it reads. Called once when the host loads it,
    /// without grants or settings.
    fn describe() -> HookDescription;
}

impl HookDescription {
    /// A hook that does `summary`, for any tool, that reads no settings.
    pub fn new(summary: &str) -> HookDescription {
        HookDescription {
            summary: summary.to_string(),
            tools: Vec::new(),
            settings: Vec::new(),
        }
    }

    /// Meant for these tools (names, `*` and `?` wildcards) rather than any.
    pub fn tools(mut self, tools: &[&str]) -> HookDescription {
        self.tools = tools.iter().map(|t| t.to_string()).collect();
        self
    }

    /// Reads the non-negative integer `name`, `default` when it is not given.
    pub fn count(self, name: &str, default: u64, description: &str) -> HookDescription {
        let default = default.to_string();
        self.setting(name, SettingType::Count, Some(&default), description)
    }

    /// Reads the string `name`, `default` when it is not given.
    pub fn text(self, name: &str, default: Option<&str>, description: &str) -> HookDescription {
        let default = default.map(|d| format!("{d:?}"));
        self.setting(name, SettingType::Text, default.as_deref(), description)
    }

    /// Reads the list of strings `name`, `default` when it is not given.
    pub fn names(self, name: &str, default: &[&str], description: &str) -> HookDescription {
        let default = format!("{default:?}");
        self.setting(name, SettingType::Names, Some(&default), description)
    }

    /// Reads the setting `name` of type `kind`; `default` is what it uses when the setting
    /// is not given, as a config would write it (`200`, `"/audit/log.jsonl"`, `["a", "b"]`).
    pub fn setting(
        mut self,
        name: &str,
        kind: SettingType,
        default: Option<&str>,
        description: &str,
    ) -> HookDescription {
        self.settings.push(Setting {
            name: name.to_string(),
            type_: kind,
            default: default.map(String::from),
            description: description.to_string(),
        });
        self
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
    $crate::bindings::export_bindings!(Exported with_types_in $crate::bindings);
        };
    };
}

/// Exports `$hook` (a type implementing [`Hook`] and [`Describe`]) as the component's
/// `tool-hook` and `hook-info`: a component of the `described-hook` world.
#[macro_export]
macro_rules! export_described {
    ($hook:ty) => {
        const _: () = {
            use $crate::described::exports::harness::hooks as exported;
            struct Exported;
            impl exported::tool_hook::Guest for Exported {
                fn before_execute(
                    ctx: $crate::CallContext,
                    call: $crate::ToolCall,
                ) -> ::core::result::Result<exported::tool_hook::Proceed, ::std::string::String>
                {
                    <$hook as $crate::Hook>::before_execute(ctx, call)
                        .map(::core::convert::Into::into)
                }
                fn after_execute(
                    ctx: $crate::CallContext,
                    call: $crate::ToolCall,
                    outcome: $crate::CallOutcome,
                    result: $crate::ToolResult,
                ) -> exported::tool_hook::After {
                    <$hook as $crate::Hook>::after_execute(ctx, call, outcome, result).into()
                }
            }
            impl exported::hook_info::Guest for Exported {
                fn describe() -> $crate::HookDescription {
                    <$hook as $crate::Describe>::describe()
                }
            }
    $crate::described::export_described_bindings!(Exported with_types_in $crate::described);
        };
    };
}

/// The operator's settings for this hook (`wasi:config/store`), typed. TOML values that are
/// not strings arrive as their JSON text; each reader says what it expected when a value
/// has another type, so a hook can refuse the call (or trap) with that message.
pub mod settings {
    use crate::bindings::wasi::config::store;

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
