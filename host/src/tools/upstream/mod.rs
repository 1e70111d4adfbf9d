//! Upstream MCP servers: hookhost connects to them as a client and serves their tools as
//! its own, named `UPSTREAM__TOOL`, so every call goes through the hook chain (offload,
//! audit…) like any other tool.
//!
//! An upstream that does not start (within its timeout) is reported, contributes no
//! tools, and is tried again; one that dies later is restarted. Both with a backoff from
//! 1 s doubling to [`MAX_UPSTREAM_BACKOFF`] (logged); meanwhile its tools answer with an
//! error saying it is down, and `/readyz` names it. When an upstream comes up (again) with
//! other tools than before, [`Upstream::changes`] ticks so MCP clients are told
//! (`notifications/tools/list_changed`).
//!
//! Either era (`protocol = "auto"`): hookhost begins with the 2025 era's `initialize`, and
//! connects again asking with MCP 2026-07-28's `server/discover` when that fails (a server
//! that speaks only 2026 refuses it, -32022). The 2025 era first, because a server that
//! speaks both serves 2025 clients everything through it as they asked for it — resource
//! subscriptions, log lines, its requests mid-call — which over 2026 would need bridges
//! hookhost does not have yet (`subscriptions/listen` for `resources/subscribe`, log levels
//! in `_meta`). `protocol` pins one era. To a 2026 server every request names its version
//! and capabilities in `_meta`, as rmcp sends them. A 2026 server's multi-round-trip answer
//! (`input_required`) is fulfilled through the client whose request it serves and retried
//! (see [`relay`]); the hooks see one call. Each call is bounded by the
//! upstream's timeout, so a hung upstream never hangs a client; the client's progress
//! token is passed on and the upstream's progress notifications relayed back.
//!
//! Security: a stdio upstream starts with an empty environment plus `PATH` and the
//! operator's `env` (so no tenant can read the host's environment through it); a URL
//! upstream gets only the operator's `headers`. Its stderr goes to the host's log, never
//! to the output of a command.

mod oauth;
mod pool;
mod relay;

pub use pool::Pool;
pub use relay::{Asker, CLIENT, Client, Notice, Question};

use super::{Callee, Extras, Tool};
use crate::abi::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::config::{UpstreamConfig, UpstreamProtocol, is_tool_name};
use crate::failure::Failure;
use crate::limits::{
    DEFAULT_UPSTREAM_TIMEOUT, MAX_UPSTREAM_BACKOFF, UPSTREAM_HEALTHY_AFTER,
    UPSTREAM_IDLE_CONNECTION, UPSTREAM_REDIRECTS, UPSTREAM_RELIST_MIN, UPSTREAM_RELISTEN_PAUSE,
};
use crate::secret::{Secret, expand};
use crate::sessions::{Caller, SessionHolder};
use axum::http::{HeaderName, HeaderValue};
use relay::Relay;
#[allow(
    deprecated,
    reason = "MCP 2025-11-25 has resources/subscribe; hookhost serves it"
)]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject, Prompt, ProtocolVersion,
    Resource, ResourceTemplate, ServerCapabilities, ServerResult, SubscribeRequest,
    SubscribeRequestParams, SubscriptionFilter, Tool as McpTool, UnsubscribeRequest,
    UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess, Transport};
use rmcp::{
    ClientLifecycleMode, ClientServiceExt, ErrorData as McpError, RoleClient, ServiceError,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};

/// Separates an upstream's name from its tool's in the names agents see.
pub const SEPARATOR: &str = "__";

/// Why an upstream could not be used.
#[derive(Debug, thiserror::Error)]
#[error("upstream '{name}': {what}")]
pub struct UpstreamError {
    pub name: String,
    pub what: String,
}

/// An upstream server, kept running.
pub struct Upstream {
    name: String,
    spec: UpstreamConfig,
    timeout: Duration,
    /// The connection while it is up.
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// Whether it was ever up: one that never was is `unavailable`, not `down`.
    reached: AtomicBool,
    /// Its tools as served (`NAME__TOOL`), as last listed.
    tools: RwLock<Vec<McpTool>>,
    /// How long that list may be kept, when the upstream said (`ttlMs`).
    tools_ttl: Mutex<Option<Duration>>,
    /// Ticks each time the tools listed change.
    changes: watch::Sender<u64>,
    relay: Relay,
    /// How many clients subscribe to each resource URI (see [`Upstream::subscription`]).
    subscribed: Mutex<HashMap<String, usize>>,
    /// Told when those change, for an upstream of MCP 2026-07-28's listener.
    resubscribe: Notify,
    /// Cancelled when no config lists it any more (see [`Running`]): its connection is
    /// closed, its process killed, and it is not restarted.
    stop: tokio_util::sync::CancellationToken,
    /// Its OAuth client once it has one: a restart keeps its tokens (a refresh token the
    /// server rotated is the one the next refresh needs, not the config's).
    authorized: Mutex<Option<oauth::Authorized>>,
}

/// An upstream kept running for as long as this lives: the configs in effect that list it
/// share it (a reload that keeps an upstream's settings keeps its process), and when the
/// last goes — the calls that began under it ended — the upstream is stopped.
pub struct Running(Arc<Upstream>);

impl std::ops::Deref for Running {
    type Target = Arc<Upstream>;
    fn deref(&self) -> &Arc<Upstream> {
        &self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        tracing::info!(upstream = %self.0.name, "upstream stopped");
        self.0.stop.cancel();
    }
}

type Connection = RunningService<RoleClient, Relay>;
impl Upstream {
    /// Whether it is up (its process or connection is alive).
    pub fn is_up(&self) -> bool {
        self.current()
            .is_some_and(|peer| !peer.is_transport_closed())
    }

    /// `up`; `down` (it died and is being restarted; its tools answer with an error); or
    /// `unavailable` (it never started, and is being tried again).
    pub fn state(&self) -> &'static str {
        if self.is_up() {
            "up"
        } else if self.reached.load(Ordering::Relaxed) {
            "down"
        } else {
            "unavailable"
        }
    }

    /// Whether it speaks MCP 2026-07-28 or later, while it is up.
    fn speaks_2026(&self) -> bool {
        self.protocol()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
    }

    /// An upstream of MCP 2026-07-28 tells its changes only to a listener: one
    /// `subscriptions/listen` kept open while it is up, for its list changes and the
    /// resources hookhost's clients subscribed (opened again when they change, or when
    /// it ends). What it is told reaches the relay as any notification of the upstream's
    /// does (the connection's transport sees it), so this only keeps it open.
    async fn listen(&self, peer: Peer<RoleClient>) {
        loop {
            let mut filter = SubscriptionFilter::new();
            filter.tools_list_changed = Some(true);
            filter.prompts_list_changed = Some(true);
            filter.resources_list_changed = Some(true);
            let uris: Vec<String> = self
                .subscribed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .keys()
                .cloned()
                .collect();
            filter.resource_subscriptions = (!uris.is_empty()).then_some(uris);
            match peer.listen(filter).await {
                Ok(mut listening) => loop {
                    tokio::select! {
                        next = listening.next() => match next {
                            Ok(Some(_)) => {}
                            Ok(None) | Err(_) => break,
                        },
                        () = self.resubscribe.notified() => break,
                    }
                },
                Err(e) => {
                    tracing::debug!(upstream = %self.name, error = %e, "listening to the upstream failed")
                }
            }
            // Not at once again: an upstream that ends each listener at once is not spun.
            tokio::time::sleep(UPSTREAM_RELISTEN_PAUSE).await;
        }
    }

    /// The MCP revision it speaks, while it is up.
    pub fn protocol(&self) -> Option<ProtocolVersion> {
        Some(self.current()?.peer_info()?.protocol_version.clone())
    }

    /// Its tools as MCP lists them, under the names served.
    pub fn listing(&self) -> Vec<McpTool> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The tool served as `exposed`, if this upstream lists it.
    pub fn tool(self: &Arc<Self>, exposed: &str) -> Option<UpstreamTool> {
        let listing = self
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|t| t.name == exposed)?
            .clone();
        Some(UpstreamTool {
            descriptor: descriptor(&listing),
            remote: exposed[self.prefix().len()..].to_string(),
            listing,
            upstream: self.clone(),
            extras: Mutex::new(None),
        })
    }

    /// What its tools' and prompts' names are served with in front: `prefix`, else
    /// `NAME__`.
    pub fn prefix(&self) -> String {
        self.spec
            .prefix
            .clone()
            .unwrap_or_else(|| format!("{}{SEPARATOR}", self.name))
    }

    /// The settings it was started with.
    pub fn spec(&self) -> &UpstreamConfig {
        &self.spec
    }

    /// Ticks when the tools it lists change (after a restart).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Its name as configured.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it declared it serves, in its answer to `initialize`; `None` while it is down.
    pub fn capabilities(&self) -> Option<ServerCapabilities> {
        let peer = self.current()?;
        Some(peer.peer_info()?.capabilities.clone())
    }

    /// The connection while it is up, or the error saying it is down.
    fn up(&self) -> Result<Peer<RoleClient>, McpError> {
        self.current()
            .filter(|p| !p.is_transport_closed())
            .ok_or_else(|| {
                McpError::internal_error(
                    format!(
                        "upstream '{}' is down and being restarted; try again shortly",
                        self.name
                    ),
                    None,
                )
            })
    }

    /// What it answered, or MCP's error for what went wrong: its own error as it sent it,
    /// else one naming it.
    fn answered<T>(
        &self,
        answer: Result<Result<T, ServiceError>, tokio::time::error::Elapsed>,
    ) -> Result<T, McpError> {
        match answer {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(ServiceError::McpError(e))) => Err(e),
            Ok(Err(e)) => Err(McpError::internal_error(failure(&self.name, &e), None)),
            Err(_) => Err(McpError::internal_error(
                format!(
                    "upstream '{}' did not answer within {} s",
                    self.name,
                    self.timeout.as_secs()
                ),
                None,
            )),
        }
    }

    /// Sends `request` on behalf of the client of this task (see [`CLIENT`]): what the
    /// upstream sends that client meanwhile (progress, logs, elicitation…) reaches it.
    pub async fn forward(&self, request: ClientRequest) -> Result<ServerResult, McpError> {
        let peer = self.up()?;
        let answer = relay::within(self.timeout, relay::request(&peer, &self.relay, request)).await;
        self.answered(answer)
    }

    /// Its resources, every page of them.
    pub async fn resources(&self) -> Result<Vec<Resource>, McpError> {
        let peer = self.up()?;
        self.answered(tokio::time::timeout(self.timeout, peer.list_all_resources()).await)
    }

    /// Its resource templates, every page of them.
    pub async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>, McpError> {
        let peer = self.up()?;
        let listed = peer.list_all_resource_templates();
        self.answered(tokio::time::timeout(self.timeout, listed).await)
    }

    /// Its prompts, every page of them.
    pub async fn prompts(&self) -> Result<Vec<Prompt>, McpError> {
        let peer = self.up()?;
        self.answered(tokio::time::timeout(self.timeout, peer.list_all_prompts()).await)
    }

    /// Subscribes to `uri` (`subscribe`) or unsubscribes. Clients' subscriptions are
    /// counted: the upstream is subscribed when the first client subscribes and
    /// unsubscribed when the last goes.
    #[allow(
        deprecated,
        reason = "MCP 2025-11-25 has resources/subscribe; hookhost serves it"
    )]
    pub async fn subscription(&self, uri: &str, subscribe: bool) -> Result<(), McpError> {
        let send = {
            let mut counts = self.subscribed.lock().unwrap_or_else(|e| e.into_inner());
            let count = counts.entry(uri.to_string()).or_default();
            let before = *count;
            *count = if subscribe {
                before + 1
            } else {
                before.saturating_sub(1)
            };
            let after = *count;
            if after == 0 {
                counts.remove(uri);
            }
            (before == 0) != (after == 0)
        };
        if !send {
            return Ok(());
        }
        if self.speaks_2026() {
            // Its listener is opened again with the resources subscribed now.
            self.resubscribe.notify_one();
            return Ok(());
        }
        let request = if subscribe {
            ClientRequest::SubscribeRequest(SubscribeRequest::new(SubscribeRequestParams::new(uri)))
        } else {
            ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(
                UnsubscribeRequestParams::new(uri),
            ))
        };
        self.forward(request).await.map(drop)
    }

    fn current(&self) -> Option<Peer<RoleClient>> {
        self.peer.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn routed<T: Transport<RoleClient>>(&self, inner: T) -> relay::Routed<T> {
        relay::Routed {
            inner,
            relay: self.relay.clone(),
        }
    }

    fn fail(&self, what: String) -> UpstreamError {
        UpstreamError {
            name: self.name.clone(),
            what,
        }
    }

    /// Starts (or connects to) the server and lists its tools, within the timeout.
    async fn start(&self) -> Result<(Connection, Vec<McpTool>), UpstreamError> {
        let started = tokio::time::timeout(self.timeout, self.connect())
            .await
            .map_err(|_| {
                self.fail(format!("did not start within {} s", self.timeout.as_secs()))
            })??;
        let tools = self.list(started.peer()).await?;
        Ok((started, tools))
    }

    /// Its tools, named as served, within the timeout; notes how long the list may be
    /// kept, when the upstream says (MCP 2026-07-28's `ttlMs`).
    async fn list(&self, peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, UpstreamError> {
        let listed = tokio::time::timeout(self.timeout, peer.list_all_tools_with_cache_hint())
            .await
            .map_err(|_| self.fail("did not list its tools in time".into()))?
            .map_err(|e| self.fail(format!("cannot list its tools: {e}")))?;
        *self.tools_ttl.lock().unwrap_or_else(|e| e.into_inner()) = listed
            .ttl_ms
            .map(|ms| Duration::from_millis(ms).max(UPSTREAM_RELIST_MIN));
        let mut tools = Vec::new();
        for mut tool in listed.items {
            let exposed = format!("{}{}", self.prefix(), tool.name);
            if !is_tool_name(&exposed) {
                tracing::warn!(upstream = %self.name, tool = %tool.name, "skipping a tool whose name cannot be served");
                continue;
            }
            tool.name = exposed.into();
            tools.push(tool);
        }
        Ok(tools)
    }

    /// Lists its tools again (it said they changed, or the list's time to live is over:
    /// `why`), and takes them as listed.
    async fn relist(&self, why: &'static str) {
        let Some(peer) = self.current() else {
            return;
        };
        match self.list(&peer).await {
            Ok(tools) => {
                let count = tools.len();
                if self.listed(tools) {
                    tracing::info!(upstream = %self.name, tools = count, why, "upstream's tools changed");
                } else {
                    tracing::debug!(upstream = %self.name, why, "upstream's tools listed again, unchanged");
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing an upstream's changed tools failed"),
        }
    }

    /// Connects as `protocol` says (see the module's doc): `auto` begins with the 2025
    /// era's `initialize` and, when that fails, asks with MCP 2026-07-28's
    /// `server/discover` on a new connection (a process started again).
    async fn connect(&self) -> Result<Connection, UpstreamError> {
        let discover = || ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        match self.spec.protocol {
            UpstreamProtocol::V2025 => self.open(ClientLifecycleMode::Initialize).await,
            UpstreamProtocol::V2026 => self.open(discover()).await,
            UpstreamProtocol::Auto => match self.open(ClientLifecycleMode::Initialize).await {
                Ok(connection) => Ok(connection),
                Err(legacy) => self.open(discover()).await.map_err(|modern| {
                    self.fail(format!(
                        "{}; asked with MCP 2026-07-28's server/discover: {}",
                        legacy.what, modern.what
                    ))
                }),
            },
        }
    }

    async fn open(&self, lifecycle: ClientLifecycleMode) -> Result<Connection, UpstreamError> {
        let spec = &self.spec;
        let expanded = |table: &std::collections::BTreeMap<String, Secret>, key: &str| {
            table
                .iter()
                .map(|(k, v)| {
                    expand(v.expose())
                        .map(|v| (k.clone(), v))
                        .map_err(|why| self.fail(format!("{key}.{k}: {why}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        match (&spec.command, &spec.url) {
            (Some(command), _) => {
                let mut cmd = tokio::process::Command::new(command);
                let path = std::env::var_os("PATH")
                    .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
                cmd.args(&spec.args)
                    .env_clear()
                    .env("PATH", path)
                    .envs(expanded(&spec.env, "env")?)
                    .kill_on_drop(true);
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| self.fail(format!("cannot start {command}: {e}")))?;
                if let Some(stderr) = stderr {
                    tokio::spawn(log_stderr(self.name.clone(), stderr));
                }
                self.relay
                    .clone()
                    .serve_with_lifecycle(self.routed(transport), lifecycle)
                    .await
                    .map_err(|e| self.fail(format!("no MCP handshake: {e}")))
            }
            (None, Some(written)) => {
                // Errors name the URL as written: expanded, it may hold a secret.
                let written = written.expose();
                let url = expand(written).map_err(|why| self.fail(format!("url: {why}")))?;
                let mut custom = HashMap::new();
                for (key, value) in expanded(&spec.headers, "headers")? {
                    let key = HeaderName::try_from(key.as_str())
                        .map_err(|e| self.fail(format!("headers.{key}: {e}")))?;
                    let value = HeaderValue::try_from(value)
                        .map_err(|e| self.fail(format!("headers.{key}: {e}")))?;
                    custom.insert(key, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let served = match &spec.oauth {
                    None => {
                        let transport = StreamableHttpClientTransport::with_client(
                            http_client().map_err(|e| self.fail(format!("http client: {e}")))?,
                            config,
                        );
                        self.relay
                            .clone()
                            .serve_with_lifecycle(self.routed(transport), lifecycle)
                            .await
                    }
                    Some(oauth) => {
                        let kept = self
                            .authorized
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .clone();
                        let client = match kept {
                            Some(client) => client,
                            None => {
                                let client = oauth::authorized(&self.name, &url, oauth)
                                    .await
                                    .map_err(|why| self.fail(format!("oauth: {why}")))?;
                                *self.authorized.lock().unwrap_or_else(|e| e.into_inner()) =
                                    Some(client.clone());
                                client
                            }
                        };
                        let transport = StreamableHttpClientTransport::with_client(client, config);
                        self.relay
                            .clone()
                            .serve_with_lifecycle(self.routed(transport), lifecycle)
                            .await
                    }
                };
                served.map_err(|e| {
                    // The HTTP client's errors quote the URL they were given.
                    let e = e.to_string().replace(&url, written);
                    // rmcp's transport error for a 401 with a challenge.
                    if e.contains("Auth required") && spec.oauth.is_none() {
                        return self.fail(format!(
                            "{written} requires MCP authorization (OAuth): hookhost runs no flow \
                             that needs a person; register a client at its authorization server \
                             and give it as `oauth = {{ client_id = \"…\", client_secret = \
                             \"${{SECRET}}\" }}` (the client_credentials grant; or \
                             `private_key`, or a `refresh_token`), or a token in `headers`"
                        ));
                    }
                    self.fail(format!("no MCP handshake with {written}: {e}"))
                })
            }
            (None, None) => Err(self.fail("neither `command` nor `url` is given".into())),
        }
    }

    /// Takes `connection` as its current one, with `tools` as listed: ticks
    /// [`Upstream::changes`] when they are not the tools it listed before.
    fn came_up(&self, connection: &Connection, tools: Vec<McpTool>) {
        self.reached.store(true, Ordering::Relaxed);
        *self.peer.write().unwrap_or_else(|e| e.into_inner()) = Some(connection.peer().clone());
        self.listed(tools);
    }

    /// Takes `tools` as its tools: ticks [`Upstream::changes`] when they are not the ones
    /// it listed before.
    fn listed(&self, tools: Vec<McpTool>) -> bool {
        let changed = {
            let mut known = self.tools.write().unwrap_or_else(|e| e.into_inner());
            let changed = *known != tools;
            *known = tools;
            changed
        };
        if changed {
            self.changes.send_modify(|n| *n += 1);
        }
        changed
    }

    /// Keeps it up: watches the connection while there is one; when it ends, or when there
    /// is none (it did not start), starts the server again with a backoff. Ends when it is
    /// stopped: dropping the connection closes it (and kills the process).
    async fn supervise(self: Arc<Self>, mut connection: Option<Connection>) {
        let mut backoff = Duration::from_secs(1);
        loop {
            if let Some(up) = connection.take() {
                let up_since = Instant::now();
                let listening = async {
                    match self.speaks_2026().then(|| self.current()).flatten() {
                        Some(peer) => self.listen(peer).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::pin!(listening);
                let waiting = up.waiting();
                tokio::pin!(waiting);
                let reason = loop {
                    // Listed again when the upstream says its tools changed, or when the
                    // list's time to live is over.
                    let ttl = *self.tools_ttl.lock().unwrap_or_else(|e| e.into_inner());
                    let expired = async {
                        match ttl {
                            Some(ttl) => tokio::time::sleep(ttl).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        reason = &mut waiting => break reason,
                        () = self.relay.relist.notified() => self.relist("it said they changed").await,
                        () = expired => self.relist("their ttlMs is over").await,
                        () = &mut listening => {}
                        () = self.stop.cancelled() => return,
                    }
                };
                *self.peer.write().unwrap_or_else(|e| e.into_inner()) = None;
                if up_since.elapsed() >= UPSTREAM_HEALTHY_AFTER {
                    backoff = Duration::from_secs(1);
                }
                tracing::warn!(upstream = %self.name, ?reason, retry_in = ?backoff, "upstream is down; restarting");
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_UPSTREAM_BACKOFF);
            let started = tokio::select! {
                started = self.start() => started,
                () = self.stop.cancelled() => return,
            };
            match started {
                Ok((next, tools)) => {
                    tracing::info!(upstream = %self.name, tools = tools.len(), protocol = %next.peer().peer_info().map(|i| i.protocol_version.to_string()).unwrap_or_default(), "upstream up");
                    self.came_up(&next, tools);
                    connection = Some(next);
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "starting the upstream failed");
                }
            }
        }
    }
}

/// An upstream's tool as the chain sees it: its name as served, description and schema.
pub fn descriptor(listing: &McpTool) -> ToolDescriptor {
    ToolDescriptor {
        name: listing.name.to_string(),
        description: listing
            .description
            .as_deref()
            .unwrap_or_default()
            .to_string(),
        input_schema: serde_json::to_string(listing.input_schema.as_ref())
            .unwrap_or_else(|_| r#"{"type":"object"}"#.into()),
    }
}

/// One tool of an upstream server, for one call.
pub struct UpstreamTool {
    descriptor: ToolDescriptor,
    /// The upstream's listing under the name served (title, annotations, output schema).
    listing: McpTool,
    remote: String,
    upstream: Arc<Upstream>,
    /// What the call returned beside its text, until the MCP front end takes it (one
    /// `UpstreamTool` serves one call: [`Upstream::tool`] makes it for the call).
    extras: Mutex<Option<Extras>>,
}

/// Starts (or connects to) the upstream `name` and keeps it running (restarting it when it
/// dies).
///
/// # Errors
///
/// [`UpstreamError`] when it cannot be started, does not answer in time, or its tools
/// cannot be listed.
pub async fn connect(
    name: &str,
    spec: &UpstreamConfig,
    notices: &tokio::sync::broadcast::Sender<Notice>,
) -> Result<Running, UpstreamError> {
    let upstream = Upstream::new(name, spec, notices);
    let (connection, tools) = upstream.start().await?;
    upstream.came_up(&connection, tools);
    tracing::info!(upstream = name, tools = upstream.listing().len(), protocol = %upstream.protocol().map(|v| v.to_string()).unwrap_or_default(), "upstream connected");
    tokio::spawn(upstream.clone().supervise(Some(connection)));
    Ok(Running(upstream))
}

/// [`connect`], except that an upstream that does not start is kept, `unavailable`, and
/// tried again with a backoff until it does (or is stopped): the start is not held up by
/// a server that comes later, and the operator need not reload for it.
pub async fn keep(
    name: &str,
    spec: &UpstreamConfig,
    notices: &tokio::sync::broadcast::Sender<Notice>,
) -> Running {
    match connect(name, spec, notices).await {
        Ok(running) => running,
        Err(e) => {
            tracing::error!(error = %e, "upstream unavailable; trying it again");
            let upstream = Upstream::new(name, spec, notices);
            tokio::spawn(upstream.clone().supervise(None));
            Running(upstream)
        }
    }
}

impl Upstream {
    fn new(
        name: &str,
        spec: &UpstreamConfig,
        notices: &tokio::sync::broadcast::Sender<Notice>,
    ) -> Arc<Upstream> {
        crate::crypto::install_crypto_provider();
        Arc::new(Upstream {
            name: name.to_string(),
            spec: spec.clone(),
            timeout: spec
                .timeout_secs
                .map_or(DEFAULT_UPSTREAM_TIMEOUT, Duration::from_secs),
            peer: RwLock::new(None),
            reached: AtomicBool::new(false),
            tools: RwLock::new(Vec::new()),
            tools_ttl: Mutex::default(),
            changes: watch::channel(0).0,
            relay: Relay::new(notices.clone(), spec.roots),
            subscribed: Mutex::default(),
            resubscribe: Notify::new(),
            stop: tokio_util::sync::CancellationToken::new(),
            authorized: Mutex::default(),
        })
    }
}

/// The HTTP client of an upstream's connection: its connections kept open between
/// requests for [`UPSTREAM_IDLE_CONNECTION`] (rmcp's own opens one per request, 0.2 ms of
/// a call to a local upstream, see docs/performance.md), with `TCP_NODELAY`; it follows
/// only 307 and 308 redirects to the same origin, which keep the request's method and
/// body — one elsewhere would carry the session id and the operator's headers there.
pub(super) fn http_client() -> reqwest::Result<reqwest::Client> {
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let origin = |url: &reqwest::Url| url.origin();
        let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
        let first = attempt.previous().first().map(origin);
        if attempt.previous().len() > UPSTREAM_REDIRECTS {
            attempt.error("too many redirects")
        } else if keeps_body && first == Some(origin(attempt.url())) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(UPSTREAM_IDLE_CONNECTION)
        .redirect(same_origin)
        .build()
}

/// What went wrong with a request to upstream `name`, said without rmcp's transport type.
fn failure(name: &str, e: &ServiceError) -> String {
    match e {
        ServiceError::TransportSend(sent) => format!("upstream '{name}' failed: {}", sent.error),
        e => format!("upstream '{name}' failed: {e}"),
    }
}

/// Copies an upstream's stderr into the host's log, line by line.
async fn log_stderr(name: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(upstream = %name, "stderr: {line}");
    }
}

/// Holds nothing per session.
impl SessionHolder for UpstreamTool {}

#[async_trait::async_trait]
impl Callee for UpstreamTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        caller: &Caller<'_>,
        _ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        let upstream = &self.upstream;
        let peer = match upstream.up() {
            Ok(peer) => peer,
            Err(down) => return Ok(ToolResult::error(down.message.to_string())),
        };
        let arguments: JsonObject = serde_json::from_str(&call.arguments).unwrap_or_default();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments),
        ));
        // A tenant's `deadline_ms` shortens the upstream's timeout, and its
        // `max_output_bytes` bounds the answer, as for a component.
        let tenant = caller.tenant_limits();
        let timeout = tenant.deadline_ms.map_or(upstream.timeout, |ms| {
            upstream.timeout.min(Duration::from_millis(ms))
        });
        let answer = relay::within(timeout, async {
            match relay::request(&peer, &upstream.relay, request).await? {
                ServerResult::CallToolResult(result) => Ok(result),
                _ => Err(rmcp::ServiceError::UnexpectedResponse),
            }
        })
        .await;
        Ok(match answer {
            Ok(Ok(result)) => {
                let (result, extras) = super::rich::split(result);
                if tenant.max_output_bytes.is_some() {
                    result.check_size(&caller.limits())?;
                }
                *self.extras.lock().unwrap_or_else(|e| e.into_inner()) = Some(extras);
                result
            }
            Ok(Err(e)) => ToolResult::error(failure(&upstream.name, &e)),
            Err(_) => ToolResult::error(format!(
                "upstream '{}' did not answer within {} s",
                upstream.name,
                timeout.as_secs_f64()
            )),
        })
    }
}

impl Tool for UpstreamTool {
    fn mcp_listing(&self) -> Option<&McpTool> {
        Some(&self.listing)
    }

    fn take_extras(&self, _call_id: &str) -> Option<Extras> {
        self.extras.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}
