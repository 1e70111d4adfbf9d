//! Who keeps a persistent directory's backing tree ([`Keeper`]): the host itself, as a
//! tree of files ([`HostTree`], over [`Backing`]), or a store component its own way
//! (`crate::stores`). The session side — when a checkout is loaded, refreshed, committed,
//! and what is reported — is written once over this trait (`crate::sessions::kept`).
//!
//! A keeper takes its tree's lock itself, for each operation, from the [`StoreLocks`] it
//! is handed ([`locked`] does so off the executor): every host reaching a tree must
//! serialise through the same locks.

use super::{
    Backing, CommitReport, LoadReport, Manifest, OnConflict, PersistentError, Room, StoreLocks,
};
use crate::ids::TenantId;
use crate::limits::Limits;
use crate::network::{Allow, RequestLog};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One persistent directory of one session, as its keeper is asked about it.
#[derive(Clone)]
pub struct Kept<'a> {
    /// Where the session sees it (`/persistent/NAME`).
    pub virtual_path: &'a str,
    /// The session's checkout.
    pub checkout: &'a Path,
    /// The backing tree.
    pub backing: &'a Path,
    /// What a commit does with a file changed on both sides.
    pub on_conflict: OnConflict,
    /// The session's working directory, when it has one.
    pub workdir: Option<&'a Path>,
    /// The session's limits: what bounds a keeper that runs guest code.
    pub limits: &'a Limits,
    /// The locks of backing trees.
    pub locks: &'a Arc<dyn StoreLocks>,
    /// The session's tenant: `{tenant}` in a store component's settings.
    pub tenant: &'a TenantId,
    /// The session's tenant's network ceiling: what a store component's grant cannot
    /// exceed.
    pub ceiling: Option<&'a Arc<Allow>>,
    /// Where a store component's network requests are recorded for a trace (a call's, or
    /// a commit's outside one); when `None`, only the host's log says them.
    pub requests: Option<&'a Arc<RequestLog>>,
}

/// What loads a persistent directory's checkout from its backing tree, brings it up to
/// date and publishes what the session changed. Each takes the tree's lock itself.
#[async_trait::async_trait]
pub trait Keeper: Send + Sync {
    /// Loads the tree into `kept`'s checkout, which is empty: its manifest and what it
    /// loaded.
    async fn load(&self, kept: &Kept<'_>) -> Result<(Manifest, LoadReport), PersistentError>;

    /// Brings what the session has not changed in the checkout up to what other sessions
    /// committed since `manifest`, and `manifest` with it: how many files it brought. A
    /// keeper whose checkout holds the tree as loaded until the session commits (a store
    /// component's: a commit finds what the store changed since in conflict) brings none.
    async fn refresh(
        &self,
        kept: &Kept<'_>,
        manifest: &mut Manifest,
    ) -> Result<usize, PersistentError>;

    /// Publishes what the checkout changed since `manifest`, all of it or none, within
    /// `room`, and brings `manifest` up to date.
    async fn commit(
        &self,
        kept: &Kept<'_>,
        manifest: &mut Manifest,
        room: Room,
    ) -> Result<CommitReport, PersistentError>;
}

/// The host's own keeping: the backing tree is a tree of files (see [`Backing`]); its
/// work, file system work under the lock, runs off the executor.
#[derive(Debug, Default)]
pub struct HostTree;

impl HostTree {
    /// Runs `work` on `kept`'s backing tree and checkout off the executor.
    async fn blocking<T: Send + 'static>(
        kept: &Kept<'_>,
        work: impl FnOnce(Backing, PathBuf) -> Result<T, PersistentError> + Send + 'static,
    ) -> Result<T, PersistentError> {
        let backing = Backing::locked_by(kept.backing.to_path_buf(), kept.locks.clone());
        let checkout = kept.checkout.to_path_buf();
        tokio::task::spawn_blocking(move || work(backing, checkout))
            .await
            .map_err(|e| PersistentError::Stopped(e.to_string()))?
    }
}

#[async_trait::async_trait]
impl Keeper for HostTree {
    async fn load(&self, kept: &Kept<'_>) -> Result<(Manifest, LoadReport), PersistentError> {
        HostTree::blocking(kept, |backing, checkout| backing.load(&checkout)).await
    }

    async fn refresh(
        &self,
        kept: &Kept<'_>,
        manifest: &mut Manifest,
    ) -> Result<usize, PersistentError> {
        let mine = std::mem::take(manifest);
        let (brought, refreshed) = HostTree::blocking(kept, |backing, checkout| {
            let mut manifest = mine;
            let brought = backing.refresh(&checkout, &mut manifest)?;
            Ok((brought, manifest))
        })
        .await?;
        *manifest = refreshed;
        Ok(brought)
    }

    async fn commit(
        &self,
        kept: &Kept<'_>,
        manifest: &mut Manifest,
        room: Room,
    ) -> Result<CommitReport, PersistentError> {
        let on_conflict = kept.on_conflict;
        let mine = std::mem::take(manifest);
        let (report, committed) = HostTree::blocking(kept, move |backing, checkout| {
            let mut manifest = mine;
            let report = backing.commit(&checkout, &mut manifest, on_conflict, room);
            Ok((report, manifest))
        })
        .await?;
        // A failed commit leaves the manifest as it was, so it goes back either way.
        *manifest = committed;
        report
    }
}

/// Takes the lock of the backing tree at `root` from `locks`, off the executor; held until
/// the guard is dropped.
///
/// # Errors
///
/// [`PersistentError::Lock`] when it cannot be taken.
pub async fn locked(
    locks: &Arc<dyn StoreLocks>,
    root: &Path,
) -> Result<Box<dyn Send>, PersistentError> {
    let (locks, root) = (locks.clone(), root.to_path_buf());
    tokio::task::spawn_blocking(move || locks.lock(&root))
        .await
        .map_err(|e| PersistentError::Stopped(e.to_string()))?
}
