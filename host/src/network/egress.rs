//! A component's outgoing HTTP: `wasmtime-wasi-http`'s [`WasiHttpHooks`], sending what its
//! grant lets through to the address the host checked (see [`super`] for the rules).

use super::{Failure, Host, Outcome, Policy, Reach, Request, RequestLog, remember};
use crate::limits::{Limits, MAX_HOST_BYTES, NETWORK_CONNECT_TIMEOUT};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;
use tracing::Instrument;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// What a response future resolves to, as `wasmtime-wasi-http` takes it.
type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
>;

/// The network side of one component's store: what it may reach, and where its requests
/// are counted and recorded.
pub struct Egress {
    policy: Arc<Policy>,
    reach: Reach,
    component: Arc<str>,
    /// The call's log, which its trace reads; `None` outside a call (`describe`).
    log: Option<Arc<RequestLog>>,
    budget: Arc<Budget>,
}

/// What the current call may still spend (reset by [`Egress::arm`]).
#[derive(Default)]
struct Budget {
    requests: AtomicU32,
    bytes: AtomicU64,
}

impl Budget {
    /// Takes `n` bytes; false (and nothing taken) when fewer are left.
    fn spend(&self, n: u64) -> bool {
        self.bytes
            .try_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }
}

impl Egress {
    /// The egress of `component`, reaching what `reach` lets through, recording into
    /// `log`.
    pub fn new(
        policy: Arc<Policy>,
        reach: Reach,
        component: &str,
        log: Option<Arc<RequestLog>>,
    ) -> Egress {
        Egress {
            policy,
            reach,
            component: component.into(),
            log,
            budget: Arc::default(),
        }
    }

    /// Starts a call's budget: `limits.network_requests` requests and
    /// `limits.network_bytes` bytes.
    pub fn arm(&self, limits: &Limits) {
        self.budget
            .requests
            .store(limits.network_requests, Ordering::Relaxed);
        self.budget
            .bytes
            .store(limits.network_bytes, Ordering::Relaxed);
    }

    /// Records a request refused before it left, and answers it with `error`.
    fn refuse(&self, mut request: Request, outcome: Outcome, reason: String, error: Error) -> Sent {
        request.outcome = outcome;
        request.reason = Some(reason);
        remember(self.log.as_deref(), request);
        Err(error)
    }
}

impl WasiHttpHooks for Egress {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let started = Instant::now();
        let uri = request.uri();
        let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let host_text = uri.host().unwrap_or_default().to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let mut record = Request::new(
            self.component.clone(),
            request.method().as_str(),
            &host_text,
            port,
        );
        // Every request counts, refused or not: a loop of refused ones ends here too.
        let left = self
            .budget
            .requests
            .try_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if left.is_err() {
            return Box::new(std::future::ready(self.refuse(
                record,
                Outcome::Limited,
                "past the call's network_requests".into(),
                Error::ConnectionLimitReached,
            )));
        }
        if host_text.len() > MAX_HOST_BYTES {
            return Box::new(std::future::ready(self.refuse(
                record,
                Outcome::Denied,
                format!("a host name longer than {MAX_HOST_BYTES} bytes"),
                Error::HttpRequestDenied,
            )));
        }
        let host = Host::parse(&host_text);
        let Some(rule) = self.reach.permits(host, port) else {
            let reason = match (&self.reach.grant, self.reach.ceiling.is_some()) {
                (None, _) => "the component has no network grant".to_string(),
                (Some(grant), _) if grant.permits(host, port).is_none() => {
                    format!("{host}:{port} is not in the component's network grant")
                }
                _ => format!("{host}:{port} is not in its tenant's network grant"),
            };
            return Box::new(std::future::ready(self.refuse(
                record,
                Outcome::Denied,
                reason,
                Error::HttpRequestDenied,
            )));
        };
        record.rule = Some(rule.written().to_string());
        let span = tracing::info_span!(
            "network.request",
            otel.name = %format_args!("{} {host}", record.method),
            component = %self.component,
            method = %record.method,
            host = %host,
            port,
            status = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let sending = Sending {
            policy: self.policy.clone(),
            reach: self.reach.clone(),
            budget: self.budget.clone(),
            tally: Arc::new(Tally {
                record: Mutex::new(Some(record)),
                started,
                out: AtomicU64::new(0),
                received: AtomicU64::new(0),
                limited: AtomicBool::new(false),
                log: self.log.clone(),
                span: span.clone(),
            }),
        };
        Box::new(sending.send(request, tls, options).instrument(span))
    }

    fn p2_error_from_hyper(&mut self, err: &hyper::Error) -> ErrorCode {
        tracing::debug!(component = %self.component, error = %err, "component's request failed");
        ErrorCode::HttpProtocolError
    }
}

/// One request on its way.
struct Sending {
    policy: Arc<Policy>,
    reach: Reach,
    budget: Arc<Budget>,
    tally: Arc<Tally>,
}

impl Sending {
    async fn send(
        self,
        mut request: http::Request<WasiBody>,
        tls: bool,
        options: Option<RequestOptions>,
    ) -> Sent {
        let tally = self.tally.clone();
        let (host, port) = {
            let record = tally.record.lock().unwrap_or_else(|e| e.into_inner());
            let record = record.as_ref().expect("not ended before it is sent");
            (record.host.clone(), record.port)
        };
        let connected = match self.connect(&host, port, options).await {
            Ok(connected) => connected,
            Err((outcome, reason, error)) => {
                tally.end(outcome, Some(reason));
                return Err(error);
            }
        };
        let (stream, address) = connected;
        tally.with(|r| r.address = Some(address.ip()));
        let io: Box<dyn Io> = if tls {
            let server_name = match Host::parse(&host) {
                Host::Address(ip) => rustls_pki_types::ServerName::from(ip),
                Host::Name(name) => {
                    match rustls_pki_types::ServerName::try_from(name.to_string()) {
                        Ok(name) => name,
                        Err(e) => {
                            tally.end(Outcome::Failed, Some(e.to_string()));
                            return Err(Error::HttpRequestUriInvalid);
                        }
                    }
                }
            };
            let config = match self.policy.tls() {
                Ok(config) => config,
                Err(why) => {
                    tally.end(Outcome::Failed, Some(why.clone()));
                    return Err(Error::InternalError(Some(why)));
                }
            };
            match tokio_rustls::TlsConnector::from(config)
                .connect(server_name, stream)
                .await
            {
                Ok(stream) => Box::new(stream),
                Err(e) => {
                    let error = tls_error(&e);
                    tally.end(Outcome::Failed, Some(format!("TLS: {e}")));
                    return Err(error);
                }
            }
        } else {
            Box::new(stream)
        };
        let (mut sender, connection) =
            match hyper::client::conn::http1::handshake(TokioIo::new(io)).await {
                Ok(pair) => pair,
                Err(e) => {
                    tally.end(Outcome::Failed, Some(e.to_string()));
                    return Err(Error::Hyper(e));
                }
            };
        // What goes on the wire is the origin form; the Host header names the host.
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        *request.uri_mut() = match path.parse() {
            Ok(uri) => uri,
            Err(_) => {
                tally.end(Outcome::Failed, Some("an invalid path".into()));
                return Err(Error::HttpRequestUriInvalid);
            }
        };
        let request = request.map(|body| {
            Counted {
                inner: body,
                budget: self.budget.clone(),
                tally: tally.clone(),
                incoming: false,
            }
            .boxed_unsync()
        });
        // The connection is driven while the response is awaited, and afterwards for
        // its body.
        let mut connection = Box::pin(connection);
        let mut send = Box::pin(sender.send_request(request));
        let mut driving = true;
        let response = std::future::poll_fn(|cx| {
            if let Poll::Ready(response) = send.as_mut().poll(cx) {
                return Poll::Ready(response);
            }
            if driving && let Poll::Ready(done) = connection.as_mut().poll(cx) {
                driving = false;
                if let Err(e) = done {
                    return Poll::Ready(Err(e));
                }
                return send.as_mut().poll(cx);
            }
            Poll::Pending
        })
        .await;
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                let limited = tally.limited.load(Ordering::Relaxed);
                let (outcome, error) = match limited {
                    true => (Outcome::Limited, Error::HttpRequestBodySize(None)),
                    false => (Outcome::Failed, Error::Hyper(e)),
                };
                tally.end(outcome, Some(error.to_string()));
                return Err(error);
            }
        };
        let status = response.status().as_u16();
        tally.with(|r| r.status = Some(status));
        tally.span.record("status", status);
        let response = response.map(|body| {
            Counted {
                inner: body.map_err(Error::from),
                budget: self.budget.clone(),
                tally: tally.clone(),
                incoming: true,
            }
            .boxed_unsync()
        });
        let driven: Box<dyn Future<Output = Result<(), Error>> + Send> = match driving {
            true => Box::new(async move { connection.await.map_err(Error::from) }),
            false => Box::new(std::future::ready(Ok(()))),
        };
        Ok((response, driven))
    }

    /// A connection to the first address of `host` the grants let through, as the
    /// component's request's error when there is none.
    async fn connect(
        &self,
        host: &str,
        port: u16,
        options: Option<RequestOptions>,
    ) -> Result<(tokio::net::TcpStream, SocketAddr), (Outcome, String, Error)> {
        let timeout = options
            .and_then(|o| o.connect_timeout)
            .map_or(NETWORK_CONNECT_TIMEOUT, |t| t.min(NETWORK_CONNECT_TIMEOUT));
        self.policy
            .connect(&self.reach, host, port, timeout)
            .await
            .map_err(|refused| {
                let error = match refused.failure {
                    Failure::Resolve => Error::DnsError {
                        rcode: Some(refused.why.clone()),
                        info_code: None,
                    },
                    Failure::Prohibited => Error::DestinationIpProhibited,
                    Failure::Timeout => Error::ConnectionTimeout,
                    Failure::Connect(kind) => connect_error(kind),
                };
                let outcome = match refused.failure {
                    Failure::Prohibited => Outcome::Prohibited,
                    _ => Outcome::Failed,
                };
                (outcome, refused.why, error)
            })
    }
}

/// A request's tally: its record until it ends, the bytes each way, and where it goes
/// when it ends (the call's log, the log file, its span).
struct Tally {
    record: Mutex<Option<Request>>,
    started: Instant,
    out: AtomicU64,
    received: AtomicU64,
    /// A body went past the call's `network_bytes`.
    limited: AtomicBool,
    log: Option<Arc<RequestLog>>,
    span: tracing::Span,
}

impl Tally {
    fn with(&self, f: impl FnOnce(&mut Request)) {
        if let Some(record) = self
            .record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            f(record);
        }
    }

    /// Ends the request, once: with `outcome`, or the first end it was given.
    fn end(&self, outcome: Outcome, reason: Option<String>) {
        let Some(mut record) = self.record.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        record.outcome = outcome;
        record.reason = reason;
        record.bytes_out = self.out.load(Ordering::Relaxed);
        record.bytes_in = self.received.load(Ordering::Relaxed);
        record.duration = self.started.elapsed();
        self.span.record("outcome", outcome.as_str());
        remember(self.log.as_deref(), record);
    }
}

impl Drop for Tally {
    /// A request whose response body was dropped unread, or whose future was dropped
    /// (the call's deadline): ended with what it got.
    fn drop(&mut self) {
        let limited = self.limited.load(Ordering::Relaxed);
        let answered = self.with_status();
        match (limited, answered) {
            (true, _) => self.end(
                Outcome::Limited,
                Some("past the call's network_bytes".into()),
            ),
            (false, true) => self.end(Outcome::Answered, None),
            (false, false) => self.end(Outcome::Failed, Some("stopped before an answer".into())),
        }
    }
}

impl Tally {
    fn with_status(&self) -> bool {
        self.record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|r| r.status.is_some())
    }
}

/// A body whose bytes are counted against the call's budget: past it, the body fails
/// (`HttpRequestBodySize` or `HttpResponseBodySize`).
struct Counted<B> {
    inner: B,
    budget: Arc<Budget>,
    tally: Arc<Tally>,
    /// The response's (else the request's).
    incoming: bool,
}

impl<B> Body for Counted<B>
where
    B: Body<Data = Bytes, Error = Error> + Unpin,
{
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            let n = data.len() as u64;
            let counter = match self.incoming {
                true => &self.tally.received,
                false => &self.tally.out,
            };
            counter.fetch_add(n, Ordering::Relaxed);
            if !self.budget.spend(n) {
                self.tally.limited.store(true, Ordering::Relaxed);
                return Poll::Ready(Some(Err(match self.incoming {
                    true => Error::HttpResponseBodySize(None),
                    false => Error::HttpRequestBodySize(None),
                })));
            }
        }
        if self.incoming && matches!(polled, Poll::Ready(None)) {
            self.tally.end(Outcome::Answered, None);
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

/// The stream a request goes over: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

fn connect_error(kind: std::io::ErrorKind) -> Error {
    use std::io::ErrorKind;
    match kind {
        ErrorKind::ConnectionRefused => Error::ConnectionRefused,
        ErrorKind::TimedOut => Error::ConnectionTimeout,
        ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable | ErrorKind::NetworkDown => {
            Error::DestinationUnavailable
        }
        _ => Error::ConnectionRefused,
    }
}

fn tls_error(e: &std::io::Error) -> Error {
    match e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(_)) => Error::TlsCertificateError,
        Some(rustls::Error::AlertReceived(alert)) => Error::TlsAlertReceived {
            alert_id: Some(u8::from(*alert)),
            alert_message: None,
        },
        _ => Error::TlsProtocolError,
    }
}
