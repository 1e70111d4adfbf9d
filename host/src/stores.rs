//! Store components: persistent directories whose backing tree a component keeps its own
//! way (`[persistent."/persistent/NAME"] store = …`, the `harness:store` world).
//!
//! Each call into a store gets a fresh instance whose WASI context holds two preopens:
//! `/store`, the directory's backing (read-write), and `/checkout`, the session's checkout
//! — read-write for `load`, read-only for `commit`. Besides them, only what the entry gives
//! its store: its `settings` through `wasi:config/store` (`{tenant}` in a value replaced
//! by the session's tenant as one URL path segment, so a remote store keeps each tenant's
//! tree apart), the hosts of its `network` grant under the tenant's ceiling (each load or
//! commit with a call's budget of requests and bytes, its requests traced in the call or
//! commit that ran it, named by the directory's path), and its `limits` over the
//! session's. The session table serialises the calls for one backing tree (its lock, see
//! [`crate::persistent::keeper`]); the store makes each commit all or nothing, and says so
//! in its own documentation.

use crate::abi::store::{Change, ChangeKind, OnConflict, StoreError, StorePre, Version};
use crate::component::ComponentRef;
use crate::failure::Failure;
use crate::ids::TenantId;
use crate::limits::{LimitOverrides, Limits};
use crate::mounts::{PersistentSpec, ResolvedMount, Scope};
use crate::network::{Allow, Egress, Reach, RequestLog};
use crate::persistent::keeper::{self, Keeper, Kept};
use crate::persistent::{
    self, Changed, CommitReport, FileChange, LoadReport, Manifest, PersistentError, Room,
};
use crate::sandbox::{Access, Grants, Sandbox, Settings, StoreState};
use crate::sessions::Tenants;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use wasmtime::Store;

/// Where a store sees its backing tree.
pub const STORE_PATH: &str = "/store";
/// Where a store sees the session's checkout.
pub const CHECKOUT_PATH: &str = "/checkout";

/// A persistent directory's store component, ready to call.
pub struct StoreComponent {
    pre: StorePre,
    component: ComponentRef,
    sandbox: Arc<Sandbox>,
    settings: Settings,
    /// Its `network` grant; nothing when `None`.
    network: Option<Arc<Allow>>,
    /// Its limits over the session's.
    limits: LimitOverrides,
}

impl StoreComponent {
    /// The component, as the config names it.
    pub fn component(&self) -> &ComponentRef {
        &self.component
    }

    /// The store `component` of the persistent directory `spec`, with its settings and
    /// limits, granted `network` (`spec`'s grant, read).
    pub fn new(
        pre: StorePre,
        component: ComponentRef,
        sandbox: Arc<Sandbox>,
        spec: &PersistentSpec,
        network: Option<Arc<Allow>>,
    ) -> StoreComponent {
        StoreComponent {
            pre,
            component,
            sandbox,
            settings: spec.settings.clone(),
            network,
            limits: spec.limits,
        }
    }

    /// Its `network` grant; nothing when `None`.
    pub fn network(&self) -> Option<&Allow> {
        self.network.as_deref()
    }

    /// Whether it keeps past versions (`history`, `restore`).
    pub fn keeps_versions(&self) -> bool {
        self.pre.keeps_versions()
    }

    /// A store for one call: `/store` on `mount`'s backing, `/checkout` on its checkout
    /// (`checkout` access), its settings, and its grant under the tenant's ceiling; with
    /// the limits it runs under, its own over the session's.
    fn wasi(
        &self,
        dirs: Dirs<'_>,
        checkout: Access,
    ) -> Result<(Store<StoreState>, Limits), PersistentError> {
        let under = |dir: &Path| {
            dirs.workdir
                .filter(|w| dir.starts_with(w))
                .map(Path::to_path_buf)
        };
        let synthetic = |virtual_path: &str, host: PathBuf| ResolvedMount {
            virtual_path: virtual_path.to_string(),
            workdir: under(&host),
            host,
            scope: Scope::Persistent,
            persistent: None,
        };
        let mounts = [
            synthetic(STORE_PATH, dirs.backing.to_path_buf()),
            synthetic(CHECKOUT_PATH, dirs.checkout.to_path_buf()),
        ];
        let grants = Grants::from([
            (STORE_PATH.to_string(), Access::ReadWrite),
            (CHECKOUT_PATH.to_string(), checkout),
        ]);
        let reach = Reach {
            grant: self.network.clone(),
            ceiling: dirs.ceiling.cloned(),
        };
        let egress = Egress::new(
            self.sandbox.network_policy(),
            reach,
            dirs.virtual_path,
            dirs.requests.cloned(),
        );
        let limits = dirs.limits.with(&self.limits);
        let tenant = dirs.tenant.url_segment();
        let settings: Settings = self
            .settings
            .iter()
            .map(|(key, value)| (key.clone(), value.replace("{tenant}", &tenant)))
            .collect();
        let store = self
            .sandbox
            .store(&mounts, &grants, &settings, &limits, egress)
            .map_err(|e| self.failed(e))?;
        Ok((store, limits))
    }

    fn failed(&self, why: impl std::fmt::Display) -> PersistentError {
        PersistentError::Store {
            component: self.component.to_string(),
            why: why.to_string(),
        }
    }

    fn answer<T>(
        &self,
        called: Result<Result<T, StoreError>, Failure>,
    ) -> Result<T, PersistentError> {
        match called {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(StoreError::Conflict(paths))) => Err(PersistentError::Conflict(paths)),
            Ok(Err(StoreError::Failed(why))) => Err(self.failed(why)),
            Err(failure) => Err(self.failed(failure)),
        }
    }

    /// What a call of its `versions` export gave, as [`Self::answer`] for `store`'s.
    fn versions_answer<T>(
        &self,
        called: Result<Option<Result<T, String>>, Failure>,
    ) -> Result<T, PersistentError> {
        match called {
            Ok(Some(Ok(value))) => Ok(value),
            Ok(Some(Err(why))) => Err(self.failed(why)),
            Ok(None) => Err(self.failed("it keeps no versions")),
            Err(failure) => Err(self.failed(failure)),
        }
    }

    /// The versions the store keeps of `tenant`'s `mount`, oldest first, under the
    /// tenant's limits and network ceiling in `tenants` (its requests said in the host's
    /// log only).
    ///
    /// # Errors
    ///
    /// [`PersistentError::Store`] when it keeps none or fails.
    pub async fn history(
        &self,
        mount: &ResolvedMount,
        tenant: &TenantId,
        tenants: &Tenants,
    ) -> Result<Vec<Version>, PersistentError> {
        let (limits, ceiling) = (tenants.limits(tenant), tenants.network_ceiling(tenant));
        let dirs = Dirs::outside(mount, tenant, &limits, ceiling.as_ref())?;
        let (mut store, limits) = self.wasi(dirs, Access::ReadOnly)?;
        let called = self
            .pre
            .history(&mut store, &limits, &mount.virtual_path)
            .await;
        self.versions_answer(called)
    }

    /// Makes version `id` of `mount` the newest: its new version (bounded as
    /// [`Self::history`] is).
    ///
    /// # Errors
    ///
    /// [`PersistentError::Store`] when it keeps no versions, has no such one, or fails.
    pub async fn restore(
        &self,
        mount: &ResolvedMount,
        id: &str,
        tenant: &TenantId,
        tenants: &Tenants,
    ) -> Result<String, PersistentError> {
        let (limits, ceiling) = (tenants.limits(tenant), tenants.network_ceiling(tenant));
        let dirs = Dirs::outside(mount, tenant, &limits, ceiling.as_ref())?;
        let (mut store, limits) = self.wasi(dirs, Access::ReadOnly)?;
        let called = self
            .pre
            .restore(&mut store, &limits, &mount.virtual_path, id)
            .await;
        self.versions_answer(called)
    }
}

/// What a call into a store sees: a backing tree and a checkout, under a session's limits
/// and its tenant's network ceiling, its requests recorded in `requests`.
#[derive(Clone, Copy)]
struct Dirs<'a> {
    virtual_path: &'a str,
    tenant: &'a TenantId,
    backing: &'a Path,
    checkout: &'a Path,
    workdir: Option<&'a Path>,
    limits: &'a Limits,
    ceiling: Option<&'a Arc<Allow>>,
    requests: Option<&'a Arc<RequestLog>>,
}

impl<'a> Dirs<'a> {
    fn of(kept: &Kept<'a>) -> Dirs<'a> {
        Dirs {
            virtual_path: kept.virtual_path,
            tenant: kept.tenant,
            backing: kept.backing,
            checkout: kept.checkout,
            workdir: kept.workdir,
            limits: kept.limits,
            ceiling: kept.ceiling,
            requests: kept.requests,
        }
    }

    /// `mount` as no session's call has it (`history`, `restore`): no working directory,
    /// no trace.
    fn outside(
        mount: &'a ResolvedMount,
        tenant: &'a TenantId,
        limits: &'a Limits,
        ceiling: Option<&'a Arc<Allow>>,
    ) -> Result<Dirs<'a>, PersistentError> {
        let persistent = mount.persistent.as_ref().ok_or_else(|| {
            PersistentError::Stopped(format!("{} is not persistent", mount.virtual_path))
        })?;
        Ok(Dirs {
            virtual_path: &mount.virtual_path,
            tenant,
            backing: &persistent.backing,
            checkout: &mount.host,
            workdir: None,
            limits,
            ceiling,
            requests: None,
        })
    }
}

#[async_trait::async_trait]
impl Keeper for StoreComponent {
    async fn load(&self, kept: &Kept<'_>) -> Result<(Manifest, LoadReport), PersistentError> {
        let started = Instant::now();
        let _lock = keeper::locked(kept.locks, kept.backing).await?;
        let (mut store, limits) = self.wasi(Dirs::of(kept), Access::ReadWrite)?;
        let loaded = self.answer(self.pre.load(&mut store, &limits, kept.virtual_path).await)?;
        let (manifest, files, bytes) = Manifest::loaded_by_store(kept.checkout, loaded.version)?;
        let report = LoadReport {
            files: usize::try_from(files).unwrap_or(usize::MAX),
            bytes,
            ms: persistent::elapsed_ms(started),
        };
        Ok((manifest, report))
    }

    /// A store's checkout holds the store as loaded until the session commits: a commit
    /// finds what the store changed since in conflict.
    async fn refresh(&self, _: &Kept<'_>, _: &mut Manifest) -> Result<usize, PersistentError> {
        Ok(0)
    }

    async fn commit(
        &self,
        kept: &Kept<'_>,
        manifest: &mut Manifest,
        room: Room,
    ) -> Result<CommitReport, PersistentError> {
        let started = Instant::now();
        let _lock = keeper::locked(kept.locks, kept.backing).await?;
        let changes = manifest.changes(kept.checkout)?;
        if changes.is_empty() {
            return Ok(CommitReport::default());
        }
        // Sizes as the walk of the checkout listed them (never a path looked up again).
        let bytes: u64 = changes.iter().map(|c| c.bytes).sum();
        let count = |kind| changes.iter().filter(|c| c.change == kind).count() as u64;
        let (created, deleted) = (count(FileChange::Created), count(FileChange::Deleted));
        room.check(bytes, created.saturating_sub(deleted))?;

        let wit: Vec<Change> = changes
            .iter()
            .map(|Changed { path, change, .. }| Change {
                path: path.clone(),
                kind: match change {
                    FileChange::Created => ChangeKind::Created,
                    FileChange::Updated => ChangeKind::Updated,
                    FileChange::Deleted => ChangeKind::Deleted,
                },
            })
            .collect();
        let on_conflict = match kept.on_conflict {
            persistent::OnConflict::Theirs => OnConflict::Theirs,
            persistent::OnConflict::Ours => OnConflict::Ours,
            persistent::OnConflict::Fail => OnConflict::Fail,
        };
        let (mut store, limits) = self.wasi(Dirs::of(kept), Access::ReadOnly)?;
        let base = manifest.store_version().unwrap_or_default().to_string();
        let called = self
            .pre
            .commit(
                &mut store,
                &limits,
                kept.virtual_path,
                &base,
                &wit,
                on_conflict,
            )
            .await;
        let committed = self.answer(called)?;

        // A change left as the store has it is not sent again: the checkout's copy is
        // its new base too.
        manifest.published(kept.checkout, &changes, committed.version)?;
        let published: Vec<(String, FileChange)> = changes
            .into_iter()
            .filter(|c| !committed.kept_theirs.contains(&c.path))
            .map(|c| (c.path, c.change))
            .collect();
        let mut report = CommitReport {
            kept_theirs: committed.kept_theirs,
            ..CommitReport::default()
        };
        for (path, change) in published {
            match change {
                FileChange::Created => report.created.push(path),
                FileChange::Updated => report.updated.push(path),
                FileChange::Deleted => report.deleted.push(path),
            }
        }
        report.bytes = bytes;
        report.ms = persistent::elapsed_ms(started);
        Ok(report)
    }
}
