//! Persistent directories kept by store components (`store = …`, see [`crate::stores`]):
//! the session table's side — when a checkout is loaded and committed, under the backing
//! tree's lock, its manifest kept beside it — while the runtime, which holds the
//! components, does the loading and committing ([`StoreBackend`]).
//!
//! A store's checkout is loaded before the session's first call ([`Sessions::load_stores`],
//! which the runtime runs before each call; components cannot load it as they first touch
//! it, as a host tree's checkout is) and is not refreshed during the session: it holds the
//! store as loaded, plus what the session changed; a commit finds what the store changed
//! since in conflict.

use super::{Session, SessionError, Sessions};
use crate::ids::{SessionId, TenantId};
use crate::mounts::{CommitAt, ResolvedMount, ResolvedPersistent, SessionVars};
use crate::persistent::{CommitReport, LoadReport, Manifest, PersistentError, Room};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What loads and commits a persistent directory through its store component.
#[async_trait::async_trait]
pub trait StoreBackend: Send + Sync {
    /// Loads `mount`'s tree into its checkout, which is empty: its manifest and what it
    /// loaded.
    async fn load(
        &self,
        session: &Session,
        mount: &ResolvedMount,
    ) -> Result<(Manifest, LoadReport), PersistentError>;

    /// Publishes what `mount`'s checkout changed since `manifest`, all of it or none, and
    /// brings `manifest` up to date.
    async fn commit(
        &self,
        session: &Session,
        mount: &ResolvedMount,
        manifest: &mut Manifest,
        room: Room,
    ) -> Result<CommitReport, PersistentError>;
}

/// The store components in effect, by the virtual path of their persistent directory.
pub type StoreBackends = BTreeMap<String, Arc<dyn StoreBackend>>;

impl Sessions {
    /// Sets the store components in effect (the runtime's, at start and each reload).
    pub fn set_stores(&self, stores: StoreBackends) {
        self.stores.store(Arc::new(stores));
    }

    /// Loads `session`'s checkouts of persistent directories kept by store components that
    /// it has not loaded yet, each under its tree's lock; the loads are reported to the
    /// trace of the call that follows (see [`super::MountDirs::take_loads`]).
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming the directory that could not be loaded (its checkout
    /// is left without a manifest: the next call tries again).
    pub async fn load_stores(&self, session: &Session) -> Result<(), SessionError> {
        let stores = session
            .mounts
            .iter()
            .filter_map(|m| Some((m, m.persistent.as_ref()?)))
            .filter(|(_, p)| p.spec.store.is_some());
        for (mount, persistent) in stores {
            if persistent.manifest.exists() {
                continue;
            }
            let failed = |source| SessionError::Commit {
                mount: mount.virtual_path.clone(),
                source,
            };
            let backend = self.backend(mount).map_err(failed)?;
            let _lock = self.lock(persistent).await.map_err(failed)?;
            empty_dir(&mount.host).map_err(failed)?;
            let (manifest, loaded) = backend.load(session, mount).await.map_err(failed)?;
            manifest.write(&persistent.manifest).map_err(failed)?;
            self.dirs.loaded(&mount.host, loaded);
        }
        Ok(())
    }

    /// Publishes the store-kept checkouts of `session` due at `at` (see
    /// [`super::dirs::commit_checkouts`]), within `room`, each under its tree's lock.
    pub(super) async fn commit_stores(
        &self,
        session: &Session,
        at: Option<CommitAt>,
        mut room: Room,
    ) -> Result<(Vec<(String, CommitReport)>, Room), SessionError> {
        let mut committed = Vec::new();
        let publishable = session
            .mounts
            .iter()
            .filter_map(|m| Some((m, super::dirs::publishable(m, at)?)))
            .filter(|(_, p)| p.spec.store.is_some());
        for (mount, persistent) in publishable {
            let failed = |source| super::dirs::commit_failed(mount, source);
            let backend = self.backend(mount).map_err(failed)?;
            let _lock = self.lock(persistent).await.map_err(failed)?;
            let mut manifest = Manifest::read(&persistent.manifest).map_err(failed)?;
            let report = backend
                .commit(session, mount, &mut manifest, room)
                .await
                .map_err(failed)?;
            manifest.write(&persistent.manifest).map_err(failed)?;
            room = room.less(report.bytes, report.created.len() as u64);
            super::dirs::log_commit(mount, &report);
            committed.push((mount.virtual_path.clone(), report));
        }
        Ok((committed, room))
    }

    /// `tenant`'s persistent directories as no session has them (their checkouts are
    /// those of a session named `-`, which none is): for what works on a backing tree
    /// alone (`hookhost persistent history`).
    ///
    /// # Errors
    ///
    /// [`SessionError`] when the tenant is not declared or a mount cannot be resolved.
    pub fn outside_sessions(&self, tenant: &TenantId) -> Result<Session, SessionError> {
        let id = SessionId::new("-").map_err(SessionError::from)?;
        let mounts = self.mounts.resolve(&SessionVars {
            data: self.dirs.data_root(),
            tenant,
            session: &id,
            workdir: None,
        })?;
        Ok(Session {
            id,
            tenant: tenant.clone(),
            workdir: None,
            mounts,
            declared: self.tenants().get(tenant)?.cloned(),
        })
    }

    /// Holds the lock of `mount`'s backing tree until the guard is dropped: what a store's
    /// `restore` changes, no load or commit sees half of.
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] when the lock cannot be taken.
    pub async fn lock_store(&self, mount: &ResolvedMount) -> Result<Box<dyn Send>, SessionError> {
        let persistent = mount
            .persistent
            .as_ref()
            .ok_or_else(|| SessionError::Commit {
                mount: mount.virtual_path.clone(),
                source: PersistentError::Stopped("not a persistent directory".into()),
            })?;
        self.lock(persistent)
            .await
            .map_err(|source| SessionError::Commit {
                mount: mount.virtual_path.clone(),
                source,
            })
    }

    fn backend(&self, mount: &ResolvedMount) -> Result<Arc<dyn StoreBackend>, PersistentError> {
        self.stores
            .load()
            .get(&mount.virtual_path)
            .cloned()
            .ok_or_else(|| PersistentError::Store {
                component: mount.virtual_path.clone(),
                why: "its store component is not loaded here (a command that runs no \
                      component: use `hookhost serve`, `call`, or `session commit`)"
                    .into(),
            })
    }

    /// Takes the lock of `persistent`'s backing tree, off the executor.
    async fn lock(
        &self,
        persistent: &ResolvedPersistent,
    ) -> Result<Box<dyn Send>, PersistentError> {
        let (locks, root) = (self.dirs.locks().clone(), persistent.backing.clone());
        tokio::task::spawn_blocking(move || locks.lock(&root))
            .await
            .map_err(|e| PersistentError::Stopped(e.to_string()))?
    }
}

/// Makes `dir` an empty directory: what a load before it left is gone.
fn empty_dir(dir: &std::path::Path) -> Result<(), PersistentError> {
    let io = |source| PersistentError::Io {
        path: dir.to_path_buf(),
        source,
    };
    // What a session left in its checkout is removed as a deleted session's is: by
    // descriptor, whatever it hid or however deep.
    crate::beneath::remove_path(dir).map_err(io)?;
    std::fs::create_dir_all(dir).map_err(io)
}
