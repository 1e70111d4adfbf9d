//! What a request presents to prove who sends it, read the same way by the MCP endpoint
//! and the admin API.

use axum::http::{HeaderMap, header};

/// The bearer token `headers` present (`Authorization: Bearer TOKEN`, any case).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}
