//! What MCP lists of the tools a client may call: the host's tools, then each upstream
//! server's its session uses (the shared ones, then its instances of those with one per
//! tenant or session), each name once (see [`crate::tools::listed`]), as its tenant's
//! `tools` allow-list lets it see them ([`Tenants::authorize`](crate::sessions::Tenants)).

use crate::abi::ToolDescriptor;
use crate::ids::TenantId;
use crate::runtime::Runtime;
use crate::sessions::{Action, Session};
use rmcp::model::{JsonObject, Tool};
use std::sync::Arc;

/// The tools `tenant` may call, as MCP lists them; with its `session`, that session's
/// instances of upstream servers too (started now if need be).
pub(super) async fn tools(
    runtime: &Runtime,
    tenant: &TenantId,
    session: Option<&Session>,
) -> Vec<Tool> {
    let upstreams = match session {
        Some(session) => runtime.upstreams_for(session).await,
        None => runtime.shared_upstreams(),
    };
    let host = runtime.host_tools().iter().map(listing).collect();
    let groups = std::iter::once(("hookhost", host))
        .chain(upstreams.iter().map(|u| (u.name(), u.listing())));
    let tenants = runtime.tenants();
    crate::tools::listed(
        groups,
        |t| &t.name,
        |name| tenants.authorize(tenant, Action::Call(name)),
    )
}

/// How MCP lists a host tool: its name, description and input schema.
fn listing(tool: &ToolDescriptor) -> Tool {
    let schema: JsonObject = serde_json::from_str(&tool.input_schema).unwrap_or_default();
    Tool::new(
        tool.name.clone(),
        tool.description.clone(),
        Arc::new(schema),
    )
}
