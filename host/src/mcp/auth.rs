//! What a request presents to prove who sends it, read the same way by the MCP endpoint
//! and the admin API; why it was refused; and the throttle that holds a source address
//! that keeps presenting wrong tokens (see [`AUTH_FAILURES_PER_WINDOW`]).

use crate::limits::{AUTH_FAILURE_WINDOW, AUTH_FAILURES_PER_WINDOW, AUTH_THROTTLE_SOURCES};
use axum::http::{HeaderMap, header};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bearer token `headers` present (`Authorization: Bearer TOKEN`, any case).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Why a request's credentials were refused: what the log line, the
/// `hookhost_auth_failures_total{reason}` counter and the 401's challenge say. Carried on
/// the 401 response as an extension, for the layer that logs and counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token.
    Missing,
    /// A token no tenant has.
    InvalidToken,
    /// A JWT refused (its reason).
    InvalidJwt(String),
    /// Not the admin token.
    AdminToken,
}

impl Refusal {
    /// Its label in the counter.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::InvalidToken => "invalid_token",
            Refusal::InvalidJwt(_) => "invalid_jwt",
            Refusal::AdminToken => "admin_token",
        }
    }

    /// Whether a token was presented: a guess, which the throttle counts.
    pub fn guessed(&self) -> bool {
        *self != Refusal::Missing
    }

    /// The `WWW-Authenticate` challenge's parameters (RFC 6750 §3): `error="invalid_token"`
    /// when a token was presented, nothing more when none was.
    pub fn challenge(&self) -> &'static str {
        match self {
            Refusal::Missing => "",
            _ => {
                "error=\"invalid_token\", error_description=\"the bearer token is not valid here\""
            }
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Missing => f.write_str("no bearer token"),
            Refusal::InvalidToken => f.write_str("a bearer token no tenant has"),
            Refusal::InvalidJwt(why) => write!(f, "a JWT refused: {why}"),
            Refusal::AdminToken => f.write_str("not the admin token"),
        }
    }
}

/// Failed authentications by source address, each in a window of
/// [`AUTH_FAILURE_WINDOW`] from its first failure: past [`AUTH_FAILURES_PER_WINDOW`], the
/// address is held until its window ends.
#[derive(Default)]
pub struct Throttle {
    sources: Mutex<HashMap<IpAddr, Window>>,
}

struct Window {
    began: Instant,
    failures: u32,
}

impl Throttle {
    fn sources(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Window>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long `source` is held, when it failed too often in its window.
    pub fn held(&self, source: IpAddr) -> Option<Duration> {
        let sources = self.sources();
        let window = sources.get(&keyed(source))?;
        let left = AUTH_FAILURE_WINDOW.checked_sub(window.began.elapsed())?;
        (window.failures >= AUTH_FAILURES_PER_WINDOW).then_some(left)
    }

    /// Counts a failed authentication of `source`. When [`AUTH_THROTTLE_SOURCES`] are kept,
    /// the windows that ended are dropped, and if none has, the oldest.
    pub fn failed(&self, source: IpAddr) {
        let source = keyed(source);
        let mut sources = self.sources();
        if sources.len() >= AUTH_THROTTLE_SOURCES && !sources.contains_key(&source) {
            sources.retain(|_, w| w.began.elapsed() < AUTH_FAILURE_WINDOW);
            let oldest = sources
                .iter()
                .min_by_key(|(_, w)| w.began)
                .map(|(key, _)| *key)
                .filter(|_| sources.len() >= AUTH_THROTTLE_SOURCES);
            if let Some(oldest) = oldest {
                sources.remove(&oldest);
            }
        }
        let fresh = || Window {
            began: Instant::now(),
            failures: 0,
        };
        let window = sources.entry(source).or_insert_with(fresh);
        if window.began.elapsed() >= AUTH_FAILURE_WINDOW {
            *window = fresh();
        }
        window.failures += 1;
    }
}

/// What the throttle counts `source` as: an IPv4 address (one mapped into IPv6 too), or an
/// IPv6 address's /64 — what one host usually has to draw addresses from.
fn keyed(source: IpAddr) -> IpAddr {
    match source {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_held_after_its_failures_and_others_are_not() {
        let throttle = Throttle::default();
        let (guesser, other) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        for _ in 0..AUTH_FAILURES_PER_WINDOW - 1 {
            throttle.failed(guesser);
        }
        assert_eq!(throttle.held(guesser), None);
        throttle.failed(guesser);
        let held = throttle.held(guesser).expect("held");
        assert!(held <= AUTH_FAILURE_WINDOW && held > AUTH_FAILURE_WINDOW / 2);
        assert_eq!(throttle.held(other), None);
    }

    #[test]
    fn an_ipv6_host_is_one_source_however_many_addresses_it_takes() {
        let throttle = Throttle::default();
        for n in 0..AUTH_FAILURES_PER_WINDOW {
            throttle.failed(format!("2001:db8:1:2::{:x}", n + 1).parse().unwrap());
        }
        assert!(
            throttle
                .held("2001:db8:1:2::ffff".parse().unwrap())
                .is_some()
        );
        assert_eq!(throttle.held("2001:db8:1:3::1".parse().unwrap()), None);
    }

    #[test]
    fn a_full_table_still_counts_a_new_source() {
        let throttle = Throttle::default();
        for n in 0..AUTH_THROTTLE_SOURCES {
            let n = u32::try_from(n).unwrap();
            throttle.failed(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n)));
        }
        let guesser: IpAddr = "192.0.2.9".parse().unwrap();
        for _ in 0..AUTH_FAILURES_PER_WINDOW {
            throttle.failed(guesser);
        }
        assert!(throttle.held(guesser).is_some());
        assert!(throttle.sources().len() <= AUTH_THROTTLE_SOURCES);
    }
}
