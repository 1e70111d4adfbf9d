//! Upstream MCP servers: hookhost connects to them as a client and serves their tools as
//! its own, named `UPSTREAM__TOOL`, so every call goes through the hook chain (offload,
//! audit…) like any other tool.
//!
//! An upstream that does not start within its timeout is reported and contributes no
//! tools; one that dies later answers every call of its tools with an error naming it.
//! Each call is bounded by the same timeout, so a hung upstream never hangs a client.
//!
//! Security: a stdio upstream starts with an empty environment plus `PATH` and the
//! operator's `env` (so no tenant can read the host's environment through it); a URL
//! upstream gets only the operator's `headers`. Its stderr goes to the host's log, never
//! to the output of a command.

use super::{Extras, Tool};
use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::config::{UpstreamConfig, expand_env, is_tool_name};
use crate::sandbox::Failure;
use crate::session::Session;
use axum::http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, Tool as McpTool,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
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
pub struct Upstream {
    name: String,
    client: RunningService<RoleClient, ()>,
    timeout: Duration,
}

impl Upstream {
    /// Whether it still answers (its process or connection is alive).
    pub fn is_up(&self) -> bool {
        !self.client.is_closed()
    }
}

/// One tool of an upstream server.
pub struct UpstreamTool {
    descriptor: ToolDescriptor,
    /// The upstream's listing under the name served (title, annotations, output schema).
    listing: McpTool,
    remote: String,
    upstream: Arc<Upstream>,
    /// What calls returned beside their text, until the MCP front end takes it.
    extras: Mutex<HashMap<String, Extras>>,
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
) -> Result<(Arc<Upstream>, Vec<UpstreamTool>), UpstreamError> {
    let fail = |what: String| UpstreamError {
        name: name.to_string(),
        what,
    };
    let timeout = spec
        .timeout_secs
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let expanded = |table: &std::collections::BTreeMap<String, crate::config::Secret>,
                    key: &str| {
        table
            .iter()
            .map(|(k, v)| {
                expand_env(v.expose())
                    .map(|v| (k.clone(), v))
                    .map_err(|why| fail(format!("{key}.{k}: {why}")))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let env = expanded(&spec.env, "env")?;
    let headers = expanded(&spec.headers, "headers")?;
    let started = async {
        match (&spec.command, &spec.url) {
            (Some(command), _) => {
                let mut cmd = tokio::process::Command::new(command);
                let path = std::env::var_os("PATH")
                    .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
                cmd.args(&spec.args)
                    .env_clear()
                    .env("PATH", path)
                    .envs(env)
                    .kill_on_drop(true);
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| fail(format!("cannot start {command}: {e}")))?;
                if let Some(stderr) = stderr {
                    tokio::spawn(log_stderr(name.to_string(), stderr));
                }
                ().serve(transport)
                    .await
                    .map_err(|e| fail(format!("no MCP handshake: {e}")))
            }
            (None, Some(url)) => {
                let mut custom = std::collections::HashMap::new();
                for (key, value) in headers {
                    let key = HeaderName::try_from(key.as_str())
                        .map_err(|e| fail(format!("headers.{key}: {e}")))?;
                    let value = HeaderValue::try_from(value)
                        .map_err(|e| fail(format!("headers.{key}: {e}")))?;
                    custom.insert(key, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(config);
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
        let mut listing = tool.clone();
        listing.name = exposed.clone().into();
        tools.push(UpstreamTool {
            descriptor: ToolDescriptor {
                name: exposed,
                description: tool.description.as_deref().unwrap_or_default().to_string(),
                input_schema: serde_json::to_string(tool.input_schema.as_ref())
                    .unwrap_or_else(|_| r#"{"type":"object"}"#.into()),
            },
            listing,
            remote: tool.name.to_string(),
            upstream: upstream.clone(),
            extras: Mutex::new(HashMap::new()),
        });
    }
    tracing::info!(upstream = name, tools = tools.len(), "upstream connected");
    Ok((upstream, tools))
}

/// Copies an upstream's stderr into the host's log, line by line.
async fn log_stderr(name: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(upstream = %name, "stderr: {line}");
    }
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
            Ok(Ok(result)) => {
                let (result, extras) = split_result(result);
                if let Some(extras) = extras {
                    self.extras
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(call.id.clone(), extras);
                }
                result
            }
            Ok(Err(e)) => ToolResult::error(format!("upstream '{}' failed: {e}", upstream.name)),
            Err(_) => ToolResult::error(format!(
                "upstream '{}' did not answer within {} s",
                upstream.name,
                upstream.timeout.as_secs()
            )),
        })
    }

    fn mcp_listing(&self) -> Option<&McpTool> {
        Some(&self.listing)
    }

    fn take_extras(&self, call_id: &str) -> Option<Extras> {
        self.extras
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(call_id)
    }
}

/// The text the hooks see — text blocks joined by newlines, each other block named by a
/// line such as `[image: image/png, 10240 bytes of base64, passed to the client]` — and
/// what passes beside it: structured content, and the non-text blocks as they are.
fn split_result(result: CallToolResult) -> (ToolResult, Option<Extras>) {
    let mut parts = Vec::new();
    let mut blocks = Vec::new();
    for block in result.content {
        match &block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::Image(image) => {
                parts.push(format!(
                    "[image: {}, {} bytes of base64, passed to the client]",
                    image.mime_type,
                    image.data.len()
                ));
                blocks.push(block);
            }
            ContentBlock::Audio(audio) => {
                parts.push(format!(
                    "[audio: {}, {} bytes of base64, passed to the client]",
                    audio.mime_type,
                    audio.data.len()
                ));
                blocks.push(block);
            }
            other => {
                let what = match other {
                    ContentBlock::Resource(_) => "embedded resource",
                    ContentBlock::ResourceLink(_) => "resource link",
                    _ => "content",
                };
                parts.push(format!("[{what}, passed to the client]"));
                blocks.push(block);
            }
        }
    }
    let output = if parts.is_empty() {
        result
            .structured_content
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default()
    } else {
        parts.join("\n")
    };
    let extras = (result.structured_content.is_some() || !blocks.is_empty()).then(|| Extras {
        structured: result.structured_content,
        blocks,
    });
    let result = ToolResult {
        output,
        is_error: result.is_error.unwrap_or(false),
        media_type: None,
    };
    (result, extras)
}
