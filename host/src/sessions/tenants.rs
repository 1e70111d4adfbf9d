//! Tenants: who may have sessions, and everything the config says of each — how many
//! sessions, where they work, what disk they may fill, under which limits, through which
//! chain, which tools, whether traced, how its shell is confined, and the token that names
//! it. One [`Tenant`] holds all of it; [`Tenants`] holds every declared one with their
//! rates' state, as one value that a reload replaces whole (inside the runtime's snapshot
//! of the config in effect). A call reads its tenant through its [`Caller`].
//!
//! Security rule: tenancy is closed as soon as one tenant is declared — then a session of
//! an undeclared tenant is refused; with none declared every session is the default
//! tenant's (or any id's, from the command line).

use super::Session;
use super::quota::Quota;
use super::rate::{Admitted, RateRefusal, Rates};
use super::table::SessionError;
use crate::ids::{TenantId, ToolMatch};
use crate::limits::{LimitOverrides, Limits, RateLimit, ShellLimitOverrides};
use crate::network::RequestLog;
use crate::secret::TokenDigest;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A declared tenant (`[tenants.ID]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tenant {
    /// The SHA-256 of the bearer token that names it to `serve --http`.
    pub token: Option<TokenDigest>,
    pub max_sessions: Option<usize>,
    pub quota: Quota,
    /// Over the defaults for every call of its sessions: a component's (whose own limits
    /// win), and `bash`'s and upstream servers' time (`deadline_ms`) and output
    /// (`max_output_bytes`).
    pub limits: LimitOverrides,
    /// Where its `serve` sessions work.
    pub workdir: Option<WorkdirTemplate>,
    /// Its chain: hook names, outermost first; the whole chain when `None`.
    pub hooks: Option<Vec<String>>,
    /// The tools it may call; every tool when `None`.
    pub tools: Option<ToolMatch>,
    /// The upstream servers' resources it may list and read, by URI; every one when `None`.
    pub resources: Option<ToolMatch>,
    /// The upstream servers' prompts it may list and get, by name as served; every one
    /// when `None`.
    pub prompts: Option<ToolMatch>,
    /// Whether its sessions are traced; `[trace] enabled` when `None`.
    pub trace: Option<bool>,
    /// `[tenants.ID.bash] network`, which replaces `[bash]`'s.
    pub shell_network: Option<crate::limits::ShellNetwork>,
    /// `[tenants.ID.bash] limits`, over `[bash]`'s.
    pub shell_limits: ShellLimitOverrides,
    /// The most its components may reach (see [`crate::network`]); their grants alone
    /// when `None`.
    pub network: Option<Arc<crate::network::Allow>>,
    /// How fast its calls may come, and how many at once.
    pub rate: RateLimit,
}

/// What a tenant may be allowed to do: the question [`Tenants::authorize`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action<'a> {
    /// Call, and see listed, the tool of this name.
    Call(&'a str),
    /// List and read the upstream resource of this URI.
    Read(&'a str),
    /// List and get the upstream prompt of this name (as served, prefix included).
    Prompt(&'a str),
}

impl Tenant {
    /// Whether its allow-lists let it do `action` (no list: everything of that kind).
    pub fn allows(&self, action: Action<'_>) -> bool {
        let (list, name) = match action {
            Action::Call(tool) => (&self.tools, tool),
            Action::Read(uri) => (&self.resources, uri),
            Action::Prompt(prompt) => (&self.prompts, prompt),
        };
        list.as_ref().is_none_or(|m| m.matches(name))
    }
}

/// The declared tenants, their rates' state, and where `serve` sessions work by default.
#[derive(Default)]
pub struct Tenants {
    declared: BTreeMap<TenantId, Arc<Tenant>>,
    /// `[serve] workdir`: where sessions made by `serve` work, unless their tenant says.
    serve_workdir: Option<WorkdirTemplate>,
    /// Each rate-limited tenant's bucket and calls running.
    rates: Rates,
}

impl Tenants {
    pub fn new(
        declared: BTreeMap<TenantId, Tenant>,
        serve_workdir: Option<WorkdirTemplate>,
    ) -> Tenants {
        let mut tenants = Tenants {
            declared: declared
                .into_iter()
                .map(|(id, t)| (id, Arc::new(t)))
                .collect(),
            serve_workdir,
            rates: Rates::default(),
        };
        tenants.rates = tenants.rates.renewed(&tenants);
        tenants
    }

    /// These tenants with the rates' state of `old` (the config a reload replaces) where a
    /// tenant's limits did not change: a reload neither refills a bucket nor forgets the
    /// calls running (see [`Rates::renewed`]).
    #[must_use]
    pub fn after(mut self, old: &Tenants) -> Tenants {
        self.rates = old.rates.renewed(&self);
        self
    }

    /// Admits a call of `tenant` within its rate limits (see [`super::rate`]): its place
    /// among the tenant's running calls, held until dropped.
    ///
    /// # Errors
    ///
    /// [`RateRefusal`] saying which limit, and when to retry.
    pub fn admit_rate(&self, tenant: &TenantId) -> Result<Admitted, RateRefusal> {
        self.rates.admit(tenant)
    }

    /// `tenant`'s rate limits and, when they bound calls at once, how many run now (see
    /// [`Rates::state`]); `None` when it has none.
    pub fn rate_state(&self, tenant: &TenantId) -> Option<(RateLimit, Option<u32>)> {
        self.rates.state(tenant)
    }

    /// `session` as a caller under these tenants.
    ///
    /// # Errors
    ///
    /// [`SessionError::UnknownTenant`] when its tenant is no longer declared (a reload
    /// removed it).
    pub fn caller<'a>(
        &'a self,
        session: &'a Session,
        requests: &'a Arc<RequestLog>,
    ) -> Result<Caller<'a>, SessionError> {
        Ok(Caller {
            session,
            tenant: self.get(&session.tenant)?.map(Arc::as_ref),
            requests,
        })
    }

    /// The limits of `tenant`'s calls before a hook's or tool's own (see [`Caller::limits`]).
    pub fn limits(&self, tenant: &TenantId) -> Limits {
        let overrides = self.declared.get(tenant).map(|t| t.limits);
        Limits::default().with(&overrides.unwrap_or_default())
    }

    /// `tenant`'s network ceiling, which no component's grant exceeds in its sessions: none
    /// for a tenant that sets none, or on a host that declares no tenants; nothing at all
    /// for a tenant no longer declared (a reload removed it while its session ran), so a
    /// store's load or commit of that session fails closed.
    pub fn network_ceiling(&self, tenant: &TenantId) -> Option<Arc<crate::network::Allow>> {
        match self.declared.get(tenant) {
            Some(declared) => declared.network.clone(),
            None if self.is_closed() => Some(Arc::default()),
            None => None,
        }
    }

    /// The declared tenants, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&TenantId, &Tenant)> {
        self.declared.iter().map(|(id, t)| (id, t.as_ref()))
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
    pub fn get(&self, tenant: &TenantId) -> Result<Option<&Arc<Tenant>>, SessionError> {
        match self.declared.get(tenant) {
            None if self.is_closed() => Err(SessionError::UnknownTenant {
                tenant: tenant.to_string(),
            }),
            found => Ok(found),
        }
    }

    /// Whether `tenant` may do `action`: the one place a tenant's allow-lists are read,
    /// for calls and listings alike. An undeclared tenant (a host without tenants) may do
    /// everything; whether its token lets a request in at all is the endpoint's
    /// (`mcp/http.rs`), and its rate the runtime's gate (`Runtime::admit`).
    pub fn authorize(&self, tenant: &TenantId, action: Action<'_>) -> bool {
        self.declared.get(tenant).is_none_or(|t| t.allows(action))
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

    /// The digests of the tenants' bearer tokens, for the HTTP front end.
    pub fn tokens(&self) -> Vec<(TokenDigest, TenantId)> {
        self.declared
            .iter()
            .filter_map(|(id, t)| Some((t.token?, id.clone())))
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

/// A session making a call, with its tenant as the config the call began with declares it:
/// what the chain, the tools and the trace read a tenant's bounds from. It derefs to the
/// [`Session`].
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub session: &'a Session,
    /// Its tenant's declaration; `None` for an undeclared tenant (no bounds of its own).
    pub tenant: Option<&'a Tenant>,
    /// Where its components' network requests are recorded as they end, for its trace.
    pub requests: &'a Arc<RequestLog>,
}

impl Caller<'_> {
    /// The limits of its calls before a hook's or tool's own: the defaults with the
    /// tenant's overrides.
    pub fn limits(&self) -> Limits {
        Limits::default().with(&self.tenant_limits())
    }

    /// What a component granted `grant` may reach in this caller's tenant.
    pub fn reach(&self, grant: Option<&Arc<crate::network::Allow>>) -> crate::network::Reach {
        crate::network::Reach {
            grant: grant.cloned(),
            ceiling: self.tenant.and_then(|t| t.network.clone()),
        }
    }

    /// The limits its tenant sets itself (none for an undeclared tenant): what bounds the
    /// calls that are not components' (`bash`, upstream servers).
    pub fn tenant_limits(&self) -> LimitOverrides {
        self.tenant.map(|t| t.limits).unwrap_or_default()
    }
}

impl std::ops::Deref for Caller<'_> {
    type Target = Session;

    fn deref(&self) -> &Session {
        self.session
    }
}

/// Where the sessions `serve` makes work: an absolute path, or one starting with `{cwd}`
/// (the directory hookhost was started in — an MCP client starts it in the user's
/// project), in which `{tenant}` may stand for a whole segment (the tenant id, encoded so
/// it cannot traverse). A directory named through `{tenant}` is created when missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkdirTemplate(String);

impl WorkdirTemplate {
    /// # Errors
    ///
    /// What is wrong with `template`.
    pub fn new(template: &str) -> Result<WorkdirTemplate, String> {
        if !(template.starts_with('/') || template.starts_with("{cwd}")) {
            return Err("a working directory is an absolute path or starts with {cwd}".into());
        }
        for (i, segment) in template.split('/').enumerate() {
            let ok = match segment {
                "." | ".." => false,
                "{cwd}" => i == 0,
                "{tenant}" => true,
                other => !other.contains(['{', '}']),
            };
            if !ok {
                return Err(format!(
                    "{segment:?}: no '.' or '..'; {{cwd}} only at the start, {{tenant}} only as a whole segment"
                ));
            }
        }
        Ok(WorkdirTemplate(template.to_string()))
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The directory for `tenant`'s sessions, made (0700) when the template names the
    /// tenant and it is missing.
    ///
    /// # Errors
    ///
    /// When the current directory is unknown or the directory cannot be made.
    pub fn resolve(&self, tenant: &TenantId) -> std::io::Result<PathBuf> {
        let mut path = self.0.replace("{tenant}", &tenant.path_segment());
        if path.starts_with("{cwd}") {
            let cwd = std::env::current_dir()?;
            path = path.replacen("{cwd}", &cwd.to_string_lossy(), 1);
        }
        if self.0.contains("{tenant}") {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&path)?;
        }
        Ok(PathBuf::from(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ToolMatch;

    #[test]
    fn a_tenant_is_authorized_by_the_list_of_each_kind_alone() {
        let alpha = TenantId::new("alpha").unwrap();
        let tenant = Tenant {
            tools: Some(ToolMatch::new(&["read_*"])),
            prompts: Some(ToolMatch::new(&["docs.*"])),
            ..Tenant::default()
        };
        let tenants = Tenants::new(BTreeMap::from([(alpha.clone(), tenant)]), None);
        assert!(tenants.authorize(&alpha, Action::Call("read_file")));
        assert!(!tenants.authorize(&alpha, Action::Call("bash")));
        // No resource list: every resource; a prompt list binds prompts only.
        assert!(tenants.authorize(&alpha, Action::Read("file:///x")));
        assert!(tenants.authorize(&alpha, Action::Prompt("docs.review")));
        assert!(!tenants.authorize(&alpha, Action::Prompt("other.review")));
        // A tenant that is not declared (a host without tenants) may do everything.
        let default = TenantId::default_tenant();
        assert!(Tenants::default().authorize(&default, Action::Call("bash")));
    }

    #[test]
    fn a_tenant_no_longer_declared_reaches_nothing() {
        let alpha = TenantId::new("alpha").unwrap();
        let capped = crate::network::Allow::parse(&["files.example"]).unwrap();
        let tenant = Tenant {
            network: Some(Arc::new(capped)),
            ..Tenant::default()
        };
        let tenants = Tenants::new(BTreeMap::from([(alpha.clone(), tenant)]), None);
        let ceiling = tenants.network_ceiling(&alpha).unwrap();
        assert_eq!(ceiling.written().collect::<Vec<_>>(), ["files.example"]);
        // Removed by a reload while its session ran: an empty ceiling, not none.
        let gone = tenants.network_ceiling(&TenantId::new("beta").unwrap());
        assert!(gone.is_some_and(|c| c.is_empty()));
        // A host without tenants caps nothing.
        assert!(Tenants::default().network_ceiling(&alpha).is_none());
    }
}
