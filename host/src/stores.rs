//! Store components: persistent directories whose backing tree a component keeps its own
//! way (`[persistent."/persistent/NAME"] store = …`, the `harness:store` world).
//!
//! Each call into a store gets a fresh instance whose WASI context holds two preopens and
//! nothing else: `/store`, the directory's backing (read-write), and `/checkout`, the
//! session's checkout — read-write for `load`, read-only for `commit`. It runs under the
//! session's limits, as any component. The session table serialises the calls for one
//! backing tree (its lock, see [`crate::sessions::stores`]); the store makes each commit
//! all or nothing, and says so in its own documentation.

use crate::abi::store::{Change, ChangeKind, OnConflict, StoreError, StorePre, Version};
use crate::component::ComponentRef;
use crate::failure::Failure;
use crate::limits::Limits;
use crate::mounts::{ResolvedMount, Scope};
use crate::persistent::{
    self, Changed, CommitReport, FileChange, LoadReport, Manifest, PersistentError, Room,
};
use crate::sandbox::{Access, Grants, Sandbox, Settings, StoreState};
use crate::sessions::{Session, StoreBackend};
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
}

impl StoreComponent {
    pub fn new(pre: StorePre, component: ComponentRef, sandbox: Arc<Sandbox>) -> StoreComponent {
        StoreComponent {
            pre,
            component,
            sandbox,
        }
    }

    /// Whether it keeps past versions (`history`, `restore`).
    pub fn keeps_versions(&self) -> bool {
        self.pre.keeps_versions()
    }

    /// A store for one call: `/store` on `mount`'s backing, `/checkout` on its checkout
    /// (`checkout` access).
    fn wasi(
        &self,
        mount: &ResolvedMount,
        workdir: Option<&Path>,
        checkout: Access,
        limits: &Limits,
    ) -> Result<Store<StoreState>, PersistentError> {
        let backing = backing(mount)?;
        let under = |dir: &Path| {
            workdir
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
            synthetic(STORE_PATH, backing.to_path_buf()),
            synthetic(CHECKOUT_PATH, mount.host.clone()),
        ];
        let grants = Grants::from([
            (STORE_PATH.to_string(), Access::ReadWrite),
            (CHECKOUT_PATH.to_string(), checkout),
        ]);
        self.sandbox
            .store(&mounts, &grants, &Settings::new(), limits)
            .map_err(|e| self.failed(e))
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

    /// The versions the store keeps of `mount`, oldest first.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Store`] when it keeps none or fails.
    pub async fn history(
        &self,
        mount: &ResolvedMount,
        limits: &Limits,
    ) -> Result<Vec<Version>, PersistentError> {
        let mut store = self.wasi(mount, None, Access::ReadOnly, limits)?;
        let called = self
            .pre
            .history(&mut store, limits, &mount.virtual_path)
            .await;
        self.versions_answer(called)
    }

    /// Makes version `id` of `mount` the newest: its new version.
    ///
    /// # Errors
    ///
    /// [`PersistentError::Store`] when it keeps no versions, has no such one, or fails.
    pub async fn restore(
        &self,
        mount: &ResolvedMount,
        id: &str,
        limits: &Limits,
    ) -> Result<String, PersistentError> {
        let mut store = self.wasi(mount, None, Access::ReadOnly, limits)?;
        let called = self
            .pre
            .restore(&mut store, limits, &mount.virtual_path, id)
            .await;
        self.versions_answer(called)
    }
}

/// `mount`'s backing tree.
fn backing(mount: &ResolvedMount) -> Result<&Path, PersistentError> {
    mount
        .persistent
        .as_ref()
        .map(|p| p.backing.as_path())
        .ok_or_else(|| {
            PersistentError::Stopped(format!("{} is not persistent", mount.virtual_path))
        })
}

#[async_trait::async_trait]
impl StoreBackend for StoreComponent {
    async fn load(
        &self,
        session: &Session,
        mount: &ResolvedMount,
    ) -> Result<(Manifest, LoadReport), PersistentError> {
        let started = Instant::now();
        let limits = session.limits();
        let mut store = self.wasi(
            mount,
            session.workdir.as_deref(),
            Access::ReadWrite,
            &limits,
        )?;
        let loaded = self.answer(
            self.pre
                .load(&mut store, &limits, &mount.virtual_path)
                .await,
        )?;
        let (manifest, files, bytes) = Manifest::loaded_by_store(&mount.host, loaded.version)?;
        let report = LoadReport {
            files: usize::try_from(files).unwrap_or(usize::MAX),
            bytes,
            ms: persistent::elapsed_ms(started),
        };
        Ok((manifest, report))
    }

    async fn commit(
        &self,
        session: &Session,
        mount: &ResolvedMount,
        manifest: &mut Manifest,
        room: Room,
    ) -> Result<CommitReport, PersistentError> {
        let started = Instant::now();
        let changes = manifest.changes(&mount.host)?;
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
        let on_conflict = match mount.persistent.as_ref().map(|p| p.spec.on_conflict) {
            Some(persistent::OnConflict::Theirs) => OnConflict::Theirs,
            Some(persistent::OnConflict::Ours) => OnConflict::Ours,
            _ => OnConflict::Fail,
        };
        let limits = session.limits();
        let mut store = self.wasi(mount, session.workdir.as_deref(), Access::ReadOnly, &limits)?;
        let base = manifest.store_version().unwrap_or_default().to_string();
        let called = self
            .pre
            .commit(
                &mut store,
                &limits,
                &mount.virtual_path,
                &base,
                &wit,
                on_conflict,
            )
            .await;
        let committed = self.answer(called)?;

        // A change left as the store has it is not sent again: the checkout's copy is
        // its new base too.
        manifest.published(&mount.host, &changes, committed.version)?;
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
