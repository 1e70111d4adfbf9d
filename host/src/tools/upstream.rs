//! Upstream MCP servers: hookhost connects to them as a client and serves their tools as
//! its own, named `UPSTREAM__TOOL`, so every call goes through the hook chain (offload,
//! audit…) like any other tool.
//!
//! An upstream that does not start within its timeout is reported and contributes no
//! tools; one that dies later answers every call of its tools with an error naming it.
//! Each call is bounded by the same timeout, so a hung upstream never hangs a client.

use super::Tool;
use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::config::{UpstreamConfig, is_tool_name};
use crate::sandbox::Failure;
use crate::session::Session;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use std::sync::Arc;
use std::time::Duration;

/// Separates an upstream's name from its tool's in the names agents see.
pub const SEPARATOR: &str = "__";

/// How long an upstream may take to start, and each call, unless its config says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why an upstream could not be used.
#[derive(Debug, thiserror::Error)]
#[error("upstream '{name}': {what}")]
pub struct UpstreamError {
    pub name: String,
    pub what: String,
}

/// A connected upstream server.
struct Upstream {
    name: String,
    client: RunningService<RoleClient, ()>,
    timeout: Duration,
}

/// One tool of an upstream server.
pub struct UpstreamTool {
    descriptor: ToolDescriptor,
    remote: String,
    upstream: Arc<Upstream>,
}

/// Starts (or connects to) the upstream `name` and returns its tools.
///
/// # Errors
///
/// [`UpstreamError`] when it cannot be started, does not answer in time, or its tools
/// cannot be listed.
pub async fn connect(
    name: &str,
    spec: &UpstreamConfig,
) -> Result<Vec<UpstreamTool>, UpstreamError> {
    let fail = |what: String| UpstreamError {
        name: name.to_string(),
        what,
    };
    let timeout = spec
        .timeout_secs
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let started = async {
        match (&spec.command, &spec.url) {
            (Some(command), _) => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(&spec.args).kill_on_drop(true);
                let transport = TokioChildProcess::new(cmd)
                    .map_err(|e| fail(format!("cannot start {command}: {e}")))?;
                ().serve(transport)
                    .await
                    .map_err(|e| fail(format!("no MCP handshake: {e}")))
            }
            (None, Some(url)) => {
                let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                ().serve(transport)
                    .await
                    .map_err(|e| fail(format!("no MCP handshake with {url}: {e}")))
            }
            (None, None) => Err(fail("neither `command` nor `url` is given".into())),
        }
    };
    let client = tokio::time::timeout(timeout, started)
        .await
        .map_err(|_| fail(format!("did not start within {} s", timeout.as_secs())))??;
    let listed = tokio::time::timeout(timeout, client.list_all_tools())
        .await
        .map_err(|_| fail("did not list its tools in time".into()))?
        .map_err(|e| fail(format!("cannot list its tools: {e}")))?;
    let upstream = Arc::new(Upstream {
        name: name.to_string(),
        client,
        timeout,
    });
    let mut tools = Vec::new();
    for tool in listed {
        let exposed = format!("{name}{SEPARATOR}{}", tool.name);
        if !is_tool_name(&exposed) {
            tracing::warn!(upstream = name, tool = %tool.name, "skipping a tool whose name cannot be served");
            continue;
        }
        tools.push(UpstreamTool {
            descriptor: ToolDescriptor {
                name: exposed,
                description: tool.description.as_deref().unwrap_or_default().to_string(),
                input_schema: serde_json::to_string(tool.input_schema.as_ref())
                    .unwrap_or_else(|_| r#"{"type":"object"}"#.into()),
            },
            remote: tool.name.to_string(),
            upstream: upstream.clone(),
        });
    }
    tracing::info!(upstream = name, tools = tools.len(), "upstream connected");
    Ok(tools)
}

#[async_trait::async_trait]
impl Tool for UpstreamTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        _session: &Session,
        _ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        let upstream = &self.upstream;
        let arguments: JsonObject = serde_json::from_str(&call.arguments).unwrap_or_default();
        let request = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        let answer =
            tokio::time::timeout(upstream.timeout, upstream.client.call_tool(request)).await;
        Ok(match answer {
            Ok(Ok(result)) => to_tool_result(result),
            Ok(Err(e)) => ToolResult::error(format!("upstream '{}' failed: {e}", upstream.name)),
            Err(_) => ToolResult::error(format!(
                "upstream '{}' did not answer within {} s",
                upstream.name,
                upstream.timeout.as_secs()
            )),
        })
    }
}

/// Text blocks joined by newlines; other blocks as their JSON.
fn to_tool_result(result: CallToolResult) -> ToolResult {
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block.as_text() {
            Some(text) => text.text.clone(),
            None => serde_json::to_string(block).unwrap_or_default(),
        })
        .collect();
    let output = if parts.is_empty() {
        result
            .structured_content
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default()
    } else {
        parts.join("\n")
    };
    ToolResult {
        output,
        is_error: result.is_error.unwrap_or(false),
        media_type: None,
    }
}
