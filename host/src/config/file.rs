//! The config file's tables, as written: what serde reads, with the spans errors name.

use super::Located;
use crate::chain::{FailurePolicy, InstanceMode};
use crate::limits::{
    DEFAULT_KEEP_RESIDENT_BYTES, DEFAULT_POOL_INSTANCES, DEFAULT_TRACE_DIFF_BYTES, LimitOverrides,
    RateLimit, ShellLimitOverrides,
};
use crate::mounts::{MountSpec, PersistentSpec};
pub use crate::network::NetworkGrant;
use crate::sandbox::Access;
use crate::secret::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Spanned;

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
    /// Persistent directories (`/persistent/NAME`) → their backing tree and commit policy;
    /// each is a mount too, of the session's checkout.
    #[serde(default)]
    pub persistent: BTreeMap<Spanned<String>, PersistentSpec>,
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
    /// What hookhost keeps of the agents' sessions it runs hooks for.
    #[serde(default)]
    pub agents: AgentsConfig,
    /// Where spans go.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Bearer JWTs naming tenants, beside tenants' own tokens.
    #[serde(default)]
    pub auth: Option<AuthConfig>,
    /// The OCI registries `oci://` components come from, by `host[:port]` as a reference
    /// names them: how to reach one (credentials come from `HOOKHOST_REGISTRY_USERNAME` and
    /// `HOOKHOST_REGISTRY_PASSWORD` for the registry `HOOKHOST_REGISTRY_HOST` names, or the
    /// Docker config file). A registry not listed is
    /// reached over HTTPS.
    #[serde(default)]
    pub registries: BTreeMap<Spanned<String>, RegistryConfig>,
    /// How components' granted requests are resolved and verified (see
    /// [`crate::network`]).
    #[serde(default)]
    pub network: NetworkConfig,
    /// The file it was read from, for messages (`<built-in config>`, `<config>`).
    #[serde(skip)]
    pub source: String,
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

/// The `[auth]` table: bearer JWTs from an identity provider, each naming its tenant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Where the provider's signing keys are: a JWKS URL (`https://idp/.well-known/jwks.json`)
    /// or file; it may name host variables or secret files (`${NAME}`, `${file:PATH}`).
    pub jwks: Spanned<Secret>,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry (this server's name at the provider).
    pub audience: String,
    /// The claim whose value is the tenant's id.
    #[serde(default = "default_tenant_claim")]
    pub tenant_claim: String,
    /// The claim whose value is the token's subject: a session opened with a token is
    /// bound to its subject as well as its tenant, and another subject's token of the same
    /// tenant cannot use it. A token without it is refused.
    #[serde(default = "default_subject_claim")]
    pub subject_claim: String,
    /// Where clients get tokens, in the protected-resource metadata; `[issuer]` when left
    /// out.
    #[serde(default)]
    pub authorization_servers: Option<Vec<String>>,
    /// This server's MCP endpoint as clients reach it (`https://mcp.example/mcp`), in the
    /// metadata; taken from each request's `Host` when left out.
    #[serde(default)]
    pub resource: Option<String>,
}

fn default_tenant_claim() -> String {
    "tenant".into()
}

fn default_subject_claim() -> String {
    "sub".into()
}

/// The `[agents]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsConfig {
    /// How long an agent's session it ended (not cleared) keeps its files for a resume,
    /// once idle (`30m`, `12h`, `7d`): then `session gc` deletes it. Default
    /// [`crate::limits::DEFAULT_KEEP_ARTIFACTS`].
    #[serde(default)]
    pub keep_artifacts: Option<Spanned<String>>,
}

/// A `[registries."HOST"]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// Plain HTTP instead of HTTPS: for a registry on this machine (`localhost`, a loopback
    /// address); another needs `insecure_remote` too.
    #[serde(default)]
    pub insecure: bool,
    /// Plain HTTP to a registry that is not this machine, on a network you trust: whoever
    /// is on the path can give a tag another component. A component pinned by digest is
    /// still checked against its digest.
    #[serde(default)]
    pub insecure_remote: bool,
    /// The user to sign in as (`${NAME}` and `${file:PATH}` are replaced), with `password`;
    /// over the environment's and the Docker config file's.
    #[serde(default)]
    pub username: Option<Spanned<Secret>>,
    /// Its password or token (`"${REGISTRY_TOKEN}"`, `"${file:/run/secrets/registry}"`).
    #[serde(default)]
    pub password: Option<Spanned<Secret>>,
    /// Every component from this registry must be signed by one of these keys to load
    /// (besides what a component's own `require_signature` asks).
    #[serde(default)]
    pub require_signature: Option<Spanned<SignatureConfig>>,
}

/// `require_signature = { keys = ["cosign.pub", …] }`: the PEM ECDSA P-256 public keys a
/// registry component must be signed by, one of them at least, in the form `cosign sign
/// --key` (and `hookhost component sign`) writes (see `crate::registry`'s `signature`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureConfig {
    /// The public keys' PEM files (`cosign.pub`, `openssl ec -pubout`), one of which must
    /// have signed the component's manifest.
    pub keys: Vec<String>,
}

/// The `[network]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// DNS servers (`"10.0.0.2"`, `"127.0.0.1:5353"`) asked for the names components'
    /// requests go to, instead of the system's resolver (`/etc/hosts`, `resolv.conf`).
    #[serde(default)]
    pub nameservers: Vec<Spanned<String>>,
    /// PEM files of certificate authorities that components' HTTPS requests trust besides
    /// the system's roots (a company's internal CA).
    #[serde(default)]
    pub ca_certificates: Vec<PathBuf>,
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
    /// sharing one data directory use as one fleet (see the book's "A fleet of hosts", docs/operating.md).
    /// `${NAME}` and `${file:PATH}` in it are replaced (a password from the environment).
    #[serde(default)]
    pub store: Option<Spanned<Secret>>,
}

/// The `[serve]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// The working directory (`{workdir}`) of the sessions `serve` makes, as a
    /// [`crate::sessions::WorkdirTemplate`]; `serve --workdir` overrides it. None: no working directory.
    #[serde(default)]
    pub workdir: Option<Spanned<String>>,
    /// The bearer token of the admin page and API (`/admin`, `serve --http`): in clear,
    /// `${NAME}` or `${file:PATH}`, as a tenant's `token`. No admin page without one.
    #[serde(default)]
    pub admin_token: Option<Spanned<Secret>>,
    /// Or its SHA-256, 64 hexadecimal digits.
    #[serde(default)]
    pub admin_token_sha256: Option<Spanned<String>>,
    /// Serve the admin page and API on this address of their own (`127.0.0.1:9090`, a
    /// name resolved), over TLS when `tls_cert` is set, instead of on `serve --http`'s:
    /// a firewall can then keep it from the clients. Read at start, not on a reload.
    /// Needs `admin_token`.
    #[serde(default)]
    pub admin_listen: Option<Spanned<String>>,
    /// The certificate chain (PEM) `serve --http` presents over TLS, with `tls_key`; both
    /// are read again on a reload, so a renewed certificate needs no restart.
    #[serde(default)]
    pub tls_cert: Option<Spanned<PathBuf>>,
    /// The private key (PEM: PKCS#8, SEC1 or PKCS#1) of `tls_cert`.
    #[serde(default)]
    pub tls_key: Option<Spanned<PathBuf>>,
    /// How long `serve` drains at SIGTERM or SIGINT (`5s`, `20s`): running calls may finish
    /// and be answered for this long, new requests get 503. Read at start, not on a
    /// reload. Default [`crate::limits::SHUTDOWN_GRACE`].
    #[serde(default)]
    pub shutdown_grace: Option<Spanned<String>>,
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
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// A program speaking MCP on its stdio, started per instance with `args`.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Or the URL of a Streamable HTTP MCP server; it may name host variables or secret
    /// files as `env` does (`https://mcp.example/?key=${KEY}`).
    #[serde(default)]
    pub url: Option<Secret>,
    /// How long one call (and the start) may take; 60 s when left out.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// The child's environment besides `PATH` (it inherits nothing else). A value may
    /// name host variables, `GITHUB_TOKEN = "${GITHUB_TOKEN}"`, or files,
    /// `"${file:/run/secrets/github}"`.
    #[serde(default)]
    pub env: BTreeMap<String, Secret>,
    /// HTTP headers sent to a `url` upstream, e.g. `Authorization = "Bearer ${TOKEN}"`;
    /// values may name host variables as in `env`.
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// What its tools' and prompts' names are served with in front: `NAME__` when left
    /// out; `""` serves them under their own names. A name two servers (or a server and a
    /// host tool) would both serve stops the start; one that appears later (a server
    /// restarted with other tools) is served by the first in the config, host tools
    /// first, and the other's is not served (logged as an error).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Whether it may ask a client's session for its roots (`roots/list`): hookhost then
    /// answers with the session's working directory (none when it has none). Off unless
    /// set: a working directory's path says something of the user.
    #[serde(default)]
    pub roots: bool,
    /// Which sessions share one process (or connection) of it: `shared` (every session,
    /// the default), `tenant` (one per tenant) or `session` (one per session). A stateful
    /// server — a memory, a filesystem — needs `tenant` or `session` to keep tenants
    /// apart. `{tenant}` (and with `session`, `{session}` and `{workdir}`) in `args`,
    /// `env`, `headers` and `url` are the instance's; `{data}` is the data directory.
    #[serde(default)]
    pub scope: UpstreamScope,
    /// How many instances of a `tenant` or `session` upstream may run at once;
    /// [`crate::limits::DEFAULT_UPSTREAM_INSTANCES`] when left out.
    #[serde(default)]
    pub max_instances: Option<usize>,
    /// For a `url` upstream that requires MCP authorization: the client hookhost is at its
    /// authorization server (found from the server's protected-resource metadata).
    #[serde(default)]
    pub oauth: Option<UpstreamOAuth>,
    /// Which MCP revision hookhost speaks to it: `auto` (the default) begins with the 2025
    /// era's `initialize` and, for a server that refuses it (one that speaks only
    /// 2026-07-28), connects again with `server/discover`; `"2026-07-28"` or
    /// `"2025-11-25"` pins one.
    #[serde(default)]
    pub protocol: UpstreamProtocol,
    /// Whether the host is ready without it: an optional upstream that is not up is
    /// reported by `/readyz` as degraded, not as a reason to take the host out of a
    /// balancer (its tools are listed once it comes up). Off unless set.
    #[serde(default)]
    pub optional: bool,
}

/// Which MCP revision hookhost speaks to an upstream (`[upstreams.NAME] protocol`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum UpstreamProtocol {
    /// `initialize` first, `server/discover` for a server that speaks only 2026-07-28.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// MCP 2026-07-28 only: no `initialize`, every request naming its version.
    #[serde(rename = "2026-07-28")]
    V2026,
    /// The 2025 era only: `initialize` with 2025-11-25, and an MCP session.
    #[serde(rename = "2025-11-25")]
    V2025,
}

/// `[upstreams.NAME.oauth]`: a client registered beforehand at the upstream's
/// authorization server, getting its tokens by a grant that needs no person: the
/// `client_credentials` grant (OAuth 2.1, MCP's SEP-1046), authenticated by
/// `client_secret` or by a JWT signed with `private_key` (`private_key_jwt`, RFC 7523); or
/// the `refresh_token` grant with `refresh_token`, a public client or one with
/// `client_secret`. Values may name host variables or secret files (`${file:key.pem}`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuth {
    /// hookhost's client id, registered beforehand at the authorization server.
    pub client_id: Secret,
    /// Its secret, for `client_secret_basic` or `_post`.
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// A PEM private key (PKCS#8) for `private_key_jwt`.
    #[serde(default)]
    pub private_key: Option<Secret>,
    /// How `private_key` signs.
    #[serde(default)]
    pub signing_algorithm: SigningAlgorithm,
    /// Use the `refresh_token` grant with this token instead of `client_credentials`.
    #[serde(default)]
    pub refresh_token: Option<Secret>,
    /// The scopes to ask for; none when left out.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// The JWS algorithm of a `private_key_jwt` assertion (`oauth.signing_algorithm`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum SigningAlgorithm {
    #[default]
    RS256,
    RS384,
    RS512,
    ES256,
    ES384,
}

/// Which sessions share an upstream server's instance (`[upstreams.NAME] scope`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamScope {
    #[default]
    Shared,
    Tenant,
    Session,
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
    /// The bearer token its MCP clients present over HTTP: in clear, `${NAME}` (an
    /// environment variable) or `${file:PATH}` (a mounted secret).
    #[serde(default)]
    pub token: Option<Secret>,
    /// Or the token's SHA-256, 64 hexadecimal digits, so that the config holds no secret.
    #[serde(default)]
    pub token_sha256: Option<String>,
    /// Its network switch and limits for `bash`.
    #[serde(default)]
    pub bash: TenantBashConfig,
    /// Whether its sessions are traced (`[trace] enabled` when left out).
    #[serde(default)]
    pub trace: Option<bool>,
    /// How fast its calls may come, and how many at once (`{ calls_per_second = 10, burst
    /// = 20, concurrent = 4 }`); unbounded when left out.
    #[serde(default)]
    pub rate: Located<RateLimit>,
    /// The tools it may call, names with `*`/`?` wildcards (`["read_file", "fs__*"]`);
    /// every tool when left out. Others are unknown to it and missing from its list.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// The upstream servers' resources it may list and read, URIs with wildcards
    /// (`["file:///docs/*"]`); every one when left out.
    #[serde(default)]
    pub resources: Option<Vec<String>>,
    /// The upstream servers' prompts it may list and get, names as served with wildcards;
    /// every one when left out.
    #[serde(default)]
    pub prompts: Option<Vec<String>>,
    /// The working directory of its sessions made by `serve`, over `[serve] workdir`: a
    /// [`crate::sessions::WorkdirTemplate`]. The operator chooses it; a client never does.
    #[serde(default)]
    pub workdir: Option<Spanned<String>>,
    /// The most any component may reach in its sessions: a request goes out only when
    /// both the component's grant and this one let it through. Left out, components'
    /// grants alone decide.
    #[serde(default)]
    pub network: Option<Spanned<NetworkGrant>>,
}

/// The `[bash]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashConfig {
    /// Off unless set: bash runs host programs, outside WebAssembly.
    #[serde(default)]
    pub enabled: bool,
    /// The mount it works in; [`crate::limits::DEFAULT_BASH_MOUNT`] when left out.
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
    /// What commands may reach: `false` (the default: a network namespace of their own,
    /// with only a loopback), `true` (whatever the host reaches, through slirp4netns), or
    /// `{ allow = [...] }` (the listed hosts, through hookhost's proxy). A tenant's
    /// `[tenants.ID.bash] network` replaces it.
    #[serde(default)]
    pub network: Option<Spanned<BashNetwork>>,
    /// Bounds of each command (see [`crate::limits::ShellLimits`]); a tenant's override these.
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
            network: None,
            limits: Located::default(),
            bwrap: None,
        }
    }
}

/// `[bash] network` (or a tenant's): a switch, or the hosts commands reach through
/// hookhost's proxy (see `tools::bash::proxy`).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "`true`, `false` or `{ allow = [\"host\", \"host:port\", …] }`"
)]
pub enum BashNetwork {
    /// `true`: whatever the host reaches (slirp4netns); `false`: nothing.
    Switch(bool),
    /// `{ allow = [...] }`: entries as a component's `network` grant takes them.
    Allow(NetworkGrant),
}

/// A `[tenants.ID.bash]` table: the tenant's own network switch and limits for `bash`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantBashConfig {
    /// Replaces `[bash] network`.
    #[serde(default)]
    pub network: Option<Spanned<BashNetwork>>,
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
    /// An `oci://` component must be signed by one of these keys to load.
    #[serde(default)]
    pub require_signature: Option<Spanned<SignatureConfig>>,
    /// The hosts its `wasi:http` requests may reach; none when left out.
    #[serde(default)]
    pub network: Option<Spanned<NetworkGrant>>,
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
    /// As for tools: an `oci://` component must be signed by one of these keys to load.
    #[serde(default)]
    pub require_signature: Option<Spanned<SignatureConfig>>,
    /// The hosts its `wasi:http` requests may reach; none when left out.
    #[serde(default)]
    pub network: Option<Spanned<NetworkGrant>>,
}
