//! The checks of a config: one function per table, each refusing what cannot work (with
//! the line and the key) and adding its part to the [`Plan`]. Tables that name others are
//! checked after them: grants after `[mounts]`, tenants' chains after `[[hooks]]`.

use super::{
    BashNetwork, BashPlan, ComponentPlan, Config, HookPlan, JwtPlan, NetworkGrant, Plan,
    ShellSandboxPlan, SignatureConfig, TlsFiles, UpstreamConfig, UpstreamOAuth, UpstreamScope,
    WrittenSetting,
};
use crate::component::{ComponentRef, SettingType};
use crate::ids::{TenantId, ToolMatch};
use crate::limits::{
    DEFAULT_BASH_RO_MOUNT, LimitOverrides, Limits, MAX_BASH_TIMEOUT, MAX_ID_BYTES, MIN_TOKEN_BYTES,
    SYSTEM_PATHS, ShellLimits, ShellNetwork,
};
use crate::mounts::{MountError, MountSpec, MountTable, Scope};
use crate::sandbox::{Access, Grants, Settings};
use crate::secret::{Secret, TokenDigest};
use crate::sessions::{Quota, Tenant, WorkdirTemplate};
use crate::trace::TraceSettings;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

impl Config {
    /// Checks every table of the config read from `text` and makes the [`Plan`].
    pub(super) fn validate(&self, text: &str) -> Result<Plan, Invalid> {
        let mounts = self.mounts();
        let hooks = self.hooks_plan(&mounts, text)?;
        let hook_names: BTreeSet<&str> = hooks.iter().map(|h| h.component.name.as_str()).collect();
        self.check_engine()?;
        let tenants = self.tenants_plan(&hook_names)?;
        self.check_stores()?;
        Ok(Plan {
            mounts: self.mount_table(&mounts)?,
            tools: self.tools_plan(&mounts, text)?,
            admin_token: self.admin_token(&tenants)?,
            admin_listen: self.admin_listen()?,
            tls: self.tls()?,
            jwt: self.jwt()?,
            tenants,
            hooks,
            serve_workdir: self.serve_workdir()?,
            bash: match self.bash.enabled {
                true => Some(self.bash_plan(&mounts)?),
                false => None,
            },
            upstreams: self.upstreams_plan()?,
            registries: self.registries_plan()?,
            network: self.network_plan()?,
            engine: self.engine.clone(),
            fuel: self.uses_fuel(),
            max_memory_bytes: self.max_memory_bytes(),
            session_store: self.session_store()?,
            trace: TraceSettings {
                enabled: self.trace.enabled,
                mount: mounts
                    .get(&self.trace.mount)
                    .filter(|m| m.scope == Scope::Session)
                    .map(|_| self.trace.mount.clone()),
                diff_bytes: self.trace.diff_bytes,
                watch: true,
                fleet: false,
            },
            otlp_endpoint: self.telemetry.otlp_endpoint.clone(),
            keep_artifacts: self.keep_artifacts()?,
            shutdown_grace: self.shutdown_grace()?,
            source: self.source.clone(),
        })
    }

    /// `[network]`: name servers as addresses (port 53 when left out).
    fn network_plan(&self) -> Result<crate::network::NetworkSettings, Invalid> {
        let nameservers = self
            .network
            .nameservers
            .iter()
            .map(|written| {
                let server = written.get_ref();
                server
                    .parse::<std::net::SocketAddr>()
                    .or_else(|_| server.parse::<std::net::IpAddr>().map(|ip| (ip, 53).into()))
                    .map_err(|_| {
                        Invalid::at(
                            written.span(),
                            format!(
                                "network.nameservers: \"{server}\" is not an address \
                                 (\"10.0.0.2\", \"127.0.0.1:5353\", \"[::1]:53\")"
                            ),
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(crate::network::NetworkSettings {
            nameservers,
            ca_certificates: self.network.ca_certificates.clone(),
        })
    }

    /// `[mounts]`: virtual paths that are absolute, not nested, with templates that
    /// resolve.
    fn mount_table(&self, mounts: &BTreeMap<String, MountSpec>) -> Result<MountTable, Invalid> {
        MountTable::new(mounts.clone()).map_err(|e| {
            let span = match (&e, &self.mounts) {
                (
                    MountError::BadVirtualPath(path)
                    | MountError::BadTemplate { path, .. }
                    | MountError::Nested { inner: path, .. },
                    Some(declared),
                ) => declared
                    .keys()
                    .find(|k| k.get_ref() == path)
                    .map_or(0..0, Spanned::span),
                _ => 0..0,
            };
            Invalid::at(span, format!("mounts: {e}"))
        })
    }

    /// `[tools.NAME]`: plain names, components that exist, declared mounts, settings a
    /// built-in tool takes, limits in range.
    fn tools_plan(
        &self,
        mounts: &BTreeMap<String, MountSpec>,
        text: &str,
    ) -> Result<Vec<ComponentPlan>, Invalid> {
        let mut tools = Vec::with_capacity(self.tools.len());
        for (name, tool) in &self.tools {
            let owner = format!("tools.{}", name.get_ref());
            if !is_tool_name(name.get_ref()) {
                return Err(Invalid::at(
                    name.span(),
                    format!(
                        "{owner}: a tool name is 1 to {MAX_ID_BYTES} letters, digits, '_' and '-'"
                    ),
                ));
            }
            if self.bash.enabled && name.get_ref() == "bash" {
                return Err(Invalid::at(
                    name.span(),
                    format!("{owner}: the name `bash` is taken by the [bash] tool"),
                ));
            }
            check_component(&format!("{owner}.component"), &tool.component)?;
            check_grants(mounts, &owner, &tool.grants)?;
            check_tool_settings(&owner, &tool.component, &tool.settings)?;
            check_limits(&owner, tool.limits.out_of_range(), &tool.limits.span)?;
            let mut plan = ComponentPlan::of(
                name.get_ref(),
                &tool.component,
                &tool.grants,
                (&tool.settings, text),
                *tool.limits,
                tool.allow_unknown_imports,
            );
            plan.require_signature =
                require_signature(&owner, &plan.component, tool.require_signature.as_ref())?;
            plan.network = network_grant(&owner, tool.network.as_ref())?;
            tools.push(plan);
        }
        Ok(tools)
    }

    /// `[[hooks]]`: unique names, components that exist, declared mounts, limits in range.
    /// (A hook's settings are checked when it loads, against what it says it takes.)
    fn hooks_plan(
        &self,
        mounts: &BTreeMap<String, MountSpec>,
        text: &str,
    ) -> Result<Vec<HookPlan>, Invalid> {
        let mut names = BTreeSet::new();
        let mut hooks = Vec::with_capacity(self.hooks.len());
        for hook in &self.hooks {
            let owner = format!("hooks.{}", hook.name.get_ref());
            if hook.name.get_ref().is_empty() {
                return Err(Invalid::at(
                    hook.name.span(),
                    "hooks: `name` is empty".into(),
                ));
            }
            if !names.insert(hook.name.get_ref().as_str()) {
                return Err(Invalid::at(
                    hook.name.span(),
                    format!(
                        "hooks: the name {:?} is used twice; each hook needs its own `name`",
                        hook.name.get_ref()
                    ),
                ));
            }
            check_component(&format!("{owner}.component"), &hook.component)?;
            check_grants(mounts, &owner, &hook.grants)?;
            check_limits(&owner, hook.limits.out_of_range(), &hook.limits.span)?;
            let mut component = ComponentPlan::of(
                hook.name.get_ref(),
                &hook.component,
                &hook.grants,
                (&hook.settings, text),
                *hook.limits,
                hook.allow_unknown_imports,
            );
            component.require_signature = require_signature(
                &owner,
                &component.component,
                hook.require_signature.as_ref(),
            )?;
            component.network = network_grant(&owner, hook.network.as_ref())?;
            hooks.push(HookPlan {
                component,
                on_failure: hook.on_failure,
                tools: hook
                    .tools
                    .as_deref()
                    .map_or_else(ToolMatch::all, ToolMatch::new),
                instance: hook.instance,
            });
        }
        Ok(hooks)
    }

    /// `[sessions] store`, with its `${…}` replaced.
    fn session_store(&self) -> Result<Option<Secret>, Invalid> {
        let Some(store) = &self.sessions.store else {
            return Ok(None);
        };
        store
            .get_ref()
            .resolved()
            .map(Some)
            .map_err(|why| Invalid::at(store.span(), format!("sessions.store: {why}")))
    }

    /// `[auth]`: a JWKS that is a URL or an absolute file, an issuer and an audience.
    fn jwt(&self) -> Result<Option<JwtPlan>, Invalid> {
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        let written = auth.jwks.get_ref();
        let jwks = written
            .resolved()
            .map_err(|why| Invalid::at(auth.jwks.span(), format!("auth.jwks: {why}")))?;
        let url = jwks.expose().starts_with("https://") || jwks.expose().starts_with("http://");
        if !url && !jwks.expose().starts_with('/') {
            return Err(Invalid::at(
                auth.jwks.span(),
                "auth.jwks: a URL (https://…) or an absolute file path".into(),
            ));
        }
        if [
            &auth.issuer,
            &auth.audience,
            &auth.tenant_claim,
            &auth.subject_claim,
        ]
        .iter()
        .any(|v| v.is_empty())
        {
            return Err(Invalid::at(
                auth.jwks.span(),
                "auth: `issuer`, `audience`, `tenant_claim` and `subject_claim` may not be empty"
                    .into(),
            ));
        }
        Ok(Some(JwtPlan {
            jwks,
            jwks_written: written.expose().to_string(),
            issuer: auth.issuer.clone(),
            audience: auth.audience.clone(),
            tenant_claim: auth.tenant_claim.clone(),
            subject_claim: auth.subject_claim.clone(),
            authorization_servers: auth
                .authorization_servers
                .clone()
                .unwrap_or_else(|| vec![auth.issuer.clone()]),
            resource: auth.resource.clone(),
        }))
    }

    /// `[serve] tls_cert` and `tls_key`: both or neither. (They are read when `serve`
    /// starts, and again at each reload.)
    fn tls(&self) -> Result<Option<TlsFiles>, Invalid> {
        match (&self.serve.tls_cert, &self.serve.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.get_ref().clone(),
                key: key.get_ref().clone(),
            })),
            (None, None) => Ok(None),
            (Some(given), None) | (None, Some(given)) => Err(Invalid::at(
                given.span(),
                "serve.tls_cert, serve.tls_key: TLS needs both the certificate and its key".into(),
            )),
        }
    }

    /// `[serve] admin_token`: long enough, and no tenant's (a tenant's token must never
    /// open the admin page).
    fn admin_token(
        &self,
        tenants: &BTreeMap<TenantId, Tenant>,
    ) -> Result<Option<TokenDigest>, Invalid> {
        let serve = &self.serve;
        let span = match (&serve.admin_token, &serve.admin_token_sha256) {
            (Some(token), _) => token.span(),
            (None, Some(hex)) => hex.span(),
            (None, None) => return Ok(None),
        };
        let token = token_digest(
            serve.admin_token.as_ref().map(Spanned::get_ref),
            serve
                .admin_token_sha256
                .as_ref()
                .map(|h| h.get_ref().as_str()),
        )
        .map_err(|why| Invalid::at(span.clone(), format!("serve.admin_{why}")))?;
        if let Some(shared) = tenants
            .iter()
            .find(|(_, t)| t.token.is_some() && t.token == token)
        {
            return Err(Invalid::at(
                span,
                format!(
                    "serve.admin_token: tenant '{}' has this token; the admin page needs its own",
                    shared.0
                ),
            ));
        }
        Ok(token)
    }

    /// `[tenants.ID]`: ids, limits in range, chains of declared hooks, working
    /// directories, tokens long enough and each a tenant's own.
    fn tenants_plan(&self, hooks: &BTreeSet<&str>) -> Result<BTreeMap<TenantId, Tenant>, Invalid> {
        let mut tenants = BTreeMap::new();
        let mut tokens = BTreeSet::new();
        for (id, tenant) in &self.tenants {
            let owner = format!("tenants.{}", id.get_ref());
            let tenant_id = TenantId::new(id.get_ref().as_str())
                .map_err(|e| Invalid::at(id.span(), format!("tenants: {e}")))?;
            check_limits(&owner, tenant.limits.out_of_range(), &tenant.limits.span)?;
            if tenant.rate.burst.is_some() && tenant.rate.calls_per_second.is_none() {
                return Err(Invalid::at(
                    tenant.rate.span.clone(),
                    format!("{owner}.rate: `burst` needs `calls_per_second`"),
                ));
            }
            let shell_limits = &tenant.bash.limits;
            check_limits(
                &format!("{owner}.bash"),
                shell_limits.out_of_range(),
                &shell_limits.span,
            )?;
            for hook in tenant.hooks.iter().flatten() {
                if !hooks.contains(hook.get_ref().as_str()) {
                    return Err(Invalid::at(
                        hook.span(),
                        format!(
                            "{owner}.hooks: no hook is named {:?} (hooks: {})",
                            hook.get_ref(),
                            hooks.iter().copied().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
            let workdir = tenant
                .workdir
                .as_ref()
                .map(|t| {
                    WorkdirTemplate::new(t.get_ref())
                        .map_err(|why| Invalid::at(t.span(), format!("{owner}.workdir: {why}")))
                })
                .transpose()?;
            let token = tenant_token(tenant)
                .map_err(|why| Invalid::at(id.span(), format!("{owner}.{why}")))?;
            if let Some(token) = token
                && !tokens.insert(token.0)
            {
                return Err(Invalid::at(
                    id.span(),
                    format!("{owner}.token: another tenant has this token; each needs its own"),
                ));
            }
            tenants.insert(
                tenant_id,
                Tenant {
                    token,
                    max_sessions: tenant.max_sessions,
                    quota: Quota {
                        bytes: tenant.disk_quota_bytes,
                        entries: tenant.disk_quota_files,
                    },
                    limits: *tenant.limits,
                    workdir,
                    hooks: tenant
                        .hooks
                        .as_ref()
                        .map(|names| names.iter().map(|n| n.get_ref().clone()).collect()),
                    tools: tenant.tools.as_deref().map(ToolMatch::new),
                    resources: tenant.resources.as_deref().map(ToolMatch::new),
                    prompts: tenant.prompts.as_deref().map(ToolMatch::new),
                    trace: tenant.trace,
                    shell_network: shell_network(
                        &format!("{owner}.bash"),
                        tenant.bash.network.as_ref(),
                    )?,
                    network: network_grant(&owner, tenant.network.as_ref())?,
                    shell_limits: *tenant.bash.limits,
                    rate: *tenant.rate,
                },
            );
        }
        Ok(tenants)
    }

    /// `[upstreams.NAME]`: names that cannot collide with a tool's, and one way to reach
    /// each.
    fn upstreams_plan(&self) -> Result<Vec<(String, UpstreamConfig)>, Invalid> {
        let mut upstreams = Vec::with_capacity(self.upstreams.len());
        for (name, upstream) in &self.upstreams {
            let owner = format!("upstreams.{}", name.get_ref());
            if !is_tool_name(name.get_ref()) || name.get_ref().contains("__") {
                return Err(Invalid::at(
                    name.span(),
                    format!("{owner}: a name is letters, digits, '_' and '-', without '__'"),
                ));
            }
            if let Some(prefix) = &upstream.prefix
                && !prefix.is_empty()
                && !is_tool_name(prefix)
            {
                return Err(Invalid::at(
                    name.span(),
                    format!("{owner}: a prefix is letters, digits, '_' and '-'"),
                ));
            }
            check_upstream_placeholders(&owner, upstream)
                .map_err(|why| Invalid::at(name.span(), why))?;
            if let Some(oauth) = &upstream.oauth {
                check_oauth(&owner, upstream.url.is_some(), oauth)
                    .map_err(|why| Invalid::at(name.span(), why))?;
            }
            if upstream.command.is_some() == upstream.url.is_some() {
                return Err(Invalid::at(
                    name.span(),
                    format!("{owner}: give either `command` (stdio) or `url` (HTTP)"),
                ));
            }
            upstreams.push((name.get_ref().clone(), upstream.clone()));
        }
        Ok(upstreams)
    }

    /// `[agents] keep_artifacts`: a duration (`7d`).
    fn keep_artifacts(&self) -> Result<std::time::Duration, Invalid> {
        let Some(keep) = &self.agents.keep_artifacts else {
            return Ok(crate::limits::DEFAULT_KEEP_ARTIFACTS);
        };
        humantime::parse_duration(keep.get_ref()).map_err(|e| {
            Invalid::at(
                keep.span(),
                format!("agents.keep_artifacts: {e} (a duration such as 12h or 7d)"),
            )
        })
    }

    /// `[serve] admin_listen`: `HOST:PORT`, with an admin token to serve.
    fn admin_listen(&self) -> Result<Option<String>, Invalid> {
        let Some(listen) = &self.serve.admin_listen else {
            return Ok(None);
        };
        if self.serve.admin_token.is_none() && self.serve.admin_token_sha256.is_none() {
            return Err(Invalid::at(
                listen.span(),
                "serve.admin_listen: no admin page to serve without `admin_token`".into(),
            ));
        }
        match listen.get_ref().rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Some(listen.get_ref().clone()))
            }
            _ => Err(Invalid::at(
                listen.span(),
                "serve.admin_listen: an address such as 127.0.0.1:9090".into(),
            )),
        }
    }

    /// `[serve] shutdown_grace`: a duration (`5s`), at most
    /// [`crate::limits::MAX_SHUTDOWN_GRACE`].
    fn shutdown_grace(&self) -> Result<std::time::Duration, Invalid> {
        let Some(grace) = &self.serve.shutdown_grace else {
            return Ok(crate::limits::SHUTDOWN_GRACE);
        };
        let max = crate::limits::MAX_SHUTDOWN_GRACE;
        match humantime::parse_duration(grace.get_ref()) {
            Ok(grace) if grace <= max => Ok(grace),
            Ok(_) => Err(Invalid::at(
                grace.span(),
                format!(
                    "serve.shutdown_grace: over the most a drain may last, {}",
                    humantime::format_duration(max)
                ),
            )),
            Err(e) => Err(Invalid::at(
                grace.span(),
                format!("serve.shutdown_grace: {e} (a duration such as 5s or 20s)"),
            )),
        }
    }

    /// `[serve] workdir`: a template, which tenants without their own share only when it
    /// names `{tenant}`.
    fn serve_workdir(&self) -> Result<Option<WorkdirTemplate>, Invalid> {
        let Some(template) = &self.serve.workdir else {
            return Ok(None);
        };
        let workdir = WorkdirTemplate::new(template.get_ref())
            .map_err(|why| Invalid::at(template.span(), format!("serve.workdir: {why}")))?;
        let sharing = self
            .tenants
            .values()
            .filter(|t| t.workdir.is_none())
            .count();
        if !template.get_ref().contains("{tenant}") && sharing > 1 {
            return Err(Invalid::at(
                template.span(),
                "serve.workdir: tenants would share one working directory: name {tenant} in it, or give each tenant its own `workdir`".into(),
            ));
        }
        Ok(Some(workdir))
    }

    /// `[engine]`: a pool with slots.
    fn check_engine(&self) -> Result<(), Invalid> {
        if self.engine.pooling && self.engine.pool_instances == 0 {
            return Err(Invalid::at(
                0..0,
                "engine.pool_instances: a pool needs at least 1 slot; set `pooling = false` to allocate on demand instead".into(),
            ));
        }
        Ok(())
    }

    /// Every limits table of the file: tools', hooks', tenants'.
    fn all_limits(&self) -> impl Iterator<Item = &LimitOverrides> {
        self.tools
            .values()
            .map(|t| &t.limits.value)
            .chain(self.hooks.iter().map(|h| &h.limits.value))
            .chain(self.tenants.values().map(|t| &t.limits.value))
    }

    /// The largest linear memory any component may get: what a pool slot must hold.
    fn max_memory_bytes(&self) -> u64 {
        self.all_limits()
            .filter_map(|l| l.memory_bytes)
            .fold(Limits::default().memory_bytes, u64::max)
    }

    /// Whether any limits set fuel: the engine meters fuel only then.
    fn uses_fuel(&self) -> bool {
        self.all_limits().any(|l| l.fuel.is_some())
    }

    /// Checks `[bash]` (and the tenants' `bash` tables) against the declared `mounts`.
    fn bash_plan(&self, mounts: &BTreeMap<String, MountSpec>) -> Result<BashPlan, Invalid> {
        let bash = &self.bash;
        let mount = self.bash_mount();
        let at = |key: Option<&Spanned<String>>| key.map_or(0..0, Spanned::span);
        if !mounts.contains_key(mount) {
            return Err(Invalid::at(
                at(bash.mount.as_ref()),
                format!("bash.mount: {mount:?} is not a declared mount"),
            ));
        }
        let grants: Grants = match &bash.grants {
            Some(grants) => {
                check_grants(mounts, "bash", grants)?;
                for path in grants.keys() {
                    if SYSTEM_PATHS.contains(&path.get_ref().as_str()) {
                        return Err(Invalid::at(
                            path.span(),
                            format!(
                                "bash.grants: {:?} is where the sandbox keeps the system ({}); give the mount another name",
                                path.get_ref(),
                                SYSTEM_PATHS.join(", ")
                            ),
                        ));
                    }
                }
                self::grants(grants)
            }
            None => [(mount.to_string(), Access::ReadWrite)]
                .into_iter()
                .chain(
                    mounts
                        .contains_key(DEFAULT_BASH_RO_MOUNT)
                        .then(|| (DEFAULT_BASH_RO_MOUNT.to_string(), Access::ReadOnly)),
                )
                .collect(),
        };
        if !grants.contains_key(mount) {
            return Err(Invalid::at(
                at(bash.mount.as_ref()),
                format!("bash.grants: the mount bash works in, {mount:?}, is not granted"),
            ));
        }
        if SYSTEM_PATHS.contains(&mount) {
            return Err(Invalid::at(
                at(bash.mount.as_ref()),
                format!("bash.mount: {mount:?} is where the sandbox keeps the system"),
            ));
        }
        check_limits("bash", bash.limits.out_of_range(), &bash.limits.span)?;
        if let Some(secs) = &bash.timeout_secs
            && !(1..=MAX_BASH_TIMEOUT.as_secs()).contains(secs.get_ref())
        {
            return Err(Invalid::at(
                secs.span(),
                format!(
                    "bash.timeout_secs = {}: from 1 to {} (a call may ask for at most that)",
                    secs.get_ref(),
                    MAX_BASH_TIMEOUT.as_secs()
                ),
            ));
        }
        let sandbox = if bash.sandbox {
            // A tenant's network ceiling caps its bash's allow-list too (see
            // `tools::bash::proxy`); an open network would go around it.
            for (id, tenant) in &self.tenants {
                let network = tenant.bash.network.as_ref().or(bash.network.as_ref());
                if let (Some(_), Some(open)) = (&tenant.network, network)
                    && matches!(open.get_ref(), BashNetwork::Switch(true))
                {
                    return Err(Invalid::at(
                        open.span(),
                        format!(
                            "tenants.{id}: its `network` ceiling caps what its commands reach, \
                             and its bash's `network = true` ({}) reaches anything; give it \
                             `[tenants.{id}.bash] network = {{ allow = [...] }}`",
                            match tenant.bash.network.is_some() {
                                true => "its own",
                                false => "[bash]'s",
                            }
                        ),
                    ));
                }
            }
            Some(ShellSandboxPlan {
                bwrap: bash.bwrap.clone(),
                network: shell_network("bash", bash.network.as_ref())?.unwrap_or_default(),
                limits: ShellLimits::default().with(&bash.limits),
            })
        } else {
            let networks = std::iter::once(("bash".to_string(), bash.network.as_ref())).chain(
                self.tenants
                    .iter()
                    .map(|(id, t)| (format!("tenants.{id}.bash"), t.bash.network.as_ref())),
            );
            for (owner, network) in networks {
                if let Some(network) = network
                    && !matches!(network.get_ref(), BashNetwork::Switch(true))
                {
                    return Err(Invalid::at(
                        network.span(),
                        format!(
                            "{owner}.network: only a sandboxed bash has its network confined; \
                             with `sandbox = false` a command reaches whatever the host reaches"
                        ),
                    ));
                }
            }
            if !self.tenants.is_empty() && !bash.unsandboxed_with_tenants {
                return Err(Invalid::at(
                    0..0,
                    "bash.sandbox: an unsandboxed bash lets every tenant's shell read every other tenant's files and this config's tokens; keep `sandbox = true`, or set `unsandboxed_with_tenants = true` to accept that".into(),
                ));
            }
            if bash.grants.is_some() {
                return Err(Invalid::at(
                    0..0,
                    "bash.grants: only a sandboxed bash is confined to its grants; with `sandbox = false` a command reaches every file of the host's user".into(),
                ));
            }
            None
        };
        Ok(BashPlan {
            mount: mount.to_string(),
            timeout: bash
                .timeout_secs
                .as_ref()
                .map(|s| Duration::from_secs(*s.get_ref())),
            grants,
            sandbox,
        })
    }
}

/// Refuses a limits table with a value outside its range (see `limits.rs`), at its line.
fn check_limits(owner: &str, problem: Option<String>, span: &Range<usize>) -> Result<(), Invalid> {
    match problem {
        Some(why) => Err(Invalid::at(span.clone(), format!("{owner}.limits: {why}"))),
        None => Ok(()),
    }
}

/// A validation error before it is given its file and line.
pub(super) struct Invalid {
    pub(super) span: Range<usize>,
    pub(super) what: String,
}

impl Invalid {
    fn at(span: Range<usize>, what: String) -> Invalid {
        Invalid { span, what }
    }
}

/// `[upstreams.NAME.oauth]`: on a `url` upstream, with exactly one grant and the client
/// authentication it takes.
fn check_oauth(owner: &str, is_url: bool, oauth: &UpstreamOAuth) -> Result<(), String> {
    if !is_url {
        return Err(format!("{owner}: `oauth` is for a `url` upstream"));
    }
    match (
        &oauth.refresh_token,
        &oauth.client_secret,
        &oauth.private_key,
    ) {
        (Some(_), _, Some(_)) => Err(format!(
            "{owner}: `oauth.private_key` signs for the client_credentials grant, not with \
             `refresh_token`; give `client_secret` or nothing (a public client)"
        )),
        (None, Some(_), Some(_)) => Err(format!(
            "{owner}: `oauth` takes `client_secret` or `private_key`, not both"
        )),
        (None, None, None) => Err(format!(
            "{owner}: `oauth` needs `client_secret` or `private_key` (the client_credentials \
             grant) or `refresh_token`"
        )),
        _ => Ok(()),
    }
}

/// Tool names reach the model and, through hooks, file names: keep them plain.
/// `{tenant}`, `{session}` and `{workdir}` in an upstream's `args`, `env`, `headers` and
/// `url` are its instance's: `{tenant}` needs `scope = "tenant"` or `"session"`, the
/// others `scope = "session"`; `{data}` goes anywhere.
fn check_upstream_placeholders(owner: &str, upstream: &UpstreamConfig) -> Result<(), String> {
    let texts = upstream
        .args
        .iter()
        .map(String::as_str)
        .chain(upstream.env.values().map(Secret::expose))
        .chain(upstream.headers.values().map(Secret::expose))
        .chain(upstream.url.iter().map(Secret::expose));
    for text in texts {
        for (placeholder, needs) in [
            (
                "{tenant}",
                &[UpstreamScope::Tenant, UpstreamScope::Session][..],
            ),
            ("{session}", &[UpstreamScope::Session][..]),
            ("{workdir}", &[UpstreamScope::Session][..]),
        ] {
            if text.contains(placeholder) && !needs.contains(&upstream.scope) {
                return Err(format!(
                    "{owner}: {placeholder} is an instance's: give the upstream `scope = \"{}\"`",
                    if placeholder == "{tenant}" {
                        "tenant"
                    } else {
                        "session"
                    }
                ));
            }
        }
    }
    Ok(())
}

pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_ID_BYTES
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Config {
    /// Each persistent directory's `store`, when it names one, is a component there is;
    /// `settings`, `network` and `limits` are its store's, so they need one; the grant's
    /// entries are read, the limits in range.
    fn check_stores(&self) -> Result<(), Invalid> {
        for (path, spec) in &self.persistent {
            let owner = format!("persistent.{:?}", path.get_ref());
            if let Some(store) = &spec.store {
                let key = format!("{owner}.store");
                check_component(&key, &Spanned::new(path.span(), store.clone()))?;
            } else if !spec.settings.is_empty()
                || spec.network.is_some()
                || spec.limits != Default::default()
            {
                return Err(Invalid::at(
                    path.span(),
                    format!(
                        "{owner}: settings, network and limits are a store component's; a \
                         tree hookhost keeps itself takes none (give it `store = …`)"
                    ),
                ));
            }
            check_limits(&owner, spec.limits.out_of_range(), &path.span())?;
            if let Some(grant) = &spec.network {
                allow_list(&owner, grant, path.span())?;
            }
        }
        Ok(())
    }
}

impl Config {
    /// `[registries]`: the hosts reached over plain HTTP (`insecure` alone only for a
    /// loopback registry), their credentials (resolved), and the keys each one's
    /// components must be signed by.
    fn registries_plan(&self) -> Result<crate::registry::Registries, Invalid> {
        let mut plan = crate::registry::Registries::default();
        let mut names = BTreeSet::new();
        for (host, registry) in &self.registries {
            let key = format!("registries.{:?}", host.get_ref());
            let probe = format!("{}{}/probe:probe", crate::registry::SCHEME, host.get_ref());
            let reference = crate::registry::OciRef::parse(&probe).map_err(|_| {
                Invalid::at(host.span(), format!("{key}: not a registry host[:port]"))
            })?;
            if registry.insecure_remote && !registry.insecure {
                return Err(Invalid::at(
                    host.span(),
                    format!("{key}: insecure_remote needs insecure = true"),
                ));
            }
            if registry.insecure && !registry.insecure_remote && !reference.is_loopback() {
                return Err(Invalid::at(
                    host.span(),
                    format!(
                        "{key}: insecure = true is for a registry on this machine; plain HTTP \
                         to another needs insecure_remote = true as well (anyone on the network \
                         path could give a tag another component)"
                    ),
                ));
            }
            // As references name it (see `OciRef::parse`): one spelling per registry.
            let name = reference.registry().to_string();
            if !names.insert(name.clone()) {
                return Err(Invalid::at(
                    host.span(),
                    format!("{key}: {name} is listed twice, spelled differently"),
                ));
            }
            if registry.insecure {
                plan.insecure.push(name.clone());
            }
            if let Some(required) = &registry.require_signature {
                let keys = signature_keys(&format!("{key}.require_signature"), required)?;
                plan.signers.insert(name.clone(), keys);
            }
            let resolved = |secret: &Spanned<Secret>, name: &str| {
                secret
                    .get_ref()
                    .resolved()
                    .map_err(|why| Invalid::at(secret.span(), format!("{key}.{name}: {why}")))
            };
            match (&registry.username, &registry.password) {
                (Some(username), Some(password)) => {
                    let credentials = crate::registry::Credentials {
                        username: resolved(username, "username")?,
                        password: resolved(password, "password")?,
                    };
                    plan.credentials.insert(name.clone(), credentials);
                }
                (None, None) => {}
                _ => {
                    return Err(Invalid::at(
                        host.span(),
                        format!("{key}: username and password go together"),
                    ));
                }
            }
        }
        Ok(plan)
    }
}

fn check_component(key: &str, component: &Spanned<String>) -> Result<(), Invalid> {
    let fail = |what: String| Err(Invalid::at(component.span(), format!("{key}: {what}")));
    match ComponentRef::parse(component.get_ref()) {
        ComponentRef::Builtin(name) if !ComponentRef::builtin_names().any(|n| n == name) => {
            fail(format!(
                "{:?} is not a built-in component (built-ins: {})",
                component.get_ref(),
                ComponentRef::builtin_list()
            ))
        }
        ComponentRef::File(path) if !path.is_file() => {
            fail(format!("the file {} does not exist", path.display()))
        }
        ComponentRef::Oci(reference) => match crate::registry::OciRef::parse(&reference) {
            Ok(_) => Ok(()),
            Err(e) => fail(e.to_string()),
        },
        _ => Ok(()),
    }
}

/// The digest of a tenant's token: its `token` resolved (`${…}`) and at least
/// [`MIN_TOKEN_BYTES`] long, or its `token_sha256`; `Err` says which key is wrong.
fn tenant_token(tenant: &super::TenantConfig) -> Result<Option<TokenDigest>, String> {
    token_digest(tenant.token.as_ref(), tenant.token_sha256.as_deref())
}

/// The digest of a token given in clear (resolved, at least [`MIN_TOKEN_BYTES`] long) or
/// as its SHA-256; `Err` says which key is wrong (`token: …`, `token_sha256: …`).
fn token_digest(
    token: Option<&Secret>,
    sha256: Option<&str>,
) -> Result<Option<TokenDigest>, String> {
    match (token, sha256) {
        (Some(_), Some(_)) => Err("token: give `token` or `token_sha256`, not both".into()),
        (Some(token), None) => {
            let token = token.resolved().map_err(|why| format!("token: {why}"))?;
            if token.expose().len() < MIN_TOKEN_BYTES {
                return Err(format!(
                    "token: a token is at least {MIN_TOKEN_BYTES} bytes"
                ));
            }
            Ok(Some(TokenDigest::of(token.expose().as_bytes())))
        }
        (None, Some(hex)) => TokenDigest::parse(hex)
            .map(Some)
            .ok_or_else(|| "token_sha256: 64 hexadecimal digits (`sha256sum` of the token)".into()),
        (None, None) => Ok(None),
    }
}

/// Refuses settings a built-in tool does not take, or of the wrong type.
fn check_tool_settings(
    owner: &str,
    component: &Spanned<String>,
    settings: &BTreeMap<Spanned<String>, toml::Value>,
) -> Result<(), Invalid> {
    let Some(declared) = ComponentRef::parse(component.get_ref()).builtin_tool_settings() else {
        return Ok(());
    };
    for (key, value) in settings {
        if let Some(problem) = setting_problem(component.get_ref(), declared, key.get_ref(), value)
        {
            return Err(Invalid::at(
                key.span(),
                format!("{owner}.settings{problem}"),
            ));
        }
    }
    Ok(())
}

/// What is wrong with the setting `key = value` of `component`, which declares the
/// settings `declared`: `": … has no setting …"` or `".KEY: must be …"`; `None` when it is
/// one it takes, of its type.
pub fn setting_problem<K: AsRef<str>>(
    component: &str,
    declared: &[(K, SettingType)],
    key: &str,
    value: &toml::Value,
) -> Option<String> {
    match declared.iter().find(|(k, _)| k.as_ref() == key) {
        None => {
            let names: Vec<&str> = declared.iter().map(|(k, _)| k.as_ref()).collect();
            let known = if names.is_empty() {
                "it takes none".to_string()
            } else {
                format!("it takes {}", names.join(", "))
            };
            Some(format!(": {component} has no setting {key:?} ({known})"))
        }
        Some((_, kind)) if !kind.accepts(value) => {
            Some(format!(".{key}: must be {kind}, not {value}"))
        }
        Some(_) => None,
    }
}

impl ComponentPlan {
    fn of(
        name: &str,
        component: &Spanned<String>,
        grants: &BTreeMap<Spanned<String>, Access>,
        (settings, text): (&BTreeMap<Spanned<String>, toml::Value>, &str),
        limits: LimitOverrides,
        allow_unknown_imports: bool,
    ) -> ComponentPlan {
        ComponentPlan {
            name: name.to_string(),
            component: ComponentRef::parse(component.get_ref()),
            grants: self::grants(grants),
            settings: self::settings(settings),
            setting_values: settings
                .iter()
                .map(|(k, v)| {
                    let written = WrittenSetting {
                        value: v.clone(),
                        line: Some(super::line_at(text, k.span().start)),
                    };
                    (k.get_ref().clone(), written)
                })
                .collect(),
            limits,
            allow_unknown_imports,
            require_signature: None,
            network: None,
        }
    }
}

/// `OWNER.network`: an `allow` list of hosts, each entry read (see [`crate::network::Allow`]).
fn network_grant(
    owner: &str,
    grant: Option<&Spanned<NetworkGrant>>,
) -> Result<Option<std::sync::Arc<crate::network::Allow>>, Invalid> {
    let Some(grant) = grant else {
        return Ok(None);
    };
    allow_list(owner, grant.get_ref(), grant.span()).map(Some)
}

/// `OWNER.network` of `[bash]` or a tenant's `bash` table: a switch or an `allow` list,
/// read as a component's grant is.
fn shell_network(
    owner: &str,
    network: Option<&Spanned<BashNetwork>>,
) -> Result<Option<ShellNetwork>, Invalid> {
    let Some(network) = network else {
        return Ok(None);
    };
    Ok(Some(match network.get_ref() {
        BashNetwork::Switch(false) => ShellNetwork::Closed,
        BashNetwork::Switch(true) => ShellNetwork::Open,
        BashNetwork::Allow(grant) => ShellNetwork::Allow(allow_list(owner, grant, network.span())?),
    }))
}

/// The `allow` list of `grant`, written at `span`, each entry read.
fn allow_list(
    owner: &str,
    grant: &NetworkGrant,
    span: Range<usize>,
) -> Result<std::sync::Arc<crate::network::Allow>, Invalid> {
    crate::network::Allow::parse(&grant.allow)
        .map(std::sync::Arc::new)
        .map_err(|why| Invalid::at(span, format!("{owner}.network.allow: {why}")))
}

/// `OWNER.require_signature`: for an `oci://` component only (a file on this host is the
/// operator's own), with at least one key.
fn require_signature(
    owner: &str,
    component: &ComponentRef,
    required: Option<&Spanned<SignatureConfig>>,
) -> Result<Option<Vec<PathBuf>>, Invalid> {
    let Some(required) = required else {
        return Ok(None);
    };
    if !matches!(component, ComponentRef::Oci(_)) {
        return Err(Invalid::at(
            required.span(),
            format!(
                "{owner}.require_signature: only a component from a registry (oci://…) is \
                 signed; {component} is not"
            ),
        ));
    }
    signature_keys(&format!("{owner}.require_signature"), required).map(Some)
}

/// The keys of a `require_signature`: at least one.
fn signature_keys(key: &str, required: &Spanned<SignatureConfig>) -> Result<Vec<PathBuf>, Invalid> {
    if required.get_ref().keys.is_empty() {
        return Err(Invalid::at(
            required.span(),
            format!("{key}.keys: name at least one public key (a PEM file, cosign.pub)"),
        ));
    }
    Ok(required.get_ref().keys.iter().map(PathBuf::from).collect())
}

/// Checks that every mount `owner` (`tools.NAME`, `bash`…) is granted is declared.
fn check_grants(
    mounts: &BTreeMap<String, MountSpec>,
    owner: &str,
    grants: &BTreeMap<Spanned<String>, Access>,
) -> Result<(), Invalid> {
    for path in grants.keys() {
        if !mounts.contains_key(path.get_ref()) {
            return Err(Invalid::at(
                path.span(),
                format!(
                    "{owner}.grants: {:?} is not a declared mount (declared: {})",
                    path.get_ref(),
                    mounts.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Grants as the sandbox takes them.
fn grants(grants: &BTreeMap<Spanned<String>, Access>) -> Grants {
    grants
        .iter()
        .map(|(p, a)| (p.get_ref().clone(), *a))
        .collect()
}

/// Settings as `wasi:config/store` hands them over: strings as they are, anything else as
/// its JSON text (so `exclude_tools = ["a", "b"]` arrives as `["a","b"]`).
pub(super) fn settings(settings: &BTreeMap<Spanned<String>, toml::Value>) -> Settings {
    settings
        .iter()
        .map(|(k, v)| (k.get_ref().clone(), setting_text(v)))
        .collect()
}

/// One setting's value as `wasi:config/store` hands it over (see `settings`).
pub fn setting_text(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_else(|_| other.to_string()),
    }
}
