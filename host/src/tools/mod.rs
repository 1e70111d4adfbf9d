//! Tools: what the agent calls, at the centre of the hook chain.
//!
//! A tool is a guest component (the `tool` world, see [`guest`]), a host-native tool such
//! as [`bash`], or a tool of an upstream MCP server ([`upstream`]); all sit behind the
//! [`Tool`] trait, so the chain treats them alike.

pub mod bash;
pub mod guest;
pub mod upstream;

use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::sandbox::Failure;
use crate::session::Session;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A tool the runtime can call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// Its name, description and input schema.
    fn descriptor(&self) -> &ToolDescriptor;

    /// Runs one call for `session`. A call that ran and went wrong is an `Ok` result with
    /// `is_error`; `Err` means the tool itself failed (a component trapped, timed out...).
    async fn execute(
        &self,
        session: &Session,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure>;
}

/// The tools of a runtime, by name.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// Adds `tool` under its descriptor's name; returns false (and adds nothing) when the
    /// name is taken.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) -> bool {
        let name = tool.descriptor().name.clone();
        if self.tools.contains_key(&name) {
            return false;
        }
        self.tools.insert(name, tool);
        true
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// The tools' descriptors, by name.
    pub fn descriptors(&self) -> impl Iterator<Item = &ToolDescriptor> {
        self.tools.values().map(|t| t.descriptor())
    }
}

/// Splits a page of the built-in `read_file` into its text and the offset its last line says
/// to continue from (`[bytes A-B of T; to continue reading use offset=B]`); `None` on the
/// last page. A page whose text merely looks like a trailer but does not end with a
/// well-formed one is all text.
pub fn split_read_file_page(page: &str) -> (&str, Option<u64>) {
    if let Some(at) = page.rfind("\n\n[bytes ")
        && let Some(next) = page[at..]
            .strip_suffix(']')
            .and_then(|t| t.rsplit_once("use offset="))
            .and_then(|(_, n)| n.parse().ok())
    {
        return (&page[..at], Some(next));
    }
    (page, None)
}
