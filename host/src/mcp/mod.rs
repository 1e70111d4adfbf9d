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
//! client presents, made at `initialize`; the client's `DELETE`, or the idle timeout
//! (every request of the session keeps it alive), ends both, and an ended session stays
//! ended (404). A request of MCP 2026-07-28, which has neither `initialize` nor MCP
//! sessions, is served statelessly (by rmcp) and names its hookhost session itself
//! (`http/stateless.rs`: the `Hookhost-Session` header or the [`SESSION_META`] `_meta`
//! key; [`NEW_SESSION`] asks for one), or runs in an ephemeral one deleted once it is
//! answered; over stdio the connection's session serves it. Both eras are served side by
//! side.
//!
//! Ending a session stops its running commands before its directories are deleted; a
//! cancelled request (`notifications/cancelled`) stops its call. A call over its tenant's
//! rate limits is answered with the error [`RATE_LIMITED`]. SIGTERM and SIGINT end a
//! server gracefully: running calls get `[serve] shutdown_grace`
//! ([`SHUTDOWN_GRACE`](crate::limits::SHUTDOWN_GRACE) by default; an HTTP server drains,
//! refusing new requests with 503), then the server's sessions are ended as on disconnect. SIGHUP reloads the config (see
//! [`reload`]): sessions stay open, and calls running finish on the config they began with.
//!
//! `mod.rs` is the MCP server one session sees ([`McpServer`]); `stdio.rs` and `http.rs`
//! are the two transports, HTTP with its gate (tokens, sessions opened, the agents' hook
//! endpoint, health and metrics), [`tls`] its TLS (bearer JWTs are [`crate::jwt`]'s); `admin.rs`
//! is the admin page; [`reload`] puts a config read again in effect.

use crate::ids::TenantId;
use crate::limits::MCP_PEER_CHECK;
use crate::persistent::OnConflict;
use crate::runtime::{CallError, Rate, Runtime};
use crate::sessions::{Session, SessionError};
use changes::{Change, Changes};
#[allow(deprecated, reason = "MCP 2025-11-25 has logging; hookhost serves it")]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, CustomRequest, CustomResult, DiscoverResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerConfig, ServerNotification, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, RequestContext, SubscriptionContext, SubscriptionSendError,
};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The MCP method by which a client publishes its session's persistent directories.
pub const COMMIT_METHOD: &str = crate::runtime::COMMIT_CALL;

mod admin;
mod auth;
mod changes;
pub mod gateway;
mod http;
mod listing;
pub mod reload;
mod stdio;
pub mod tls;
mod waiting;

/// The JSON-RPC error code of a call its tenant's rate limits refused (in the range
/// JSON-RPC leaves to implementations; MCP defines none). Its `data` says which limit
/// (`rate` or `concurrent`) and, for a rate, when to retry: `{"limit": "rate",
/// "retry_after_ms": 180}`.
pub const RATE_LIMITED: rmcp::model::ErrorCode = rmcp::model::ErrorCode(-32029);

/// The JSON-RPC error code of a commit (`hookhost/commit`, or the end of a session over
/// HTTP) that a conflict stopped: a file changed both in the store since the session
/// loaded it and by the session. Its `data` names them, `{"mount": "/persistent/notes",
/// "files": ["a.md"]}`; nothing of that directory was published, and the session goes on.
/// `hookhost/commit` with `{"resolve": "ours"}` (or `"theirs"`) settles them for one
/// commit.
pub const COMMIT_CONFLICT: rmcp::model::ErrorCode = rmcp::model::ErrorCode(-32040);

/// A failed commit as an MCP error: a conflict as [`COMMIT_CONFLICT`] naming its files,
/// anything else an internal error.
pub(crate) fn commit_error(e: &SessionError) -> McpError {
    match e.conflict() {
        Some((mount, files)) => McpError::new(
            COMMIT_CONFLICT,
            e.to_string(),
            Some(serde_json::json!({"mount": mount, "files": files})),
        ),
        None => McpError::internal_error(e.to_string(), None),
    }
}

pub use http::{
    HttpOptions, NEW_SESSION, SESSION_HEADER, SESSION_META, metrics_route, serve_http,
    serve_metrics,
};
pub use reload::{ConfigSource, Reloader};
pub use stdio::serve_stdio;

/// The path the Streamable HTTP endpoint is served at.
pub const HTTP_PATH: &str = "/mcp";

/// How `serve` makes and ends its sessions.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// The working directory of every session the server makes (`serve --workdir`); else
    /// the tenant's or `[serve] workdir` from the config.
    pub workdir: Option<PathBuf>,
    /// Keep sessions (and their files) when they end by disconnect or shutdown.
    pub keep_session: bool,
    /// Where the config is read again on SIGHUP (or `POST /admin/reload`).
    pub config: ConfigSource,
    /// How long running calls may finish after a shutdown signal (`[serve]
    /// shutdown_grace`).
    pub shutdown_grace: Duration,
}

impl ServeOptions {
    fn workdir(
        &self,
        runtime: &Runtime,
        tenant: &TenantId,
    ) -> Result<Option<PathBuf>, SessionError> {
        match &self.workdir {
            Some(dir) => Ok(Some(dir.clone())),
            None => runtime.tenants().serve_workdir(tenant),
        }
    }
}

/// The MCP face of a runtime: one per stdio connection or per HTTP MCP session.
#[derive(Clone)]
pub struct McpServer {
    runtime: Arc<Runtime>,
    /// stdio: the connection's session. HTTP: `None`, the session comes with each request.
    session: Option<Arc<Session>>,
    /// The tenant of a stdio connection; over HTTP each request names its own.
    tenant: TenantId,
    /// Cancelled when the client is gone (stdin reached its end): the calls still running
    /// stop at once, as if each had been cancelled, since no one can read their answers.
    gone: CancellationToken,
    /// The upstream resources this client subscribed to.
    subscriptions: Arc<gateway::Subscriptions>,
    /// The capabilities its `initialize` was answered with: only their list changes are
    /// told to it (a reload that adds an upstream's prompts tells nobody who was not
    /// told it serves prompts).
    declared: Arc<std::sync::OnceLock<rmcp::model::ServerCapabilities>>,
    /// The requests of MCP 2026-07-28 clients waiting for their input, the server's
    /// (over HTTP, one for every request).
    waiting: Arc<waiting::Waiting>,
}

/// The HTTP request behind an MCP request, with the tenant the gate authenticated.
fn http_tenant(
    context: &RequestContext<RoleServer>,
) -> Option<(&axum::http::request::Parts, TenantId)> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    let tenant = parts.extensions.get::<TenantId>()?.clone();
    Some((parts, tenant))
}

impl McpServer {
    fn tenant_of(&self, context: &RequestContext<RoleServer>) -> TenantId {
        match (&self.session, http_tenant(context)) {
            (Some(session), _) => session.tenant.clone(),
            (None, Some((_, tenant))) => tenant,
            (None, None) => self.tenant.clone(),
        }
    }

    fn session_for(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Session>, McpError> {
        if let Some(session) = &self.session {
            return Ok(session.clone());
        }
        // The gate opened it for this request (see `guard`).
        let (parts, _) = http_tenant(context)
            .ok_or_else(|| McpError::internal_error("no authenticated HTTP request", None))?;
        parts
            .extensions
            .get::<Arc<Session>>()
            .cloned()
            .ok_or_else(|| McpError::invalid_request("no Mcp-Session-Id", None))
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = gateway::capabilities(&self.runtime.shared_upstreams());
        let info = InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("hookhost", env!("CARGO_PKG_VERSION")));
        if self.runtime.offloads(&self.tenant) {
            info.with_instructions(hookhost_formats::instructions())
        } else {
            info
        }
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        // What the upstreams this client's session uses serve.
        if let Ok(session) = self.session_for(&context) {
            result.capabilities =
                gateway::capabilities(&self.runtime.upstreams_for(&session).await);
        }
        // The caller's chain (over HTTP, the tenant its token names) decides, not the
        // default tenant's that `get_info` knows.
        result.instructions = self
            .runtime
            .offloads(&self.tenant_of(&context))
            .then(hookhost_formats::instructions);
        let _ = self.declared.set(result.capabilities.clone());
        Ok(result)
    }

    /// MCP 2026's `server/discover`, for the caller's tenant as `initialize` is.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        let mut info = self.get_info();
        info.instructions = self
            .runtime
            .offloads(&self.tenant_of(&context))
            .then(hookhost_formats::instructions);
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Tell this client when the tools change, what its upstreams tell every client,
        // and the updates of the resources it subscribed to, for as long as it is
        // connected.
        let changes = Changes::follow(&self.runtime);
        let subscriptions = self.subscriptions.clone();
        let declared = self.declared.get().cloned().unwrap_or_default();
        let (prompts, resources) = (declared.prompts.is_some(), declared.resources.is_some());
        tokio::spawn(async move {
            let peer = context.peer;
            let closed = async {
                let mut check = tokio::time::interval(MCP_PEER_CHECK);
                while !peer.is_transport_closed() {
                    check.tick().await;
                }
            };
            let tell = |change| {
                let (peer, subscriptions) = (peer.clone(), subscriptions.clone());
                #[allow(deprecated, reason = "MCP 2025-11-25 has resources/subscribe")]
                async move {
                    let sent = match change {
                        Change::Tools => peer.notify_tool_list_changed().await,
                        Change::Prompts if prompts => peer.notify_prompt_list_changed().await,
                        Change::Resources if resources => peer.notify_resource_list_changed().await,
                        Change::Prompts | Change::Resources => Ok(()),
                        Change::ResourceUpdated(uri) if subscriptions.contains(&uri) => {
                            peer.notify_resource_updated(
                                rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                            )
                            .await
                        }
                        Change::ResourceUpdated(_) => Ok(()),
                    };
                    sent.is_ok()
                }
            };
            changes.forward(closed, tell).await;
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp narrows it to the capabilities declared (resources only when an upstream
        // offers `resources.subscribe`).
        Some(requested.clone())
    }

    /// A 2026 client's `subscriptions/listen`: the list changes it asked for, and the
    /// updates of the resources it named (each subscribed upstream while it listens, as a
    /// 2025 session's `resources/subscribe` is; one it may not read, or no upstream
    /// serves, is left out and logged), as long as its request lasts.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let followed = Arc::new(gateway::Subscriptions::default());
        let request = context.request_context();
        for uri in context.accepted().resource_subscriptions.iter().flatten() {
            if let Err(e) = self
                .subscribe_in(&followed, uri.clone(), true, request)
                .await
            {
                tracing::info!(%uri, error = %e.message, "a listener's resource not followed");
            }
        }
        let sink = context.sink().clone();
        let tell = move |change| {
            let (sink, followed) = (sink.clone(), followed.clone());
            #[allow(
                deprecated,
                reason = "the resource's update is what the listener asked"
            )]
            async move {
                let notification = match change {
                    Change::Tools => {
                        ServerNotification::ToolListChangedNotification(Default::default())
                    }
                    Change::Prompts => {
                        ServerNotification::PromptListChangedNotification(Default::default())
                    }
                    Change::Resources => {
                        ServerNotification::ResourceListChangedNotification(Default::default())
                    }
                    Change::ResourceUpdated(uri) if followed.contains(&uri) => {
                        ServerNotification::ResourceUpdatedNotification(
                            rmcp::model::ResourceUpdatedNotification::new(
                                rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                            ),
                        )
                    }
                    Change::ResourceUpdated(_) => return true,
                };
                match sink.send(notification).await {
                    Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => true,
                    Err(_) => false,
                }
            }
        };
        Changes::follow(&self.runtime)
            .forward(context.cancelled(), tell)
            .await;
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = match self.session_for(&context) {
            Ok(session) => listing::tools(&self.runtime, &session.tenant, Some(&session)).await,
            Err(_) => listing::tools(&self.runtime, &self.tenant_of(&context), None).await,
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.list_upstream_resources(&context).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.list_upstream_templates(&context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.read_upstream_resource(request, &context).await
    }

    #[allow(
        deprecated,
        reason = "MCP 2025-11-25 has resources/subscribe; hookhost serves it"
    )]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribe_upstream(request.uri, true, &context).await
    }

    #[allow(
        deprecated,
        reason = "MCP 2025-11-25 has resources/unsubscribe; hookhost serves it"
    )]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribe_upstream(request.uri, false, &context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.list_upstream_prompts(&context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.get_upstream_prompt(request, &context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.complete_upstream(request, &context).await
    }

    #[allow(deprecated, reason = "MCP 2025-11-25 has logging; hookhost serves it")]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.set_upstream_level(request, &context).await
    }

    /// `hookhost/commit`: publishes the session's persistent directories now (at the end
    /// of an agent's turn, say): each all or nothing; a conflict is the error
    /// [`COMMIT_CONFLICT`] naming the files, the checkout kept, unless the params say how to
    /// settle it this once (`{"resolve": "ours" | "theirs"}`). Answers what each published.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        if request.method != COMMIT_METHOD {
            return Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let resolve = match request.params.as_ref().and_then(|p| p.get("resolve")) {
            None | Some(serde_json::Value::Null) => None,
            Some(how) => match serde_json::from_value::<OnConflict>(how.clone()) {
                Ok(OnConflict::Fail) | Err(_) => {
                    return Err(McpError::invalid_params(
                        "resolve: \"ours\" (the session's version is published) or \"theirs\" (the store's stays)",
                        None,
                    ));
                }
                Ok(how) => Some(how),
            },
        };
        let session = self.session_for(&context)?;
        // A commit is admitted as a call is, within the tenant's rate: a store's commit
        // reaches the network, and a client must not loop it unbounded.
        let _admitted = self
            .runtime
            .admit(&session, COMMIT_METHOD, Rate::Counted)
            .await
            .map_err(refused)?;
        let committed = self
            .runtime
            .commit(&session, None, resolve)
            .await
            .map_err(|e| commit_error(&e))?;
        let committed: Vec<serde_json::Value> = committed
            .into_iter()
            .map(|(mount, report)| {
                serde_json::json!({
                    "mount": mount,
                    "created": report.created,
                    "updated": report.updated,
                    "deleted": report.deleted,
                    "keptTheirs": report.kept_theirs,
                    "bytes": report.bytes,
                })
            })
            .collect();
        Ok(CustomResult::new(
            serde_json::json!({ "committed": committed }),
        ))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let what = format!("tools/call {}", request.name);
        let responses = request.input_responses.take();
        let called = match request.request_state.take() {
            Some(state) => self.resumed(&context, what, &state, responses).await?,
            None => {
                let session = self.session_for(&context)?;
                let arguments =
                    serde_json::Value::Object(request.arguments.unwrap_or_default()).to_string();
                // A 2026 client has no MCP session: the result names the hookhost session
                // it ran in, for the client to name again; or, when it named none, says
                // that the files the result names are already gone.
                let ephemeral =
                    http_tenant(&context).is_some_and(|(parts, _)| http::is_ephemeral(parts));
                let named = match ephemeral {
                    true => Named::Gone,
                    false if is_2026(&context) => Named::Session,
                    false => Named::Not,
                };
                let (runtime, called, name) = (self.runtime.clone(), session.clone(), request.name);
                let call = async move {
                    let result = runtime.call_with_extras(&called, &name, &arguments).await;
                    answer(&called, result, named)
                };
                // What an upstream sends meanwhile (progress, logs, questions) goes to this
                // client; a cancelled request drops its call: hooks stop, a command's
                // process group dies.
                self.asking_client(&session, &context, what, responses, call)
                    .await?
            }
        };
        match called {
            waiting::Waited::Done(answer) => answer.map(Into::into),
            waiting::Waited::Asks(asks) => Ok(asks.into()),
        }
    }
}

/// What a tool result says of the hookhost session it ran in (see `call_tool`).
#[derive(Clone, Copy)]
enum Named {
    /// Nothing: a 2025-era session's client knows it.
    Not,
    /// Its id, in the result's `_meta`, for a 2026 client to name again.
    Session,
    /// That it is gone with the files it made, when the result names one.
    Gone,
}

/// The answer to a tool call, from what the call returned.
fn answer(
    session: &Session,
    called: Result<(crate::abi::ToolResult, Option<crate::tools::Extras>), CallError>,
    named: Named,
) -> Result<CallToolResult, McpError> {
    let (result, extras) = match called {
        Ok(called) => called,
        Err(e @ (CallError::UnknownTool { .. } | CallError::NoTools { .. })) => {
            return Err(McpError::invalid_params(e.to_string(), None));
        }
        Err(e @ CallError::RateLimited(_)) => return Err(refused(e)),
        Err(e @ (CallError::BadArguments { .. } | CallError::Session(_))) => {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                e.to_string(),
            )]));
        }
    };
    let (content, structured) = match extras {
        Some(extras) => extras.delivered(result.output),
        None => (vec![ContentBlock::text(result.output)], None),
    };
    let mut answer = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    answer.structured_content = structured;
    match named {
        Named::Gone if names_a_file(session, &answer) => {
            answer
                .content
                .push(ContentBlock::text(http::EPHEMERAL_NOTE));
        }
        Named::Session => {
            let mut meta = rmcp::model::MetaObject::default();
            meta.0
                .insert(SESSION_META.into(), session.id.as_str().into());
            answer.meta = Some(meta);
        }
        Named::Gone | Named::Not => {}
    }
    Ok(answer)
}

impl McpServer {
    /// Resolves when the request of `context` (`what`) is cancelled by its client, or the
    /// client is gone.
    fn stopped(
        &self,
        context: &RequestContext<RoleServer>,
        what: String,
    ) -> impl Future<Output = ()> + Send + 'static {
        let (cancelled, gone) = (context.ct.clone(), self.gone.clone());
        async move {
            tokio::select! {
                () = cancelled.cancelled() => tracing::info!(request = %what, "cancelled by the client"),
                () = gone.cancelled() => tracing::info!(request = %what, "stopped: the client is gone"),
            }
        }
    }
}

/// Whether a tool result names a file deleted with the session (an offloaded output, most
/// often): one under a session-scoped mount.
fn names_a_file(session: &Session, answer: &CallToolResult) -> bool {
    let prefixes: Vec<String> = session
        .own_mounts()
        .map(|mount| format!("{}/", mount.virtual_path))
        .collect();
    answer.content.iter().any(|block| {
        block
            .as_text()
            .is_some_and(|text| prefixes.iter().any(|p| text.text.contains(p.as_str())))
    })
}

/// Whether the request is one of MCP 2026-07-28 or later (its `_meta` says so).
fn is_2026(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The answer to a request its tenant's rate limits refused (see [`RATE_LIMITED`]).
fn refused(error: CallError) -> McpError {
    let CallError::RateLimited(refused) = error else {
        return McpError::internal_error(error.to_string(), None);
    };
    let data = serde_json::json!({
        "limit": refused.reason(),
        "retry_after_ms": refused.retry_after().map(|d| d.as_millis() as u64),
    });
    McpError::new(RATE_LIMITED, refused.to_string(), Some(data))
}

/// Resolves on SIGTERM or SIGINT with the signal's name. The handlers are installed when
/// this is called, so call it before serving.
///
/// # Errors
///
/// When a signal handler cannot be installed.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = &'static str>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}
