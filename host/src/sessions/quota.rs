//! Disk quotas: how many bytes and entries a tenant's directories hold, kept per tenant,
//! measured off the executor, and enforced while a call runs.
//!
//! A tenant's use is measured at start (a walk of all its session and tenant directories,
//! on the blocking pool) and then kept up to date from what each call changes: a call walks
//! only the session and tenant directories its hooks and tool may write in (their `rw`
//! grants, `bash`'s mount), before, during and after it; a deleted session's use is
//! subtracted.
//! While a call of a tenant with a quota runs, its directories are measured every
//! [`QUOTA_CHECK_INTERVAL`]; a call that takes the tenant over its quota is stopped there
//! (its components dropped, its commands killed) and its output withheld. So a tenant can
//! overshoot by what one call writes in that interval plus one walk of those directories —
//! not by what it writes until its deadline. `session gc` measures every tenant afresh.
//!
//! What is kept does not see what another process removes (`hookhost session delete`,
//! another host of a fleet): a tenant whose kept use says it is at its quota is measured
//! afresh before a call of it is refused, and by a server's tick (see
//! [`Sessions::remeasure_over_quota`]), so deleting its files lets it in again at once.
//!
//! Walks never follow symlinks (a link counts as an entry; what it points to is not the
//! tenant's) and count every entry — files, directories, links — so empty files are not
//! free.

use super::{DiskUsage, Session, SessionError, Sessions, owned};
use crate::ids::TenantId;
use crate::limits::QUOTA_CHECK_INTERVAL;
use crate::mounts::Scope;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What some directories hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Bytes of regular files.
    pub bytes: u64,
    /// Entries of any kind below the directories (files, directories, symlinks…).
    pub entries: u64,
}

impl Usage {
    /// `self` with the change from `before` to `after` applied (never below zero).
    pub fn moved(self, before: Usage, after: Usage) -> Usage {
        let apply = |now: u64, b: u64, a: u64| (now + a).saturating_sub(b);
        Usage {
            bytes: apply(self.bytes, before.bytes, after.bytes),
            entries: apply(self.entries, before.entries, after.entries),
        }
    }
}

/// A tenant's bounds, from `disk_quota_bytes` and `disk_quota_files`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quota {
    pub bytes: Option<u64>,
    pub entries: Option<u64>,
}

impl Quota {
    /// Whether any bound is set.
    pub fn is_set(&self) -> bool {
        self.bytes.is_some() || self.entries.is_some()
    }

    /// What `usage` is over, said for the model: `None` when within the quota. `at_limit`
    /// counts reaching a bound as over (before a call: nothing more fits).
    pub fn exceeded(&self, usage: Usage, at_limit: bool) -> Option<String> {
        let over = |used: u64, max: u64| if at_limit { used >= max } else { used > max };
        if let Some(max) = self.bytes
            && over(usage.bytes, max)
        {
            return Some(format!("{} of its {max} bytes", usage.bytes));
        }
        if let Some(max) = self.entries
            && over(usage.entries, max)
        {
            return Some(format!("{} of its {max} files", usage.entries));
        }
        None
    }
}

/// Each tenant's use as last measured and kept up to date.
#[derive(Default)]
pub struct QuotaBook {
    tenants: Mutex<HashMap<TenantId, Usage>>,
}

impl QuotaBook {
    fn tenants(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, Usage>> {
        self.tenants.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept use of `tenant`, if measured.
    pub fn get(&self, tenant: &TenantId) -> Option<Usage> {
        self.tenants().get(tenant).copied()
    }

    pub fn set(&self, tenant: &TenantId, usage: Usage) {
        self.tenants().insert(tenant.clone(), usage);
    }

    /// Applies what a call changed: its directories went from `before` to `after`.
    pub fn moved(&self, tenant: &TenantId, before: Usage, after: Usage) {
        if let Some(usage) = self.tenants().get_mut(tenant) {
            *usage = usage.moved(before, after);
        }
    }

    /// Forgets every tenant's use.
    pub fn clear(&self) {
        self.tenants().clear();
    }
}

/// What `dirs` hold, walked without following symlinks; missing directories hold nothing.
/// Blocking: call it on the blocking pool ([`measure_async`]) from async code.
pub fn measure<'a>(dirs: impl Iterator<Item = &'a Path>) -> Usage {
    let mut usage = Usage::default();
    let mut stack: Vec<PathBuf> = dirs.map(Path::to_path_buf).collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            usage.entries += 1;
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => usage.bytes += entry.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    usage
}

/// [`measure`] on the blocking pool, so a large tree never holds an executor thread.
pub async fn measure_async(dirs: Vec<PathBuf>) -> Usage {
    tokio::task::spawn_blocking(move || measure(dirs.iter().map(PathBuf::as_path)))
        .await
        .unwrap_or_default()
}

/// A tenant's disk use as the session table sees it: measured, kept, enforced around calls.
impl Sessions {
    /// Measures the disk use of every tenant with a quota afresh (a walk of its session and
    /// tenant directories each, off the executor) and keeps it: at start and after a sweep,
    /// so that calls only apply what they change.
    ///
    /// # Errors
    ///
    /// [`SessionError`] when the table cannot be read.
    pub async fn measure_quotas(&self) -> Result<(), SessionError> {
        self.usage.clear();
        for tenant in self.tenants.with_quota() {
            let usage = self.measure_tenant(tenant).await?;
            self.usage.set(tenant, usage);
        }
        Ok(())
    }

    /// Disk used by `session` and by its tenant, against the tenant's quota, measured now
    /// (without following symlinks).
    ///
    /// # Errors
    ///
    /// [`SessionError`] when the tenant's sessions cannot be listed or resolved.
    pub async fn usage(&self, session: &Session) -> Result<DiskUsage, SessionError> {
        let tenant = self.measure_tenant(&session.tenant).await?;
        Ok(DiskUsage {
            session: measure_async(owned(session.own_dirs())).await,
            tenant,
            quota: self.tenants.quota(&session.tenant),
        })
    }

    /// Each tenant with a quota: the bytes it uses as kept (not walked; `None` until
    /// measured) and its byte quota.
    pub fn kept_disk_use(&self) -> Vec<(TenantId, Option<u64>, Option<u64>)> {
        self.tenants
            .with_quota()
            .map(|tenant| {
                (
                    tenant.clone(),
                    self.usage.get(tenant).map(|u| u.bytes),
                    self.tenants.quota(tenant).bytes,
                )
            })
            .collect()
    }

    /// Runs `call` (a call of `session`) within its tenant's disk quota, if it has one:
    /// refused when the tenant is at its quota; stopped as soon as it takes the tenant over
    /// it (see [the module](self)); its output withheld when it ends over it. Only the mounts the
    /// call may write in (`writable`, virtual paths) are measured around it; the tenant's
    /// use is kept, not walked.
    ///
    /// # Errors
    ///
    /// What the agent is told when the call was refused, stopped or its output withheld.
    pub async fn within_quota<T>(
        &self,
        session: &Session,
        writable: &BTreeSet<&str>,
        call: impl Future<Output = T>,
    ) -> Result<T, String> {
        let quota = self.tenants.quota(&session.tenant);
        if !quota.is_set() {
            return Ok(call.await);
        }
        let tenant = &session.tenant;
        let mut used = match self.tenant_usage(tenant).await {
            Ok(used) => used,
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "cannot measure disk use");
                return Ok(call.await);
            }
        };
        if quota.exceeded(used, true).is_some() {
            used = self.remeasure(tenant).await.unwrap_or(used);
        }
        if let Some(over) = quota.exceeded(used, true) {
            return Err(format!(
                "disk quota exceeded: tenant '{tenant}' uses {over}; delete files or sessions to continue"
            ));
        }
        let dirs = owned(session.quota_dirs(writable));
        let before = measure_async(dirs.clone()).await;
        let watch = async {
            loop {
                tokio::time::sleep(QUOTA_CHECK_INTERVAL).await;
                let now = measure_async(dirs.clone()).await;
                if let Some(over) = quota.exceeded(used.moved(before, now), false) {
                    return over;
                }
            }
        };
        let result = tokio::select! {
            result = call => Ok(result),
            over = watch => {
                tracing::warn!(%tenant, session = %session.id, over, "disk quota exceeded during a call; stopped");
                Err(format!(
                    "disk quota exceeded: the call took tenant '{tenant}' to {over} and was stopped; its output is withheld"
                ))
            }
        };
        let after = measure_async(dirs).await;
        self.usage.moved(tenant, before, after);
        match quota.exceeded(used.moved(before, after), false) {
            Some(over) if result.is_ok() => {
                tracing::warn!(%tenant, over, "disk quota exceeded by a call");
                Err(format!(
                    "disk quota exceeded: the call left tenant '{tenant}' using {over}; its output is withheld"
                ))
            }
            _ => result,
        }
    }

    /// Measures afresh each tenant whose kept use is at or over its quota: what another
    /// process deleted since is then no longer counted, and a tenant it locked out is let
    /// in again (and says so in `/metrics`). A server calls it on its tick; a tenant under
    /// its quota is left as kept (its calls keep it up to date).
    pub async fn remeasure_over_quota(&self) {
        for tenant in self.tenants.with_quota() {
            let over = self
                .usage
                .get(tenant)
                .is_some_and(|used| self.tenants.quota(tenant).exceeded(used, true).is_some());
            if over {
                let _ = self.remeasure(tenant).await;
            }
        }
    }

    /// Walks `tenant`'s directories and keeps what they hold. A call of it in flight may
    /// then count its writes twice until the next measure: an overstatement, never an
    /// understatement.
    async fn remeasure(&self, tenant: &TenantId) -> Option<Usage> {
        match self.measure_tenant(tenant).await {
            Ok(usage) => {
                self.usage.set(tenant, usage);
                Some(usage)
            }
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "cannot measure disk use");
                None
            }
        }
    }

    /// `tenant`'s use as kept; measured (off the executor) if it was not (another process
    /// swept, or measuring failed at start).
    async fn tenant_usage(&self, tenant: &TenantId) -> Result<Usage, SessionError> {
        if let Some(usage) = self.usage.get(tenant) {
            return Ok(usage);
        }
        let usage = self.measure_tenant(tenant).await?;
        self.usage.set(tenant, usage);
        Ok(usage)
    }

    /// Walks all of `tenant`'s session and tenant directories: what its quota counts.
    async fn measure_tenant(&self, tenant: &TenantId) -> Result<Usage, SessionError> {
        let dirs = self
            .mount_dirs(Some(tenant), |m| m.scope != Scope::Persistent)
            .await?;
        Ok(measure_async(dirs).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_counts_and_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/a"), "12345").unwrap();
        std::fs::write(dir.path().join("empty"), "").unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("link")).unwrap();
        let usage = measure(std::iter::once(dir.path()));
        assert_eq!(
            usage,
            Usage {
                bytes: 5,
                entries: 4
            }
        );
    }

    #[test]
    fn quotas_name_what_is_over() {
        let quota = Quota {
            bytes: Some(10),
            entries: Some(3),
        };
        let within = Usage {
            bytes: 10,
            entries: 3,
        };
        assert_eq!(quota.exceeded(within, false), None);
        assert!(quota.exceeded(within, true).is_some());
        let files = Usage {
            bytes: 0,
            entries: 4,
        };
        assert_eq!(quota.exceeded(files, false).unwrap(), "4 of its 3 files");
    }
}
