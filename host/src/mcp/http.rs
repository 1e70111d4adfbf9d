//! MCP over Streamable HTTP: the gate (tenants' tokens, the sessions this server opened),
//! the agents' hook endpoint, health and metrics.

use super::auth::{Refusal, Throttle, bearer};
use super::{HTTP_PATH, McpServer, ServeOptions, shutdown_signal, tls};
use crate::agents;
use crate::ids::{SessionId, TenantId};
use crate::jwt::{Jwt, METADATA_PATH};
use crate::limits::{DEFAULT_HOOK_DEADLINE, MAX_HOOK_INPUT_BYTES};
use crate::limits::{MAX_HTTP_BODY_BYTES, SHUTDOWN_CLOSE};
use crate::runtime::Runtime;
use crate::secret::TokenDigest;
use crate::sessions::{IdleSweep, Owner, Principal, SessionError, SessionHolder, SessionKey};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod stateless;
pub use stateless::{EPHEMERAL_NOTE, NEW_SESSION, SESSION_HEADER, SESSION_META};

/// Whether an MCP request runs in an ephemeral session: one of MCP 2026-07-28 that named
/// no hookhost session, whose session is deleted once it is answered (see [`stateless`]).
pub(super) fn is_ephemeral(parts: &axum::http::request::Parts) -> bool {
    ephemeral(parts).is_some()
}

/// The end of a request's ephemeral session, to hold it back (see [`is_ephemeral`]).
pub(super) fn ephemeral(parts: &axum::http::request::Parts) -> Option<stateless::Ephemeral> {
    parts.extensions.get::<stateless::Ephemeral>().cloned()
}

/// Who may call the HTTP endpoint (the tenants' bearer tokens), and the sessions this
/// server made, to end them. Which session is whose is the session table's to say, so
/// that every host of a fleet answers alike.
struct Gate {
    runtime: Arc<Runtime>,
    /// `http` or `https`.
    scheme: &'static str,
    /// The MCP sessions this server opened that have not ended, by id: ended when it
    /// shuts down, unless the session table is a fleet's (its other hosts go on).
    opened: Mutex<HashMap<String, TenantId>>,
    sessions: Arc<LocalSessionManager>,
    options: ServeOptions,
    /// Set at a shutdown signal: from then on every new request is refused (see
    /// [`answer_or_refuse`]).
    draining: AtomicBool,
    /// The requests being answered, each until its response's body has been sent: what a
    /// drain waits for.
    answering: TaskTracker,
    /// Source addresses that failed to authenticate lately.
    throttle: Throttle,
    /// The requests of MCP 2026-07-28 clients waiting for their input (every request's
    /// [`McpServer`] shares it).
    waiting: Arc<super::waiting::Waiting>,
}

impl Gate {
    /// Whether requests must authenticate: tenants have tokens, or JWTs are configured.
    fn authenticates(&self) -> bool {
        let (tenants, jwt) = self.runtime.credentials();
        jwt.is_some() || !tenants.tokens().is_empty()
    }

    /// Who presents the request, among the tenants in effect (a reload may change them):
    /// a tenant, by its own token, else a JWT's tenant and subject (see [`jwt`]). Every
    /// tenant's token is compared, in constant time, so timing tells nothing about which
    /// one nearly matched.
    async fn principal(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        let (tenants, jwt) = self.runtime.credentials();
        let tokens = tenants.tokens();
        if tokens.is_empty() && jwt.is_none() {
            return Ok(Principal::tenant(TenantId::default_tenant()));
        }
        let presented = bearer(headers).ok_or(Refusal::Missing)?;
        // The presented token is hashed once, then compared with every tenant's digest.
        let digest = TokenDigest::of(presented.as_bytes());
        let mut found = None;
        for (token, tenant) in &tokens {
            if token.matches(&digest) {
                found = Some(tenant.clone());
            }
        }
        if let Some(tenant) = found {
            return Ok(Principal::tenant(tenant));
        }
        let jwt = jwt.ok_or(Refusal::InvalidToken)?;
        jwt.principal(presented, &tenants)
            .await
            .map_err(|e| Refusal::InvalidJwt(e.to_string()))
    }

    /// This server's MCP endpoint as a client reaches it: `[auth] resource`, else from
    /// the request's `Host`.
    fn resource(&self, jwt: &Jwt, headers: &HeaderMap) -> String {
        if let Some(resource) = &jwt.plan().resource {
            return resource.clone();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        format!("{}://{host}{HTTP_PATH}", self.scheme)
    }

    /// The answer to a request without a valid token: 401, saying why in its challenge
    /// (`error="invalid_token"` when it presented one, RFC 6750) and where a client that
    /// speaks OAuth finds how to get one (RFC 9728) when JWTs are configured. The refusal
    /// goes with it, for [`answer_or_refuse`] to log, count and throttle.
    fn unauthorized(&self, headers: &HeaderMap, refusal: Refusal) -> Response {
        let mut params: Vec<String> = Vec::new();
        if let Some(jwt) = self.runtime.credentials().1 {
            let resource = self.resource(&jwt, headers);
            let origin = resource.strip_suffix(HTTP_PATH).unwrap_or(&resource);
            params.push(format!(
                "resource_metadata=\"{origin}{METADATA_PATH}{HTTP_PATH}\""
            ));
        }
        if !refusal.challenge().is_empty() {
            params.push(refusal.challenge().to_string());
        }
        unauthorized(
            &params.join(", "),
            "a valid bearer token is required\n",
            refusal,
        )
    }

    fn opened(&self) -> std::sync::MutexGuard<'_, HashMap<String, TenantId>> {
        self.opened.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the hookhost session of a new MCP session.
    async fn open(&self, principal: &Principal, id: &SessionId) -> Result<(), SessionError> {
        let tenant = &principal.tenant;
        let workdir = self.options.workdir(&self.runtime, tenant)?;
        self.runtime
            .sessions()
            .create_for(principal, Some(id.clone()), workdir.as_deref())
            .await?;
        self.opened().insert(id.to_string(), tenant.clone());
        tracing::info!(%tenant, session = %id, "MCP session started");
        Ok(())
    }
}

/// The MCP sessions this server opened, each for a hookhost session.
impl SessionHolder for Gate {
    fn held(&self) -> Vec<SessionKey> {
        self.opened()
            .iter()
            .filter_map(|(id, tenant)| {
                Some(SessionKey::new(tenant, &SessionId::new(id.clone()).ok()?))
            })
            .collect()
    }

    /// Closes the MCP session of the hookhost session `key`, which ended.
    fn forget(&self, key: &SessionKey) {
        let id = key.id.as_str();
        {
            let mut opened = self.opened();
            if opened.get(id) == Some(&key.tenant) {
                opened.remove(id);
            }
        }
        let sessions = self.sessions.clone();
        let id: Arc<str> = Arc::from(id);
        tokio::spawn(async move {
            let _ = sessions.close_session(&id).await;
        });
    }
}

impl Gate {
    /// Ends the MCP session `id` of `tenant` and its hookhost session (commands killed,
    /// files deleted unless kept), its persistent directories published first — or their
    /// changes dropped, when `discard`. A commit that fails (a conflict) keeps both.
    async fn end(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        why: &str,
        discard: bool,
    ) -> Result<(), SessionError> {
        if self.options.keep_session {
            // Kept, but its MCP session is over: not resumed from the table either.
            if let Err(e) = self.runtime.sessions().forget_mcp_state(id.as_str()).await {
                tracing::warn!(session = %id, error = %e, "forgetting an MCP session's state failed");
            }
            self.forget(&SessionKey::new(tenant, id));
            return Ok(());
        }
        // Its end closes the MCP session (see `forget`).
        match self.runtime.end_session(tenant, id, discard).await {
            Ok(()) => {
                tracing::info!(%tenant, session = %id, why, "MCP session ended; session deleted");
                Ok(())
            }
            Err(SessionError::NotFound { .. }) => {
                self.forget(&SessionKey::new(tenant, id));
                Ok(())
            }
            Err(e) => {
                tracing::warn!(%tenant, session = %id, error = %e, "deleting the session failed; it goes on");
                Err(e)
            }
        }
    }
}

/// The header of a client's `DELETE` that drops its session's persistent directories'
/// changes instead of publishing them (`Hookhost-Discard: true`): how a session whose
/// commit conflicts is ended without settling it.
pub const DISCARD_HEADER: &str = "hookhost-discard";

/// Whether a `DELETE` asks to discard (see [`DISCARD_HEADER`]).
fn discards(headers: &HeaderMap) -> bool {
    headers
        .get(DISCARD_HEADER)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
}

/// The answer to a client's `DELETE` of its session (see [`Gate::end`]): 200 once it is
/// gone. A commit a conflict stopped is 409 with the JSON-RPC error
/// [`COMMIT_CONFLICT`](super::COMMIT_CONFLICT) naming its files, the session still there
/// to settle it (`hookhost/commit` with `resolve`) or to be deleted with
/// [`DISCARD_HEADER`]; one the tenant's disk quota stopped is 507 (delete files, or
/// discard); another failure is 500, the session kept too.
fn deleted(ended: Result<(), SessionError>) -> Response {
    let Err(e) = ended else {
        return StatusCode::OK.into_response();
    };
    let status = match (&e, e.conflict()) {
        (_, Some(_)) => StatusCode::CONFLICT,
        (
            SessionError::Commit {
                source: crate::persistent::PersistentError::Quota { .. },
                ..
            },
            None,
        ) => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": null, "error": super::commit_error(&e)
    });
    (status, axum::Json(body)).into_response()
}

/// `response`, with `guard` kept until its body has been sent, or dropped (the client
/// left): for what must last as long as an answer does.
fn held_until_sent<T: Send + 'static>(response: Response, guard: T) -> Response {
    use futures_util::StreamExt;
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _ = &guard;
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

/// The MCP sessions' `initialize`, kept in the session table, so that a host of a fleet
/// resumes an MCP session another host began (rmcp replays the handshake).
struct McpStates(Arc<Runtime>);

#[async_trait::async_trait]
impl SessionStore for McpStates {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        match self.0.sessions().mcp_state(id).await? {
            Some(text) => Ok(Some(serde_json::from_str(&text)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state)?;
        Ok(self.0.sessions().set_mcp_state(id, &text).await?)
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        Ok(self.0.sessions().forget_mcp_state(id).await?)
    }
}

/// The address a request came from over TLS (axum's connect info; a plain connection's is
/// axum's own `SocketAddr`): what the authentication throttle counts by.
#[derive(Clone, Copy)]
struct Source(std::net::IpAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tls::TlsListener>>
    for Source
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tls::TlsListener>) -> Source {
        Source(stream.remote_addr().ip())
    }
}

/// Holds a source address that failed to authenticate too often (429 with `Retry-After`,
/// see [`crate::limits::AUTH_FAILURES_PER_WINDOW`]), and logs (at `info`, with the source
/// and the reason), counts and throttles every refusal of credentials, whichever endpoint
/// made it. Counts each request being answered until its response's body has been sent (a
/// call's SSE stream included): what a drain waits for. A GET (a 2025 session's stream of
/// notifications, which lasts as long as the session) is not waited for. Once the server
/// drains, refuses every new request with 503 and `Retry-After` (the grace: by then
/// another host, or this one restarted, answers), `/readyz` included, so that a balancer
/// moves away at once; `/healthz` still answers (the process is alive). A client that
/// answers an elicitation or sampling request of a running call, in a new POST, is refused
/// too: that call ends with the grace.
async fn answer_or_refuse(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let source = source_of(&request);
    // The probes and metrics take no credentials: nothing to guess there, and a balancer
    // or scraper behind the same address as a guesser keeps seeing the host.
    let open = matches!(request.uri().path(), "/healthz" | "/readyz" | "/metrics");
    if let Some(held) = source
        .filter(|_| !open)
        .and_then(|source| gate.throttle.held(source))
    {
        gate.runtime.tracer().metrics().auth_failed("throttled");
        let held_back = (
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed authentications from this address\n",
        );
        return retry_after(held_back.into_response(), held);
    }
    // Counted before the drain is looked at: a drain that began meanwhile waits for it.
    let answering = (request.method() != Method::GET).then(|| gate.answering.token());
    let path = request.uri().path();
    if gate.draining.load(Ordering::Acquire) && path != "/healthz" {
        return retry_after(shutting_down(path), gate.options.shutdown_grace);
    }
    let uri = request.uri().clone();
    let response = next.run(request).await;
    if let Some(refusal) = response.extensions().get::<Refusal>() {
        tracing::info!(source = ?source, path = uri.path(), reason = refusal.reason(), "authentication failed: {refusal}");
        gate.runtime
            .tracer()
            .metrics()
            .auth_failed(refusal.reason());
        if let Some(source) = source.filter(|_| refusal.guessed()) {
            gate.throttle.failed(source);
        }
    }
    match answering {
        Some(answering) => held_until_sent(response, answering),
        None => response,
    }
}

/// The address a request came from (over TLS or not).
pub(super) fn source_of(request: &Request) -> Option<std::net::IpAddr> {
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<Source>>()
        .map(|info| info.0.0)
        .or_else(|| {
            let plain = request
                .extensions()
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
            plain.map(|info| info.0.ip())
        })
}

/// What a draining server answers a new request at `path`: 503, `/readyz` saying
/// `draining`, an MCP request a JSON-RPC error.
fn shutting_down(path: &str) -> Response {
    match path {
        "/readyz" => {
            let body = serde_json::json!({
                "status": "draining", "not_ready": ["shutting down"], "degraded": []
            });
            (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
        }
        HTTP_PATH => rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::Value::Null,
            -32000,
            "this server is shutting down: send the request again",
        ),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "this server is shutting down\n",
        )
            .into_response(),
    }
}

/// `response`, unread request and all (see [`answer_unread`]), with `Retry-After: wait`
/// in whole seconds (at least 1).
fn retry_after(response: Response, wait: Duration) -> Response {
    let mut response = answer_unread(response);
    let seconds = wait.as_secs_f64().ceil().max(1.0).to_string();
    if let Ok(value) = header::HeaderValue::from_str(&seconds) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// A 401 with the `Bearer` challenge of `params`, `body`, and `refusal` for
/// [`answer_or_refuse`].
pub(super) fn unauthorized(params: &str, body: impl IntoResponse, refusal: Refusal) -> Response {
    let challenge = match params {
        "" => "Bearer".to_string(),
        params => format!("Bearer {params}"),
    };
    let challenge = header::HeaderValue::try_from(challenge)
        .unwrap_or_else(|_| header::HeaderValue::from_static("Bearer"));
    let mut response = answer_unread((
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        body,
    ));
    response.extensions_mut().insert(refusal);
    response
}

/// A JSON-RPC error as the whole HTTP answer.
fn rpc_error(status: StatusCode, id: serde_json::Value, code: i32, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}
    });
    (status, axum::Json(body)).into_response()
}

/// An answer given before the request's body was read. The connection is closed after it,
/// and the answer says so: a client that reused it would race that close and see the
/// server hang up without an answer (httpx did, now and then, after a 401).
fn answer_unread(response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// Authenticates every request, keeps tenants out of each other's sessions, answers a
/// malformed body with a JSON-RPC parse error, makes the hookhost session at `initialize`,
/// keeps a session alive on each of its requests, and ends it on `DELETE`. A request of
/// MCP 2026-07-28, which has no MCP session, names its hookhost session itself (see
/// [`stateless`]).
async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let principal = match gate.principal(request.headers()).await {
        Ok(principal) => principal,
        Err(refusal) => return gate.unauthorized(request.headers(), refusal),
    };
    let tenant = principal.tenant.clone();
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(tenant.clone());
    parts.extensions.insert(principal.clone());
    // A POST's body is read, and parsed, once.
    let mut message = serde_json::Value::Null;
    let body = if parts.method == Method::POST {
        let Ok(bytes) = axum::body::to_bytes(body, MAX_HTTP_BODY_BYTES).await else {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                message,
                -32600,
                "request body too large or unreadable",
            );
        };
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(parsed) => message = parsed,
            Err(e) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    message,
                    -32700,
                    &format!("parse error: {e}"),
                );
            }
        }
        axum::body::Body::from(bytes)
    } else {
        body
    };
    let rpc_id = message.get("id").cloned().unwrap_or_default();
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(SessionId::new)
        .transpose();
    let Ok(session) = session else {
        return answer_unread((StatusCode::NOT_FOUND, "session not found\n"));
    };
    if session.is_none() && stateless::applies(&parts, &message) {
        return stateless::serve(&gate, principal, parts, &message, body, next).await;
    }
    if let Some(id) = &session {
        // The caller's tenant (and JWT subject) must have this session: another's does not
        // exist, as far as this caller can tell, and an ended one is gone (its MCP session
        // too). Opened once here (marked active), it goes with the request to the handler.
        match gate.runtime.sessions().open_for(&principal, id).await {
            Ok(opened) => {
                parts.extensions.insert(Arc::new(opened));
            }
            Err(SessionError::NotFound { .. }) => {
                // Gone, its MCP session closed with it; not another subject's, which goes on.
                if gate.opened().get(id.as_str()) == Some(&tenant)
                    && matches!(
                        gate.runtime.sessions().record(&tenant, id).await,
                        Err(SessionError::NotFound { .. })
                    )
                {
                    gate.forget(&SessionKey::new(&tenant, id));
                }
                return answer_unread((StatusCode::NOT_FOUND, "session not found or ended\n"));
            }
            Err(e) => {
                tracing::error!(%tenant, session = %id, error = %e, "reading the session table failed");
                return answer_unread((
                    StatusCode::SERVICE_UNAVAILABLE,
                    "session table unavailable\n",
                ));
            }
        }
    }
    // The hookhost session is ended first: a commit that conflicts keeps it, and the MCP
    // session with it. Once gone, its MCP session is closed with it (see `forget`), and
    // the answer is 200 (clients such as the Python SDK take anything else as a failed
    // termination).
    if parts.method == Method::DELETE
        && let Some(id) = &session
    {
        let discard = discards(&parts.headers);
        return deleted(
            gate.end(&tenant, id, "deleted by the client", discard)
                .await,
        );
    }
    let posting = parts.method == Method::POST;
    let response = next.run(Request::from_parts(parts, body)).await;
    if posting && session.is_none() {
        return open_new_session(&gate, principal, rpc_id, response).await;
    }
    response
}

/// After a POST without a session: a new MCP session (an `initialize` answered) gets its
/// hookhost session, or is closed again with the reason when the tenant may not have one.
async fn open_new_session(
    gate: &Gate,
    principal: Principal,
    rpc_id: serde_json::Value,
    response: Response,
) -> Response {
    let Some(new) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return response;
    };
    let opened = match SessionId::new(new.as_str()) {
        Ok(id) => gate.open(&principal, &id).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match opened {
        Ok(()) => response,
        Err(e) => {
            tracing::warn!(tenant = %principal.tenant, error = %e, "MCP session refused");
            let _ = gate.sessions.close_session(&Arc::from(new.as_str())).await;
            rpc_error(StatusCode::FORBIDDEN, rpc_id, -32000, &e.to_string())
        }
    }
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`: the protected-resource metadata
/// (RFC 9728) when JWTs are configured, else 404.
async fn resource_metadata(State(gate): State<Arc<Gate>>, headers: HeaderMap) -> Response {
    match gate.runtime.credentials().1 {
        Some(jwt) => axum::Json(jwt.metadata(&gate.resource(&jwt, &headers))).into_response(),
        None => (StatusCode::NOT_FOUND, "no [auth] configured\n").into_response(),
    }
}

/// `/healthz`: 200 with the upstream servers' states, and how many instances of each
/// scoped one (per tenant or session) are in each state.
async fn healthz(State(gate): State<Arc<Gate>>) -> Response {
    let upstreams: serde_json::Map<String, serde_json::Value> = gate
        .runtime
        .upstream_states()
        .into_iter()
        .map(|(name, state)| (name, serde_json::Value::String(state.to_string())))
        .collect();
    let instances: serde_json::Map<String, serde_json::Value> = gate
        .runtime
        .upstream_instances()
        .into_iter()
        .map(|(name, states)| (name, serde_json::json!(states)))
        .collect();
    let body = serde_json::json!({"status": "ok", "upstreams": upstreams, "instances": instances});
    axum::Json(body).into_response()
}

/// `/readyz`: whether this host can serve what its config promises, for a load balancer's
/// probe: 200 when every upstream server is up (an `optional` one that is not is listed
/// as `degraded`) and the session table answers, else 503 with what is not ready.
/// (`/healthz` says the process is alive.)
async fn readyz(State(gate): State<Arc<Gate>>) -> Response {
    let (mut not_ready, mut degraded) = (Vec::new(), Vec::new());
    for (name, state, optional) in gate.runtime.upstreams_down() {
        let line = format!("upstream {name}: {state}");
        match optional {
            true => degraded.push(line),
            false => not_ready.push(line),
        }
    }
    // An instance of one tenant or session that is down is that tenant's trouble, not
    // the host's: degraded.
    for (name, states) in gate.runtime.upstream_instances() {
        let down = states.get("down").copied().unwrap_or(0);
        if down > 0 {
            let all: usize = states.values().sum();
            degraded.push(format!("upstream {name}: {down} of {all} instances down"));
        }
    }
    if let Err(why) = gate.runtime.sessions().ping().await {
        not_ready.push(format!("session store: {why}"));
    }
    let (status, word) = match not_ready.is_empty() {
        true => (StatusCode::OK, "ready"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "not ready"),
    };
    let body = serde_json::json!({"status": word, "not_ready": not_ready, "degraded": degraded});
    (status, axum::Json(body)).into_response()
}

/// `POST /hooks/AGENT/EVENT`: an agent's hook (see [`crate::agents`]) answered by this
/// server's chain, for the caller's tenant (as for MCP, by its bearer token). The body is
/// what the agent writes on a command hook's stdin; the response body what it reads on
/// stdout, with the exit code it expects in [`agents::EXIT_HEADER`] (and a line for its
/// stderr in [`agents::STDERR_HEADER`]). A Claude Code `http` hook can call it directly: an
/// answer that is the agent's non-blocking error comes with status 422.
async fn agent_hook(
    State(gate): State<Arc<Gate>>,
    axum::extract::Path((agent, event)): axum::extract::Path<(String, String)>,
    request: axum::extract::Request,
) -> Response {
    use agents::{Agent, Event, HookSettings};
    let agent = <Agent as clap::ValueEnum>::from_str(&agent, true);
    let (Ok(agent), Some(event)) = (agent, Event::parse(&event)) else {
        return (StatusCode::NOT_FOUND, "no such agent or event\n").into_response();
    };
    // The token before the body: nobody unauthenticated gets a body read.
    let principal = match gate.principal(request.headers()).await {
        Ok(principal) => principal,
        Err(refusal) => return gate.unauthorized(request.headers(), refusal),
    };
    // As large as `hookhost hook` reads from stdin (axum's default of 2 MB would refuse a
    // post-tool event with a large output, the one offload is for).
    let limit = usize::try_from(MAX_HOOK_INPUT_BYTES).unwrap_or(usize::MAX);
    let answer = match axum::body::to_bytes(request.into_body(), limit).await {
        Ok(body) => {
            let settings = HookSettings {
                tenant: principal.tenant,
                subject: principal.subject,
                options: agents::protocol::Options::default(),
                // Only a server of one user (no tenants' tokens) takes the agent's directory.
                trust_cwd: !gate.authenticates(),
                closed_tools: None,
            };
            let runtime = gate.runtime.clone();
            agents::answer(
                agent,
                event,
                &settings,
                DEFAULT_HOOK_DEADLINE,
                &body,
                || async { Ok(runtime) },
            )
            .await
        }
        Err(e) => agents::protocol::unreadable(
            agent,
            &format!(
                "the hook input could not be read (at most {MAX_HOOK_INPUT_BYTES} bytes): {e}"
            ),
        ),
    };
    let status = if answer.exit == 0 {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let mut response = (status, answer.stdout).into_response();
    let headers = response.headers_mut();
    headers.insert(agents::EXIT_HEADER, u16::from(answer.exit).into());
    if let Some(line) = answer.stderr {
        // A header holds visible ASCII only.
        let line: String = line
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if let Ok(value) = line.parse() {
            headers.insert(agents::STDERR_HEADER, value);
        }
    }
    response
}

/// `/metrics`: the runtime's metrics, OpenMetrics text (see [`crate::metrics`]).
async fn metrics(State(runtime): State<Arc<Runtime>>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::CONTENT_TYPE,
        )],
        runtime.metrics_text().await,
    )
        .into_response()
}

/// A router answering `GET /metrics` for `runtime`.
pub fn metrics_route(runtime: Arc<Runtime>) -> axum::Router {
    axum::Router::new().route("/metrics", axum::routing::get(metrics).with_state(runtime))
}

/// Serves `/metrics` alone at `addr` (`serve --metrics`, beside a stdio server) until the
/// process ends.
///
/// # Errors
///
/// When `addr` cannot be resolved or bound.
pub async fn serve_metrics(runtime: Arc<Runtime>, addr: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics {addr}: cannot listen"))?;
    let local = listener.local_addr()?;
    crate::announce::serving("metrics", &format!("http://{local}/metrics"));
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, metrics_route(runtime)).await {
            tracing::warn!(error = %e, "the metrics server stopped");
        }
    });
    Ok(())
}

/// What `serve --http` is told.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen: `HOST:PORT`, names resolved (`localhost:8080`).
    pub addr: String,
    /// End MCP sessions idle this long.
    pub idle: Duration,
    /// Serve `bash` although no tenant has a token (any local user gets a shell).
    pub unauthenticated_bash: bool,
    /// Serve over TLS with this certificate and key (`[serve] tls_cert`, `tls_key`).
    pub tls: Option<crate::config::TlsFiles>,
    /// Serve the admin page on this address of its own (`[serve] admin_listen`).
    pub admin_listen: Option<String>,
}

/// Serves MCP over Streamable HTTP (path [`HTTP_PATH`]) until a shutdown signal, then ends
/// the sessions it made.
///
/// Tenants authenticate with their `token`; with no token in the config, requests are the
/// default tenant's, which is allowed on a loopback address only, and without `bash` unless
/// `unauthenticated_bash`. MCP sessions idle for `idle` are ended and their hookhost
/// sessions deleted.
///
/// # Errors
///
/// When the configuration is unsafe to serve, or the address cannot be resolved or bound.
pub async fn serve_http(
    runtime: Arc<Runtime>,
    http: HttpOptions,
    options: ServeOptions,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let signal = shutdown_signal()?;
    let (tenants, jwt) = runtime.credentials();
    let has_tokens = !tenants.tokens().is_empty() || jwt.is_some();
    let (listener, addr, local) = bind(&http, has_tokens, runtime.has_tool("bash")).await?;
    let tls: Option<tls::Current> = match &http.tls {
        Some(files) => Some(Arc::new(arc_swap::ArcSwap::new(tls::load(files)?))),
        None => None,
    };
    let reloader = Arc::new(super::Reloader::new(
        runtime.clone(),
        options.config.clone(),
        prepare_reload(addr, &http, tls.clone()),
    ));
    reloader.on_sighup()?;
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(http.idle);
    let sessions = Arc::new(manager);
    let gate = Arc::new(Gate {
        runtime: runtime.clone(),
        scheme: if tls.is_some() { "https" } else { "http" },
        opened: Mutex::new(HashMap::new()),
        sessions: sessions.clone(),
        options,
        draining: AtomicBool::new(false),
        answering: TaskTracker::new(),
        throttle: Throttle::default(),
        waiting: Arc::default(),
    });
    // A session deleted by anything in this process, or by another, ends its MCP session.
    runtime
        .sessions()
        .hold(Arc::downgrade(&gate) as std::sync::Weak<dyn SessionHolder>);
    let stop = CancellationToken::new();
    let admin = Arc::new(super::admin::Admin {
        runtime: runtime.clone(),
        reloader,
    });
    let refusing = |app: axum::Router| {
        app.layer(axum::middleware::from_fn_with_state(
            gate.clone(),
            answer_or_refuse,
        ))
    };
    let mut app = router(&gate, sessions, addr, stop.clone());
    // The admin page on its own address, or beside MCP.
    let admin_listener = match &http.admin_listen {
        Some(at) => {
            let listener = tokio::net::TcpListener::bind(at)
                .await
                .with_context(|| format!("[serve] admin_listen {at}: cannot listen"))?;
            Some(listener)
        }
        None => {
            app = app.merge(super::admin::routes(admin.clone()));
            None
        }
    };
    let app = refusing(app);

    // Every HTTP server's sessions: in a fleet, a session begun on one host may be
    // continued on another, and any host collects it once it is idle. Sessions of stdio
    // servers and of the CLI are theirs to collect.
    let tended = runtime.clone();
    let collect = (!gate.options.keep_session).then_some(IdleSweep {
        idle: http.idle,
        owners: |owner| matches!(owner, Owner::Http(_)),
    });
    let sweeper = tokio::spawn(async move {
        let tick = (http.idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
        tended.sessions().tend(tick, collect).await;
    });
    let scheme = gate.scheme;
    tracing::info!(%local, scheme, "serving MCP over HTTP");
    // Cancelled once drained: no new connection is accepted from then on.
    let accepting = CancellationToken::new();
    // The address on stderr, so a caller that asked for port 0 learns the port.
    crate::announce::serving("MCP", &format!("{scheme}://{local}{HTTP_PATH}"));
    let mut admin_server = match admin_listener {
        Some(listener) => {
            let at = listener.local_addr()?;
            tracing::info!(%at, scheme, "serving the admin page on its own address");
            crate::announce::serving("the admin page", &format!("{scheme}://{at}/admin"));
            let app = refusing(super::admin::routes(admin));
            Some(spawn_server(listener, tls.clone(), app, accepting.clone())?)
        }
        None => None,
    };
    let mut server = spawn_server(listener, tls, app, accepting.clone())?;
    let served = tokio::select! {
        served = &mut server => served,
        name = signal => {
            // The drain: new requests refused; those running finish and are answered
            // (within the grace); then no new connection, MCP's streams end, and the
            // connections with them.
            let grace = gate.options.shutdown_grace;
            tracing::info!(signal = name, ?grace, "shutting down: draining the requests running");
            gate.draining.store(true, Ordering::Release);
            gate.answering.close();
            if tokio::time::timeout(grace, gate.answering.wait()).await.is_err() {
                tracing::warn!(?grace, "requests still running after the grace are cancelled");
            }
            // Calls held for their clients' input end with the server, and their
            // ephemeral sessions with them.
            gate.waiting.clear();
            let _ = tokio::time::timeout(SHUTDOWN_CLOSE, gate.answering.wait()).await;
            accepting.cancel();
            stop.cancel();
            if let Some(admin) = &mut admin_server
                && tokio::time::timeout(SHUTDOWN_CLOSE, &mut *admin).await.is_err()
            {
                admin.abort();
            }
            match tokio::time::timeout(SHUTDOWN_CLOSE, &mut server).await {
                Ok(served) => served,
                Err(_) => {
                    server.abort();
                    Ok(Ok(()))
                }
            }
        }
    };
    sweeper.abort();
    // A fleet's sessions outlive one host: its other hosts go on serving them, and the
    // idle sweep of any host collects them.
    if !runtime.sessions().is_shared() {
        let opened: Vec<(String, TenantId)> = gate.opened().drain().collect();
        for (id, tenant) in opened {
            if let Ok(id) = SessionId::new(id) {
                let _ = gate.end(&tenant, &id, "server shut down", false).await;
            }
        }
    }
    Ok(served??)
}

/// Serves `app` on `listener`, over TLS when `tls` is given, until `accepting` is
/// cancelled (then the connections open are closed as they finish).
fn spawn_server(
    listener: tokio::net::TcpListener,
    tls: Option<tls::Current>,
    app: axum::Router,
    accepting: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
    let stopped = async move { accepting.cancelled().await };
    Ok(match tls {
        Some(current) => tokio::spawn(
            axum::serve(
                tls::TlsListener::new(listener, current)?,
                app.into_make_service_with_connect_info::<Source>(),
            )
            .with_graceful_shutdown(stopped)
            .into_future(),
        ),
        None => {
            // Without TCP_NODELAY the last small segment of every response waits for the
            // client's delayed ACK: a kept-alive call took 44 ms instead of 0.7 ms.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
                }
            });
            tokio::spawn(
                axum::serve(
                    listener,
                    app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
                )
                .with_graceful_shutdown(stopped)
                .into_future(),
            )
        }
    })
}

/// This server's part of a reload (see [`super::reload::Prepare`]): the new config must be
/// as safe to serve at `addr` as the first one; its TLS certificate and key (read again,
/// so a renewed certificate needs no restart) are put in effect with it (its `[auth]` is
/// the runtime's snapshot's). Turning TLS on or off needs a restart.
fn prepare_reload(
    addr: std::net::SocketAddr,
    http: &HttpOptions,
    tls: Option<tls::Current>,
) -> super::reload::Prepare {
    let unauthenticated_bash = http.unauthenticated_bash;
    let admin_listen = http.admin_listen.clone();
    Box::new(move |plan| {
        if plan.admin_listen != admin_listen {
            tracing::warn!(
                now = ?admin_listen,
                "[serve] admin_listen changed: only a restart moves the admin page"
            );
        }
        let has_tokens = plan.tenants.values().any(|t| t.token.is_some()) || plan.jwt.is_some();
        if let Some(why) =
            unsafe_to_serve(addr, has_tokens, plan.bash.is_some(), unauthenticated_bash)
        {
            return Err(why);
        }
        let renewed = match (&tls, &plan.tls) {
            (None, None) => None,
            (Some(current), Some(files)) => Some((
                current.clone(),
                tls::load(files).map_err(|e| e.to_string())?,
                files.cert.clone(),
            )),
            _ => return Err("[serve] tls_cert changed between TLS and plain HTTP: only a restart puts that in effect".into()),
        };
        Ok(Box::new(move || {
            if let Some((current, renewed, cert)) = renewed {
                current.store(renewed);
                // Read again whether or not it changed: said apart from the config's changes.
                tracing::info!(cert = %cert.display(), "TLS certificate and key read again and put in effect");
            }
        }))
    })
}

/// Why serving at `addr` would be unsafe, if it would: no tokens on a public address, or
/// `bash` without tokens unless `unauthenticated_bash`.
fn unsafe_to_serve(
    addr: std::net::SocketAddr,
    has_tokens: bool,
    serves_bash: bool,
    unauthenticated_bash: bool,
) -> Option<String> {
    if !has_tokens && !addr.ip().is_loopback() {
        return Some(format!(
            "refusing to serve {addr} without authentication: declare tenants with a `token`, or bind a loopback address"
        ));
    }
    if !has_tokens && serves_bash && !unauthenticated_bash {
        return Some(format!(
            "refusing to serve the `bash` tool over HTTP without authentication: anyone who can reach {addr} (every local user) would get a shell. Declare tenants with a `token`, disable [bash] in the config, or pass --unauthenticated-bash to allow it deliberately"
        ));
    }
    None
}

/// Resolves and binds `http.addr`, refusing what is unsafe to serve (see
/// [`unsafe_to_serve`]). Returns the listener, the address and the local address.
async fn bind(
    http: &HttpOptions,
    has_tokens: bool,
    serves_bash: bool,
) -> anyhow::Result<(
    tokio::net::TcpListener,
    std::net::SocketAddr,
    std::net::SocketAddr,
)> {
    use anyhow::Context;
    let addr = tokio::net::lookup_host(&http.addr)
        .await
        .with_context(|| format!("--http {}: cannot resolve the address", http.addr))?
        .next()
        .with_context(|| format!("--http {}: the name has no address", http.addr))?;
    if let Some(why) = unsafe_to_serve(addr, has_tokens, serves_bash, http.unauthenticated_bash) {
        anyhow::bail!(why);
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;

    Ok((listener, addr, local))
}

/// The HTTP routes: MCP at [`HTTP_PATH`] behind the gate's `guard`, the agents' hooks,
/// `/healthz`, `/readyz` and `/metrics` (the admin page's are `admin.rs`'s). `stop` ends MCP's streams at shutdown.
fn router(
    gate: &Arc<Gate>,
    sessions: Arc<LocalSessionManager>,
    addr: std::net::SocketAddr,
    stop: CancellationToken,
) -> axum::Router {
    let runtime = &gate.runtime;
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = stop;
    config.session_store = Some(Arc::new(McpStates(runtime.clone())));
    if !addr.ip().is_loopback() {
        // Host validation protects loopback servers from DNS rebinding; a public server is
        // protected by its tokens instead.
        config = config.disable_allowed_hosts();
    }
    let factory_runtime = runtime.clone();
    let waiting = gate.waiting.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(McpServer {
                runtime: factory_runtime.clone(),
                session: None,
                tenant: TenantId::default_tenant(),
                // An HTTP client's disconnect cancels its requests (rmcp's `ct`).
                gone: CancellationToken::new(),
                subscriptions: Default::default(),
                declared: Default::default(),
                waiting: waiting.clone(),
            })
        },
        sessions,
        config,
    );
    axum::Router::new()
        .route_service(HTTP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(gate.clone(), guard))
        .route(
            "/healthz",
            axum::routing::get(healthz).with_state(gate.clone()),
        )
        .route(
            "/readyz",
            axum::routing::get(readyz).with_state(gate.clone()),
        )
        .route(
            METADATA_PATH,
            axum::routing::get(resource_metadata).with_state(gate.clone()),
        )
        .route(
            &format!("{METADATA_PATH}{HTTP_PATH}"),
            axum::routing::get(resource_metadata).with_state(gate.clone()),
        )
        .route(
            "/hooks/{agent}/{event}",
            axum::routing::post(agent_hook).with_state(gate.clone()),
        )
        .merge(metrics_route(gate.runtime.clone()))
}
