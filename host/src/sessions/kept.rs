//! A session's persistent directories, whoever keeps their backing trees (see
//! [`crate::persistent::keeper`]): when a checkout is loaded, brought up to date and
//! committed, its manifest kept beside it, written once for the host's trees and store
//! components alike.
//!
//! - **Load**: before a call, for the persistent directories it is granted that the
//!   session has not loaded yet ([`Sessions::load`]; a checkout with a manifest was
//!   loaded already, by this process or one before it, and may hold changes). Each load
//!   empties the checkout first: what a load that stopped half-way left is gone.
//! - **Refresh**: before each call, the loaded checkouts brought up to what other sessions
//!   committed since ([`Sessions::refresh`]; a store component's holds the store as
//!   loaded until the session commits).
//! - **Commit**: at each directory's boundary ([`Sessions::commit`]), each all or nothing,
//!   within the tenant's quota; the first that fails (a conflict) stops the commit and
//!   keeps its checkout.

use super::{Session, SessionError, Sessions};
use crate::ids::{SessionId, TenantId};
use crate::limits::Limits;
use crate::mounts::{CommitAt, ResolvedMount, ResolvedPersistent, SessionVars};
use crate::network::{Allow, RequestLog};
use crate::persistent::keeper::{self, HostTree, Keeper, Kept};
use crate::persistent::{CommitReport, Manifest, OnConflict, PersistentError};
use std::sync::Arc;

impl Sessions {
    /// Loads the checkouts of `session`'s persistent directories that `granted` names and
    /// that it has not loaded yet, each through its keeper; the loads are reported to the
    /// trace of the call that follows (see [`super::MountDirs::take_loads`]); a store
    /// component's network requests are recorded in `requests`, the call's.
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming the directory that could not be loaded (its checkout
    /// is left without a manifest: the next call tries again).
    pub async fn load(
        &self,
        session: &Session,
        granted: impl Fn(&str) -> bool,
        requests: &Arc<RequestLog>,
    ) -> Result<(), SessionError> {
        let unloaded = session
            .mounts
            .iter()
            .filter(|m| granted(&m.virtual_path))
            .filter_map(|m| Some((m, m.persistent.as_ref()?)))
            .filter(|(_, p)| !p.manifest.exists());
        let bounds = self.bounds(&session.tenant);
        for (mount, persistent) in unloaded {
            let failed = |source| SessionError::Commit {
                mount: mount.virtual_path.clone(),
                source,
            };
            self.dirs.ensure(mount).map_err(SessionError::from)?;
            empty_dir(&mount.host).map_err(failed)?;
            let kept = self.kept(session, mount, persistent, &bounds, Some(requests));
            let keeper = self.keeper(mount).map_err(failed)?;
            let (manifest, loaded) = keeper.load(&kept).await.map_err(failed)?;
            manifest.write(&persistent.manifest).map_err(failed)?;
            self.dirs.loaded(&mount.host, loaded);
        }
        Ok(())
    }

    /// Brings `session`'s loaded checkouts up to what other sessions committed since,
    /// keeping what it changed: before each call. A checkout that cannot be refreshed is
    /// left as it is, and logged: the call goes on with what the session had.
    pub async fn refresh(&self, session: &Session) {
        let bounds = self.bounds(&session.tenant);
        let loaded = session
            .mounts
            .iter()
            .filter_map(|m| Some((m, m.persistent.as_ref()?)))
            .filter(|(_, p)| p.manifest.exists());
        for (mount, persistent) in loaded {
            let kept = self.kept(session, mount, persistent, &bounds, None);
            let refreshed = async {
                let keeper = self.keeper(mount)?;
                let mut manifest = Manifest::read(&persistent.manifest)?;
                let brought = keeper.refresh(&kept, &mut manifest).await?;
                if brought > 0 {
                    manifest.write(&persistent.manifest)?;
                }
                Ok::<_, PersistentError>(brought)
            };
            match refreshed.await {
                Ok(0) => {}
                Ok(files) => tracing::info!(
                    target: "hookhost::trace",
                    kind = "persistent_dir.refreshed",
                    mount = mount.virtual_path,
                    files,
                ),
                Err(e) => {
                    tracing::warn!(mount = mount.virtual_path, error = %e, "persistent directory not refreshed")
                }
            }
        }
    }

    /// Publishes `session`'s checkouts whose boundary is `at` — every one for `None`: the
    /// session's end, an explicit commit — that were loaded, each all or nothing, in
    /// order, within its tenant's quota; stops at the first that fails (a conflict:
    /// nothing of it applied, its checkout kept). Read-only ones are never published.
    /// Returns what each published. A store component's network requests are recorded
    /// in `requests` when given (the trace of the call or commit).
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] naming the mount that could not be published.
    pub async fn commit(
        &self,
        session: &Session,
        at: Option<CommitAt>,
        requests: Option<&Arc<RequestLog>>,
    ) -> Result<Vec<(String, CommitReport)>, SessionError> {
        self.publish(session, at, None, requests).await
    }

    /// Publishes every loaded checkout of `session` now, as [`Sessions::commit`] does, a
    /// file changed on both sides settled by `resolve` this once instead of each
    /// directory's `on_conflict`: how a session settles a conflict (`hookhost/commit` with
    /// `resolve`, `session commit --resolve`).
    ///
    /// # Errors
    ///
    /// As [`Sessions::commit`].
    pub async fn commit_resolving(
        &self,
        session: &Session,
        resolve: Option<OnConflict>,
        requests: Option<&Arc<RequestLog>>,
    ) -> Result<Vec<(String, CommitReport)>, SessionError> {
        self.publish(session, None, resolve, requests).await
    }

    async fn publish(
        &self,
        session: &Session,
        at: Option<CommitAt>,
        resolve: Option<OnConflict>,
        requests: Option<&Arc<RequestLog>>,
    ) -> Result<Vec<(String, CommitReport)>, SessionError> {
        if !self.has_due(session, at) {
            return Ok(Vec::new());
        }
        let mut room = self.room(&session.tenant).await;
        let bounds = self.bounds(&session.tenant);
        let mut committed = Vec::new();
        for mount in &session.mounts {
            let Some(persistent) = publishable(mount, at) else {
                continue;
            };
            let failed = |source| commit_failed(mount, source);
            let mut kept = self.kept(session, mount, persistent, &bounds, requests);
            kept.on_conflict = resolve.unwrap_or(kept.on_conflict);
            let keeper = self.keeper(mount).map_err(failed)?;
            let mut manifest = Manifest::read(&persistent.manifest).map_err(failed)?;
            let report = keeper
                .commit(&kept, &mut manifest, room)
                .await
                .map_err(failed)?;
            manifest.write(&persistent.manifest).map_err(failed)?;
            room = room.less(report.bytes, report.created.len() as u64);
            log_commit(mount, &report);
            committed.push((mount.virtual_path.clone(), report));
        }
        Ok(committed)
    }

    /// Whether a commit of `session` at `at` has anything to publish: a persistent
    /// directory loaded and due then. What most calls find is no, at the cost of a stat or
    /// none.
    pub fn has_due(&self, session: &Session, at: Option<CommitAt>) -> bool {
        session.mounts.iter().any(|m| publishable(m, at).is_some())
    }

    /// `tenant`'s persistent directories as no session has them (their checkouts are
    /// those of a session named `-`, which none is): for what works on a backing tree
    /// alone (`hookhost persistent history`).
    ///
    /// # Errors
    ///
    /// [`SessionError`] when the tenant is not declared or a mount cannot be resolved.
    pub fn outside_sessions(&self, tenant: &TenantId) -> Result<Session, SessionError> {
        self.tenants().get(tenant)?;
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
        })
    }

    /// Holds the lock of `mount`'s backing tree until the guard is dropped: what a store's
    /// `restore` changes, no load or commit sees half of.
    ///
    /// # Errors
    ///
    /// [`SessionError::Commit`] when the lock cannot be taken.
    pub async fn lock_backing(&self, mount: &ResolvedMount) -> Result<Box<dyn Send>, SessionError> {
        let failed = |source| SessionError::Commit {
            mount: mount.virtual_path.clone(),
            source,
        };
        let persistent = mount.persistent.as_ref().ok_or_else(|| {
            failed(PersistentError::Stopped(
                "not a persistent directory".into(),
            ))
        })?;
        keeper::locked(self.dirs.locks(), &persistent.backing)
            .await
            .map_err(failed)
    }

    /// How `mount` of `session` is shown to its keeper.
    fn kept<'a>(
        &'a self,
        session: &'a Session,
        mount: &'a ResolvedMount,
        persistent: &'a ResolvedPersistent,
        bounds: &'a Bounds,
        requests: Option<&'a Arc<RequestLog>>,
    ) -> Kept<'a> {
        Kept {
            virtual_path: &mount.virtual_path,
            checkout: &mount.host,
            backing: &persistent.backing,
            on_conflict: persistent.spec.on_conflict,
            workdir: session.workdir.as_deref(),
            limits: &bounds.limits,
            locks: self.dirs.locks(),
            tenant: &session.tenant,
            ceiling: bounds.ceiling.as_ref(),
            requests,
        }
    }

    /// What bounds the keepers' calls for `tenant`'s directories, looked up once for all
    /// of them.
    fn bounds(&self, tenant: &TenantId) -> Bounds {
        let tenants = self.tenants();
        Bounds {
            limits: tenants.limits(tenant),
            ceiling: tenants.network_ceiling(tenant),
        }
    }

    /// Who keeps `mount`'s backing tree: its store component, or the host.
    fn keeper(&self, mount: &ResolvedMount) -> Result<Arc<dyn Keeper>, PersistentError> {
        let store = mount
            .persistent
            .as_ref()
            .and_then(|p| p.spec.store.as_ref());
        if store.is_none() {
            return Ok(Arc::new(HostTree));
        }
        self.in_effect
            .keeper(&mount.virtual_path)
            .ok_or_else(|| PersistentError::Store {
                component: mount.virtual_path.clone(),
                why: "its store component is not loaded here (a command that runs no \
                      component: use `hookhost serve`, `call`, or `session commit`)"
                    .into(),
            })
    }
}

/// A tenant's limits and network ceiling, as a keeper that runs guest code is bounded.
struct Bounds {
    limits: Limits,
    ceiling: Option<Arc<Allow>>,
}

/// `mount`'s persistent directory when it is one whose boundary is `at` (every one for
/// `None`).
pub(super) fn due(mount: &ResolvedMount, at: Option<CommitAt>) -> Option<&ResolvedPersistent> {
    let persistent = mount.persistent.as_ref()?;
    at.is_none_or(|at| at == persistent.spec.commit)
        .then_some(persistent)
}

/// `mount`'s persistent directory when a commit at `at` publishes it: due then, writable,
/// and loaded (its manifest is there).
fn publishable(mount: &ResolvedMount, at: Option<CommitAt>) -> Option<&ResolvedPersistent> {
    due(mount, at).filter(|p| !mount.read_only() && p.manifest.exists())
}

/// The error of `mount`'s failed commit, logged on `hookhost::trace`.
fn commit_failed(mount: &ResolvedMount, source: PersistentError) -> SessionError {
    tracing::info!(
        target: "hookhost::trace",
        kind = "persistent_dir.commit.failed",
        mount = mount.virtual_path,
        reason = %source,
    );
    SessionError::Commit {
        mount: mount.virtual_path.clone(),
        source,
    }
}

/// What `mount`'s commit published, logged on `hookhost::trace`.
fn log_commit(mount: &ResolvedMount, report: &CommitReport) {
    if !report.is_empty() {
        tracing::info!(
            target: "hookhost::trace",
            kind = "persistent_dir.commit.succeeded",
            mount = mount.virtual_path,
            created = report.created.len(),
            updated = report.updated.len(),
            deleted = report.deleted.len(),
            kept_theirs = report.kept_theirs.len(),
            bytes = report.bytes,
            ms = report.ms,
        );
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
    std::fs::create_dir_all(dir).map_err(io)?;
    crate::beneath::empty(dir).map_err(io)
}
