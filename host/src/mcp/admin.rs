//! The admin page of `serve --http`, at `/admin`: off unless the config gives
//! `[serve] admin_token`. The page (`admin/`: HTML, a script and a style sheet, no build
//! step) asks for the token and draws what the JSON API under `/admin/api/` answers:
//!
//! - `GET overview`: each tenant with its sessions, calls by outcome, rate-limit refusals,
//!   disk use against its quota and its rate limits; the upstream servers' states;
//! - `GET sessions/TENANT/ID/trace`: the session's trace (its last
//!   [`ADMIN_TRACE_BYTES`] of `trace/events.jsonl`), one event per element, for the
//!   timeline;
//! - `DELETE sessions/TENANT/ID`: ends the session as `session delete` does;
//! - `POST reload`: reloads the config, as SIGHUP does, and answers what changed or why
//!   it was refused.
//!
//! Security: every API request presents the admin token as a bearer token (compared in
//! constant time; a tenant's token never is one, see the config's checks). Every action
//! (a request that is not a `GET`) and every request refused a wrong token (which the
//! throttle bounds per source) is written, as one JSON line (time, source address,
//! method, path, status, the refusal's reason), to the audit log
//! [`AUDIT_FILE`] in the data directory, and logged at `info`. `[serve] admin_listen` puts
//! the page and API on an address of their own, which a firewall can keep from clients. The page is
//! served with a content security policy that allows only its own script and style, and
//! draws every value a tenant's components could have written (file names, diffs, stderr)
//! as text, never as HTML. The trace file is opened beneath its mount (`cap-std`): a
//! component that left a symlink there gets an error, not a file of the host's.

use super::Reloader;
use super::auth::Refusal;
use crate::ids::{SessionId, TenantId};
use crate::limits::ADMIN_TRACE_BYTES;
use crate::runtime::Runtime;
use crate::secret::TokenDigest;
use crate::sessions::{SessionError, SessionRecord};
use crate::trace::EVENTS_FILE;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The admin API's audit log, in the data directory: one JSON object a line, only ever
/// appended to, readable by the server's user alone.
pub const AUDIT_FILE: &str = "admin-audit.jsonl";

/// The most of a request's path an audit line keeps.
const AUDIT_PATH_CHARS: usize = 256;

/// What the admin routes need.
pub(super) struct Admin {
    pub runtime: Arc<Runtime>,
    pub reloader: Arc<Reloader>,
}

const PAGE: &str = include_str!("admin/index.html");
const SCRIPT: &str = include_str!("admin/admin.js");
const STYLE: &str = include_str!("admin/admin.css");

/// Only the page's own script and style; nothing framed, nothing sent elsewhere.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The admin routes, under `/admin`.
pub(super) fn routes(admin: Arc<Admin>) -> axum::Router {
    let api = axum::Router::new()
        .route("/admin/api/overview", get(overview))
        .route("/admin/api/sessions/{tenant}/{id}/trace", get(trace))
        .route("/admin/api/sessions/{tenant}/{id}", delete(delete_session))
        .route("/admin/api/reload", post(reload))
        .layer(axum::middleware::from_fn_with_state(
            admin.clone(),
            authorized,
        ))
        .layer(axum::middleware::from_fn_with_state(admin.clone(), audited));
    let page = axum::Router::new()
        .route("/admin", get(|| asset(PAGE, "text/html; charset=utf-8")))
        .route(
            "/admin/admin.js",
            get(|| asset(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route(
            "/admin/admin.css",
            get(|| asset(STYLE, "text/css; charset=utf-8")),
        )
        .layer(axum::middleware::from_fn_with_state(admin.clone(), enabled));
    api.merge(page).with_state(admin)
}

/// One of the page's files, under its content security policy.
async fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, PAGE_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "no admin page: set [serve] admin_token\n",
    )
        .into_response()
}

/// The page exists only when an admin token is configured.
async fn enabled(State(admin): State<Arc<Admin>>, request: Request, next: Next) -> Response {
    match admin.runtime.admin_token() {
        Some(_) => next.run(request).await,
        None => not_found(),
    }
}

/// Lets through the requests that present the admin token.
async fn authorized(State(admin): State<Arc<Admin>>, request: Request, next: Next) -> Response {
    let Some(token) = admin.runtime.admin_token() else {
        return not_found();
    };
    let presented =
        super::auth::bearer(request.headers()).map(|token| TokenDigest::of(token.as_bytes()));
    let refusal = match presented {
        Some(presented) if token.matches(&presented) => return next.run(request).await,
        Some(_) => Refusal::AdminToken,
        None => Refusal::Missing,
    };
    // Logged, counted and throttled as any refusal (see `http::answer_or_refuse`).
    let body = axum::Json(json!({"error": "the admin token is required"}));
    super::http::unauthorized(refusal.challenge(), body, refusal)
}

/// Writes each action, and each refusal, of the API to the audit log (see [`AUDIT_FILE`]).
async fn audited(State(admin): State<Arc<Admin>>, request: Request, next: Next) -> Response {
    let source = super::http::source_of(&request);
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let response = next.run(request).await;
    // A request without a token guesses nothing (and is not throttled): not written
    // down, so that it cannot fill the disk.
    let refusal = response.extensions().get::<Refusal>();
    if refusal.is_some_and(|r| !r.guessed())
        || (method == axum::http::Method::GET && refusal.is_none())
    {
        return response;
    }
    let refused = refusal.map(Refusal::reason);
    let path: String = path.chars().take(AUDIT_PATH_CHARS).collect();
    let status = response.status().as_u16();
    tracing::info!(?source, %method, path, status, refused, "admin API request");
    let line = json!({
        "time": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        "source": source.map(|s| s.to_string()),
        "method": method.as_str(),
        "path": path,
        "status": status,
        "refused": refused,
    });
    let file = admin.runtime.data_root().join(AUDIT_FILE);
    let written = tokio::task::spawn_blocking(move || append_line(&file, &line)).await;
    if let Ok(Err(e)) = written {
        tracing::error!(error = %e, file = AUDIT_FILE, "cannot write the admin audit log");
    }
    response
}

/// Appends `line` and a newline to `file` in one write, making it (mode 0600) if needed.
fn append_line(file: &std::path::Path, line: &Value) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = serde_json::to_vec(line)?;
    bytes.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)?
        .write_all(&bytes)
}

/// A JSON error answer.
fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (status, axum::Json(json!({"error": message.to_string()}))).into_response()
}

fn session_error(e: SessionError) -> Response {
    match e {
        SessionError::NotFound { .. } => error(StatusCode::NOT_FOUND, e),
        e => error(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn session_json(record: &SessionRecord) -> Value {
    json!({
        "id": record.id.as_str(),
        "created": rfc3339(record.created),
        "last_active": rfc3339(record.last_active),
        "owner": record.owner.to_text(),
        "workdir": record.workdir,
    })
}

/// `GET /admin/api/overview`.
async fn overview(State(admin): State<Arc<Admin>>) -> Response {
    let runtime = &admin.runtime;
    let sessions = runtime.sessions();
    let records = match sessions.list(None).await {
        Ok(records) => records,
        Err(e) => return session_error(e),
    };
    let tenants = runtime.tenants();
    let mut by_tenant: BTreeMap<String, Vec<Value>> = tenants
        .iter()
        .map(|(id, _)| (id.to_string(), Vec::new()))
        .collect();
    for record in &records {
        by_tenant
            .entry(record.tenant.to_string())
            .or_default()
            .push(session_json(record));
    }
    let tallies = runtime.tracer().metrics().tallies();
    let disk: BTreeMap<String, (Option<u64>, Option<u64>)> = sessions
        .kept_disk_use()
        .into_iter()
        .map(|(tenant, used, quota)| (tenant.to_string(), (used, quota)))
        .collect();
    let tenant_list: Vec<Value> = by_tenant
        .into_iter()
        .map(|(id, sessions_of)| {
            let tenant = TenantId::new(id.clone()).ok();
            let declared = tenant.as_ref().and_then(|t| tenants.get(t).ok().flatten());
            let rate = tenant.as_ref().and_then(|t| tenants.rate_state(t));
            let tally = tallies.get(&id).cloned().unwrap_or_default();
            let (used, quota) = disk.get(&id).copied().unwrap_or_default();
            json!({
                "id": id,
                "declared": declared.is_some(),
                "sessions": sessions_of,
                "calls": tally.outcomes,
                "rate_limited": tally.rate_limited,
                "disk": {"used_bytes": used, "quota_bytes": quota},
                "rate": rate.map(|(limit, running)| json!({
                    "calls_per_second": limit.calls_per_second,
                    "burst": limit.burst,
                    "concurrent": limit.concurrent,
                    "running": running,
                })),
            })
        })
        .collect();
    let upstreams: Vec<Value> = runtime
        .upstream_states()
        .into_iter()
        .map(|(name, state)| json!({"name": name, "state": state}))
        .collect();
    // Where each component came from: a registry's by the digest it resolved to, so that
    // the hosts of a fleet can be compared.
    let components: Vec<Value> = runtime
        .components()
        .into_iter()
        .map(|(owner, source, pulled)| {
            json!({
                "owner": owner,
                "source": source.to_string(),
                "digest": pulled.as_ref().map(|p| &p.manifest),
                "layer": pulled.as_ref().map(|p| &p.layer),
                "signed_by": pulled.map(|p| p.signed_by).unwrap_or_default(),
            })
        })
        .collect();
    axum::Json(json!({
        "config": runtime.config_file(),
        "tenants": tenant_list,
        "upstreams": upstreams,
        "components": components,
    }))
    .into_response()
}

/// The tenant and session a path names (`…/sessions/TENANT/ID…`); a 400 when either is
/// not a valid id.
struct SessionPath(TenantId, SessionId);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for SessionPath {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<SessionPath, Response> {
        let Path((tenant, id)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let tenant = TenantId::new(tenant).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
        let id = SessionId::new(id).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
        Ok(SessionPath(tenant, id))
    }
}

/// `GET /admin/api/sessions/TENANT/ID/trace`: `{"events": [...], "truncated": bool}`.
async fn trace(State(admin): State<Arc<Admin>>, SessionPath(tenant, id): SessionPath) -> Response {
    let sessions = admin.runtime.sessions();
    // Read without marking it active: looking at a session does not keep it alive.
    let session = match sessions.record(&tenant, &id).await {
        Ok(record) => match sessions.resolve(&record) {
            Ok(session) => session,
            Err(e) => return session_error(e),
        },
        Err(e) => return session_error(e),
    };
    let Some(mount) = admin.runtime.tracer().settings().mount.clone() else {
        return axum::Json(json!({"events": [], "truncated": false})).into_response();
    };
    let Some(dir) = session.host_dir(&mount).map(std::path::Path::to_path_buf) else {
        return axum::Json(json!({"events": [], "truncated": false})).into_response();
    };
    let read = tokio::task::spawn_blocking(move || read_trace(&dir)).await;
    match read {
        Ok(Ok((events, truncated))) => {
            axum::Json(json!({"events": events, "truncated": truncated})).into_response()
        }
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read the trace: {e}"),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// The events of the trace file under the mount directory `dir` (its last
/// [`ADMIN_TRACE_BYTES`], whole lines), and whether earlier ones were left out. No file
/// yet: none.
fn read_trace(dir: &std::path::Path) -> std::io::Result<(Vec<Value>, bool)> {
    use std::io::{Read, Seek, SeekFrom};
    let root = match cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()) {
        Ok(root) => root,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(e) => return Err(e),
    };
    let mut file = match root.open(EVENTS_FILE) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let truncated = len > ADMIN_TRACE_BYTES;
    if truncated {
        file.seek(SeekFrom::Start(len - ADMIN_TRACE_BYTES))?;
    }
    let mut bytes = Vec::new();
    file.take(ADMIN_TRACE_BYTES).read_to_end(&mut bytes)?;
    let mut lines = bytes.split(|b| *b == b'\n');
    if truncated {
        // The first line read is likely a part of one.
        lines.next();
    }
    let events = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect();
    Ok((events, truncated))
}

/// `DELETE /admin/api/sessions/TENANT/ID`.
async fn delete_session(
    State(admin): State<Arc<Admin>>,
    SessionPath(tenant, id): SessionPath,
) -> Response {
    match admin.runtime.sessions().delete(&tenant, &id).await {
        Ok(()) => {
            tracing::info!(%tenant, session = %id, "session deleted from the admin page");
            axum::Json(json!({"deleted": true})).into_response()
        }
        Err(e) => session_error(e),
    }
}

/// `POST /admin/api/reload`: 200 with what changed, or 422 with why it was refused.
async fn reload(State(admin): State<Arc<Admin>>) -> Response {
    match admin.reloader.reload().await {
        Ok(reloaded) => axum::Json(json!({
            "reloaded": true,
            "summary": reloaded.to_string(),
            "changes": reloaded,
        }))
        .into_response(),
        Err(e) => error(StatusCode::UNPROCESSABLE_ENTITY, e),
    }
}
