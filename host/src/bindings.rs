//! Rust bindings of the WIT packages `harness:hooks@0.1.0` and `@0.2.0` (the public plugin
//! ABI), one module per version; the host loads hooks of both into one chain.
//!
//! The 0.1.0 `hook` world owns the shared `types` interface; the 0.1.0 `tool` world and the
//! 0.2.0 worlds reuse those Rust types (0.2.0's `types` interface is the same), so a
//! [`ToolCall`] or [`ToolResult`] moves between hooks of either version and tools
//! unchanged, without a copy.

/// Bindings of the `hook` world.
pub mod hook {
    wasmtime::component::bindgen!({
        path: "../wit/hooks@0.1.0",
        world: "hook",
        exports: { default: async },
        additional_derives: [serde::Serialize, PartialEq, Eq],
    });
}

/// Bindings of the `tool` world.
pub mod tool {
    wasmtime::component::bindgen!({
        path: "../wit/hooks@0.1.0",
        world: "tool",
        exports: { default: async },
        with: {
            "harness:hooks/types": super::hook::harness::hooks::types,
        },
    });
}

/// Bindings of `harness:hooks@0.2.0`.
pub mod v0_2_0 {
    /// The `hook` world.
    pub mod hook {
        wasmtime::component::bindgen!({
            path: "../wit/hooks@0.2.0",
            world: "hook",
            exports: { default: async },
            with: {
                "harness:hooks/types": crate::bindings::hook::harness::hooks::types,
            },
        });
    }

    /// The `described-hook` world: a hook that exports `hook-info`.
    pub mod described {
        wasmtime::component::bindgen!({
            path: "../wit/hooks@0.2.0",
            world: "described-hook",
            exports: { default: async },
            with: {
                "harness:hooks/types": crate::bindings::hook::harness::hooks::types,
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
                "harness:hooks/types": crate::bindings::hook::harness::hooks::types,
            },
        });
    }

    pub use described::exports::harness::hooks::hook_info::{
        HookDescription, Setting, SettingType,
    };
    pub use hook::exports::harness::hooks::tool_hook::{After, Proceed};
    pub use hook::harness::hooks::outcomes::{
        CallOutcome, Failure, FailureKind, OutcomeKind, Phase,
    };
}

pub use hook::exports::harness::hooks::tool_hook::Proceed;
pub use hook::harness::hooks::types::{CallContext, ToolCall, ToolDescriptor, ToolResult};

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
}
