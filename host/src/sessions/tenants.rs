//! Tenants as sessions see them: who may have sessions, how many, where they work, what
//! disk they may fill, under which limits, and the token that names them.
//!
//! Security rule: tenancy is closed as soon as one tenant is declared — then a session of
//! an undeclared tenant is refused; with none declared every session is the default
//! tenant's (or any id's, from the command line).

use super::quota::Quota;
use super::table::SessionError;
use crate::config::{Secret, WorkdirTemplate};
use crate::ids::TenantId;
use crate::limits::LimitOverrides;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A declared tenant's bounds.
#[derive(Debug, Clone, Default)]
pub struct TenantPolicy {
    /// The bearer token that names it to `serve --http`.
    pub token: Option<Secret>,
    pub max_sessions: Option<usize>,
    pub quota: Quota,
    pub limits: LimitOverrides,
    /// Where its `serve` sessions work.
    pub workdir: Option<WorkdirTemplate>,
}

/// The declared tenants, and where `serve` sessions work by default.
#[derive(Debug, Default)]
pub struct Tenants {
    declared: BTreeMap<TenantId, TenantPolicy>,
    /// `[serve] workdir`: where sessions made by `serve` work, unless their tenant says.
    serve_workdir: Option<WorkdirTemplate>,
}

impl Tenants {
    pub fn new(
        declared: BTreeMap<TenantId, TenantPolicy>,
        serve_workdir: Option<WorkdirTemplate>,
    ) -> Tenants {
        Tenants {
            declared,
            serve_workdir,
        }
    }

    /// Whether tenants are declared (then only they may have sessions).
    pub fn is_closed(&self) -> bool {
        !self.declared.is_empty()
    }

    /// `tenant`'s declaration; an error when tenancy is closed and it is not declared.
    ///
    /// # Errors
    ///
    /// [`SessionError::UnknownTenant`].
    pub fn policy(&self, tenant: &TenantId) -> Result<Option<&TenantPolicy>, SessionError> {
        match self.declared.get(tenant) {
            None if self.is_closed() => Err(SessionError::UnknownTenant {
                tenant: tenant.to_string(),
            }),
            found => Ok(found),
        }
    }

    /// `tenant`'s quota (none when undeclared).
    pub fn quota(&self, tenant: &TenantId) -> Quota {
        self.declared
            .get(tenant)
            .map(|t| t.quota)
            .unwrap_or_default()
    }

    /// The tenants that have a disk quota.
    pub fn with_quota(&self) -> impl Iterator<Item = &TenantId> {
        self.declared
            .iter()
            .filter(|(_, t)| t.quota.is_set())
            .map(|(id, _)| id)
    }

    /// The tenants' bearer tokens, for the HTTP front end.
    pub fn tokens(&self) -> Vec<(Vec<u8>, TenantId)> {
        self.declared
            .iter()
            .filter_map(|(id, t)| {
                Some((t.token.as_ref()?.expose().as_bytes().to_vec(), id.clone()))
            })
            .collect()
    }

    /// The working directory of a session `serve` makes for `tenant`: its tenant's
    /// `workdir`, else `[serve] workdir`, else none. (`serve --workdir` is the caller's.)
    ///
    /// # Errors
    ///
    /// [`SessionError::Workdir`] when the directory cannot be found or made.
    pub fn serve_workdir(&self, tenant: &TenantId) -> Result<Option<PathBuf>, SessionError> {
        let template = self
            .declared
            .get(tenant)
            .and_then(|t| t.workdir.as_ref())
            .or(self.serve_workdir.as_ref());
        template
            .map(|t| {
                t.resolve(tenant).map_err(|source| SessionError::Workdir {
                    path: PathBuf::from(t.as_str()),
                    source,
                })
            })
            .transpose()
    }
}
