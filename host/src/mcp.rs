//! hookhost as an MCP server, over stdio or Streamable HTTP (with the official Rust SDK,
//! `rmcp`).
//!
//! `tools/list` lists the configured tools (their descriptions and input schemas come from
//! the components); `tools/call` runs through the session's hook chain and answers with the
//! result's text and `isError`. When the chain offloads, the `initialize` result carries
//! instructions telling the model how offloaded outputs look and how to page them.
//!
//! Sessions: a stdio server is one hookhost session, made at start and deleted (with its
//! session-scoped directories) when the client disconnects, unless kept. Over HTTP, an MCP
//! session (`Mcp-Session-Id`) is a hookhost session of the tenant whose bearer token the
//! client presents; the client's `DELETE`, or the idle timeout, ends both. Only protocol
//! versions with sessions (`initialize` handshakes, up to 2025-11-25) are offered, since a
//! hookhost session needs one.

use crate::ids::{SessionId, TenantId};
use crate::runtime::{CallError, Runtime};
use crate::session::Session;
use crate::session_store::SessionError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use subtle::ConstantTimeEq;

/// What the model is told when offload is in the chain (the `initialize` instructions).
pub const OFFLOAD_INSTRUCTIONS: &str = "\
Tool outputs longer than the context can take are offloaded: the full output is saved to a \
file under /artifacts/tool-results/ and the result you receive is a reference instead. It \
starts with \"[Output offloaded: …]\", then gives the file's path (\"Full output: PATH\"), \
its size in bytes and lines, and a preview of its first lines (and, for JSON, a summary of \
its structure). The preview may be enough; when it is not, read the file with the read_file \
tool: {\"path\": PATH, \"offset\": 0, \"limit\": 4096} returns the first 4096 bytes, and each \
page that does not reach the end closes with \"[bytes A-B of T; to continue reading use \
offset=B]\": call read_file again with that offset. Read only the pages you need; prefer a \
larger limit (up to 262144) over many small pages when you need much of the file.";

/// The path the Streamable HTTP endpoint is served at.
pub const HTTP_PATH: &str = "/mcp";

/// How long an HTTP MCP session may stay idle before it is ended (and its hookhost session
/// deleted), unless the operator says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);

/// The MCP face of a runtime: one per stdio connection or per HTTP MCP session.
#[derive(Clone)]
pub struct McpServer {
    runtime: Arc<Runtime>,
    /// stdio: the connection's session. HTTP: `None`, the session comes with each request.
    session: Option<Arc<Session>>,
    /// Whose chain `initialize` describes.
    tenant: TenantId,
}

impl McpServer {
    fn session_for(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Session>, McpError> {
        if let Some(session) = &self.session {
            return Ok(session.clone());
        }
        let parts = context
            .extensions
            .get::<axum::http::request::Parts>()
            .ok_or_else(|| McpError::internal_error("no HTTP request", None))?;
        let tenant = parts
            .extensions
            .get::<TenantId>()
            .cloned()
            .ok_or_else(|| McpError::internal_error("no authenticated tenant", None))?;
        let id = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| McpError::invalid_request("no Mcp-Session-Id", None))?;
        let id = SessionId::new(id).map_err(|e| McpError::invalid_request(e.to_string(), None))?;
        let session = match self.runtime.open_session(&tenant, &id) {
            Ok(session) => session,
            Err(SessionError::NotFound { .. }) => {
                match self
                    .runtime
                    .create_session(tenant.clone(), Some(id.clone()), None)
                {
                    Ok(session) => session,
                    // A concurrent first call made it.
                    Err(SessionError::Exists { .. }) => self
                        .runtime
                        .open_session(&tenant, &id)
                        .map_err(|e| McpError::internal_error(e.to_string(), None))?,
                    Err(e) => return Err(McpError::invalid_request(e.to_string(), None)),
                }
            }
            Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
        };
        Ok(Arc::new(session))
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hookhost", env!("CARGO_PKG_VERSION")));
        if self.runtime.offloads(&self.tenant) {
            info.with_instructions(OFFLOAD_INSTRUCTIONS)
        } else {
            info
        }
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self
            .runtime
            .tools()
            .map(|d| {
                let schema: JsonObject = serde_json::from_str(&d.input_schema).unwrap_or_default();
                McpTool::new(d.name.clone(), d.description.clone(), Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let session = self.session_for(&context)?;
        let arguments =
            serde_json::Value::Object(request.arguments.unwrap_or_default()).to_string();
        let result = match self.runtime.call(&session, &request.name, &arguments).await {
            Ok(result) => result,
            Err(e @ CallError::UnknownTool { .. }) => {
                return Err(McpError::invalid_params(e.to_string(), None));
            }
            Err(e) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into());
            }
        };
        let content = vec![ContentBlock::text(result.output)];
        Ok(if result.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

/// Serves MCP on stdin/stdout as one session of `tenant`, until the client disconnects;
/// then deletes the session unless `keep`.
///
/// # Errors
///
/// When the session cannot be made, or the transport fails.
pub async fn serve_stdio(
    runtime: Arc<Runtime>,
    tenant: TenantId,
    keep: bool,
) -> anyhow::Result<()> {
    let session = Arc::new(runtime.create_session(tenant.clone(), None, None)?);
    tracing::info!(session = %session.id, "serving MCP on stdio");
    let server = McpServer {
        runtime: runtime.clone(),
        session: Some(session.clone()),
        tenant,
    };
    let served = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(anyhow::Error::from),
        Err(e) => Err(anyhow::anyhow!("MCP handshake failed: {e}")),
    };
    if !keep {
        runtime.delete_session(&session.tenant, &session.id)?;
        tracing::info!(session = %session.id, "session ended and deleted");
    }
    served
}

/// Who may call the HTTP endpoint: the tenants' bearer tokens, and which session belongs
/// to which tenant.
struct Gate {
    runtime: Arc<Runtime>,
    /// (token, tenant); empty: no authentication, every request is the default tenant.
    tokens: Vec<(Vec<u8>, TenantId)>,
    owners: Mutex<HashMap<String, TenantId>>,
}

impl Gate {
    /// The tenant whose token the request presents. Every token is compared, in constant
    /// time, so timing tells nothing about which one nearly matched.
    fn tenant(&self, headers: &HeaderMap) -> Option<TenantId> {
        if self.tokens.is_empty() {
            return Some(TenantId::default_tenant());
        }
        let presented = headers
            .get(header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?
            .as_bytes();
        let mut found = None;
        for (token, tenant) in &self.tokens {
            if bool::from(token.as_slice().ct_eq(presented)) {
                found = Some(tenant.clone());
            }
        }
        found
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, TenantId>> {
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Authenticates every request, keeps tenants out of each other's sessions, and deletes
/// the hookhost session when its MCP session is deleted.
async fn guard(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let Some(tenant) = gate.tenant(request.headers()) else {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a valid bearer token is required\n",
        )
            .into_response();
    };
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session
        && gate.owners().get(id).is_some_and(|owner| owner != &tenant)
    {
        // Another tenant's session does not exist, as far as this tenant can tell.
        return (StatusCode::NOT_FOUND, "session not found\n").into_response();
    }
    let deleting = request.method() == Method::DELETE;
    request.extensions_mut().insert(tenant.clone());
    let mut response = next.run(request).await;
    if deleting && response.status() == StatusCode::ACCEPTED {
        // The session is gone once this returns; say so plainly (clients such as the Python
        // SDK take anything but 200 as a failed termination).
        *response.status_mut() = StatusCode::OK;
    }

    match &session {
        None => {
            if let Some(id) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                gate.owners().insert(id.to_string(), tenant);
            }
        }
        Some(id) if deleting && response.status().is_success() => {
            gate.owners().remove(id);
            end_session(&gate.runtime, &tenant, id);
        }
        Some(_) => {}
    }
    response
}

fn end_session(runtime: &Runtime, tenant: &TenantId, id: &str) {
    let Ok(id) = SessionId::new(id) else { return };
    match runtime.delete_session(tenant, &id) {
        Ok(()) => tracing::info!(%tenant, session = %id, "MCP session ended; session deleted"),
        // No tool was called: there was never a hookhost session.
        Err(SessionError::NotFound { .. }) => {}
        Err(e) => tracing::warn!(%tenant, session = %id, error = %e, "deleting the session failed"),
    }
}

/// Serves MCP over Streamable HTTP at `addr` (path [`HTTP_PATH`]) until ctrl-c.
///
/// Tenants authenticate with their `token`; with no token in the config, requests are the
/// default tenant's, which is allowed on a loopback address only. MCP sessions idle for
/// `idle` are ended and their hookhost sessions deleted.
///
/// # Errors
///
/// When no tenant has a token and `addr` is not loopback, or the address cannot be bound.
pub async fn serve_http(
    runtime: Arc<Runtime>,
    addr: SocketAddr,
    idle: Duration,
) -> anyhow::Result<()> {
    let tokens = runtime.tenant_tokens();
    if tokens.is_empty() && !addr.ip().is_loopback() {
        anyhow::bail!(
            "refusing to serve {addr} without authentication: declare tenants with a `token`, or bind a loopback address"
        );
    }
    let gate = Arc::new(Gate {
        runtime: runtime.clone(),
        tokens,
        owners: Mutex::new(HashMap::new()),
    });
    let factory_runtime = runtime.clone();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(idle);
    let mut config = StreamableHttpServerConfig::default();
    if !addr.ip().is_loopback() {
        // Host validation protects loopback servers from DNS rebinding; a public server is
        // protected by its tokens instead.
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || {
            Ok(McpServer {
                runtime: factory_runtime.clone(),
                session: None,
                tenant: TenantId::default_tenant(),
            })
        },
        Arc::new(sessions),
        config,
    );
    let app = axum::Router::new()
        .route_service(HTTP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(gate, guard));

    // Idle hookhost sessions go with their idle MCP sessions.
    let sweeper_runtime = runtime.clone();
    let sweeper = tokio::spawn(async move {
        let mut tick = tokio::time::interval(
            (idle / 2).clamp(Duration::from_secs(1), Duration::from_secs(60)),
        );
        loop {
            tick.tick().await;
            let cutoff = SystemTime::now()
                .checked_sub(idle)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            match sweeper_runtime.gc(Some(cutoff)) {
                Ok(r) if r.sessions + r.orphans > 0 => {
                    tracing::info!(
                        sessions = r.sessions,
                        orphans = r.orphans,
                        "idle sessions swept"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sweeping idle sessions failed"),
            }
        }
    });

    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tracing::info!(%local, "serving MCP over HTTP");
    // The address on stderr, so a caller that asked for port 0 learns the port.
    eprintln!("hookhost: serving MCP at http://{local}{HTTP_PATH}");
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    sweeper.abort();
    Ok(served?)
}
