//! Network grants: which hosts a component may reach over `wasi:http`, and how each of
//! its requests is checked, bounded and accounted.
//!
//! The security rules, all enforced here:
//! - **Deny by default.** A component reaches a host only when its grant (`network = {
//!   allow = [...] }` on its hook, tool, or persistent directory for its store) lets it
//!   through, and, when its tenant declares `network`, the tenant's grant too: a tenant's
//!   grant is a ceiling no component's can pass. Anything else is answered at once with
//!   `HttpRequestDenied`.
//! - **Only `wasi:http`.** `wasi:sockets` (TCP, UDP, name lookups) stays denied to every
//!   component, granted or not: a socket names an address, so a grant of names cannot be
//!   checked on it, and a component holding one could speak any protocol to anything its
//!   addresses reach. Over `wasi:http` the host makes the connection itself, to a host it
//!   checked.
//! - **Names are checked after resolution.** The host resolves a granted name once, refuses
//!   the addresses that lead into this machine or its networks — loopback, link-local
//!   (cloud metadata at 169.254.169.254), private, shared (CGNAT), this host's own, and
//!   the others [`address::special`] lists — unless the grant names that address itself
//!   (`"10.0.0.5:8181"`), and connects to the address it checked: a name that resolves to
//!   a public address when checked and to a private one a moment later (DNS rebinding)
//!   never gets a second resolution to exploit.
//! - **Redirects are the component's.** `wasi:http` hands a 3xx to the component; the
//!   request it makes next is checked anew.
//! - **HTTPS is verified** against the system's roots and `[network] ca_certificates`;
//!   there is no switch to turn verification off.
//! - **Bounded.** One call of a component may make [`crate::limits::Limits::network_requests`]
//!   requests and move [`crate::limits::Limits::network_bytes`] bytes (request and
//!   response bodies together); its deadline covers the time it waits on the network.
//! - **Accounted, never read.** Each request is logged, traced (`network.request`: host,
//!   method, status, bytes, time, outcome) and counted by tenant, component and the grant
//!   entry that let it through; headers and bodies never are.

pub mod address;
pub mod allow;
mod egress;

pub use allow::{Allow, Host, NetworkGrant};
pub use egress::Egress;

use crate::limits::{
    MAX_HOST_BYTES, MAX_RECORDED_REQUESTS, NETWORK_DNS_TIMEOUT, NETWORK_SYSTEM_LOOKUPS,
};
use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The `[network]` table as the plan keeps it: how the host resolves and verifies for
/// every component.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkSettings {
    /// DNS servers to ask (`"127.0.0.1:5353"`), instead of the system's resolver.
    pub nameservers: Vec<SocketAddr>,
    /// PEM files of certificate authorities trusted besides the system's.
    pub ca_certificates: Vec<PathBuf>,
}

/// How the host reaches hosts for components: its resolver and its TLS configuration.
pub struct Policy {
    settings: NetworkSettings,
    resolver: Resolver,
    /// Made at the first HTTPS request (reading the system's roots takes milliseconds).
    tls: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

enum Resolver {
    /// `getaddrinfo`, as every program on the host resolves (`/etc/hosts`, nsswitch).
    System,
    /// The configured servers, asked directly.
    Servers(Box<TokioResolver>),
}

/// Turns at the system resolver (see [`NETWORK_SYSTEM_LOOKUPS`]).
static SYSTEM_LOOKUPS: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(NETWORK_SYSTEM_LOOKUPS);

impl Policy {
    /// The policy of `settings`.
    ///
    /// # Errors
    ///
    /// When the resolver cannot be made of the configured servers.
    pub fn new(settings: &NetworkSettings) -> Result<Policy, String> {
        let resolver = match settings.nameservers.as_slice() {
            [] => Resolver::System,
            servers => {
                let config = ResolverConfig::from_name_servers(
                    servers
                        .iter()
                        .map(|server| {
                            let mut config = NameServerConfig::udp_and_tcp(server.ip());
                            for connection in &mut config.connections {
                                connection.port = server.port();
                            }
                            config
                        })
                        .collect(),
                );
                let mut builder =
                    TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
                builder.options_mut().timeout = NETWORK_DNS_TIMEOUT;
                let resolver = builder.build().map_err(|e| {
                    format!("cannot make the resolver of [network] nameservers: {e}")
                })?;
                Resolver::Servers(Box::new(resolver))
            }
        };
        let policy = Policy {
            settings: settings.clone(),
            resolver,
            tls: OnceLock::new(),
        };
        // A configured CA that cannot be read fails the start (or the reload) that names
        // it, not the first HTTPS request; without one, the system's roots are read on
        // first use.
        if !settings.ca_certificates.is_empty() {
            policy.tls()?;
        }
        Ok(policy)
    }

    /// The system's resolver and roots.
    pub fn system() -> Policy {
        Policy {
            settings: NetworkSettings::default(),
            resolver: Resolver::System,
            tls: OnceLock::new(),
        }
    }

    /// What it was made of.
    pub fn settings(&self) -> &NetworkSettings {
        &self.settings
    }

    /// The addresses of `name`, within [`NETWORK_DNS_TIMEOUT`].
    ///
    /// # Errors
    ///
    /// Why there are none.
    pub async fn resolve(&self, name: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        let resolved = async {
            match &self.resolver {
                Resolver::System => {
                    // The turn goes with the blocking lookup: held until getaddrinfo
                    // returns, even when the timeout gave up on it.
                    let Ok(turn) = SYSTEM_LOOKUPS.acquire().await else {
                        unreachable!("the semaphore is never closed")
                    };
                    let name = name.to_string();
                    tokio::task::spawn_blocking(move || {
                        let _turn = turn;
                        std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port))
                    })
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|found| found.map_err(|e| e.to_string()))
                    .map(|found| found.map(|a| a.ip()).collect())
                }
                Resolver::Servers(resolver) => resolver
                    .lookup_ip(name)
                    .await
                    .map(|found| found.iter().collect())
                    .map_err(|e| e.to_string()),
            }
        };
        match tokio::time::timeout(NETWORK_DNS_TIMEOUT, resolved).await {
            Ok(Ok(found)) if Vec::is_empty(&found) => Err("no address".into()),
            Ok(found) => found,
            Err(_) => Err(format!("no answer in {NETWORK_DNS_TIMEOUT:?}")),
        }
    }

    /// A connection to the first address of `host` (a name or an address literal) that
    /// `reach` lets a request to `port` go to, each tried within `timeout`: the name
    /// resolved once, and the connection made to the address judged.
    ///
    /// # Errors
    ///
    /// A [`Refused`]: the name has no address, every address is refused, or none could
    /// be connected to.
    pub async fn connect(
        &self,
        reach: &Reach,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<(tokio::net::TcpStream, SocketAddr), Refused> {
        let addresses = match Host::parse(host) {
            Host::Address(address) => vec![address],
            Host::Name(name) => self.resolve(name, port).await.map_err(|why| Refused {
                failure: Failure::Resolve,
                why: format!("cannot resolve {name}: {why}"),
            })?,
        };
        let mut refused = None;
        let allowed: Vec<IpAddr> = addresses
            .into_iter()
            .filter(|&address| match reach.judge(address, port) {
                Ok(()) => true,
                Err(why) => {
                    refused.get_or_insert(why);
                    false
                }
            })
            .collect();
        if allowed.is_empty() {
            return Err(Refused {
                failure: Failure::Prohibited,
                why: refused.unwrap_or_else(|| format!("{host} has no address")),
            });
        }
        let mut last = None;
        for address in allowed {
            let address = SocketAddr::new(address, port);
            match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok((stream, address));
                }
                Ok(Err(e)) => {
                    last = Some(Refused {
                        failure: Failure::Connect(e.kind()),
                        why: format!("{address}: {e}"),
                    })
                }
                Err(_) => {
                    last = Some(Refused {
                        failure: Failure::Timeout,
                        why: format!("{address}: no connection in {timeout:?}"),
                    })
                }
            }
        }
        Err(last.expect("at least one address was tried"))
    }

    /// The TLS client configuration: the system's roots and the configured ones.
    fn tls(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.tls
            .get_or_init(|| {
                use rustls_pki_types::CertificateDer;
                use rustls_pki_types::pem::PemObject;
                crate::crypto::install_crypto_provider();
                let mut roots = rustls::RootCertStore::empty();
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                for path in &self.settings.ca_certificates {
                    let said = |why: String| {
                        format!("[network] ca_certificates {}: {why}", path.display())
                    };
                    let certs = CertificateDer::pem_file_iter(path)
                        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                        .map_err(|e| said(e.to_string()))?;
                    if certs.is_empty() {
                        return Err(said("no PEM certificate in it".into()));
                    }
                    roots.add_parsable_certificates(certs);
                }
                let config = rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                Ok(Arc::new(config))
            })
            .clone()
    }
}

/// Why [`Policy::connect`] made no connection.
#[derive(Debug)]
pub struct Refused {
    pub failure: Failure,
    /// Said for the log, the trace and the one who asked.
    pub why: String,
}

/// What [`Policy::connect`] stopped at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The name has no address.
    Resolve,
    /// Every address is special and not named by the grant.
    Prohibited,
    /// No address answered in time.
    Timeout,
    /// The last address refused (or another socket error).
    Connect(std::io::ErrorKind),
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response came (whatever its status).
    Answered,
    /// No grant lets its host through: `HttpRequestDenied`.
    Denied,
    /// Its host's addresses are all special and not granted: `DestinationIpProhibited`.
    Prohibited,
    /// Past the call's `network_requests` or `network_bytes`.
    Limited,
    /// The name, the connection, TLS or HTTP failed.
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Denied => "denied",
            Outcome::Prohibited => "prohibited",
            Outcome::Limited => "limited",
            Outcome::Failed => "failed",
        }
    }
}

/// One request of a component, once it ended: what the trace and the metrics say of it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The hook or tool that made it.
    pub component: Arc<str>,
    pub method: String,
    /// As the request named it (`api.example.com`, `[::1]`).
    pub host: String,
    pub port: u16,
    /// The grant entry that let it through, as written; `None` when none did.
    pub rule: Option<String>,
    /// The address it was sent to.
    pub address: Option<IpAddr>,
    pub status: Option<u16>,
    /// Request body bytes sent.
    pub bytes_out: u64,
    /// Response body bytes received.
    pub bytes_in: u64,
    pub duration: Duration,
    pub outcome: Outcome,
    /// Why it was refused or failed.
    pub reason: Option<String>,
}

impl Request {
    /// A request of `component` to `host`:`port` as it starts: nothing sent or answered
    /// yet, failed until it is. A host past [`MAX_HOST_BYTES`] is kept cut there.
    pub fn new(component: Arc<str>, method: &str, host: &str, port: u16) -> Request {
        let mut end = host.len().min(MAX_HOST_BYTES);
        while !host.is_char_boundary(end) {
            end -= 1;
        }
        Request {
            component,
            method: method.to_string(),
            host: host[..end].to_string(),
            port,
            rule: None,
            address: None,
            status: None,
            bytes_out: 0,
            bytes_in: 0,
            duration: Duration::ZERO,
            outcome: Outcome::Failed,
            reason: None,
        }
    }
}

/// The requests of one call's components, as they end, until its trace takes them.
#[derive(Debug, Default)]
pub struct RequestLog {
    ended: Mutex<Vec<Request>>,
    /// Requests past [`MAX_RECORDED_REQUESTS`], counted only.
    unrecorded: std::sync::atomic::AtomicU64,
}

impl RequestLog {
    /// Records a request that ended (a component's, or one `bash`'s proxy made); past
    /// [`MAX_RECORDED_REQUESTS`] waiting, only counts it.
    pub fn push(&self, request: Request) {
        let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        if ended.len() < MAX_RECORDED_REQUESTS {
            ended.push(request);
            return;
        }
        drop(ended);
        let before = self.unrecorded.fetch_add(1, Ordering::Relaxed);
        if before == 0 {
            tracing::warn!(
                component = %request.component,
                "more than {MAX_RECORDED_REQUESTS} network requests in one call: the rest \
                 are counted, not recorded"
            );
        }
    }

    /// The requests that ended since the last time.
    pub fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.ended.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Requests that were counted but not recorded, since the log was made.
    pub fn unrecorded(&self) -> u64 {
        self.unrecorded.load(Ordering::Relaxed)
    }
}

/// Says a request that ended: in the call's log (for the trace and metrics) and the
/// host's log.
pub fn remember(log: Option<&RequestLog>, request: Request) {
    tracing::debug!(
        component = %request.component,
        method = %request.method,
        host = %request.host,
        port = request.port,
        status = request.status,
        outcome = request.outcome.as_str(),
        reason = request.reason.as_deref().unwrap_or_default(),
        bytes_out = request.bytes_out,
        bytes_in = request.bytes_in,
        "network request"
    );
    if let Some(log) = log {
        log.push(request);
    }
}

/// What one component may reach in one tenant: its grant, under its tenant's ceiling.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// The component's `network` grant; nothing when `None`.
    pub grant: Option<Arc<Allow>>,
    /// Its tenant's `network`, when the tenant declares one.
    pub ceiling: Option<Arc<Allow>>,
}

impl Reach {
    /// The entry that lets a request to `host`:`port` through: the component's, when the
    /// ceiling lets it through too.
    pub fn permits(&self, host: Host<'_>, port: u16) -> Option<&allow::Rule> {
        let rule = self.grant.as_deref()?.permits(host, port)?;
        match &self.ceiling {
            Some(ceiling) => ceiling.permits(host, port).map(|_| rule),
            None => Some(rule),
        }
    }

    /// Whether a request may go to `address`: a public one, or one the grants name; else
    /// why not.
    pub fn judge(&self, address: IpAddr, port: u16) -> Result<(), String> {
        if self.names_address(address, port) {
            return Ok(());
        }
        if let Some(why) = address::special(address) {
            return Err(format!("{address} is {why}, which the grant does not name"));
        }
        if address::is_own(address) {
            return Err(format!(
                "{address} is this host's own address, which the grant does not name"
            ));
        }
        Ok(())
    }

    /// Whether the grants name `address` itself (and so let a special address through).
    fn names_address(&self, address: IpAddr, port: u16) -> bool {
        self.grant
            .as_deref()
            .is_some_and(|g| g.names_address(address, port))
            && self
                .ceiling
                .as_deref()
                .is_none_or(|c| c.names_address(address, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_that_cannot_be_read_fails_the_policy_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        for (path, why) in [
            (dir.path().join("absent.pem"), "No such file"),
            (empty, "no PEM certificate in it"),
        ] {
            let settings = NetworkSettings {
                ca_certificates: vec![path.clone()],
                ..NetworkSettings::default()
            };
            let Err(refused) = Policy::new(&settings) else {
                panic!("{} was accepted", path.display())
            };
            assert!(
                refused.contains("[network] ca_certificates") && refused.contains(why),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_calls_log_records_a_bounded_number_of_requests_and_counts_the_rest() {
        let log = RequestLog::default();
        let long = "x".repeat(10 * MAX_HOST_BYTES);
        for _ in 0..MAX_RECORDED_REQUESTS + 10 {
            log.push(Request::new("hook".into(), "GET", &long, 80));
        }
        let recorded = log.take();
        assert_eq!(recorded.len(), MAX_RECORDED_REQUESTS);
        assert!(recorded.iter().all(|r| r.host.len() == MAX_HOST_BYTES));
        assert_eq!(log.unrecorded(), 10);
    }
}
