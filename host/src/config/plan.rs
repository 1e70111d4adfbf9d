//! The [`Plan`]: the config checked and typed, what a runtime is built from.

use super::UpstreamConfig;
use super::file::{EngineConfig, TraceConfig};
use crate::chain::{FailurePolicy, InstanceMode};
use crate::component::ComponentRef;
use crate::ids::{TenantId, ToolMatch};
use crate::limits::{LimitOverrides, Limits, ShellLimits, ShellNetwork};
use crate::mounts::MountTable;
use crate::sandbox::{Grants, Settings};
use crate::secret::{Secret, TokenDigest};
use crate::sessions::{Tenant, WorkdirTemplate};
use crate::trace::TraceSettings;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The config, checked and typed: what a [`crate::Runtime`] is built from, so that nothing
/// is parsed twice and no `toml::Spanned` leaves this module. Made once, when the config is
/// read ([`super::Config::load`], [`super::Config::parse`]).
#[derive(Debug, Clone)]
pub struct Plan {
    pub mounts: MountTable,
    pub tools: Vec<ComponentPlan>,
    /// The hook chain, outermost first.
    pub hooks: Vec<HookPlan>,
    /// The declared tenants: everything the file says of each.
    pub tenants: BTreeMap<TenantId, Tenant>,
    pub serve_workdir: Option<WorkdirTemplate>,
    /// The SHA-256 of the admin page's token (`[serve] admin_token`); no admin page when
    /// `None`.
    pub admin_token: Option<TokenDigest>,
    /// The address the admin page listens on by itself (`[serve] admin_listen`); on
    /// `serve --http`'s address when `None`.
    pub admin_listen: Option<String>,
    /// The certificate and key `serve --http` serves TLS with; plain HTTP when `None`.
    pub tls: Option<TlsFiles>,
    /// Bearer JWTs naming tenants (`[auth]`); only tenants' own tokens when `None`.
    pub jwt: Option<JwtPlan>,
    /// The `bash` tool, when enabled.
    pub bash: Option<BashPlan>,
    pub upstreams: Vec<(String, UpstreamConfig)>,
    /// How `oci://` components' registries are reached, and what they must be signed by
    /// (`[registries."HOST"]`).
    pub registries: crate::registry::Registries,
    /// `[network]`: how components' requests are resolved and verified.
    pub network: crate::network::NetworkSettings,
    pub engine: EngineConfig,
    /// Whether any limits set fuel: the engine meters fuel only then.
    pub fuel: bool,
    /// The largest linear memory any component may get: what a pool slot must hold.
    pub max_memory_bytes: u64,
    /// The session table's URL; the SQLite file when `None`.
    pub session_store: Option<Secret>,
    pub trace: TraceSettings,
    /// The OTLP/HTTP endpoint spans go to.
    pub otlp_endpoint: Option<String>,
    /// How long an agent's ended session is kept, idle, for a resume (`[agents]`).
    pub keep_artifacts: std::time::Duration,
    /// How long `serve` drains at a shutdown signal (`[serve] shutdown_grace`).
    pub shutdown_grace: std::time::Duration,
    /// The file the config was read from, for messages.
    pub source: String,
}

/// What a process that does one thing and exits loads of its config (see
/// [`Plan::one_shot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneShot {
    /// Everything: it calls tools (`hookhost call`, `tools`, `demo`).
    Calls,
    /// The hook chain, without hookhost's tools, `bash` or upstream servers: an agent's
    /// hook (`hookhost hook …`), whose agent runs its own tools. The four built-in tools,
    /// loaded and asked to describe themselves, were 1 ms of a hook's 11, measured.
    Hooks,
    /// Only what persistent directories need: their store components, no hook or tool
    /// (`hookhost session`, `hookhost persistent`).
    Stores,
}

impl Plan {
    /// A plan with `mounts` and nothing else — no tool, hook, tenant, `bash` or upstream —
    /// and every table's defaults: what a program composes a plan on (`component check`
    /// adds the one component it checks).
    pub fn new(mounts: MountTable, source: &str) -> Plan {
        let trace = TraceConfig::default();
        Plan {
            mounts,
            tools: Vec::new(),
            hooks: Vec::new(),
            tenants: BTreeMap::new(),
            serve_workdir: None,
            admin_token: None,
            admin_listen: None,
            tls: None,
            jwt: None,
            bash: None,
            upstreams: Vec::new(),
            registries: Default::default(),
            network: Default::default(),
            engine: EngineConfig::default(),
            fuel: false,
            max_memory_bytes: Limits::default().memory_bytes,
            session_store: None,
            trace: TraceSettings {
                enabled: trace.enabled,
                mount: None,
                diff_bytes: trace.diff_bytes,
                watch: true,
                fleet: false,
            },
            otlp_endpoint: None,
            keep_artifacts: crate::limits::DEFAULT_KEEP_ARTIFACTS,
            shutdown_grace: crate::limits::SHUTDOWN_GRACE,
            source: source.to_string(),
        }
    }

    /// The hook chain of `tenant`, outermost first: the layers its `hooks` picks, else
    /// the whole chain (as the runtime builds it).
    pub fn chain_of(&self, tenant: &TenantId) -> Vec<&HookPlan> {
        match self.tenants.get(tenant).and_then(|t| t.hooks.as_ref()) {
            Some(names) => names
                .iter()
                .filter_map(|n| self.hooks.iter().find(|h| &h.component.name == n))
                .collect(),
            None => self.hooks.iter().collect(),
        }
    }

    /// The key sets the `oci://` component `written` must be signed by, one key of each: its
    /// registry's and each of its uses' (a hook, a tool) `require_signature`.
    pub fn signers_of(&self, written: &str) -> Vec<Vec<PathBuf>> {
        let registry = crate::registry::OciRef::parse(written)
            .ok()
            .and_then(|r| self.registries.signers.get(r.registry()).cloned());
        let uses = self
            .tools
            .iter()
            .chain(self.hooks.iter().map(|h| &h.component))
            .filter(|c| matches!(&c.component, ComponentRef::Oci(r) if r == written))
            .filter_map(|c| c.require_signature.clone());
        let mut sets: Vec<Vec<PathBuf>> = registry.into_iter().chain(uses).collect();
        sets.sort();
        sets.dedup();
        sets
    }

    /// The plan of a daemon that only answers agents' hooks (`serve --hooks`): the
    /// chain, without hookhost's tools, `bash` or upstream servers.
    pub fn hooks_only(mut self) -> Plan {
        self.tools.clear();
        self.bash = None;
        self.upstreams.clear();
        self
    }

    /// The plan for a process that does one thing and exits (`hookhost call`, `hook …`;
    /// `session …` builds no runtime, only [`crate::Sessions::at`]): with what pays off only in a long-lived server left out — the pooling
    /// allocator (reserving its slots costs a thousand `mprotect`s and the page faults
    /// after them, 8 ms of CPU measured, for one instance or two) and the trace's inotify
    /// watches (see [`TraceSettings::watch`]) — and only the parts `part` needs.
    pub fn one_shot(mut self, part: OneShot) -> Plan {
        self.engine.pooling = false;
        self.trace.watch = false;
        if part != OneShot::Calls {
            self = self.hooks_only();
        }
        if part == OneShot::Stores {
            self.hooks.clear();
        }
        self
    }
}

impl Plan {
    /// The plan of a one-shot call of `tool` (`hookhost call`): when `tool` is one of
    /// `[tools]`, only that tool and the hooks that wrap it are loaded, and neither `bash`
    /// nor an upstream server starts. Loading the four built-in tools and three hooks
    /// where a `read_file` needs one and two was a third of that call's 8 ms (see
    /// docs/performance.md). A tool of another kind keeps the whole plan.
    ///
    /// What it leaves unchecked: a clash of `tool`'s name with an upstream server's tool,
    /// which `serve` and `config check` refuse.
    pub fn for_call(mut self, tool: &str) -> Plan {
        if !self.tools.iter().any(|t| t.name == tool) {
            return self;
        }
        self.tools.retain(|t| t.name == tool);
        self.hooks.retain(|h| h.tools.matches(tool));
        self.bash = None;
        self.upstreams.clear();
        self
    }
}

/// `[auth]`: how bearer JWTs are checked (see `mcp::jwt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtPlan {
    /// A JWKS URL (`http://`, `https://`) or file, resolved: it may hold a secret.
    pub jwks: Secret,
    /// The same as the config writes it (`${…}` unresolved): what messages show.
    pub jwks_written: String,
    pub issuer: String,
    pub audience: String,
    pub tenant_claim: String,
    pub subject_claim: String,
    pub authorization_servers: Vec<String>,
    pub resource: Option<String>,
}

/// `[serve] tls_cert` and `tls_key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A tool's or hook's component, as configured. Two are equal when they would load and
/// run alike (a reload keeps what it loaded of an equal one).
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentPlan {
    /// The tool's name, or the hook's.
    pub name: String,
    pub component: ComponentRef,
    pub grants: Grants,
    /// As `wasi:config/store` hands them over.
    pub settings: Settings,
    /// As written, to check against the settings a hook declares when it loads.
    pub setting_values: BTreeMap<String, WrittenSetting>,
    pub limits: LimitOverrides,
    pub allow_unknown_imports: bool,
    /// The public keys one of which must have signed it (`require_signature`); an
    /// `oci://` component only.
    pub require_signature: Option<Vec<PathBuf>>,
    /// The hosts its `wasi:http` requests may reach; none when `None`.
    pub network: Option<std::sync::Arc<crate::network::Allow>>,
}

/// A setting as the config writes it.
#[derive(Debug, Clone)]
pub struct WrittenSetting {
    pub value: toml::Value,
    /// The config's line that gives it; `None` when it comes from elsewhere
    /// (`component check --setting`).
    pub line: Option<usize>,
}

/// The same setting, wherever the file gives it.
impl PartialEq for WrittenSetting {
    fn eq(&self, other: &WrittenSetting) -> bool {
        self.value == other.value
    }
}

/// One layer of the hook chain.
#[derive(Debug, Clone, PartialEq)]
pub struct HookPlan {
    pub component: ComponentPlan,
    pub on_failure: FailurePolicy,
    pub tools: ToolMatch,
    pub instance: InstanceMode,
}

/// The `bash` tool.
#[derive(Debug, Clone, PartialEq)]
pub struct BashPlan {
    /// The mount it works in.
    pub mount: String,
    pub timeout: Option<Duration>,
    /// The mounts a sandboxed command sees.
    pub grants: Grants,
    /// How commands are confined; `None`: not at all (`sandbox = false`).
    pub sandbox: Option<ShellSandboxPlan>,
}

/// A sandboxed `bash`: bubblewrap, and what confines commands beside their mounts (each
/// tenant's [`Tenant::shell_network`] replaces its network, [`Tenant::shell_limits`]
/// override its limits: see [`ShellSandboxPlan::for_tenant`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ShellSandboxPlan {
    /// The bubblewrap program, when the config names one.
    pub bwrap: Option<PathBuf>,
    /// `[bash] network`.
    pub network: ShellNetwork,
    /// `[bash] limits` over the defaults.
    pub limits: ShellLimits,
}

impl ShellSandboxPlan {
    /// The network and limits of `tenant`'s commands (`None`: an undeclared tenant's,
    /// `[bash]`'s own), and whether the network is the tenant's own setting.
    pub fn for_tenant(&self, tenant: Option<&Tenant>) -> (ShellNetwork, ShellLimits, bool) {
        match tenant {
            Some(t) => (
                t.shell_network
                    .clone()
                    .unwrap_or_else(|| self.network.clone()),
                self.limits.with(&t.shell_limits),
                t.shell_network.is_some(),
            ),
            None => (self.network.clone(), self.limits, false),
        }
    }
}
