//! MCP 2026-07-28 over Streamable HTTP: requests without an MCP session (no `initialize`,
//! no `Mcp-Session-Id`), each naming its protocol version in `_meta`. rmcp serves them
//! statelessly; what this module adds is the hookhost session a request works in, which no
//! longer rides on an MCP session.
//!
//! - **The carrier**: a request names its hookhost session in the header
//!   [`SESSION_HEADER`] (`Hookhost-Session: ID`) or in its `_meta` under [`SESSION_META`]
//!   (`"dev.hookhost/session": "ID"`); both, when they differ, are refused (400).
//! - **Made when asked**: a request that names the session `new` gets a new one of its
//!   tenant (its `max_sessions` applies); every answer in a session names it in the same
//!   header, and a tool call's result in its `_meta` too, for the client to send back.
//! - **Ephemeral otherwise**: a request that needs a session (every one but
//!   `server/discover`, `tools/list`, `ping` and `subscriptions/listen`) and names none
//!   runs in one of its own, deleted with its files once the answer is sent; a tool
//!   result that names such a file says so (see [`EPHEMERAL_NOTE`]). So a client that
//!   knows nothing of hookhost still gets every tool, and leaves nothing behind.
//! - **Tenant binding**: a session is looked up among the tenant's whose token the request
//!   presents, and is the JWT subject's that made it (see [`Principal`]); another
//!   tenant's or subject's, or an ended one, is unknown (404), as for MCP sessions.
//! - **Retries**: a request that carries a `requestState` of hookhost's (it was answered
//!   `input_required`, see `mcp::waiting`) and names no session, or `new`, is given none:
//!   the call it goes on with has its own.
//! - **Lifetime**: as any session `serve --http` made: ended by `DELETE` with the header,
//!   or collected once idle for `--idle`. In a fleet any host answers any request, since
//!   the session table is shared.

use super::{Gate, rpc_error};
use crate::ids::{SessionId, TenantId};
use crate::sessions::{Principal, Session, SessionError};
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::model::ProtocolVersion;
use serde_json::Value;
use std::sync::Arc;

/// The header that names a request's hookhost session, and its answer's.
pub const SESSION_HEADER: &str = "hookhost-session";

/// The `_meta` key that names a request's hookhost session, and a tool call result's.
pub const SESSION_META: &str = "dev.hookhost/session";

/// What a request names instead of a session id to be given a new session.
pub const NEW_SESSION: &str = "new";

/// What the model is told under a tool result of an ephemeral session that names one of
/// its files.
pub const EPHEMERAL_NOTE: &str = "[hookhost: this request named no hookhost session, so the files it made, any named above included, were deleted once it was answered: to see more of an output, run the command again with less of it (through head, tail or grep). A client keeps a session's files by sending `\"dev.hookhost/session\": \"new\"` in a request's _meta (or the header `Hookhost-Session: new`), then the id the answer names.]";

/// Marks a request's session as ephemeral: deleted once the request is answered and
/// every clone of this is dropped (a call held for its client's input keeps one; see
/// `mcp::waiting`).
#[derive(Clone)]
pub struct Ephemeral(#[allow(dead_code, reason = "held for its drop")] Arc<Ended>);

/// The `_meta` key of a request's protocol version.
const VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// The methods that need no session: they answer the same for every session of a tenant.
const SESSIONLESS: [&str; 4] = [
    "server/discover",
    "tools/list",
    "ping",
    "subscriptions/listen",
];

/// Whether the request (with no `Mcp-Session-Id`) is one of MCP 2026-07-28 or later: a
/// POST whose `_meta` names such a version, or a `DELETE` that names a hookhost session.
pub(super) fn applies(parts: &Parts, message: &Value) -> bool {
    match parts.method {
        Method::POST => message
            .pointer("/params/_meta")
            .and_then(|meta| meta.get(VERSION_META))
            .and_then(Value::as_str)
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str()),
        Method::DELETE => parts.headers.contains_key(SESSION_HEADER),
        _ => false,
    }
}

/// The hookhost session a request names.
enum Named {
    Session(SessionId),
    New,
}

/// The hookhost session a request names, in the header or in `_meta`.
fn carried(headers: &HeaderMap, message: &Value) -> Result<Option<Named>, String> {
    let header = headers
        .get(SESSION_HEADER)
        .map(|v| {
            v.to_str()
                .map_err(|_| "Hookhost-Session is not text".to_string())
        })
        .transpose()?;
    let meta = message
        .pointer("/params/_meta")
        .and_then(|meta| meta.get(SESSION_META))
        .map(|v| {
            v.as_str()
                .ok_or(format!("_meta {SESSION_META:?} is not a string"))
        })
        .transpose()?;
    let named = match (header, meta) {
        (Some(h), Some(m)) if h != m => {
            return Err(format!(
                "Hookhost-Session and _meta {SESSION_META:?} name different sessions"
            ));
        }
        (h, m) => h.or(m),
    };
    named
        .map(|id| match id {
            NEW_SESSION => Ok(Named::New),
            id => SessionId::new(id)
                .map(Named::Session)
                .map_err(|e| format!("hookhost session: {e}")),
        })
        .transpose()
}

/// Serves a request [`applies`] to: opens the session it names, makes one when it asks,
/// or an ephemeral one when it needs one and names none; hands it to the handler, and
/// names it in the answer (an ephemeral one is deleted once the answer is sent instead).
/// A `DELETE` ends the session it names.
pub(super) async fn serve(
    gate: &Arc<Gate>,
    principal: Principal,
    mut parts: Parts,
    message: &Value,
    body: axum::body::Body,
    next: Next,
) -> Response {
    let tenant = principal.tenant.clone();
    let rpc_id = message.get("id").cloned().unwrap_or_default();
    let named = match carried(&parts.headers, message) {
        Ok(named) => named,
        Err(why) => return rpc_error(StatusCode::BAD_REQUEST, rpc_id, -32602, &why),
    };
    // Sessions are made only for the requests that run in one: `new` on `server/discover`,
    // `tools/list`, `ping`, `subscriptions/listen` or a notification makes none.
    // A retry of a request that waited for its client's input goes on in the session of
    // its call: one that names none, or `new`, is given none (see `mcp::waiting`).
    let retry = message
        .pointer("/params/requestState")
        .and_then(Value::as_str)
        .is_some_and(|state| state.starts_with(super::super::waiting::STATE_PREFIX));
    let needs = needs_session(message) && !retry;
    let ephemeral = named.is_none() && needs;
    let opened = match named {
        Some(Named::Session(id)) => gate.runtime.sessions().open_for(&principal, &id).await,
        Some(Named::New) | None if needs => mint(gate, &principal).await,
        Some(Named::New) | None => return next.run(Request::from_parts(parts, body)).await,
    };
    let session = match opened {
        Ok(session) => session,
        Err(e @ SessionError::NotFound { .. }) => {
            return rpc_error(StatusCode::NOT_FOUND, rpc_id, -32602, &e.to_string());
        }
        Err(e @ (SessionError::TooManySessions { .. } | SessionError::UnknownTenant { .. })) => {
            tracing::warn!(%tenant, error = %e, "hookhost session refused");
            return rpc_error(StatusCode::FORBIDDEN, rpc_id, -32000, &e.to_string());
        }
        Err(e) => {
            tracing::error!(%tenant, error = %e, "opening a session failed");
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                rpc_id,
                -32603,
                "session table unavailable",
            );
        }
    };
    let id = session.id.clone();
    if parts.method == Method::DELETE {
        let discard = super::discards(&parts.headers);
        return super::deleted(
            gate.end(&tenant, &id, "deleted by the client", discard)
                .await,
        );
    }
    parts.extensions.insert(Arc::new(session));
    // An ephemeral session ends when this guard is dropped: with the answer's body once
    // it is sent, or here, when the client leaves before the handler answers.
    let ends = ephemeral.then(|| {
        let ends = Ephemeral(Arc::new(Ended(Some((
            gate.clone(),
            tenant.clone(),
            id.clone(),
        )))));
        parts.extensions.insert(ends.clone());
        ends
    });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if let Some(ends) = ends {
        return super::held_until_sent(response, ends);
    }
    if let Ok(value) = HeaderValue::from_str(id.as_str()) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// Ends an ephemeral session when dropped (see [`Gate::end`]: its commands stopped, then
/// its files deleted, unless the server keeps sessions).
struct Ended(Option<(Arc<Gate>, TenantId, SessionId)>);

impl Drop for Ended {
    fn drop(&mut self) {
        if let Some((gate, tenant, id)) = self.0.take() {
            // Tracked as a request is: a drain waits for the end (and its commit).
            let answering = gate.answering.clone();
            answering.spawn(async move {
                let _ = gate.end(&tenant, &id, "ephemeral: answered", false).await;
            });
        }
    }
}

/// Whether the request needs a session: a request (not a notification) of a method that
/// works in one; `subscriptions/listen` when it follows resources (they are subscribed
/// upstream in a session, which lasts as long as the listener).
fn needs_session(message: &Value) -> bool {
    let method = message.get("method").and_then(Value::as_str);
    let follows = message
        .pointer("/params/notifications/resourceSubscriptions")
        .and_then(Value::as_array)
        .is_some_and(|uris| !uris.is_empty());
    message.get("id").is_some()
        && method
            .is_some_and(|m| !SESSIONLESS.contains(&m) || (m == "subscriptions/listen" && follows))
}

/// A new session of `principal`, for a request that named none.
async fn mint(gate: &Gate, principal: &Principal) -> Result<Session, SessionError> {
    let tenant = &principal.tenant;
    let workdir = gate.options.workdir(&gate.runtime, tenant)?;
    let session = gate
        .runtime
        .sessions()
        .create_for(principal, None, workdir.as_deref())
        .await?;
    tracing::info!(%tenant, session = %session.id, "hookhost session made for an MCP 2026 request");
    Ok(session)
}
