//! Outgoing HTTP from a hookhost component (a hook, a tool, a store), over `wasi:http`:
//! one request, its whole answer, waiting. Hooks have it as `hookhost_hook::http`.
//!
//! The host sends a request only to the hosts the operator granted the component
//! (`network = { allow = [...] }` in its config); any other is refused at once with
//! `HttpRequestDenied`, and a granted name that resolves to a private or loopback address
//! the grant does not name with `DestinationIpProhibited`. Each call of the component may
//! make a bounded number of requests moving a bounded number of bytes, and its deadline
//! covers the wait.
//!
//! ```ignore
//! let answer = hookhost_http::post(
//!     "https://collector.example/v1/lines",
//!     "application/json",
//!     br#"{"tool":"bash"}"#,
//! )?;
//! assert!(answer.is_success());
//! ```

use std::fmt;
use wasip2::http::outgoing_handler;
/// What [`request`] takes and [`Error::Refused`] carries, so that a component needs no
/// `wasip2` dependency of its own.
pub use wasip2::http::types::{ErrorCode, Method};
use wasip2::http::types::{Fields, OutgoingBody, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

/// The most bytes one stream write takes (the WASI bound).
const WRITE_CHUNK: usize = 4096;

/// The most bytes one stream read asks for.
const READ_CHUNK: u64 = 64 * 1024;

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    /// A 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Why a request got no response.
#[derive(Debug, Clone)]
pub enum Error {
    /// The URL is not `http://` or `https://` with a host.
    Url(String),
    /// The host refused it (`HttpRequestDenied`: not granted; `DestinationIpProhibited`:
    /// its address is not) or could not complete it (`ConnectionRefused`,
    /// `TlsCertificateError`, `HttpResponseBodySize`, …).
    Refused(ErrorCode),
    /// A header the host does not allow (`Host`, `Connection`, …) or cannot take.
    Header(String),
    /// The response's body broke off.
    Body(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Url(url) => write!(f, "not an http(s) URL with a host: {url}"),
            Error::Refused(code) => write!(f, "{code:?}"),
            Error::Header(name) => write!(f, "header {name} refused"),
            Error::Body(why) => write!(f, "the response body broke off: {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// `GET url`.
///
/// # Errors
///
/// See [`Error`].
pub fn get(url: &str) -> Result<Response, Error> {
    request(Method::Get, url, &[], &[])
}

/// `POST url` with `body` of type `content_type`.
///
/// # Errors
///
/// See [`Error`].
pub fn post(url: &str, content_type: &str, body: &[u8]) -> Result<Response, Error> {
    request(
        Method::Post,
        url,
        &[("content-type", content_type.as_bytes())],
        body,
    )
}

/// `method url` with `headers` and `body`, waiting for the whole response.
///
/// # Errors
///
/// See [`Error`].
pub fn request(
    method: Method,
    url: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> Result<Response, Error> {
    let (scheme, authority, path) = split_url(url).ok_or_else(|| Error::Url(url.into()))?;
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value)
            .map_err(|_| Error::Header((*name).into()))?;
    }
    // An empty body is said too, but for a GET or HEAD: without a length the body goes
    // chunked, and servers refuse a chunked DELETE (nginx: 415) or PUT.
    if !body.is_empty() || !matches!(method, Method::Get | Method::Head) {
        let length = body.len().to_string();
        fields
            .append("content-length", length.as_bytes())
            .map_err(|_| Error::Header("content-length".into()))?;
    }
    let request = OutgoingRequest::new(fields);
    // Each setter fails only for a value that is not one (checked above).
    let _ = request.set_method(&method);
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(authority));
    let _ = request.set_path_with_query(Some(&path));
    let outgoing = request.body().expect("a new request's body is there");
    let future = outgoing_handler::handle(request, None).map_err(Error::Refused)?;
    // A refused request's body has nowhere to go: what the response says wins.
    if let Ok(stream) = outgoing.write() {
        for chunk in body.chunks(WRITE_CHUNK) {
            if stream.blocking_write_and_flush(chunk).is_err() {
                break;
            }
        }
    }
    let _ = OutgoingBody::finish(outgoing, None);
    let response = loop {
        match future.get() {
            Some(answer) => break answer,
            None => future.subscribe().block(),
        }
    };
    let response = response
        .expect("the response is taken once")
        .map_err(Error::Refused)?;
    let status = response.status();
    let incoming = response.consume().expect("the body is taken once");
    let stream = incoming.stream().expect("the stream is taken once");
    let mut body = Vec::new();
    loop {
        match stream.blocking_read(READ_CHUNK) {
            Ok(bytes) => body.extend_from_slice(&bytes),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(Error::Body(e.to_debug_string()));
            }
        }
    }
    Ok(Response { status, body })
}

/// `scheme://authority/path?query` → its parts; the path begins with `/` (added when the
/// URL has none).
fn split_url(url: &str) -> Option<(Scheme, &str, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return None,
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() {
        return None;
    }
    let path = match path.starts_with('/') {
        true => path.to_string(),
        false => format!("/{path}"),
    };
    Some((scheme, authority, path))
}
