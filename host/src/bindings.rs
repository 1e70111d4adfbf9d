//! Rust bindings of the WIT package `harness:hooks@0.1.0` (the public plugin ABI).
//!
//! The `hook` world owns the shared `types` interface; the `tool` world reuses those Rust
//! types, so a [`ToolCall`] or [`ToolResult`] moves between hooks and tools unchanged.

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
