//! Tools: what the agent calls, at the centre of the hook chain.
//!
//! A tool is a guest component (the `tool` world, see [`guest`]), a host-native tool such
//! as [`bash`], or a tool of an upstream MCP server ([`upstream`]); all sit behind the
//! [`Tool`] trait, so the chain treats them alike (it calls them as a [`Callee`]).

pub mod bash;
pub mod guest;
pub mod rich;
pub mod upstream;

use crate::abi::ToolDescriptor;
pub use crate::chain::Callee;
use crate::sessions::SessionHolder;
pub use rich::Extras;
use std::collections::{BTreeMap, HashSet};
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

    /// What the call `call_id` returned beyond the text its hooks saw (its content blocks
    /// and structured content, see [`rich`]): taken once, after the chain ran.
    fn take_extras(&self, _call_id: &str) -> Option<Extras> {
        None
    }
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

/// What is listed of the items that several servers offer, `groups` of them by server, in
/// order: each name once — a later item of a name taken already is left out, logged — and
/// of those, the ones `shown` lets the client see. A name hidden from the client stays
/// taken: no later item of that name is listed in its place (it would be a different one
/// under a name the client may not use).
pub fn listed<'a, T>(
    groups: impl IntoIterator<Item = (&'a str, Vec<T>)>,
    name: impl Fn(&T) -> &str,
    shown: impl Fn(&str) -> bool,
) -> Vec<T> {
    let mut taken = HashSet::new();
    let mut listed = Vec::new();
    for (server, items) in groups {
        for item in items {
            if !taken.insert(name(&item).to_string()) {
                tracing::warn!(
                    server,
                    name = name(&item),
                    "a name another server lists first is not listed again"
                );
                continue;
            }
            if shown(name(&item)) {
                listed.push(item);
            }
        }
    }
    listed
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_name_is_listed_once_and_a_hidden_one_stays_taken() {
        let groups = [
            ("first", vec!["a", "secret"]),
            ("second", vec!["a", "b", "secret"]),
        ];
        let listed = super::listed(groups, |n| n, |n| n != "secret");
        assert_eq!(listed, ["a", "b"]);
    }
}
