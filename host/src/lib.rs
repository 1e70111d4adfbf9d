//! hookhost: a sandboxed runtime for hooks around AI agent tool calls.
//!
//! Hooks and tools are WebAssembly components of the WIT package `harness:hooks`, at
//! 0.2.0 or 0.1.0 (see `wit/` and [`abi`]; one chain may mix them). A [`Runtime`] loads them from a [`Config`]'s checked [`config::Plan`], and every
//! [`Runtime::call`] runs the hook chain around the tool, like an onion: `before-execute`
//! from the outermost hook in, the tool, then `after-execute` from the innermost hook out
//! (see [`chain`]). Each component sees only the per-session directories it was granted
//! (see [`sandbox`] and [`mounts`]), under the [`limits`].
//!
//! # Examples
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use hookhost::{Config, Runtime, TenantId};
//!
//! let runtime = Runtime::new(Config::builtin().plan, "/tmp/hookhost-data".as_ref()).await?;
//! let session = runtime.sessions().create(TenantId::default_tenant(), None, None).await?;
//! let result = runtime.call(&session, "bash", r#"{"command": "seq 1 5000"}"#).await?;
//! assert!(result.output.contains("/artifacts/tool-results/bash/"));
//! # Ok(())
//! # }
//! ```
//!
//! # The modules, from the bottom up
//!
//! | module | what it owns |
//! |---|---|
//! | [`limits`] | every limit, default and range, and the security rules they enforce |
//! | [`ids`], [`secret`], [`failure`], [`metrics`], [`guest_log`], [`crypto`], [`announce`] | ids and tool patterns, the config's secrets, how a layer failed and an error on one line, counters, a guest's stderr, the process's TLS provider, the lines a server says whatever the log level |
//! | [`beneath`] | a session's tree as host code sees it: through descriptors, following no symlink, any depth, what the session hid given back |
//! | [`persistent`] | persistent directories: a backing tree, a session's checkout, atomic commits, the trees' locks |
//! | [`mounts`] | virtual paths and the host directories behind them |
//! | [`sessions`] | sessions end to end: the table, directories, tenants ([`sessions::Tenant`]: everything declared of one), quotas, and what holds per-session state ([`sessions::SessionHolder`]) |
//! | [`sandbox`] | a component's store: its grants, settings and limits |
//! | [`abi`] | the plugin ABI, one module per WIT version ([`abi::v0_1`], [`abi::v0_2`]), the host's types the latest's ([`abi::latest`]): bindings, and how a hook or tool of that version is instantiated, called and answered; [`abi::store`], the store components' `harness:store` |
//! | [`component`] | compiling and caching components, the engine |
//! | [`stores`] | store components: a persistent directory's tree kept by a component, loaded and committed through it |
//! | [`trace`] | what the host observes of each call: events, file changes, spans |
//! | [`jwt`] | bearer JWTs naming tenants (`[auth]`): a provider's keys, fetched when needed |
//! | [`chain`] | the hook chain, run like an onion around a [`chain::Callee`] |
//! | [`config`] | the operator's file, checked once into a [`config::Plan`] |
//! | [`tools`] | tools: components, `bash` in its sandbox, upstream MCP servers |
//! | [`runtime`] | a [`Runtime`] built from a plan: the chain around every call |
//! | [`check`], [`agents`], [`mcp`] | `component check` (the hook and tool suites); agents' own hook protocols; serving MCP (stdio, HTTP) |

pub mod abi;
pub mod agents;
pub mod announce;
pub mod beneath;
pub mod chain;
pub mod check;
pub mod component;
pub mod config;
pub mod crypto;
pub mod failure;
pub mod guest_log;
pub mod ids;
pub mod jwt;
pub mod limits;
pub mod mcp;
pub mod metrics;
pub mod mounts;
pub mod network;
pub mod persistent;
pub mod registry;
pub mod runtime;
pub mod sandbox;
pub mod secret;
pub mod sessions;
pub mod stores;
pub mod tools;
pub mod trace;

pub use abi::{CallContext, ToolCall, ToolDescriptor, ToolResult};
pub use config::Config;
pub use config::OneShot;
pub use crypto::install_crypto_provider;
pub use failure::error_line;
pub use ids::{SessionId, TenantId};
pub use runtime::{CallError, Runtime, StartError};
pub use sessions::{GcReport, Session, SessionError, SessionKey, SessionRecord, Sessions};
