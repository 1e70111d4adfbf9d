//! A network grant as the config writes it: `allow = ["api.example.com",
//! "*.internal.example:8443", "10.0.0.5:8181", "*"]`, and what it lets through.

use serde::Deserialize;
use std::fmt;
use std::net::IpAddr;

/// `network = { allow = ["api.example.com", "*.internal.example:8443", "10.0.0.5:8181"] }`
/// on a hook, a tool, a store or a tenant: the hosts its `wasi:http` requests may go to
/// (see [`super`]); nothing when left out. Read into an [`Allow`] by [`Allow::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkGrant {
    /// Hosts (`api.example.com`), names under a domain (`*.example.com`), addresses
    /// (`10.0.0.5`, `[fd00::5]`) or `*` (every public host), each with an optional
    /// `:port` (every port when left out). A name is reached only at public addresses; a
    /// private, loopback or link-local one needs its address listed too.
    pub allow: Vec<String>,
}

/// The hosts one grant lets a component reach (see [`super`] for how a request is checked).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allow {
    rules: Vec<Rule>,
}

/// One entry of an `allow` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pattern: Pattern,
    /// The one port it allows; every port when `None`.
    port: Option<u16>,
    /// As written (lowercased), for messages and metrics.
    written: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// `*`: any name, and any address that is not special (see [`super::address`]).
    Any,
    /// `api.example.com`: that name only.
    Name(String),
    /// `*.example.com`: the names under it (not `example.com` itself), kept as
    /// `.example.com`.
    Under(String),
    /// `10.0.0.5`, `[::1]`: that address, special or not, whether the request names it or
    /// a granted name resolves to it.
    Address(IpAddr),
}

/// Where a request goes, as its URL names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host<'a> {
    /// A DNS name, lowercase, without a final dot.
    Name(&'a str),
    /// An address literal (`http://10.0.0.5/`, `http://[::1]/`).
    Address(IpAddr),
}

impl<'a> Host<'a> {
    /// The host part of a URL's authority, without its port: an address literal (IPv6 in
    /// brackets) or a name (lowercased by the caller).
    pub fn parse(host: &'a str) -> Host<'a> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        match bare.parse::<IpAddr>() {
            Ok(address) => Host::Address(address),
            Err(_) => Host::Name(host.strip_suffix('.').unwrap_or(host)),
        }
    }
}

impl fmt::Display for Host<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Address(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            Host::Address(v4) => write!(f, "{v4}"),
        }
    }
}

impl Allow {
    /// Reads an `allow` list.
    ///
    /// # Errors
    ///
    /// The first entry that is not a host, `*.`name, address or `*`, with an optional
    /// `:port`, said with why.
    pub fn parse<S: AsRef<str>>(list: &[S]) -> Result<Allow, String> {
        let rules = list
            .iter()
            .map(|entry| Rule::parse(entry.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Allow { rules })
    }

    /// The rule that lets a request to `host`:`port` through, by its host alone (its
    /// address is checked after resolution, see [`Self::names_address`]).
    pub fn permits(&self, host: Host<'_>, port: u16) -> Option<&Rule> {
        self.rules.iter().find(|rule| {
            rule.port.is_none_or(|p| p == port)
                && match (&rule.pattern, host) {
                    (Pattern::Any, _) => true,
                    (Pattern::Name(name), Host::Name(host)) => name == host,
                    (Pattern::Under(suffix), Host::Name(host)) => {
                        host.len() > suffix.len() && host.ends_with(suffix.as_str())
                    }
                    (Pattern::Address(address), Host::Address(host)) => *address == host,
                    _ => false,
                }
        })
    }

    /// Whether an entry names `address` (with `port`, or every port) itself: what lets a
    /// request reach a special address (loopback, private, link-local, this host's own).
    pub fn names_address(&self, address: IpAddr, port: u16) -> bool {
        self.rules.iter().any(|rule| {
            rule.port.is_none_or(|p| p == port)
                && matches!(rule.pattern, Pattern::Address(a) if same_address(a, address))
        })
    }

    /// The entries as written.
    pub fn written(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.written.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

impl Rule {
    fn parse(entry: &str) -> Result<Rule, String> {
        let written = entry.trim().to_ascii_lowercase();
        let refuse = |why: &str| Err(format!("\"{entry}\": {why}"));
        if written.is_empty() {
            return refuse("an empty host");
        }
        if written.contains("://") || written.contains('/') || written.contains('@') {
            return refuse("a host with an optional :port, not a URL (\"api.example.com:443\")");
        }
        let (host, port) = split_port(&written).map_err(|why| format!("\"{entry}\": {why}"))?;
        let pattern = if host == "*" {
            Pattern::Any
        } else if let Some(under) = host.strip_prefix("*.") {
            check_name(under).map_err(|why| format!("\"{entry}\": {why}"))?;
            Pattern::Under(format!(".{}", under.trim_end_matches('.')))
        } else {
            match Host::parse(host) {
                Host::Address(address) => Pattern::Address(address),
                Host::Name(name) => {
                    check_name(name).map_err(|why| format!("\"{entry}\": {why}"))?;
                    Pattern::Name(name.to_string())
                }
            }
        };
        Ok(Rule {
            pattern,
            port,
            written,
        })
    }

    /// As written: what a metric's `host` label and a message say.
    pub fn written(&self) -> &str {
        &self.written
    }
}

/// `host:port` → (`host`, port); an IPv6 address is written in brackets when a port
/// follows (`[::1]:8080`), bare or in brackets without one.
fn split_port(written: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(rest) = written.strip_prefix('[') {
        match rest.split_once(']') {
            Some((_, "")) => (written, None),
            Some((v6, port)) => (
                &written[..v6.len() + 2],
                Some(port.strip_prefix(':').ok_or("text after the ']'")?),
            ),
            None => return Err("a '[' without its ']'".into()),
        }
    } else if written.matches(':').count() > 1 {
        (written, None)
    } else {
        match written.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (written, None),
        }
    };
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(format!("\"{p}\" is not a port (1 to 65535)")),
            Ok(port) => Ok(port),
        })
        .transpose()?;
    Ok((host, port))
}

/// A DNS name: labels of letters, digits, `-` and `_`, none empty.
fn check_name(name: &str) -> Result<(), String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let fine = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    match fine {
        true => Ok(()),
        false => Err("not a host name (a '*' may only stand alone or begin \"*.\")".into()),
    }
}

/// Two addresses are the same when one is the other's IPv4-mapped IPv6 form.
fn same_address(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(list: &[&str]) -> Allow {
        Allow::parse(list).unwrap()
    }

    fn name(host: &str) -> Host<'_> {
        Host::parse(host)
    }

    #[test]
    fn names_ports_and_wildcards_match_as_written() {
        let a = allow(&["api.example.com", "*.internal.example:8443"]);
        assert!(a.permits(name("api.example.com"), 443).is_some());
        assert!(a.permits(name("api.example.com."), 8080).is_some());
        assert!(a.permits(name("evil-api.example.com"), 443).is_none());
        assert!(a.permits(name("api.example.com.evil"), 443).is_none());
        assert!(a.permits(name("db.internal.example"), 8443).is_some());
        assert!(a.permits(name("a.b.internal.example"), 8443).is_some());
        assert!(a.permits(name("db.internal.example"), 443).is_none());
        assert!(a.permits(name("internal.example"), 8443).is_none());
        assert!(a.permits(name("xinternal.example"), 8443).is_none());
        // A name rule never lets an address literal through.
        assert!(a.permits(name("93.184.215.14"), 443).is_none());
    }

    #[test]
    fn addresses_are_granted_by_address_only() {
        let a = allow(&["10.0.0.5:8181", "[::1]:9000", "127.0.0.1"]);
        assert!(a.permits(name("10.0.0.5"), 8181).is_some());
        assert!(a.permits(name("10.0.0.5"), 8182).is_none());
        assert!(a.permits(name("[::1]"), 9000).is_some());
        assert!(a.names_address("10.0.0.5".parse().unwrap(), 8181));
        assert!(a.names_address("::ffff:127.0.0.1".parse().unwrap(), 1));
        assert!(!a.names_address("10.0.0.6".parse().unwrap(), 8181));
        assert!(!a.names_address("::1".parse().unwrap(), 9001));
    }

    #[test]
    fn anything_else_is_refused_with_why() {
        for bad in [
            "",
            "https://api.example.com",
            "api.example.com/path",
            "user@api.example.com",
            "api.example.com:0",
            "api.example.com:http",
            "api.example.com:70000",
            "a*.example.com",
            "*example.com",
            "exa mple.com",
            "[::1",
            "[::1]x",
        ] {
            let refused = Allow::parse(&[bad]).unwrap_err();
            assert!(refused.contains(&format!("\"{bad}\"")), "{refused}");
        }
        assert!(allow(&["*"]).permits(name("anything.example"), 1).is_some());
    }
}
