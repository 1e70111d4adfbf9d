//! The operator's config file (TOML): mounts, tools, the hook chain, their grants,
//! settings and limits. The built-in default is `default.toml` beside this file, and every
//! key is documented there and in the README.
//!
//! Every table refuses unknown keys, so a typo is an error, not a silently ignored line;
//! every error names the file, the line and the key. What the checks find is kept as a
//! [`Plan`] (typed: component references, grants, settings, tool matches, tenant ids,
//! templates), which the runtime is built from.

use crate::chain::{FailurePolicy, InstanceMode, ToolMatch};
use crate::component::{ComponentRef, SettingType};
use crate::ids::TenantId;
use crate::limits::{
    DEFAULT_KEEP_RESIDENT_BYTES, DEFAULT_POOL_INSTANCES, DEFAULT_TRACE_DIFF_BYTES, LimitOverrides,
    Limits, MAX_BASH_TIMEOUT, MAX_ID_BYTES, SYSTEM_PATHS, ShellLimitOverrides, ShellLimits,
};
use crate::mounts::{MountError, MountSpec, MountTable, Scope};
use crate::sandbox::{Access, Grants, Settings};
use crate::sessions::{Quota, TenantPolicy};
use crate::trace::TraceSettings;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// The text of the built-in configuration.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// The shortest bearer token accepted: 16 bytes, so a token cannot be guessed.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The mount `bash` runs in unless `[bash] mount` says otherwise.
pub const DEFAULT_BASH_MOUNT: &str = "/workspace";

/// The mount a sandboxed `bash` also sees, read-only, unless `[bash] grants` says
/// otherwise: the model reads offloaded outputs there.
pub const DEFAULT_BASH_RO_MOUNT: &str = "/artifacts";

/// A value of the file with where it was written, so that an error about it names its
/// line; reads as the value.
#[derive(Debug, Clone, Default)]
pub struct Located<T> {
    pub value: T,
    span: Range<usize>,
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<T>::deserialize(deserializer)?;
        Ok(Located {
            span: spanned.span(),
            value: spanned.into_inner(),
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

/// Why a config was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read it: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Parse {
        file: String,
        source: Box<toml::de::Error>,
    },
    #[error("{file}:{line}: {what}")]
    Invalid {
        file: String,
        line: usize,
        what: String,
    },
}

/// A config file read and checked, once: its values as written and the [`Plan`] made of
/// them.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub plan: Plan,
}

/// A whole config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The data directory (`{data}`); the `--data` flag overrides it.
    #[serde(default)]
    pub data: Option<PathBuf>,
    /// Virtual path → host directory template and scope. Leaving the table out keeps the
    /// built-in mounts; giving it replaces them.
    #[serde(default)]
    pub mounts: Option<BTreeMap<Spanned<String>, MountSpec>>,
    /// The host-native `bash` tool.
    #[serde(default)]
    pub bash: BashConfig,
    /// Tool components by the name agents call them.
    #[serde(default)]
    pub tools: BTreeMap<Spanned<String>, ToolConfig>,
    /// The hook chain, outermost first.
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
    /// Tenants by id. When any is declared, only declared tenants may have sessions.
    #[serde(default)]
    pub tenants: BTreeMap<Spanned<String>, TenantConfig>,
    /// MCP servers whose tools are served through the chain, by name.
    #[serde(default)]
    pub upstreams: BTreeMap<Spanned<String>, UpstreamConfig>,
    /// How components are compiled and instantiated.
    #[serde(default)]
    pub engine: EngineConfig,
    /// How `hookhost serve` makes its sessions.
    #[serde(default)]
    pub serve: ServeConfig,
    /// Where the session table lives.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// The host's trace of each session.
    #[serde(default)]
    pub trace: TraceConfig,
    /// Where spans go.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// The file it was read from, for messages (`<built-in config>`, `<config>`).
    #[serde(skip)]
    pub source: String,
}

/// The config, checked and typed: what a [`crate::Runtime`] is built from, so that nothing
/// is parsed twice and no `toml::Spanned` leaves this module. Made once, when the config is
/// read ([`Config::load`], [`Config::parse`]).
#[derive(Debug, Clone)]
pub struct Plan {
    pub mounts: MountTable,
    pub tools: Vec<ComponentPlan>,
    /// The hook chain, outermost first.
    pub hooks: Vec<HookPlan>,
    pub tenants: Vec<TenantPlan>,
    pub serve_workdir: Option<WorkdirTemplate>,
    /// The `bash` tool, when enabled.
    pub bash: Option<BashPlan>,
    pub upstreams: Vec<(String, UpstreamConfig)>,
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
    /// Neither tools nor hooks: the session table, the mounts and the trace's settings
    /// (`hookhost session …`).
    Sessions,
}

impl Plan {
    /// The plan for a process that does one thing and exits (`hookhost call`, `hook …`,
    /// `session …`): with what pays off only in a long-lived server left out — the pooling
    /// allocator (reserving its slots costs a thousand `mprotect`s and the page faults
    /// after them, 8 ms of CPU measured, for one instance or two) and the trace's inotify
    /// watches (see [`TraceSettings::watch`]) — and only the parts `part` needs.
    pub fn one_shot(mut self, part: OneShot) -> Plan {
        self.engine.pooling = false;
        self.trace.watch = false;
        if part != OneShot::Calls {
            self.tools.clear();
            self.bash = None;
            self.upstreams.clear();
        }
        if part == OneShot::Sessions {
            self.hooks.clear();
        }
        self
    }
}

/// A tool's or hook's component, as configured.
#[derive(Debug, Clone)]
pub struct ComponentPlan {
    /// The tool's name, or the hook's.
    pub name: String,
    pub component: ComponentRef,
    pub grants: Grants,
    /// As `wasi:config/store` hands them over.
    pub settings: Settings,
    /// As written, to check against the settings a component declares when it loads.
    pub setting_values: BTreeMap<String, toml::Value>,
    pub limits: LimitOverrides,
    pub allow_unknown_imports: bool,
}

/// One layer of the hook chain.
#[derive(Debug, Clone)]
pub struct HookPlan {
    pub component: ComponentPlan,
    pub on_failure: FailurePolicy,
    pub tools: ToolMatch,
    pub instance: InstanceMode,
}

/// A declared tenant.
#[derive(Debug, Clone)]
pub struct TenantPlan {
    pub id: TenantId,
    /// Its chain, by hook name, outermost first; the whole chain when `None`.
    pub hooks: Option<Vec<String>>,
    pub policy: TenantPolicy,
    /// The tools it may call; every tool when `None`.
    pub tools: Option<ToolMatch>,
}

/// The `bash` tool.
#[derive(Debug, Clone)]
pub struct BashPlan {
    /// The mount it works in.
    pub mount: String,
    pub timeout: Option<Duration>,
    /// The mounts a sandboxed command sees.
    pub grants: Grants,
    /// How commands are confined; `None`: not at all (`sandbox = false`).
    pub sandbox: Option<ShellSandboxPlan>,
}

/// A sandboxed `bash`: bubblewrap, and each tenant's network switch and limits.
#[derive(Debug, Clone)]
pub struct ShellSandboxPlan {
    /// The bubblewrap program, when the config names one.
    pub bwrap: Option<PathBuf>,
    /// For sessions of tenants without a `[tenants.ID.bash]` table (and undeclared ones).
    pub policy: ShellPolicy,
    pub tenants: BTreeMap<TenantId, ShellPolicy>,
}

impl ShellSandboxPlan {
    /// What applies to `tenant`'s commands.
    pub fn policy(&self, tenant: &TenantId) -> ShellPolicy {
        self.tenants.get(tenant).copied().unwrap_or(self.policy)
    }
}

/// What confines one tenant's commands beside the mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShellPolicy {
    pub network: bool,
    pub limits: ShellLimits,
}

/// The `[trace]` table: the host's trace of each session (see [`crate::trace`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceConfig {
    /// Whether sessions are traced; a tenant's `trace` overrides it.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The mount whose directory holds `trace/events.jsonl` (a session-scoped mount, so the
    /// trace goes with its session); no trace file when the mount is not declared.
    #[serde(default = "default_trace_mount")]
    pub mount: String,
    /// The largest unified diff written inline in a `file.*` event; larger ones are
    /// written under `trace/diffs/` and referenced.
    #[serde(default = "default_diff_bytes")]
    pub diff_bytes: usize,
}

impl Default for TraceConfig {
    fn default() -> TraceConfig {
        TraceConfig {
            enabled: true,
            mount: default_trace_mount(),
            diff_bytes: DEFAULT_TRACE_DIFF_BYTES,
        }
    }
}

fn yes() -> bool {
    true
}

fn default_trace_mount() -> String {
    "/artifacts".into()
}

fn default_diff_bytes() -> usize {
    DEFAULT_TRACE_DIFF_BYTES
}

/// The `[telemetry]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// An OTLP/HTTP endpoint (`http://collector:4318`): each call is exported as a span
    /// with a child per layer phase. `OTEL_EXPORTER_OTLP_ENDPOINT` is used when left out.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
}

/// The `[sessions]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// The session table: absent, the embedded SQLite file `{data}/sessions.db`; a
    /// `postgres://user@host:port/database` URL, a PostgreSQL database that several hosts
    /// sharing one data directory use as one fleet (see the README's "A fleet of hosts").
    #[serde(default)]
    pub store: Option<Secret>,
}

/// The `[serve]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// The working directory (`{workdir}`) of the sessions `serve` makes, as a
    /// [`WorkdirTemplate`]; `serve --workdir` overrides it. None: no working directory.
    #[serde(default)]
    pub workdir: Option<Spanned<String>>,
}

/// The `[engine]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Use the pooling allocator (falls back to on-demand where the machine cannot reserve
    /// its address space).
    pub pooling: bool,
    /// Its slots: live component instances at once.
    pub pool_instances: u32,
    /// Bytes of each pooled memory kept resident between instances.
    pub keep_resident_bytes: u64,
    /// Cache compiled components in `{data}/cache`.
    pub cache: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            pooling: true,
            pool_instances: DEFAULT_POOL_INSTANCES,
            keep_resident_bytes: DEFAULT_KEEP_RESIDENT_BYTES,
            cache: true,
        }
    }
}

/// An `[upstreams.NAME]` table: an MCP server whose tools hookhost serves as
/// `NAME__TOOL`, through the hook chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// A program speaking MCP on stdio, started with `args`.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Or the URL of a Streamable HTTP MCP server.
    #[serde(default)]
    pub url: Option<String>,
    /// How long one call (and the start) may take; 60 s when left out.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// The child's environment besides `PATH` (it inherits nothing else). A value may
    /// name host variables: `GITHUB_TOKEN = "${GITHUB_TOKEN}"`.
    #[serde(default)]
    pub env: BTreeMap<String, Secret>,
    /// HTTP headers sent to a `url` upstream, e.g. `Authorization = "Bearer ${TOKEN}"`;
    /// values may name host variables as in `env`.
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
}

/// `value` with each `${NAME}` replaced by the host's environment variable `NAME`.
///
/// # Errors
///
/// The name of a variable that is not set (never a value), or an unclosed `${`.
pub fn expand_env(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find('}') else {
            return Err("an unclosed `${`".into());
        };
        let name = &rest[at + 2..at + end];
        match std::env::var(name) {
            Ok(v) => out.push_str(&v),
            Err(_) => return Err(format!("the environment variable {name} is not set")),
        }
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A secret from the config: compared, never printed.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A `[tenants.ID]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Its chain: hook names, outermost first; every hook, in file order, when left out.
    #[serde(default)]
    pub hooks: Option<Vec<Spanned<String>>>,
    /// How many sessions it may have at once; unlimited when left out.
    #[serde(default)]
    pub max_sessions: Option<usize>,
    /// Bytes its session and tenant directories may hold; unlimited when left out.
    #[serde(default)]
    pub disk_quota_bytes: Option<u64>,
    /// Entries (files, directories, links) they may hold; unlimited when left out.
    #[serde(default)]
    pub disk_quota_files: Option<u64>,
    /// Limits for every component call of its sessions (a hook's or tool's own win).
    #[serde(default)]
    pub limits: Located<LimitOverrides>,
    /// The bearer token its MCP clients present over HTTP.
    #[serde(default)]
    pub token: Option<Secret>,
    /// Its network switch and limits for `bash`.
    #[serde(default)]
    pub bash: TenantBashConfig,
    /// Whether its sessions are traced (`[trace] enabled` when left out).
    #[serde(default)]
    pub trace: Option<bool>,
    /// The tools it may call, names with `*`/`?` wildcards (`["read_file", "fs__*"]`);
    /// every tool when left out. Others are unknown to it and missing from its list.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// The working directory of its sessions made by `serve`, over `[serve] workdir`: a
    /// [`WorkdirTemplate`]. The operator chooses it; a client never does.
    #[serde(default)]
    pub workdir: Option<Spanned<String>>,
}

/// The `[bash]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashConfig {
    /// Off unless set: bash runs host programs, outside WebAssembly.
    #[serde(default)]
    pub enabled: bool,
    /// The mount it works in; [`DEFAULT_BASH_MOUNT`] when left out.
    #[serde(default)]
    pub mount: Option<Spanned<String>>,
    /// Its time limit when a call gives none, 1 to `MAX_BASH_TIMEOUT`'s seconds.
    #[serde(default)]
    pub timeout_secs: Option<Spanned<u64>>,
    /// The mounts a command sees, at their virtual paths: `ro` or `rw`. Left out: its
    /// `mount` read-write and `/artifacts` (when declared) read-only.
    #[serde(default)]
    pub grants: Option<BTreeMap<Spanned<String>, Access>>,
    /// Commands in a sandbox of their session (the default; see `tools::bash`). `false`
    /// runs commands as the host's user, with every file that user can reach.
    #[serde(default = "yes")]
    pub sandbox: bool,
    /// Accept `sandbox = false` although tenants are declared: every tenant's shell then
    /// reads every other tenant's files and this config's tokens.
    #[serde(default)]
    pub unsandboxed_with_tenants: bool,
    /// Let commands reach the network (off: a network namespace of their own, with only
    /// a loopback). A tenant's `[tenants.ID.bash] network` overrides it.
    #[serde(default)]
    pub network: bool,
    /// Bounds of each command (see [`ShellLimits`]); a tenant's override these.
    #[serde(default)]
    pub limits: Located<ShellLimitOverrides>,
    /// The bubblewrap program; `bwrap` found in `PATH` when left out.
    #[serde(default)]
    pub bwrap: Option<PathBuf>,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig {
            enabled: false,
            mount: None,
            timeout_secs: None,
            grants: None,
            sandbox: true,
            unsandboxed_with_tenants: false,
            network: false,
            limits: Located::default(),
            bwrap: None,
        }
    }
}

/// A `[tenants.ID.bash]` table: the tenant's own network switch and limits for `bash`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantBashConfig {
    /// Over `[bash] network`.
    #[serde(default)]
    pub network: Option<bool>,
    /// Over `[bash] limits`.
    #[serde(default)]
    pub limits: Located<ShellLimitOverrides>,
}

/// A `[tools.NAME]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// `builtin:NAME` or a path to a `.wasm` component of the `tool` world.
    pub component: Spanned<String>,
    /// Mounts it may use: virtual path → `ro` or `rw`.
    #[serde(default)]
    pub grants: BTreeMap<Spanned<String>, Access>,
    /// Handed to it through `wasi:config/store`.
    #[serde(default)]
    pub settings: BTreeMap<Spanned<String>, toml::Value>,
    /// Its limits, over the tenant's.
    #[serde(default)]
    pub limits: Located<LimitOverrides>,
    /// Let imports the host does not provide trap when called instead of refusing the
    /// component at load (for language runtimes that import more than they use).
    #[serde(default)]
    pub allow_unknown_imports: bool,
}

/// One `[[hooks]]` entry. (Its fields repeat [`ToolConfig`]'s rather than flatten it:
/// serde cannot refuse unknown keys through a flattened struct.)
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// Unique in the chain; names the hook in logs and error messages.
    pub name: Spanned<String>,
    /// `builtin:NAME` or a path to a `.wasm` component of the `hook` world.
    pub component: Spanned<String>,
    /// `open` (default): a failing hook is skipped. `closed`: it refuses the call or
    /// withholds the output.
    #[serde(default)]
    pub on_failure: FailurePolicy,
    /// The tools it applies to, with `*` wildcards; every tool when left out.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Mounts it may use: virtual path → `ro` or `rw`.
    #[serde(default)]
    pub grants: BTreeMap<Spanned<String>, Access>,
    /// Handed to it through `wasi:config/store`.
    #[serde(default)]
    pub settings: BTreeMap<Spanned<String>, toml::Value>,
    /// Its limits, over the tenant's.
    #[serde(default)]
    pub limits: Located<LimitOverrides>,
    /// As for tools: unknown imports trap when called instead of failing the load.
    #[serde(default)]
    pub allow_unknown_imports: bool,
    /// `per-call` (default): a fresh instance per call. `per-session`: one kept per session.
    #[serde(default)]
    pub instance: InstanceMode,
}

impl Config {
    /// The built-in configuration.
    pub fn builtin() -> Loaded {
        Config::parse(DEFAULT_CONFIG, "<built-in config>").expect("the built-in config is valid")
    }

    /// Reads and validates a config file.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file, line and key to fix.
    pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        Config::parse_in(&text, &file, path.parent())
    }

    /// A relative `component` path names a file beside the config, wherever hookhost is
    /// started from.
    fn resolve_components_in(&mut self, dir: &Path) {
        let components = self
            .hooks
            .iter_mut()
            .map(|h| &mut h.component)
            .chain(self.tools.values_mut().map(|t| &mut t.component));
        for component in components {
            let path = Path::new(component.get_ref());
            if component.get_ref().starts_with("builtin:") || path.is_absolute() {
                continue;
            }
            let resolved = dir.join(path).display().to_string();
            *component = Spanned::new(component.span(), resolved);
        }
    }

    /// Parses and validates config text; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file, line and key to fix.
    pub fn parse(text: &str, file: &str) -> Result<Loaded, ConfigError> {
        Config::parse_in(text, file, None)
    }

    /// [`Config::parse`], with relative component paths resolved in `dir` (the config
    /// file's directory) when given.
    fn parse_in(text: &str, file: &str, dir: Option<&Path>) -> Result<Loaded, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            file: file.to_string(),
            source: Box::new(source),
        })?;
        if let Some(dir) = dir.filter(|d| !d.as_os_str().is_empty()) {
            config.resolve_components_in(dir);
        }
        config.source = file.to_string();
        let plan = config
            .validate()
            .map_err(|Invalid { span, what }| ConfigError::Invalid {
                file: file.to_string(),
                line: text[..span.start.min(text.len())].matches('\n').count() + 1,
                what,
            })?;
        Ok(Loaded { config, plan })
    }

    /// The mounts in force: the file's, or the built-in ones.
    pub fn mounts(&self) -> BTreeMap<String, MountSpec> {
        match &self.mounts {
            Some(mounts) => mounts
                .iter()
                .map(|(p, s)| (p.get_ref().clone(), s.clone()))
                .collect(),
            None => Config::builtin().config.mounts(),
        }
    }

    /// The mount `bash` runs in.
    pub fn bash_mount(&self) -> &str {
        self.bash
            .mount
            .as_ref()
            .map_or(DEFAULT_BASH_MOUNT, |m| m.get_ref())
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

    /// Checks everything and makes the [`Plan`].
    fn validate(&self) -> Result<Plan, Invalid> {
        let mounts = self.mounts();
        let table = MountTable::new(mounts.clone());
        if let Err(e) = &table {
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
            return Err(Invalid::at(span, format!("mounts: {e}")));
        }
        let mut plan = Plan {
            mounts: table.expect("checked above"),
            tools: Vec::new(),
            hooks: Vec::new(),
            tenants: Vec::new(),
            serve_workdir: None,
            bash: None,
            upstreams: Vec::new(),
            engine: self.engine.clone(),
            fuel: self.uses_fuel(),
            max_memory_bytes: self.max_memory_bytes(),
            session_store: self.sessions.store.clone(),
            trace: TraceSettings {
                enabled: self.trace.enabled,
                mount: mounts
                    .get(&self.trace.mount)
                    .filter(|m| m.scope == Scope::Session)
                    .map(|_| self.trace.mount.clone()),
                diff_bytes: self.trace.diff_bytes,
                tenants: HashMap::new(),
                watch: true,
            },
            otlp_endpoint: self.telemetry.otlp_endpoint.clone(),
            source: self.source.clone(),
        };
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
            check_grants(&mounts, &owner, &tool.grants)?;
            check_settings(&owner, &tool.component, &tool.settings)?;
            check_limits(&owner, tool.limits.out_of_range(), &tool.limits.span)?;
            plan.tools.push(ComponentPlan::of(
                name.get_ref(),
                &tool.component,
                &tool.grants,
                &tool.settings,
                *tool.limits,
                tool.allow_unknown_imports,
            ));
        }
        let mut names = BTreeSet::new();
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
            check_grants(&mounts, &owner, &hook.grants)?;
            check_settings(&owner, &hook.component, &hook.settings)?;
            check_limits(&owner, hook.limits.out_of_range(), &hook.limits.span)?;
            plan.hooks.push(HookPlan {
                component: ComponentPlan::of(
                    hook.name.get_ref(),
                    &hook.component,
                    &hook.grants,
                    &hook.settings,
                    *hook.limits,
                    hook.allow_unknown_imports,
                ),
                on_failure: hook.on_failure,
                tools: hook
                    .tools
                    .as_deref()
                    .map_or_else(ToolMatch::all, ToolMatch::new),
                instance: hook.instance,
            });
        }
        for (id, tenant) in &self.tenants {
            let tenant_id = TenantId::new(id.get_ref().as_str())
                .map_err(|e| Invalid::at(id.span(), format!("tenants: {e}")))?;
            let owner = format!("tenants.{}", id.get_ref());
            check_limits(&owner, tenant.limits.out_of_range(), &tenant.limits.span)?;
            let limits = &tenant.bash.limits;
            check_limits(
                &format!("{owner}.bash"),
                limits.out_of_range(),
                &limits.span,
            )?;
            for hook in tenant.hooks.iter().flatten() {
                if !names.contains(hook.get_ref().as_str()) {
                    return Err(Invalid::at(
                        hook.span(),
                        format!(
                            "tenants.{}.hooks: no hook is named {:?} (hooks: {})",
                            id.get_ref(),
                            hook.get_ref(),
                            names.iter().copied().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
            let workdir = tenant
                .workdir
                .as_ref()
                .map(|t| {
                    WorkdirTemplate::new(t.get_ref()).map_err(|why| {
                        Invalid::at(t.span(), format!("tenants.{}.workdir: {why}", id.get_ref()))
                    })
                })
                .transpose()?;
            if let Some(traced) = tenant.trace {
                plan.trace.tenants.insert(tenant_id.clone(), traced);
            }
            plan.tenants.push(TenantPlan {
                id: tenant_id,
                hooks: tenant
                    .hooks
                    .as_ref()
                    .map(|names| names.iter().map(|n| n.get_ref().clone()).collect()),
                policy: TenantPolicy {
                    token: tenant.token.clone(),
                    max_sessions: tenant.max_sessions,
                    quota: Quota {
                        bytes: tenant.disk_quota_bytes,
                        entries: tenant.disk_quota_files,
                    },
                    limits: *tenant.limits,
                    workdir,
                },
                tools: tenant.tools.as_deref().map(ToolMatch::new),
            });
        }
        let mut tokens = BTreeSet::new();
        for (id, tenant) in &self.tenants {
            if let Some(token) = &tenant.token
                && (token.expose().len() < MIN_TOKEN_BYTES || !tokens.insert(token.expose()))
            {
                return Err(Invalid::at(
                    id.span(),
                    format!(
                        "tenants.{}.token: a token is at least {MIN_TOKEN_BYTES} bytes and belongs to one tenant",
                        id.get_ref()
                    ),
                ));
            }
        }
        for (name, upstream) in &self.upstreams {
            let owner = format!("upstreams.{}", name.get_ref());
            if !is_tool_name(name.get_ref()) || name.get_ref().contains("__") {
                return Err(Invalid::at(
                    name.span(),
                    format!("{owner}: a name is letters, digits, '_' and '-', without '__'"),
                ));
            }
            if upstream.command.is_some() == upstream.url.is_some() {
                return Err(Invalid::at(
                    name.span(),
                    format!("{owner}: give either `command` (stdio) or `url` (HTTP)"),
                ));
            }
        }
        plan.serve_workdir = self
            .serve
            .workdir
            .as_ref()
            .map(|t| {
                WorkdirTemplate::new(t.get_ref())
                    .map_err(|why| Invalid::at(t.span(), format!("serve.workdir: {why}")))
            })
            .transpose()?;
        if let Some(shared) = &self.serve.workdir
            && !shared.get_ref().contains("{tenant}")
            && self
                .tenants
                .values()
                .filter(|t| t.workdir.is_none())
                .count()
                > 1
        {
            return Err(Invalid::at(
                shared.span(),
                "serve.workdir: tenants would share one working directory: name {tenant} in it, or give each tenant its own `workdir`".into(),
            ));
        }
        if self.engine.pooling && self.engine.pool_instances == 0 {
            return Err(Invalid::at(
                0..0,
                "engine.pool_instances: a pool needs at least 1 slot; set `pooling = false` to allocate on demand instead".into(),
            ));
        }
        if self.bash.enabled {
            plan.bash = Some(self.bash_plan(&mounts)?);
        }
        plan.upstreams = self
            .upstreams
            .iter()
            .map(|(name, spec)| (name.get_ref().clone(), spec.clone()))
            .collect();
        Ok(plan)
    }
}

impl Config {
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
            let policy = ShellPolicy {
                network: bash.network,
                limits: ShellLimits::default().with(&bash.limits),
            };
            let tenants = self
                .tenants
                .iter()
                .filter_map(|(id, t)| {
                    let id = TenantId::new(id.get_ref().as_str()).ok()?;
                    let own = ShellPolicy {
                        network: t.bash.network.unwrap_or(policy.network),
                        limits: policy.limits.with(&t.bash.limits),
                    };
                    Some((id, own))
                })
                .collect();
            Some(ShellSandboxPlan {
                bwrap: bash.bwrap.clone(),
                policy,
                tenants,
            })
        } else {
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

/// A validation error before it is given its file and line.
struct Invalid {
    span: Range<usize>,
    what: String,
}

impl Invalid {
    fn at(span: Range<usize>, what: String) -> Invalid {
        Invalid { span, what }
    }
}

/// Tool names reach the model and, through hooks, file names: keep them plain.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_ID_BYTES
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
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
        _ => Ok(()),
    }
}

/// Refuses settings a built-in does not declare, or of the wrong type.
fn check_settings(
    owner: &str,
    component: &Spanned<String>,
    settings: &BTreeMap<Spanned<String>, toml::Value>,
) -> Result<(), Invalid> {
    let Some(declared) = ComponentRef::parse(component.get_ref()).declared_settings() else {
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
        settings: &BTreeMap<Spanned<String>, toml::Value>,
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
                .map(|(k, v)| (k.get_ref().clone(), v.clone()))
                .collect(),
            limits,
            allow_unknown_imports,
        }
    }
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
fn settings(settings: &BTreeMap<Spanned<String>, toml::Value>) -> Settings {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_config_is_valid() {
        let c = Config::builtin().config;
        assert!(c.bash.enabled);
        let names: Vec<&str> = c.hooks.iter().map(|h| h.name.get_ref().as_str()).collect();
        assert_eq!(names, ["offload", "audit", "plan-writer"]);
        let s = settings(&c.hooks[0].settings);
        assert_eq!(
            s["exclude_tools"],
            r#"["read_file","write_file","edit_file"]"#
        );
        assert_eq!(s["threshold"], "10000");
    }

    #[test]
    fn the_plan_is_the_config_checked_and_typed() {
        let text = format!(
            "{DEFAULT_CONFIG}\n[tenants.acme]\nhooks = [\"audit\"]\ntools = [\"read_*\"]\n\
             workdir = \"/srv/{{tenant}}\"\ndisk_quota_bytes = 10\n"
        );
        let plan = Config::parse(&text, "t.toml").unwrap().plan;
        let names: Vec<&str> = plan
            .hooks
            .iter()
            .map(|h| h.component.name.as_str())
            .collect();
        assert_eq!(names, ["offload", "audit", "plan-writer"]);
        assert_eq!(
            plan.hooks[0].component.component,
            ComponentRef::Builtin("offload".into())
        );
        assert_eq!(plan.hooks[0].component.settings["threshold"], "10000");
        assert!(plan.hooks[2].tools.matches("todo_write") && !plan.hooks[2].tools.matches("bash"));
        let acme = &plan.tenants[0];
        assert_eq!(acme.id.as_str(), "acme");
        assert_eq!(acme.hooks.as_deref(), Some(&["audit".to_string()][..]));
        assert_eq!(acme.policy.quota.bytes, Some(10));
        assert_eq!(
            acme.policy.workdir.as_ref().unwrap().as_str(),
            "/srv/{tenant}"
        );
        let tools = acme.tools.as_ref().unwrap();
        assert!(tools.matches("read_file") && !tools.matches("bash"));
        assert_eq!(plan.bash.as_ref().unwrap().mount, "/workspace");
        assert_eq!(plan.source, "t.toml");
    }

    #[test]
    fn workdir_templates_are_absolute_or_cwd_with_whole_tenant_segments() {
        for good in [
            "/srv/projects/{tenant}",
            "{cwd}",
            "{cwd}/sub/{tenant}",
            "/srv/p",
        ] {
            assert!(WorkdirTemplate::new(good).is_ok(), "{good}");
        }
        for bad in [
            "relative/{tenant}",
            "/srv/../etc",
            "/srv/t-{tenant}",
            "/srv/{cwd}",
            "/srv/{session}",
        ] {
            assert!(WorkdirTemplate::new(bad).is_err(), "{bad}");
        }
        let tenant = TenantId::new("Team.A").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let template = format!("{}/{{tenant}}", dir.path().display());
        let resolved = WorkdirTemplate::new(&template)
            .unwrap()
            .resolve(&tenant)
            .unwrap();
        assert_eq!(resolved, dir.path().join("%54eam%2E%41"));
        assert!(resolved.is_dir(), "made when missing");
    }

    #[test]
    fn tenants_may_not_share_a_working_directory_by_accident() {
        let shared = "[serve]\nworkdir = \"/srv/p\"\n[tenants.a]\n[tenants.b]\n";
        let e = Config::parse(shared, "x.toml").unwrap_err().to_string();
        assert!(
            e.contains("tenants would share one working directory"),
            "{e}"
        );
        let own = "[serve]\nworkdir = \"/srv/{tenant}\"\n[tenants.a]\n[tenants.b]\n";
        assert!(Config::parse(own, "x.toml").is_ok());
    }

    #[test]
    fn an_empty_pool_is_refused_with_the_fix() {
        let e = Config::parse("[engine]\npool_instances = 0\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pooling = false"), "{e}");
        assert!(Config::parse("[engine]\npooling = false\npool_instances = 0\n", "x.toml").is_ok());
    }

    #[test]
    fn unknown_keys_are_refused_with_their_line() {
        let e = Config::parse("[bash]\nenabled = true\ntypo = 1\n", "x.toml").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("x.toml") && msg.contains("typo") && msg.contains("line 3"),
            "{msg}"
        );
    }
}
