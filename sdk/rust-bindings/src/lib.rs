//! The `hook` world of `harness:hooks@0.2.0`, for `hookhost-hook`; a hook names these
//! types through `hookhost_hook`.
//!
//! A crate of its own because wit-bindgen names an exported interface's export macros
//! after the interface, at the crate root: the `hook` and `described-hook` worlds both
//! export `tool-hook`, so their bindings cannot share one crate.

wit_bindgen::generate!({
    path: "../../wit/hooks@0.2.0",
    world: "hook",
    generate_all,
    pub_export_macro: true,
    export_macro_name: "export_bindings",
    default_bindings_module: "hookhost_hook::bindings",
});

use exports::harness::hooks::tool_hook::Proceed;
use harness::hooks::outcomes::{FailureKind, Phase};
use harness::hooks::types::CallContext;

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
