//! Per-tenant rate limits (`[tenants.ID] rate`): calls per second, as a token bucket with
//! a burst (GCRA, from `governor`), and calls running at once. A call over either is
//! refused before it runs, with when to try again; nothing waits in a queue, so a tenant
//! at its limit holds no resource another tenant's calls need: each tenant has its own
//! bucket and its own count, checked without a lock shared between tenants.

use super::Tenants;
use crate::ids::TenantId;
use crate::limits::RateLimit;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota as Gcra};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateRefusal {
    #[error(
        "rate limit: tenant '{tenant}' may make {per_second} calls a second (bursts of {burst}); retry in {} ms",
        retry_after.as_millis()
    )]
    Rate {
        tenant: TenantId,
        per_second: u32,
        burst: u32,
        retry_after: Duration,
    },
    #[error("rate limit: tenant '{tenant}' may run {max} calls at once; retry when one ends")]
    Concurrent { tenant: TenantId, max: u32 },
}

impl RateRefusal {
    /// When to try again, as far as is known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RateRefusal::Rate { retry_after, .. } => Some(*retry_after),
            RateRefusal::Concurrent { .. } => None,
        }
    }

    /// `rate` or `concurrent`, for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            RateRefusal::Rate { .. } => "rate",
            RateRefusal::Concurrent { .. } => "concurrent",
        }
    }
}

/// A call admitted: holds its place among the tenant's running calls until dropped.
pub struct Admitted(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

/// Each limited tenant's bucket and running calls.
#[derive(Default)]
pub struct Rates {
    tenants: BTreeMap<TenantId, Arc<TenantRate>>,
}

struct TenantRate {
    limit: RateLimit,
    bucket: Option<DefaultDirectRateLimiter>,
    running: Option<Arc<Semaphore>>,
}

impl TenantRate {
    fn new(limit: RateLimit) -> TenantRate {
        let bucket = limit.calls_per_second.map(|per_second| {
            let burst = limit.burst.unwrap_or(per_second);
            DefaultDirectRateLimiter::direct(Gcra::per_second(per_second).allow_burst(burst))
        });
        let running = limit
            .concurrent
            .map(|max| Arc::new(Semaphore::new(max.get() as usize)));
        TenantRate {
            limit,
            bucket,
            running,
        }
    }
}

impl Rates {
    /// The state of every tenant of `tenants` whose `rate` sets a bound: this one's for
    /// those whose limits are unchanged (so a reload neither refills a bucket nor forgets
    /// the calls running), fresh for the others (calls running under a tenant's old
    /// limits do not count against its new ones).
    pub fn renewed(&self, tenants: &Tenants) -> Rates {
        let tenants = tenants
            .iter()
            .filter(|(_, tenant)| tenant.rate.is_set())
            .map(|(id, tenant)| {
                let rate = match self.tenants.get(id) {
                    Some(kept) if kept.limit == tenant.rate => kept.clone(),
                    _ => Arc::new(TenantRate::new(tenant.rate)),
                };
                (id.clone(), rate)
            })
            .collect();
        Rates { tenants }
    }

    /// `tenant`'s limits and, when they bound calls at once, how many run now.
    pub fn state(&self, tenant: &TenantId) -> Option<(RateLimit, Option<u32>)> {
        let rate = self.tenants.get(tenant)?;
        let running = rate
            .running
            .as_ref()
            .zip(rate.limit.concurrent)
            .map(|(s, max)| {
                max.get()
                    .saturating_sub(u32::try_from(s.available_permits()).unwrap_or(u32::MAX))
            });
        Some((rate.limit, running))
    }

    /// Admits a call of `tenant`, or says why not: over its calls running at once (checked
    /// first, so a call refused there spends none of its rate), or over its rate.
    pub fn admit(&self, tenant: &TenantId) -> Result<Admitted, RateRefusal> {
        let Some(rate) = self.tenants.get(tenant) else {
            return Ok(Admitted(None));
        };
        let permit =
            match &rate.running {
                Some(running) => Some(running.clone().try_acquire_owned().map_err(|_| {
                    RateRefusal::Concurrent {
                        tenant: tenant.clone(),
                        max: rate.limit.concurrent.map_or(0, |m| m.get()),
                    }
                })?),
                None => None,
            };
        if let Some(bucket) = &rate.bucket
            && let Err(not_until) = bucket.check()
        {
            let per_second = rate.limit.calls_per_second.map_or(0, |n| n.get());
            return Err(RateRefusal::Rate {
                tenant: tenant.clone(),
                per_second,
                burst: rate.limit.burst.map_or(per_second, |n| n.get()),
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            });
        }
        Ok(Admitted(permit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::Tenant;
    use std::num::NonZeroU32;

    fn tenants(limit: RateLimit) -> Tenants {
        let tenant = Tenant {
            rate: limit,
            ..Tenant::default()
        };
        let id = TenantId::new("a").unwrap();
        Tenants::new([(id, tenant)].into_iter().collect(), None)
    }

    fn rates(limit: RateLimit) -> (Rates, TenantId) {
        let rates = Rates::default().renewed(&tenants(limit));
        (rates, TenantId::new("a").unwrap())
    }

    #[test]
    fn a_reload_keeps_a_tenants_state_unless_its_limits_change() {
        let limit = RateLimit {
            calls_per_second: NonZeroU32::new(1),
            burst: NonZeroU32::new(1),
            concurrent: NonZeroU32::new(2),
        };
        let (rates, a) = rates(limit);
        let running = rates.admit(&a).unwrap();
        let kept = rates.renewed(&tenants(limit));
        // The bucket is not refilled, and the running call still counts.
        assert_eq!(kept.admit(&a).err().unwrap().reason(), "rate");
        let faster = RateLimit {
            calls_per_second: NonZeroU32::new(5),
            burst: NonZeroU32::new(5),
            concurrent: NonZeroU32::new(1),
        };
        // A changed limit starts afresh: the call running under the old one is not
        // counted against it.
        let changed = kept.renewed(&tenants(faster));
        let _second = changed.admit(&a).unwrap();
        assert_eq!(changed.admit(&a).err().unwrap().reason(), "concurrent");
        drop(running);
    }

    #[test]
    fn a_burst_passes_then_calls_are_refused_with_when_to_retry() {
        let (rates, a) = rates(RateLimit {
            calls_per_second: NonZeroU32::new(1),
            burst: NonZeroU32::new(3),
            concurrent: None,
        });
        for _ in 0..3 {
            rates.admit(&a).unwrap();
        }
        let refused = rates.admit(&a).err().unwrap();
        assert_eq!(refused.reason(), "rate");
        let retry = refused.retry_after().unwrap();
        assert!(
            retry > Duration::ZERO && retry <= Duration::from_secs(1),
            "{retry:?}"
        );
    }

    #[test]
    fn running_calls_are_bounded_and_a_refused_call_spends_no_rate() {
        let (rates, a) = rates(RateLimit {
            calls_per_second: NonZeroU32::new(1),
            burst: NonZeroU32::new(2),
            concurrent: NonZeroU32::new(1),
        });
        let running = rates.admit(&a).unwrap();
        let refused = rates.admit(&a).err().unwrap();
        assert_eq!(refused.reason(), "concurrent");
        drop(running);
        // The second token of the burst is still there.
        rates.admit(&a).unwrap();
    }

    #[test]
    fn other_tenants_are_not_limited() {
        let (rates, _) = rates(RateLimit {
            calls_per_second: NonZeroU32::new(1),
            burst: None,
            concurrent: None,
        });
        let other = TenantId::new("b").unwrap();
        for _ in 0..100 {
            rates.admit(&other).unwrap();
        }
    }
}
