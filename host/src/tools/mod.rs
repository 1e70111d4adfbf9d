//! Tools: what the agent calls, at the centre of the hook chain.
//!
//! A tool is a guest component (the `tool` world, see [`guest`]), a host-native tool such
//! as [`bash`], or a tool of an upstream MCP server ([`upstream`]); all sit behind the
//! [`Tool`] trait, so the chain treats them alike (it calls them as a [`Callee`]).

pub mod bash;
pub mod guest;
pub mod upstream;

use crate::abi::ToolDescriptor;
pub use crate::chain::Callee;
use crate::sessions::SessionHolder;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A tool the runtime can call: what the chain calls ([`Callee`]), and what MCP lists of
/// it. As a [`SessionHolder`], it stops what still runs for a session that ended (a
/// command and its background children); most tools hold nothing.
pub trait Tool: Callee + SessionHolder {
    /// How MCP lists the tool when it has more to say than its descriptor (an upstream
    /// server's title, annotations and output schema).
    fn mcp_listing(&self) -> Option<&rmcp::model::Tool> {
        None
    }

    /// What the call `call_id` returned beside its text, which hooks do not see: taken
    /// once, after the chain ran.
    fn take_extras(&self, _call_id: &str) -> Option<Extras> {
        None
    }
}

/// What a tool call returned beside its text output: MCP structured content, and content
/// blocks that are not text (images, audio, resources), passed to the MCP client as they
/// are. The text output (what hooks see) names each such block.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    pub structured: Option<serde_json::Value>,
    pub blocks: Vec<rmcp::model::ContentBlock>,
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

    /// Every tool.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    /// The tools' descriptors, by name.
    pub fn descriptors(&self) -> impl Iterator<Item = &ToolDescriptor> {
        self.tools.values().map(|t| t.descriptor())
    }
}
