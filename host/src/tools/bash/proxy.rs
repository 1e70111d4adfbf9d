//! The way out of a sandbox whose `[bash] network` is an allow-list (`network = { allow =
//! [...] }`): a proxy the hookhost process runs, listening inside the sandbox.
//!
//! Such a sandbox keeps its own empty network namespace (only a loopback, no slirp4netns).
//! Its launcher, PID 1 of that namespace, binds 127.0.0.1:[`SHELL_PROXY_PORT`] before any
//! command runs and hands the listening socket to the host over its control socket
//! (`SCM_RIGHTS`, as the commands' pipes travel the other way); the host accepts on it
//! while a command runs. The issue asked for "a Unix socket bound into the sandbox": a TCP
//! listener made in the sandbox's namespace is the same thing without a bridge process
//! inside, and `curl`, `pip` and `npm` reach it with an ordinary
//! `HTTP_PROXY=http://127.0.0.1:3128` (see `sandbox::PROXY_ENVIRONMENT`). No command can
//! take the port first (it is bound before the first one starts) nor reach anything else
//! (the namespace has nothing else).
//!
//! One port speaks three ways, told apart by the first byte:
//! - `CONNECT host:port` (HTTPS through an HTTP proxy): a tunnel once the host is checked;
//! - an absolute-form request (`GET http://host:port/path HTTP/1.1`): forwarded to the
//!   origin in origin form, one request per connection (`Connection: close`);
//! - SOCKS5 (`0x05`; no authentication, `CONNECT`, IPv4, IPv6 or a name) for
//!   `ALL_PROXY=socks5h://…`.
//!
//! HTTP is read by hyper; SOCKS5, a few length-prefixed fields, here, every length bounded.
//!
//! Every destination is checked by the code that checks components' requests
//! ([`crate::network`]): its host and port against the list ([`Reach::permits`]), then
//! [`Policy::connect`] resolves the name once, refuses loopback, private, link-local,
//! metadata and this host's own addresses unless the list names the address itself, and
//! connects to the address it judged. A refusal answers `403` (HTTP) or `0x02` (SOCKS5,
//! "not allowed by ruleset") naming the host and the setting that allows it, and the
//! `bash` tool adds a line per refusal to the command's output, since `curl` and `pip`
//! often hide an answer's body.
//!
//! Every connection is recorded as a [`Request`] in the call's [`RequestLog`]: the trace
//! writes it as a `network.request` event and counts it in the metrics. Connections are
//! served only while a command runs and end with it; each waits at most
//! [`SHELL_PROXY_HEAD_TIMEOUT`] for its request and lives while bytes pass at least every
//! [`SHELL_PROXY_IDLE_TIMEOUT`]; a sandbox has at most [`SHELL_PROXY_MAX_CONNECTIONS`] at
//! once.

use crate::limits::{
    MAX_HOST_BYTES, NETWORK_CONNECT_TIMEOUT, SHELL_PROXY_ACCEPT_BACKOFF, SHELL_PROXY_HEAD_TIMEOUT,
    SHELL_PROXY_IDLE_TIMEOUT, SHELL_PROXY_MAX_CONNECTIONS, SHELL_PROXY_MAX_HEAD,
    SHELL_PROXY_MAX_NOTES,
};
use crate::network::{Allow, Failure, Host, Outcome, Policy, Reach, Request, RequestLog};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashSet;
use std::convert::Infallible;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// The component name a proxied connection is recorded under.
const COMPONENT: &str = "bash";

/// SOCKS5's version byte, which also tells a SOCKS5 client from an HTTP one.
const SOCKS5: u8 = 0x05;

/// One command's proxy: what its connections may reach, where they are recorded, and
/// what it refused.
pub struct ProxyCall {
    policy: Arc<Policy>,
    reach: Reach,
    log: Arc<RequestLog>,
    /// The setting that holds the list, as messages name it: `[bash] network` or
    /// `[tenants.ID.bash] network`.
    setting: String,
    /// The setting of the tenant's ceiling, when it has one (`[tenants.ID] network`).
    ceiling: Option<String>,
    notes: Mutex<Notes>,
}

/// The refusals said in the command's output: each host and port once, at most
/// [`SHELL_PROXY_MAX_NOTES`] lines.
#[derive(Default)]
struct Notes {
    lines: Vec<String>,
    said: HashSet<String>,
    more: usize,
}

impl ProxyCall {
    /// A command's proxy: `allow`, under the tenant's `ceiling` (and the setting that
    /// holds it), checked and connected to by `policy`, its connections recorded in `log`;
    /// `setting` names where the list is written.
    pub fn new(
        policy: Arc<Policy>,
        allow: Arc<Allow>,
        ceiling: Option<(Arc<Allow>, String)>,
        log: Arc<RequestLog>,
        setting: String,
    ) -> ProxyCall {
        let (ceiling, ceiling_setting) = ceiling.unzip();
        ProxyCall {
            policy,
            reach: Reach {
                grant: Some(allow),
                ceiling,
            },
            log,
            setting,
            ceiling: ceiling_setting,
            notes: Mutex::default(),
        }
    }

    /// A line per refusal made so far (and one counting those past the bound), for the
    /// command's output.
    pub fn notes(&self) -> Vec<String> {
        let notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        let mut lines = notes.lines.clone();
        if notes.more > 0 {
            lines.push(format!(
                "[hookhost: network: {} more refused connections not listed]",
                notes.more
            ));
        }
        lines
    }

    fn note(&self, target: &str, line: String) {
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if notes.said.contains(target) {
            return;
        }
        if notes.lines.len() >= SHELL_PROXY_MAX_NOTES {
            notes.more += 1;
            return;
        }
        notes.said.insert(target.to_string());
        notes.lines.push(line);
    }

    /// A connection to `host`:`port` for `record`, if the list lets it through and an
    /// address of it may be reached; else why not, said to the command's output too.
    async fn reach(&self, record: &Record, host: &str, port: u16) -> Result<TcpStream, Refusal> {
        if host.len() > MAX_HOST_BYTES {
            let why = format!("a host name longer than {MAX_HOST_BYTES} bytes");
            record.end(Outcome::Denied, &why);
            return Err(Refusal { failure: None, why });
        }
        let target = format!("{}:{port}", Host::parse(host));
        let Some(rule) = self.reach.permits(Host::parse(host), port) else {
            let listed = self
                .reach
                .grant
                .as_deref()
                .and_then(|g| g.permits(Host::parse(host), port));
            let (why, line) = match (listed, &self.ceiling) {
                (Some(_), Some(ceiling)) => (
                    format!("not in the tenant's network ceiling ({ceiling})"),
                    format!(
                        "[hookhost: network: refused {target} — not in {ceiling}, which caps \
                         {setting}]",
                        setting = self.setting
                    ),
                ),
                _ => (
                    format!(
                        "not in the bash network allow-list ({} = {{ allow = [...] }})",
                        self.setting
                    ),
                    format!(
                        "[hookhost: network: refused {target} — not in {setting} allow; allow \
                         it with {setting} = {{ allow = [\"{target}\"] }}]",
                        setting = self.setting
                    ),
                ),
            };
            record.end(Outcome::Denied, &why);
            self.note(&target, line);
            return Err(Refusal { failure: None, why });
        };
        record.update(|r| r.rule = Some(rule.written().to_string()));
        match self
            .policy
            .connect(&self.reach, host, port, NETWORK_CONNECT_TIMEOUT)
            .await
        {
            Ok((stream, address)) => {
                record.update(|r| r.address = Some(address.ip()));
                Ok(stream)
            }
            Err(refused) if refused.failure == Failure::Prohibited => {
                let why = refused.why.replace(
                    "which the grant does not name",
                    "which the allow-list does not name",
                );
                // The trace keeps the address; the command is told its kind only, so
                // that the proxy is no way to learn the addresses of internal names.
                record.end(Outcome::Prohibited, &why);
                let literal = matches!(Host::parse(host), Host::Address(_));
                let (why, advice) = match why.split_once(' ') {
                    Some((_, kind)) if !literal => (
                        format!("its address {kind}"),
                        format!(
                            "names in {} reach public addresses only; the operator may name \
                             the address itself",
                            self.setting
                        ),
                    ),
                    _ => (
                        why.clone(),
                        format!(
                            "to reach it, name the address itself: {} = {{ allow = \
                             [\"{target}\"] }}",
                            self.setting
                        ),
                    ),
                };
                self.note(
                    &target,
                    format!("[hookhost: network: refused {target} — {why}; {advice}]"),
                );
                Err(Refusal {
                    failure: Some(Failure::Prohibited),
                    why,
                })
            }
            Err(refused) => {
                record.end(Outcome::Failed, &refused.why);
                Err(Refusal {
                    failure: Some(refused.failure),
                    why: refused.why,
                })
            }
        }
    }
}

/// Why the proxy made no connection: refused by the list (`failure: None`), or as
/// [`Policy::connect`] says.
struct Refusal {
    failure: Option<Failure>,
    why: String,
}

impl Refusal {
    /// The HTTP answer: `403` for what the list refuses, `502`/`504` for what failed.
    fn response(&self, method: &Method, target: &str) -> Response {
        let (status, text) = match self.failure {
            None | Some(Failure::Prohibited) => (
                StatusCode::FORBIDDEN,
                format!("hookhost refused {method} {target}: {}\n", self.why),
            ),
            Some(Failure::Timeout) => (
                StatusCode::GATEWAY_TIMEOUT,
                format!("hookhost could not reach {target}: {}\n", self.why),
            ),
            Some(_) => (
                StatusCode::BAD_GATEWAY,
                format!("hookhost could not reach {target}: {}\n", self.why),
            ),
        };
        text_response(status, text)
    }

    /// The SOCKS5 reply code.
    fn socks_reply(&self) -> u8 {
        match self.failure {
            // "connection not allowed by ruleset"
            None | Some(Failure::Prohibited) => 0x02,
            // "host unreachable"
            Some(Failure::Resolve | Failure::Timeout) => 0x04,
            Some(Failure::Connect(std::io::ErrorKind::ConnectionRefused)) => 0x05,
            // "general SOCKS server failure"
            Some(Failure::Connect(_)) => 0x01,
        }
    }
}

/// Serves `listener` for the command of `call`: accepts connections, at most
/// [`SHELL_PROXY_MAX_CONNECTIONS`] at once, each a task in `connections` (which the caller
/// shuts down when the command ends). Never returns: the caller drops it.
pub async fn serve(
    listener: &TcpListener,
    call: Arc<ProxyCall>,
    connections: &mut JoinSet<()>,
) -> Infallible {
    let slots = Arc::new(tokio::sync::Semaphore::new(SHELL_PROXY_MAX_CONNECTIONS));
    loop {
        while connections.try_join_next().is_some() {}
        let Ok(slot) = slots.clone().acquire_owned().await else {
            unreachable!("the semaphore is never closed")
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let call = call.clone();
                connections.spawn(async move {
                    connection(stream, call).await;
                    drop(slot);
                });
            }
            Err(e) => {
                // Out of descriptors, most likely: the connections that end free some.
                tracing::warn!(error = %e, "bash proxy: cannot accept a connection");
                tokio::time::sleep(SHELL_PROXY_ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// One connection of a command: SOCKS5 or HTTP by its first byte, ended when no byte
/// passes for [`SHELL_PROXY_IDLE_TIMEOUT`].
async fn connection(stream: TcpStream, call: Arc<ProxyCall>) {
    let _ = stream.set_nodelay(true);
    let mut first = [0u8; 1];
    // A connection closed or silent before its first byte asked nothing: not recorded.
    match tokio::time::timeout(SHELL_PROXY_HEAD_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        _ => return,
    }
    let activity = Arc::new(Activity::new());
    let served = async {
        if first[0] == SOCKS5 {
            socks5(stream, &call, &activity).await
        } else {
            http(stream, call.clone(), activity.clone()).await
        }
    };
    tokio::select! {
        () = served => {}
        () = activity.idle(SHELL_PROXY_IDLE_TIMEOUT) => {}
    }
}

/// When a connection last passed a byte.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    /// Returns once `limit` passed without a [`Self::touch`].
    async fn idle(&self, limit: std::time::Duration) {
        loop {
            let last = std::time::Duration::from_millis(self.last.load(Ordering::Relaxed));
            let quiet = self.start.elapsed().saturating_sub(last);
            match limit.checked_sub(quiet) {
                Some(left) if !left.is_zero() => tokio::time::sleep(left).await,
                _ => return,
            }
        }
    }
}

/// One proxied connection, as the trace will say it: pushed into the call's log when the
/// last holder drops it (the connection ended, or the command did).
struct Record {
    request: Mutex<Request>,
    started: Instant,
    bytes_out: AtomicU64,
    bytes_in: AtomicU64,
    log: Arc<RequestLog>,
}

impl Record {
    fn new(call: &ProxyCall, method: &str, host: &str, port: u16) -> Arc<Record> {
        Arc::new(Record {
            request: Mutex::new(Request::new(COMPONENT.into(), method, host, port)),
            started: Instant::now(),
            bytes_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            log: call.log.clone(),
        })
    }

    fn update(&self, change: impl FnOnce(&mut Request)) {
        change(&mut self.request.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn end(&self, outcome: Outcome, why: &str) {
        self.update(|r| {
            r.outcome = outcome;
            r.reason = Some(why.to_string());
        });
    }

    fn answered(&self, status: Option<u16>) {
        self.update(|r| {
            r.outcome = Outcome::Answered;
            r.status = status;
        });
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let mut request = std::mem::replace(
            self.request.get_mut().unwrap_or_else(|e| e.into_inner()),
            Request::new(COMPONENT.into(), "", "", 0),
        );
        request.duration = self.started.elapsed();
        request.bytes_out = self.bytes_out.load(Ordering::Relaxed);
        request.bytes_in = self.bytes_in.load(Ordering::Relaxed);
        crate::network::remember(Some(&self.log), request);
    }
}

/// Copies both ways between the command's `client` and the `origin` until both ends
/// closed (or either failed), counting into `record`.
async fn tunnel<C>(client: C, origin: TcpStream, record: &Record, activity: &Activity)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut origin_read, mut origin_write) = origin.into_split();
    let up = pump(
        &mut client_read,
        &mut origin_write,
        &record.bytes_out,
        activity,
    );
    let down = pump(
        &mut origin_read,
        &mut client_write,
        &record.bytes_in,
        activity,
    );
    let _ = tokio::try_join!(up, down);
}

/// Copies `from` into `to` to its end, then ends `to`'s writing.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    count: &AtomicU64,
    activity: &Activity,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buf[..n]).await?;
        count.fetch_add(n as u64, Ordering::Relaxed);
        activity.touch();
    }
}

/// What the proxy answers over HTTP.
type Response = http::Response<UnsyncBoxBody<Bytes, hyper::Error>>;

fn text_response(status: StatusCode, text: String) -> Response {
    let mut response = http::Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A `CONNECT` the service answered `200`: the tunnel that follows once hyper hands the
/// connection over.
struct Upgrade {
    pending: hyper::upgrade::OnUpgrade,
    origin: TcpStream,
    record: Arc<Record>,
}

/// An HTTP client's connection: one request (`CONNECT`, or an absolute-form request
/// forwarded), read by hyper.
async fn http(stream: TcpStream, call: Arc<ProxyCall>, activity: Arc<Activity>) {
    let upgrade: Arc<Mutex<Option<Upgrade>>> = Arc::default();
    let service = {
        let upgrade = upgrade.clone();
        let activity = activity.clone();
        hyper::service::service_fn(move |request| {
            let (call, upgrade, activity) = (call.clone(), upgrade.clone(), activity.clone());
            async move { Ok::<_, Infallible>(answer(request, &call, &upgrade, activity).await) }
        })
    };
    let served = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .timer(TokioTimer::new())
        .header_read_timeout(SHELL_PROXY_HEAD_TIMEOUT)
        .max_buf_size(SHELL_PROXY_MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "bash proxy: an HTTP connection failed");
    }
    let pending = upgrade.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(Upgrade {
        pending,
        origin,
        record,
    }) = pending
        && let Ok(upgraded) = pending.await
    {
        tunnel(TokioIo::new(upgraded), origin, &record, &activity).await;
    }
}

/// The answer to one HTTP request of a command.
async fn answer(
    request: http::Request<Incoming>,
    call: &ProxyCall,
    upgrade: &Mutex<Option<Upgrade>>,
    activity: Arc<Activity>,
) -> Response {
    activity.touch();
    if request.method() == Method::CONNECT {
        let Some((host, port)) = request
            .uri()
            .authority()
            .and_then(|a| Some((a.host().to_ascii_lowercase(), a.port_u16()?)))
        else {
            return text_response(
                StatusCode::BAD_REQUEST,
                "hookhost's proxy: CONNECT takes host:port\n".into(),
            );
        };
        let record = Record::new(call, "CONNECT", &host, port);
        let target = format!("{}:{port}", Host::parse(&host));
        return match call.reach(&record, &host, port).await {
            Ok(origin) => {
                record.answered(Some(200));
                let pending = hyper::upgrade::on(request);
                *upgrade.lock().unwrap_or_else(|e| e.into_inner()) = Some(Upgrade {
                    pending,
                    origin,
                    record,
                });
                http::Response::new(
                    Full::new(Bytes::new())
                        .map_err(|never: Infallible| match never {})
                        .boxed_unsync(),
                )
            }
            Err(refusal) => refusal.response(&Method::CONNECT, &target),
        };
    }
    forward(request, call, activity).await
}

/// An absolute-form request (`GET http://host:port/path`), sent to its origin in origin
/// form with `Connection: close`; its answer streamed back.
async fn forward(
    request: http::Request<Incoming>,
    call: &ProxyCall,
    activity: Arc<Activity>,
) -> Response {
    let uri = request.uri().clone();
    let method = request.method().clone();
    let (Some(host), true) = (uri.host(), uri.scheme() == Some(&http::uri::Scheme::HTTP)) else {
        return text_response(
            StatusCode::BAD_REQUEST,
            format!(
                "hookhost's proxy takes CONNECT host:port, or a request for an absolute \
                 http:// URL; not {method} {uri}\n"
            ),
        );
    };
    let host = host.to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(80);
    let target = format!("{}:{port}", Host::parse(&host));
    let record = Record::new(call, method.as_str(), &host, port);
    let origin = match call.reach(&record, &host, port).await {
        Ok(origin) => origin,
        Err(refusal) => return refusal.response(&method, &target),
    };
    let (mut parts, body) = request.into_parts();
    parts.uri = match uri.path_and_query().map_or("/", |p| p.as_str()).parse() {
        Ok(path) => path,
        Err(_) => {
            record.end(Outcome::Failed, "an unreadable path");
            return text_response(
                StatusCode::BAD_REQUEST,
                "hookhost's proxy: bad path\n".into(),
            );
        }
    };
    strip_hop_by_hop(&mut parts.headers);
    if !parts.headers.contains_key(header::HOST)
        && let Some(authority) = uri.authority()
        && let Ok(value) = HeaderValue::from_str(authority.as_str())
    {
        parts.headers.insert(header::HOST, value);
    }
    parts
        .headers
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    let body = Counted {
        inner: body,
        record: record.clone(),
        incoming: false,
        activity: activity.clone(),
        _driver: None,
    };
    let (mut sender, driver) =
        match hyper::client::conn::http1::handshake(TokioIo::new(origin)).await {
            Ok(connection) => connection,
            Err(e) => {
                let why = format!("{target}: {e}");
                record.end(Outcome::Failed, &why);
                return text_response(
                    StatusCode::BAD_GATEWAY,
                    format!("hookhost could not reach {why}\n"),
                );
            }
        };
    // The origin's connection, driven until the answer's body is dropped (it ends with
    // the command's connection).
    let driver = AbortOnDrop(tokio::spawn(async move {
        let _ = driver.await;
    }));
    match sender
        .send_request(http::Request::from_parts(parts, body))
        .await
    {
        Ok(response) => {
            record.answered(Some(response.status().as_u16()));
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            let body = Counted {
                inner: body,
                record,
                incoming: true,
                activity,
                _driver: Some(driver),
            };
            http::Response::from_parts(parts, body.boxed_unsync())
        }
        Err(e) => {
            let why = format!("{target}: {e}");
            record.end(Outcome::Failed, &why);
            text_response(
                StatusCode::BAD_GATEWAY,
                format!("hookhost could not reach {why}\n"),
            )
        }
    }
}

/// Removes the headers that concern one hop, not the request (RFC 9110 §7.6.1), and those
/// the `Connection` header names. Length and transfer coding stay: hyper frames the body
/// by them.
fn strip_hop_by_hop(headers: &mut http::HeaderMap) {
    let named: Vec<http::HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| http::HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .filter(|name| *name != header::TRANSFER_ENCODING && *name != header::CONTENT_LENGTH)
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("proxy-connection");
    headers.remove("keep-alive");
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A body whose bytes are counted into its connection's record.
struct Counted {
    inner: Incoming,
    record: Arc<Record>,
    /// The origin's answer (else the command's request).
    incoming: bool,
    activity: Arc<Activity>,
    _driver: Option<AbortOnDrop>,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            let count = match self.incoming {
                true => &self.record.bytes_in,
                false => &self.record.bytes_out,
            };
            count.fetch_add(data.len() as u64, Ordering::Relaxed);
            self.activity.touch();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A SOCKS5 client's connection (RFC 1928): no authentication, `CONNECT` only.
async fn socks5(mut stream: TcpStream, call: &ProxyCall, activity: &Activity) {
    let asked = tokio::time::timeout(SHELL_PROXY_HEAD_TIMEOUT, socks5_request(&mut stream)).await;
    let Ok(Ok(Some((host, port)))) = asked else {
        return;
    };
    activity.touch();
    let record = Record::new(call, "SOCKS5", &host, port);
    match call.reach(&record, &host, port).await {
        Ok(origin) => {
            // The bound address is not the command's business: 0.0.0.0:0.
            if stream.write_all(&socks5_reply(0x00)).await.is_ok() {
                record.answered(None);
                tunnel(stream, origin, &record, activity).await;
            }
        }
        Err(refusal) => {
            let _ = stream.write_all(&socks5_reply(refusal.socks_reply())).await;
        }
    }
}

/// A SOCKS5 reply of `code`, with 0.0.0.0:0 as the bound address.
fn socks5_reply(code: u8) -> [u8; 10] {
    [SOCKS5, code, 0, 0x01, 0, 0, 0, 0, 0, 0]
}

/// Reads a SOCKS5 greeting and request: the host (a name, lowercased, or an address; IPv6
/// in brackets) and port of a `CONNECT`; `None` (after the reply that says why) for what
/// is not one.
async fn socks5_request(stream: &mut TcpStream) -> std::io::Result<Option<(String, u16)>> {
    let mut greeting = [0u8; 2];
    stream.read_exact(&mut greeting).await?;
    let mut methods = vec![0u8; usize::from(greeting[1])];
    stream.read_exact(&mut methods).await?;
    if !methods.contains(&0x00) {
        // "no acceptable methods": only "no authentication" is spoken.
        stream.write_all(&[SOCKS5, 0xff]).await?;
        return Ok(None);
    }
    stream.write_all(&[SOCKS5, 0x00]).await?;
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await?;
    let [version, command, _, kind] = head;
    if version != SOCKS5 {
        return Ok(None);
    }
    let host = match kind {
        0x01 => {
            let mut octets = [0u8; 4];
            stream.read_exact(&mut octets).await?;
            Ipv4Addr::from(octets).to_string()
        }
        0x03 => {
            let mut length = [0u8; 1];
            stream.read_exact(&mut length).await?;
            let mut name = vec![0u8; usize::from(length[0])];
            stream.read_exact(&mut name).await?;
            match String::from_utf8(name) {
                Ok(name) if !name.is_empty() => name.to_ascii_lowercase(),
                _ => {
                    stream.write_all(&socks5_reply(0x04)).await?;
                    return Ok(None);
                }
            }
        }
        0x04 => {
            let mut octets = [0u8; 16];
            stream.read_exact(&mut octets).await?;
            format!("[{}]", Ipv6Addr::from(octets))
        }
        _ => {
            // "address type not supported"
            stream.write_all(&socks5_reply(0x08)).await?;
            return Ok(None);
        }
    };
    let mut port = [0u8; 2];
    stream.read_exact(&mut port).await?;
    if command != 0x01 {
        // "command not supported": no BIND, no UDP ASSOCIATE.
        stream.write_all(&socks5_reply(0x07)).await?;
        return Ok(None);
    }
    Ok(Some((host, u16::from_be_bytes(port))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(list: &[&str]) -> (Arc<ProxyCall>, Arc<RequestLog>) {
        let log = Arc::new(RequestLog::default());
        let call = ProxyCall::new(
            Arc::new(Policy::system()),
            Arc::new(Allow::parse(list).unwrap()),
            None,
            log.clone(),
            "[bash] network".into(),
        );
        (Arc::new(call), log)
    }

    /// A proxy for `list` on a listener of the host's loopback, served until dropped.
    async fn proxy(list: &[&str]) -> (u16, Arc<ProxyCall>, Arc<RequestLog>, AbortOnDrop) {
        let (call, log) = call(list);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = call.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            let _ = serve(&listener, served, &mut connections).await;
        });
        (port, call, log, AbortOnDrop(task))
    }

    /// An origin on the host's loopback that answers every connection `hello`.
    async fn origin() -> (u16, AbortOnDrop) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = stream.read(&mut buf).await;
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
                        .await;
                });
            }
        });
        (port, AbortOnDrop(task))
    }

    async fn exchange(port: u16, send: &[u8]) -> Vec<u8> {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(send).await.unwrap();
        let mut got = Vec::new();
        let read = stream.read_to_end(&mut got);
        tokio::time::timeout(std::time::Duration::from_secs(10), read)
            .await
            .unwrap()
            .unwrap();
        got
    }

    #[tokio::test]
    async fn a_host_not_in_the_list_is_refused_with_403_and_noted() {
        let (port, call, log, _served) = proxy(&["pypi.org"]).await;
        let got = exchange(
            port,
            b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
        )
        .await;
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 403"), "{got}");
        assert!(
            got.contains("evil.example:443") && got.contains("[bash] network"),
            "{got}"
        );
        let notes = call.notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("allow = [\"evil.example:443\"]"),
            "{notes:?}"
        );
        let logged = log.take();
        assert_eq!(logged.len(), 1);
        assert_eq!(logged[0].outcome, Outcome::Denied);
        assert_eq!(logged[0].method, "CONNECT");
    }

    #[tokio::test]
    async fn a_tenants_ceiling_caps_the_list_and_is_named() {
        let log = Arc::new(RequestLog::default());
        let call = ProxyCall::new(
            Arc::new(Policy::system()),
            Arc::new(Allow::parse(&["pypi.org", "evil.example"]).unwrap()),
            Some((
                Arc::new(Allow::parse(&["pypi.org"]).unwrap()),
                "[tenants.acme] network".into(),
            )),
            log.clone(),
            "[tenants.acme.bash] network".into(),
        );
        let record = Record::new(&call, "CONNECT", "evil.example", 443);
        let refused = call.reach(&record, "evil.example", 443).await.unwrap_err();
        assert!(
            refused.why.contains("[tenants.acme] network"),
            "{}",
            refused.why
        );
        assert!(
            call.notes()[0].contains("[tenants.acme] network"),
            "{:?}",
            call.notes()
        );
        let long = "a".repeat(MAX_HOST_BYTES + 1);
        let record = Record::new(&call, "CONNECT", &long, 443);
        let refused = call.reach(&record, &long, 443).await.unwrap_err();
        assert!(refused.why.contains("longer than"), "{}", refused.why);
    }

    #[tokio::test]
    async fn a_plain_request_goes_to_a_named_address_in_origin_form() {
        let (origin_port, _origin) = origin().await;
        let entry = format!("127.0.0.1:{origin_port}");
        let (port, _call, log, _served) = proxy(&[&entry]).await;
        let request = format!(
            "GET http://127.0.0.1:{origin_port}/x HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n\r\n"
        );
        let got = exchange(port, request.as_bytes()).await;
        let got = String::from_utf8_lossy(&got);
        assert!(
            got.starts_with("HTTP/1.1 200") && got.ends_with("hello"),
            "{got}"
        );
        // The record is pushed when the connection's task ends, just after the answer.
        let mut logged = Vec::new();
        for _ in 0..100 {
            logged.extend(log.take());
            if !logged.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(logged.len(), 1);
        assert_eq!(logged[0].outcome, Outcome::Answered);
        assert_eq!(logged[0].status, Some(200));
        assert_eq!(logged[0].bytes_in, 5);
    }

    #[tokio::test]
    async fn socks5_refuses_a_loopback_name_and_tunnels_to_a_named_address() {
        let (origin_port, _origin) = origin().await;
        let entry = format!("127.0.0.1:{origin_port}");
        let by_name = format!("localhost:{origin_port}");
        // A name in the list reaches public addresses only: localhost is refused.
        let (port, call, _log, _served) = proxy(&[&by_name]).await;
        let mut ask = vec![5, 1, 0, 5, 1, 0, 3, 9];
        ask.extend_from_slice(b"localhost");
        ask.extend_from_slice(&origin_port.to_be_bytes());
        let got = exchange(port, &ask).await;
        assert_eq!(&got[..4], &[5, 0, 5, 2], "{got:?}");
        assert!(
            call.notes()[0].contains("its address is loopback, which the allow-list does not name")
                && !call.notes()[0].contains("127.0.0.1"),
            "{:?}",
            call.notes()
        );
        // An address the list names is reached.
        let (port, _call, _log, _served) = proxy(&[&entry]).await;
        let mut ask = vec![5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1];
        ask.extend_from_slice(&origin_port.to_be_bytes());
        ask.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let got = exchange(port, &ask).await;
        assert_eq!(&got[..4], &[5, 0, 5, 0], "{got:?}");
        assert!(got.ends_with(b"hello"), "{got:?}");
    }

    #[tokio::test]
    async fn garbage_and_unknown_socks_commands_are_answered_not_panicked_on() {
        let (port, _call, _log, _served) = proxy(&["*"]).await;
        // BIND
        let got = exchange(port, &[5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80]).await;
        assert_eq!(&got[..4], &[5, 0, 5, 7], "{got:?}");
        // No acceptable method.
        let got = exchange(port, &[5, 1, 2]).await;
        assert_eq!(got, [5, 0xff]);
        let got = exchange(port, b"\x16\x03\x01 not http at all\r\n\r\n").await;
        assert!(
            String::from_utf8_lossy(&got).starts_with("HTTP/1.1 400"),
            "{got:?}"
        );
        let got = exchange(port, b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(
            String::from_utf8_lossy(&got).starts_with("HTTP/1.1 400"),
            "{got:?}"
        );
    }
}
