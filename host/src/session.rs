//! A session as the runtime sees it: who owns it and where its mounts live.

use crate::ids::{SessionId, TenantId};
use crate::limits::{LimitOverrides, Limits};
use crate::mounts::ResolvedMount;
use std::path::Path;

/// Names one session across tenants: a session id means something only with its tenant.
pub type SessionKey = (TenantId, SessionId);

/// One agent session: its id, its tenant, its mounts resolved to host directories, and
/// its tenant's limits.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: SessionId,
    pub tenant: TenantId,
    pub(crate) mounts: Vec<ResolvedMount>,
    pub(crate) tenant_limits: LimitOverrides,
}

impl Session {
    /// The limits of this session's calls before a hook's or tool's own: the defaults with
    /// the tenant's overrides.
    pub fn limits(&self) -> Limits {
        Limits::default().with(&self.tenant_limits)
    }

    /// The key of this session.
    pub fn key(&self) -> SessionKey {
        (self.tenant.clone(), self.id.clone())
    }

    /// The session's mounts.
    pub fn mounts(&self) -> &[ResolvedMount] {
        &self.mounts
    }

    /// The host directory behind `virtual_path` (such as `/workspace`), if it is a mount.
    pub fn host_dir(&self, virtual_path: &str) -> Option<&Path> {
        self.mounts
            .iter()
            .find(|m| m.virtual_path == virtual_path)
            .map(|m| m.host.as_path())
    }
}
