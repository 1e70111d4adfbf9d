//! Prometheus metrics of a runtime, in the OpenMetrics text format (`GET /metrics` on
//! `serve --http`, or `serve --metrics ADDR`).
//!
//! Counted as calls go: calls by tenant, tool and outcome; layer failures by layer and
//! kind; call and per-layer-phase latency histograms; output bytes hooks took out of
//! results (what offload moved to files). Read at each scrape: sessions by tenant,
//! per-session instances kept, disk use against quota by tenant, upstream health.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tenant: String,
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    layer: String,
    phase: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LayerLabels {
    layer: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabels {
    tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OffloadLabels {
    tenant: String,
    hook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RateLabels {
    tenant: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommitLabels {
    tenant: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NetworkLabels {
    tenant: String,
    component: String,
    host: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NetworkBytesLabels {
    tenant: String,
    component: String,
    host: String,
    direction: String,
}

/// The `host` label of a request no grant let through: the host a component asked for is
/// its own choice, so it never becomes a label (each would be a new series).
const NOT_GRANTED: &str = "(not granted)";

/// Latency buckets: 50 µs to ~105 s, doubling.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 22))
}

/// A runtime's metrics.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    call_seconds: Family<ToolLabels, Histogram, fn() -> Histogram>,
    layer_seconds: Family<LayerLabels, Histogram, fn() -> Histogram>,
    offloaded: Family<OffloadLabels, Counter>,
    rate_limited: Family<RateLabels, Counter>,
    sessions: Family<TenantLabels, Gauge>,
    instances: Gauge,
    disk_bytes: Family<TenantLabels, Gauge>,
    quota_bytes: Family<TenantLabels, Gauge>,
    upstreams: Family<UpstreamLabels, Gauge>,
    upstream_instances: Family<UpstreamLabels, Gauge>,
    commits: Family<CommitLabels, Counter>,
    auth_failures: Family<ReasonLabels, Counter>,
    network_requests: Family<NetworkLabels, Counter>,
    network_bytes: Family<NetworkBytesLabels, Counter>,
    /// Calls by tenant and outcome, and refusals, for the admin page (a family cannot be
    /// read back by label).
    tallies: std::sync::Mutex<BTreeMap<String, Tally>>,
}

/// A tenant's calls since the process started.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Calls finished, by outcome (`done`, `failed`, …).
    pub outcomes: BTreeMap<String, u64>,
    /// Calls its rate limits refused.
    pub rate_limited: u64,
}

/// What a scrape reads from the runtime.
pub struct Scraped {
    /// Sessions by tenant.
    pub sessions: Vec<(String, i64)>,
    /// Per-session instances kept.
    pub instances: i64,
    /// Disk use and quota (bytes) of each tenant with a quota.
    pub disk: Vec<(String, i64, Option<i64>)>,
    /// Each upstream and its state (`up`, `down`, `unavailable`).
    pub upstreams: Vec<(String, &'static str)>,
    /// Each upstream with an instance per tenant or session: how many are in a state.
    pub upstream_instances: Vec<(String, &'static str, i64)>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("hookhost");
        let metrics = Metrics {
            registry: Registry::default(),
            calls: Family::default(),
            failures: Family::default(),
            call_seconds: Family::new_with_constructor(latency),
            layer_seconds: Family::new_with_constructor(latency),
            offloaded: Family::default(),
            rate_limited: Family::default(),
            sessions: Family::default(),
            instances: Gauge::default(),
            disk_bytes: Family::default(),
            quota_bytes: Family::default(),
            upstreams: Family::default(),
            upstream_instances: Family::default(),
            commits: Family::default(),
            auth_failures: Family::default(),
            network_requests: Family::default(),
            network_bytes: Family::default(),
            tallies: Default::default(),
        };
        registry.register(
            "calls",
            "Tool calls, by tenant, tool and outcome (done, tool-error, refused, failed, unknown-tool)",
            metrics.calls.clone(),
        );
        registry.register(
            "layer_failures",
            "Failures of hooks and tools, by layer, phase and kind (trap, timeout, memory, fuel, output-too-large, invalid-output, setup, declared, disk-quota)",
            metrics.failures.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Time of whole calls through the chain, by tool",
            metrics.call_seconds.clone(),
        );
        registry.register(
            "layer_duration_seconds",
            "Time of each hook phase and tool execution, by layer and phase",
            metrics.layer_seconds.clone(),
        );
        registry.register(
            "offloaded_bytes",
            "Output bytes a hook's after-execute took out of results (offload: moved to a file)",
            metrics.offloaded.clone(),
        );
        registry.register(
            "calls_rate_limited",
            "Calls refused by their tenant's rate limits, by tenant and reason (rate, concurrent)",
            metrics.rate_limited.clone(),
        );
        registry.register("sessions", "Sessions, by tenant", metrics.sessions.clone());
        registry.register(
            "kept_instances",
            "Per-session hook instances kept",
            metrics.instances.clone(),
        );
        registry.register(
            "disk_used_bytes",
            "Bytes in each tenant's session and tenant directories (tenants with a quota)",
            metrics.disk_bytes.clone(),
        );
        registry.register(
            "disk_quota_bytes",
            "Each tenant's disk quota in bytes",
            metrics.quota_bytes.clone(),
        );
        registry.register(
            "upstream_up",
            "1 for an upstream MCP server's current state (up, down, unavailable)",
            metrics.upstreams.clone(),
        );
        registry.register(
            "upstream_instances",
            "Instances of each upstream MCP server with an instance per tenant or session (scope), by state (up, down)",
            metrics.upstream_instances.clone(),
        );
        registry.register(
            "persistent_commits",
            "Commits of persistent directories made during calls, by tenant and outcome (succeeded, conflict, failed)",
            metrics.commits.clone(),
        );
        registry.register(
            "auth_failures",
            "Requests refused for their credentials, by reason (missing, invalid_token, invalid_jwt, admin_token, throttled)",
            metrics.auth_failures.clone(),
        );
        registry.register(
            "network_requests",
            "Components' outgoing HTTP requests, by tenant, component, the grant entry that let them through (host) and outcome (answered, denied, prohibited, limited, failed)",
            metrics.network_requests.clone(),
        );
        registry.register(
            "network_bytes",
            "Body bytes of components' outgoing HTTP requests, by tenant, component, grant entry (host) and direction (out, in)",
            metrics.network_bytes.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }
}

impl Metrics {
    /// A call finished.
    pub fn call(&self, tenant: &str, tool: &str, outcome: &str, seconds: f64) {
        self.tally(tenant, |t| {
            *t.outcomes.entry(outcome.to_string()).or_default() += 1
        });
        self.calls
            .get_or_create(&CallLabels {
                tenant: tenant.into(),
                tool: tool.into(),
                outcome: outcome.into(),
            })
            .inc();
        self.call_seconds
            .get_or_create(&ToolLabels { tool: tool.into() })
            .observe(seconds);
    }

    /// A layer's phase ended, failed with `failure` (its kind) or not.
    pub fn phase(&self, layer: &str, phase: &str, seconds: f64, failure: Option<&str>) {
        self.layer_seconds
            .get_or_create(&LayerLabels {
                layer: layer.into(),
                phase: phase.into(),
            })
            .observe(seconds);
        if let Some(kind) = failure {
            self.failures
                .get_or_create(&FailureLabels {
                    layer: layer.into(),
                    phase: phase.into(),
                    kind: kind.into(),
                })
                .inc();
        }
    }

    /// A hook's after-execute took `bytes` out of a result.
    pub fn offloaded(&self, tenant: &str, hook: &str, bytes: u64) {
        self.offloaded
            .get_or_create(&OffloadLabels {
                tenant: tenant.into(),
                hook: hook.into(),
            })
            .inc_by(bytes);
    }

    /// Counts a call its tenant's rate limits refused.
    pub fn rate_limited(&self, tenant: &str, reason: &str) {
        self.tally(tenant, |t| t.rate_limited += 1);
        self.rate_limited
            .get_or_create(&RateLabels {
                tenant: tenant.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts a request refused for its credentials (see [`crate::limits::AUTH_FAILURES_PER_WINDOW`]).
    pub fn auth_failed(&self, reason: &str) {
        self.auth_failures
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }

    /// A component's request ended with `outcome`, let through by the grant entry `rule`
    /// (none: no entry did), having moved `bytes` (out, in).
    pub fn network(
        &self,
        tenant: &str,
        component: &str,
        rule: Option<&str>,
        outcome: &str,
        bytes: (u64, u64),
    ) {
        let host = rule.unwrap_or(NOT_GRANTED);
        self.network_requests
            .get_or_create(&NetworkLabels {
                tenant: tenant.into(),
                component: component.into(),
                host: host.into(),
                outcome: outcome.into(),
            })
            .inc();
        for (direction, n) in [("out", bytes.0), ("in", bytes.1)] {
            if n > 0 {
                self.network_bytes
                    .get_or_create(&NetworkBytesLabels {
                        tenant: tenant.into(),
                        component: component.into(),
                        host: host.into(),
                        direction: direction.into(),
                    })
                    .inc_by(n);
            }
        }
    }

    /// A persistent directory's commit ended: `succeeded`, `conflict` or `failed`.
    pub fn commit(&self, tenant: &str, outcome: &str) {
        self.commits
            .get_or_create(&CommitLabels {
                tenant: tenant.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Each tenant's calls so far.
    pub fn tallies(&self) -> BTreeMap<String, Tally> {
        self.tallies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn tally(&self, tenant: &str, count: impl FnOnce(&mut Tally)) {
        let mut tallies = self.tallies.lock().unwrap_or_else(|e| e.into_inner());
        count(tallies.entry(tenant.to_string()).or_default());
    }

    /// The metrics as OpenMetrics text, with `scraped`'s gauges.
    pub fn encode(&self, scraped: Scraped) -> String {
        self.sessions.clear();
        for (tenant, count) in scraped.sessions {
            self.sessions
                .get_or_create(&TenantLabels { tenant })
                .set(count);
        }
        self.instances.set(scraped.instances);
        self.disk_bytes.clear();
        self.quota_bytes.clear();
        for (tenant, used, quota) in scraped.disk {
            let labels = TenantLabels { tenant };
            self.disk_bytes.get_or_create(&labels).set(used);
            if let Some(quota) = quota {
                self.quota_bytes.get_or_create(&labels).set(quota);
            }
        }
        self.upstreams.clear();
        for (upstream, state) in scraped.upstreams {
            for candidate in ["up", "down", "unavailable"] {
                self.upstreams
                    .get_or_create(&UpstreamLabels {
                        upstream: upstream.clone(),
                        state: candidate.into(),
                    })
                    .set(i64::from(candidate == state));
            }
        }
        self.upstream_instances.clear();
        for (upstream, state, count) in scraped.upstream_instances {
            let labels = UpstreamLabels {
                upstream,
                state: state.into(),
            };
            self.upstream_instances.get_or_create(&labels).set(count);
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
