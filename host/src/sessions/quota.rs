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
//! (its components dropped, its commands killed) and its output withheld; a tool stopped
//! so fails, its `after-execute` hooks are told, and the agent is told which files the
//! call wrote (see [`QuotaCall`]). So a tenant can
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
//! free. They go by descriptor ([`crate::beneath`]): a tree of any depth is counted whole
//! (no `PATH_MAX`), and a directory the session made unreadable (`chmod 000`, on a host
//! that is not root) is given owner `rwx` back and counted, so hiding files costs as much
//! as keeping them.

use super::{DiskUsage, Session, SessionError, Sessions, owned};
use crate::beneath::{self, Walk};
use crate::failure::{Failure, FailureKind};
use crate::ids::TenantId;
use crate::limits::{ALLOCATION_SLACK, QUOTA_CHECK_INTERVAL, QUOTA_REPORTED_FILES};
use crate::limits::{QUOTA_PROBATION_BYTES, QUOTA_PROBATION_ENTRIES};
use crate::mounts::Scope;
use crate::persistent::Room;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

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

    /// This quota, each bound raised to at least what `usage` holds: the ceiling of a call
    /// admitted on probation (see [`Sessions::admit`]).
    fn at_least(self, usage: Usage) -> Quota {
        Quota {
            bytes: self.bytes.map(|max| max.max(usage.bytes)),
            entries: self.entries.map(|max| max.max(usage.entries)),
        }
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

/// Each tenant's use as last measured and kept up to date; and, for a tenant over its
/// quota, what it used when it went over (the base of its probation's room).
#[derive(Default)]
pub struct QuotaBook {
    tenants: Mutex<HashMap<TenantId, Usage>>,
    probation: Mutex<HashMap<TenantId, Usage>>,
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

    /// What `tenant` used when its probation began: `used`, if it begins now.
    fn probation_base(&self, tenant: &TenantId, used: Usage) -> Usage {
        let mut probation = self.probation.lock().unwrap_or_else(|e| e.into_inner());
        *probation.entry(tenant.clone()).or_insert(used)
    }

    /// `tenant` is within its quota again.
    fn off_probation(&self, tenant: &TenantId) {
        let mut probation = self.probation.lock().unwrap_or_else(|e| e.into_inner());
        probation.remove(tenant);
    }
}

/// The bytes a regular file counts for: its size, or the space allocated to it when that
/// is beyond its size (rounded up to the file system's block) by more than
/// [`ALLOCATION_SLACK`], so that space reserved past a file's end (`fallocate
/// --keep-size`) is not disk the quota cannot see. A sparse file counts its size.
fn charged(stat: &rustix::fs::Stat) -> u64 {
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    let allocated = u64::try_from(stat.st_blocks)
        .unwrap_or(0)
        .saturating_mul(512);
    let block = u64::try_from(stat.st_blksize).unwrap_or(4096).max(512);
    let expected = size.div_ceil(block).saturating_mul(block);
    if allocated > expected.saturating_add(ALLOCATION_SLACK) {
        allocated
    } else {
        size
    }
}

/// What `dirs` hold, walked without following symlinks, whatever their depth, with what
/// the session made unreadable given back (see [`Walk::EVERYTHING`]); missing directories
/// hold nothing. Blocking: call it on the blocking pool ([`measure_async`]) from async code.
pub fn measure<'a>(dirs: impl Iterator<Item = &'a Path>) -> Usage {
    let mut usage = Usage::default();
    for dir in dirs {
        let Ok(root) = beneath::open_root(dir, true) else {
            continue;
        };
        let counted = beneath::walk(&root, Walk::EVERYTHING, &mut |e: &beneath::Entry<'_>| {
            usage.entries += 1;
            if e.is_file() {
                usage.bytes += charged(e.stat);
            }
            Ok(true)
        });
        if let Err(e) = counted {
            tracing::warn!(dir = %dir.display(), error = %e, "a directory not counted whole");
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
        for tenant in self.tenants().with_quota() {
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
            quota: self.tenants().quota(&session.tenant),
        })
    }

    /// Each tenant with a quota: the bytes it uses as kept (not walked; `None` until
    /// measured) and its byte quota.
    pub fn kept_disk_use(&self) -> Vec<(TenantId, Option<u64>, Option<u64>)> {
        self.tenants()
            .with_quota()
            .map(|tenant| {
                (
                    tenant.clone(),
                    self.usage.get(tenant).map(|u| u.bytes),
                    self.tenants().quota(tenant).bytes,
                )
            })
            .collect()
    }

    /// Admits a call of `session` under its tenant's disk quota: `None` when the tenant has
    /// none (or its use cannot be measured: logged, and the call runs unbounded). Only the
    /// mounts the call may write in (`writable`, virtual paths) are measured around it.
    ///
    /// A tenant at or over its quota (measured afresh first: another process may have
    /// deleted files since) is never locked out: its call is admitted **on probation**, so
    /// that the agent can look and delete. While it runs, the tenant may hold
    /// [`QUOTA_PROBATION_BYTES`] and [`QUOTA_PROBATION_ENTRIES`] more than it used when it
    /// went over (its hooks' audit lines, a tool's temporary file), or the call is stopped;
    /// and the call must end with its tool's directories (`tool_writable`) holding no more
    /// than when it began, bytes and entries each, or its output is withheld. So `ls` and
    /// `rm big` go through, `touch more` does not, and the agent is told the rule. What a
    /// withheld call wrote stays, but all the calls of one probation add at most that room.
    pub async fn admit<'a>(
        &'a self,
        session: &Session,
        writable: &BTreeSet<&str>,
        tool_writable: &BTreeSet<&str>,
    ) -> Option<QuotaCall<'a>> {
        let quota = self.tenants().quota(&session.tenant);
        if !quota.is_set() {
            return None;
        }
        let tenant = &session.tenant;
        let mut used = match self.tenant_usage(tenant).await {
            Ok(used) => used,
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "cannot measure disk use");
                return None;
            }
        };
        if quota.exceeded(used, true).is_some() {
            used = self.remeasure(tenant).await.unwrap_or(used);
        }
        let mut watch = quota;
        let mut probation = None;
        let over = quota.exceeded(used, true);
        if over.is_none() {
            self.usage.off_probation(tenant);
        }
        if let Some(over) = over {
            // The room is counted from when the tenant went over, not from each call: the
            // calls of a tenant on probation add at most that much in all.
            let base = self.usage.probation_base(tenant, used);
            watch = quota.at_least(Usage {
                bytes: base.bytes.saturating_add(QUOTA_PROBATION_BYTES),
                entries: base.entries.saturating_add(QUOTA_PROBATION_ENTRIES),
            });
            let tool_dirs: Vec<PathBuf> = session
                .quota_mounts(tool_writable)
                .map(|m| m.host.clone())
                .collect();
            let tool_before = measure_async(tool_dirs.clone()).await;
            probation = Some(Probation {
                over,
                tool_dirs,
                tool_before,
            });
        }
        let dirs: Vec<(String, PathBuf)> = session
            .quota_mounts(writable)
            .map(|m| (m.virtual_path.clone(), m.host.clone()))
            .collect();
        let before = measure_async(hosts(&dirs)).await;
        Some(QuotaCall {
            sessions: self,
            tenant: tenant.clone(),
            quota,
            watch,
            probation,
            used,
            dirs,
            before,
            since: SystemTime::now(),
            stage: Mutex::new(Stage::Hooks),
            stop: tokio::sync::Notify::new(),
        })
    }

    /// Measures afresh each tenant whose kept use is at or over its quota: what another
    /// process deleted since is then no longer counted, and a tenant it locked out is let
    /// in again (and says so in `/metrics`). A server calls it on its tick; a tenant under
    /// its quota is left as kept (its calls keep it up to date).
    pub async fn remeasure_over_quota(&self) {
        for tenant in self.tenants().with_quota() {
            let over = self
                .usage
                .get(tenant)
                .is_some_and(|used| self.tenants().quota(tenant).exceeded(used, true).is_some());
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

    /// Walks all of `tenant`'s session and tenant directories, and the backing trees of
    /// its persistent directories that are its own (a `{tenant}` template; one shared by
    /// tenants is no one's): what its quota counts.
    async fn measure_tenant(&self, tenant: &TenantId) -> Result<Usage, SessionError> {
        let dirs = self
            .mount_dirs(Some(tenant), |m, dirs| {
                if m.scope != Scope::Persistent {
                    dirs.insert(m.host.clone());
                }
                if let Some(persistent) = &m.persistent
                    && persistent.spec.backing.contains("{tenant}")
                {
                    dirs.insert(persistent.backing.clone());
                }
            })
            .await?;
        Ok(measure_async(dirs).await)
    }

    /// What a commit of `tenant`'s may add to its stores: what its disk quota leaves,
    /// measured afresh (unbounded without a quota; a use that cannot be measured is logged
    /// and counts as none).
    pub(super) async fn room(&self, tenant: &TenantId) -> Room {
        let quota = self.tenants().quota(tenant);
        if !quota.is_set() {
            return Room::default();
        }
        let used = self.remeasure(tenant).await.unwrap_or_default();
        Room {
            bytes: quota.bytes.map(|max| max.saturating_sub(used.bytes)),
            files: quota.entries.map(|max| max.saturating_sub(used.entries)),
        }
    }
}

/// A call of a tenant with a disk quota, admitted (see [`Sessions::admit`]): what the
/// directories it may write in held when it began.
///
/// While it runs they are measured every [`QUOTA_CHECK_INTERVAL`] ([`QuotaCall::run`]).
/// Going over while its tool runs stops the tool, which then fails with
/// [`FailureKind::DiskQuota`] ([`QuotaCall::tool`]): the call's `after-execute` hooks still
/// run and are told so (an audit records the call as failed), and the agent is told
/// what the call wrote. Going over in a hook's phase drops the whole call, as a hook that
/// writes without bound may not finish.
pub struct QuotaCall<'a> {
    sessions: &'a Sessions,
    tenant: TenantId,
    quota: Quota,
    /// The bounds while it runs: the quota, or on probation what the tenant held when the
    /// call began and some room.
    watch: Quota,
    /// A call of a tenant at or over its quota.
    probation: Option<Probation>,
    /// The tenant's use when the call began.
    used: Usage,
    /// The mounts it may write in: virtual path, host directory.
    dirs: Vec<(String, PathBuf)>,
    /// What they held when it began.
    before: Usage,
    since: SystemTime,
    stage: Mutex<Stage>,
    /// Told when the tenant went over while the tool ran.
    stop: tokio::sync::Notify,
}

/// A call admitted while its tenant was at or over its quota (see [`Sessions::admit`]).
struct Probation {
    /// What the tenant was over, said for the model.
    over: String,
    /// The directories its tool may write in, and what they held when it began.
    tool_dirs: Vec<PathBuf>,
    tool_before: Usage,
}

/// Where a [`QuotaCall`] is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// In a hook's phase.
    Hooks,
    /// Its tool runs.
    Tool,
    /// Its tool was stopped, or ended, over the quota: the rest runs unwatched, and its
    /// result already says so.
    Failed,
}

impl QuotaCall<'_> {
    fn stage(&self) -> std::sync::MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the tenant would use with the call's directories as they are now, if that
    /// is over the bounds while it runs.
    async fn over(&self) -> Option<String> {
        let now = measure_async(hosts(&self.dirs)).await;
        self.watch
            .exceeded(self.used.moved(self.before, now), false)
    }

    /// What the agent is told of the rule, when the call was on probation.
    fn rule(&self) -> String {
        match &self.probation {
            Some(Probation { over, .. }) => format!(
                " (tenant '{}' was over its disk quota when the call began, using {over}: \
                 only a call that deletes or shrinks files goes through until it is under)",
                self.tenant
            ),
            None => String::new(),
        }
    }

    /// Runs the whole call (`call`, its hooks' phases and its tool), watching the
    /// tenant's use; then keeps what it changed.
    ///
    /// # Errors
    ///
    /// What the agent is told when a hook's phase took the tenant over its quota (the
    /// call was dropped there) or the call ended over it (its output withheld).
    pub async fn run<T>(&self, call: impl Future<Output = T>) -> Result<T, String> {
        let tenant = &self.tenant;
        let watch = async {
            loop {
                tokio::time::sleep(QUOTA_CHECK_INTERVAL).await;
                let Some(over) = self.over().await else {
                    continue;
                };
                let stage = *self.stage();
                match stage {
                    Stage::Hooks => return over,
                    Stage::Tool => self.stop.notify_one(),
                    Stage::Failed => {}
                }
                std::future::pending::<()>().await;
            }
        };
        let result = tokio::select! {
            result = call => Ok(result),
            over = watch => {
                tracing::warn!(%tenant, over, "disk quota exceeded in a hook's phase; call stopped");
                Err(format!(
                    "disk quota exceeded: the call took tenant '{tenant}' to {over} and was stopped; its output is withheld{}",
                    self.rule()
                ))
            }
        };
        let after = measure_async(hosts(&self.dirs)).await;
        self.sessions.usage.moved(tenant, self.before, after);
        let failed = *self.stage() == Stage::Failed;
        let left = match &self.probation {
            Some(probation) => probation.grown().await,
            None => self
                .quota
                .exceeded(self.used.moved(self.before, after), false)
                .map(|over| format!("using {over}")),
        };
        match left {
            Some(over) if result.is_ok() && !failed => {
                tracing::warn!(%tenant, over, "disk quota exceeded by a call");
                Err(format!(
                    "disk quota exceeded: the call left tenant '{tenant}' {over}; its output is withheld{}",
                    self.rule()
                ))
            }
            _ => result,
        }
    }

    /// Runs the call's tool (`execute`): stopped when the tenant goes over its quota, and
    /// measured when it ends.
    ///
    /// # Errors
    ///
    /// The tool's own failure, or [`FailureKind::DiskQuota`] saying what the call wrote.
    pub async fn tool<T>(
        &self,
        execute: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        *self.stage() = Stage::Tool;
        let what = tokio::select! {
            result = execute => match self.over().await {
                Some(over) => format!("the call left tenant '{}' using {over}", self.tenant),
                None => {
                    *self.stage() = Stage::Hooks;
                    return result;
                }
            },
            () = self.stop.notified() => {
                let over = self.over().await.unwrap_or_else(|| "over its quota".into());
                format!("the call took tenant '{}' to {over} and was stopped", self.tenant)
            }
        };
        *self.stage() = Stage::Failed;
        tracing::warn!(tenant = %self.tenant, what, "disk quota exceeded by a tool");
        let (dirs, since) = (self.dirs.clone(), self.since);
        let wrote = tokio::task::spawn_blocking(move || written_since(&dirs, since))
            .await
            .unwrap_or_default();
        let wrote = if wrote.is_empty() {
            String::new()
        } else {
            let files: Vec<String> = wrote
                .iter()
                .map(|(path, bytes)| format!("{path} ({bytes} bytes)"))
                .collect();
            format!("; it wrote {}", files.join(", "))
        };
        Err(Failure::new(
            FailureKind::DiskQuota,
            format!(
                "disk quota exceeded: {what}; its output is withheld{wrote}{}. Delete files or sessions to continue",
                self.rule()
            ),
        ))
    }
}

impl Probation {
    /// What its tool's directories grew by, said for the model, if they did.
    async fn grown(&self) -> Option<String> {
        let (before, now) = (
            self.tool_before,
            measure_async(self.tool_dirs.clone()).await,
        );
        (now.bytes > before.bytes || now.entries > before.entries).then(|| {
            format!(
                "with {} more bytes and {} more files in the tool's directories",
                now.bytes.saturating_sub(before.bytes),
                now.entries.saturating_sub(before.entries)
            )
        })
    }
}

/// The host directories of `dirs`.
fn hosts(dirs: &[(String, PathBuf)]) -> Vec<PathBuf> {
    dirs.iter().map(|(_, host)| host.clone()).collect()
}

/// The largest files (at most [`QUOTA_REPORTED_FILES`]) below `dirs` modified since
/// `since`, named by their virtual paths, largest first. Blocking.
fn written_since(dirs: &[(String, PathBuf)], since: SystemTime) -> Vec<(String, u64)> {
    let since = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    let mut found = Vec::new();
    for (virtual_path, host) in dirs {
        let Ok(root) = beneath::open_root(host, true) else {
            continue;
        };
        let walked = beneath::walk(&root, Walk::EVERYTHING, &mut |e: &beneath::Entry<'_>| {
            let modified =
                i128::from(e.stat.st_mtime) * 1_000_000_000 + i128::from(e.stat.st_mtime_nsec);
            if e.is_file() && modified >= since {
                found.push((
                    format!(
                        "{}/{}",
                        virtual_path.trim_end_matches('/'),
                        String::from_utf8_lossy(e.path)
                    ),
                    charged(e.stat),
                ));
            }
            Ok(true)
        });
        if let Err(e) = walked {
            tracing::debug!(dir = %host.display(), error = %e, "a directory not walked whole");
        }
    }
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    found.truncate(QUOTA_REPORTED_FILES);
    found
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

    /// 600 levels of 10-byte names: 6,600 bytes of path, past `PATH_MAX`.
    #[test]
    fn a_file_below_a_chain_longer_than_path_max_counts() {
        let dir = tempfile::tempdir().unwrap();
        let mut at = beneath::open_root(dir.path(), false).unwrap();
        for _ in 0..600 {
            rustix::fs::mkdirat(&at, "aaaaaaaaaa", rustix::fs::Mode::RWXU).unwrap();
            at = beneath::open_dir_in(&at, "aaaaaaaaaa".as_ref()).unwrap();
        }
        beneath::replace(&at, "f", ".f", rustix::fs::Mode::RUSR, |f| {
            std::io::Write::write_all(f, &[0; 12345])
        })
        .unwrap();
        let usage = measure(std::iter::once(dir.path()));
        assert_eq!(
            usage,
            Usage {
                bytes: 12345,
                entries: 601
            }
        );
        let since = SystemTime::now() - std::time::Duration::from_secs(60);
        let wrote = written_since(&[("/w".into(), dir.path().to_path_buf())], since);
        assert_eq!(wrote.len(), 1);
        assert!(wrote[0].0.ends_with("/aaaaaaaaaa/f") && wrote[0].0.len() > 6600);
    }

    /// What a session (of a host that is not root) hides behind directories it made
    /// unreadable, written through a descriptor opened before, still counts.
    #[test]
    fn files_in_directories_made_unreadable_count() {
        crate::beneath::as_ordinary_user(
            "sessions::quota::tests::files_in_directories_made_unreadable_count",
            |root| {
                use std::os::unix::fs::PermissionsExt;
                let hid = root.join("hid");
                std::fs::create_dir_all(hid.join("deeper")).unwrap();
                let mut file = std::fs::File::create(hid.join("deeper/f")).unwrap();
                for dir in [hid.join("deeper"), hid.clone()] {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o000)).unwrap();
                }
                std::io::Write::write_all(&mut file, &[1; 4096]).unwrap();
                let usage = measure(std::iter::once(root));
                assert_eq!(
                    usage,
                    Usage {
                        bytes: 4096,
                        entries: 3
                    }
                );
            },
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
