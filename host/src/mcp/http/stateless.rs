//! MCP 2026-07-28 over Streamable HTTP: requests without an MCP session (no `initialize`,
//! no `Mcp-Session-Id`), each naming its protocol version in `_meta`. rmcp serves them
//! statelessly; what this module adds is the hookhost session a request works in, which no
//! longer rides on an MCP session.
//!
//! - **The carrier**: a request names its hookhost session in the header
//!   [`SESSION_HEADER`] (`Hookhost-Session: ID`) or in its `_meta` under [`SESSION_META`]
//!   (`"dev.hookhost/session": "ID"`); both, when they differ, are refused (400).
//! - **Minted on first use**: a request that needs a session (every one but
//!   `server/discover`, `tools/list`, `ping` and `subscriptions/listen`) and names none
//!   gets a new one of its tenant (its `max_sessions` applies); every answer in a session
//!   names it in the same header, and a tool call's result in its `_meta` too, for the
//!   client to send back. A client that never sends it back gets a session per request:
//!   the offloaded output a result names is then in a session it does not reach again.
//! - **Tenant binding**: a session is looked up among the tenant's whose token the request
//!   presents; another tenant's, or an ended one, is unknown (404), as for MCP sessions.
//! - **Lifetime**: as any session `serve --http` made: ended by `DELETE` with the header,
//!   or collected once idle for `--idle`. In a fleet any host answers any request, since
//!   the session table is shared.

use super::{Gate, rpc_error};
use crate::ids::{SessionId, TenantId};
use crate::sessions::{Session, SessionError};
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::ProtocolVersion;
use serde_json::Value;
use std::sync::Arc;

/// The header that names a request's hookhost session, and its answer's.
pub const SESSION_HEADER: &str = "hookhost-session";

/// The `_meta` key that names a request's hookhost session, and a tool call result's.
pub const SESSION_META: &str = "dev.hookhost/session";

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

/// The hookhost session a request names, in the header or in `_meta`.
fn carried(headers: &HeaderMap, message: &Value) -> Result<Option<SessionId>, String> {
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
        .map(|id| SessionId::new(id).map_err(|e| format!("hookhost session: {e}")))
        .transpose()
}

/// Serves a request [`applies`] to: opens the session it names, or mints one when it needs
/// one, hands it to the handler, and names it in the answer; a `DELETE` ends it.
pub(super) async fn serve(
    gate: &Gate,
    tenant: TenantId,
    mut parts: Parts,
    message: &Value,
    body: axum::body::Body,
    next: Next,
) -> Response {
    let rpc_id = message.get("id").cloned().unwrap_or_default();
    let named = match carried(&parts.headers, message) {
        Ok(named) => named,
        Err(why) => return rpc_error(StatusCode::BAD_REQUEST, rpc_id, -32602, &why),
    };
    let sessions = gate.runtime.sessions();
    let session = match named {
        Some(id) => match sessions.open(&tenant, &id).await {
            Ok(session) => Some(session),
            Err(e @ SessionError::NotFound { .. }) => {
                return rpc_error(StatusCode::NOT_FOUND, rpc_id, -32602, &e.to_string());
            }
            Err(e) => {
                tracing::error!(%tenant, session = %id, error = %e, "reading the session table failed");
                return rpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    rpc_id,
                    -32603,
                    "session table unavailable",
                );
            }
        },
        None if needs_session(message) && parts.method == Method::POST => {
            match mint(gate, &tenant).await {
                Ok(session) => Some(session),
                Err(e) => {
                    tracing::warn!(%tenant, error = %e, "hookhost session refused");
                    return rpc_error(StatusCode::FORBIDDEN, rpc_id, -32000, &e.to_string());
                }
            }
        }
        None => None,
    };
    if parts.method == Method::DELETE {
        if let Some(session) = &session {
            gate.end(&tenant, &session.id, "deleted by the client")
                .await;
        }
        return StatusCode::OK.into_response();
    }
    let id = session.as_ref().map(|s| s.id.clone());
    if let Some(session) = session {
        parts.extensions.insert(Arc::new(session));
    }
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if let Some(value) = id.and_then(|id| HeaderValue::from_str(id.as_str()).ok()) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// Whether the request needs a session: a request (not a notification) of a method that
/// works in one.
fn needs_session(message: &Value) -> bool {
    let method = message.get("method").and_then(Value::as_str);
    message.get("id").is_some() && method.is_some_and(|m| !SESSIONLESS.contains(&m))
}

/// A new session of `tenant`, for a request that named none.
async fn mint(gate: &Gate, tenant: &TenantId) -> Result<Session, SessionError> {
    let workdir = gate.options.workdir(&gate.runtime, tenant)?;
    let session = gate
        .runtime
        .sessions()
        .create(tenant.clone(), None, workdir.as_deref())
        .await?;
    tracing::info!(%tenant, session = %session.id, "hookhost session made for an MCP 2026 request");
    Ok(session)
}
