//! The hook chain: hooks wrapped around a tool call like the layers of an onion.
//!
//! ```text
//! call → before[0] → before[1] → … → tool → … → after[1] → after[0] → result
//! ```
//!
//! - `before-execute` runs forward, `after-execute` in reverse; no hooks is the bare tool.
//! - A hook may rewrite the call's arguments (a JSON object) and set context values; both
//!   reach every inner layer and the tool, and the values reach every `after-execute`.
//! - A refusal at layer *i* short-circuits: the tool and layers inside *i* do not run, the
//!   result is an error carrying the hook's message, and layers `0..i` still get
//!   `after-execute` with it (an audit hook sees refused calls).
//! - A hook that fails — traps, passes its deadline or memory cap, returns too much or
//!   something invalid — is handled by its [`FailurePolicy`], and logged.
//! - A layer whose `tools` list does not match the tool is skipped without instantiating
//!   anything.
//! - Each call gets a fresh instance of each hook that applies; it serves both phases. A
//!   hook configured `instance = "per-session"` keeps one instance per session instead.

pub use crate::abi::Record;
use crate::abi::{
    After, CallContext, Hook, HookPre, Proceed, RESERVED_PREFIX, ToolCall, ToolDescriptor,
    ToolResult,
};
use crate::component::ComponentRef;
use crate::failure::{Failure, FailureKind};
use crate::ids::ToolMatch;
use crate::limits::{LimitOverrides, Limits, MAX_ARGUMENTS_BYTES};
use crate::sandbox::{self, Access, Grants, Sandbox, Settings, StoreState};
use crate::sessions::{Caller, SessionHolder, SessionKey};
use crate::trace::{CallTrace, Phase, PhaseEnd};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use wasmtime::Store;

/// What happens when a hook fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailurePolicy {
    /// Skip the layer: what it was given passes on unchanged.
    #[default]
    Open,
    /// Refuse the call (in `before-execute`) or withhold the output (in `after-execute`).
    Closed,
}

impl fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
        })
    }
}

/// Whether a hook gets a new instance for every call, or keeps one per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceMode {
    /// A fresh instance per call (both phases of the call share it): nothing a hook
    /// remembers survives the call.
    #[default]
    PerCall,
    /// One instance per session, kept between its calls (calls of one session take turns
    /// on it); never shared across sessions or tenants, dropped when the session ends or
    /// the instance fails. Faster; the hook sees its own state from earlier calls.
    PerSession,
}

/// What the chain wraps: the tool at the centre of the onion. The chain needs no more of
/// a tool than this; `tools::Tool` extends it with what MCP needs.
#[async_trait::async_trait]
pub trait Callee: Send + Sync {
    /// Its name, description and input schema.
    fn descriptor(&self) -> &ToolDescriptor;

    /// Runs one call of `caller` (its session, and its tenant's bounds). A call that ran and went wrong is an `Ok` result with
    /// `is_error`; `Err` means the tool itself failed (a component trapped, timed out...).
    async fn execute(
        &self,
        caller: &Caller<'_>,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure>;

    /// The mounts (virtual paths) a call of it may write in: what the trace watches and a
    /// disk quota measures around it. None by default (an upstream server's files are not
    /// the session's).
    fn writable_mounts(&self) -> Vec<&str> {
        Vec::new()
    }

    /// Every mount (virtual path) a call of it may reach, read-only or not: what is
    /// readied before the call (a persistent directory's checkout loaded). None by default.
    fn granted_mounts(&self) -> Vec<&str> {
        Vec::new()
    }
}

/// One hook of the chain, ready to instantiate.
pub struct HookLayer {
    pub name: String,
    pub component: ComponentRef,
    pub pre: HookPre,
    pub grants: Grants,
    pub settings: Settings,
    /// The hook's own limits, over the tenant's.
    pub limits: LimitOverrides,
    /// The hosts it may reach.
    pub network: Option<Arc<crate::network::Allow>>,
    pub on_failure: FailurePolicy,
    pub tools: ToolMatch,
    pub instance: InstanceMode,
    /// Per-session instances, by session.
    pub kept: Mutex<HashMap<SessionKey, Arc<tokio::sync::Mutex<HookInstance>>>>,
}

impl HookLayer {
    /// Whether it wraps a call of `tool`, also known as `alias` (an agent's own name for
    /// one of hookhost's tools).
    pub fn wraps(&self, tool: &str, alias: Option<&str>) -> bool {
        self.tools.matches(tool) || alias.is_some_and(|a| self.tools.matches(a))
    }
}

/// A per-session hook keeps an instance for each session.
impl SessionHolder for HookLayer {
    fn held(&self) -> Vec<SessionKey> {
        self.kept.held()
    }

    fn forget(&self, key: &SessionKey) {
        self.kept.forget(key);
    }
}

/// The instance a layer uses for one call.
enum Slot {
    Fresh(HookInstance),
    Kept(tokio::sync::OwnedMutexGuard<HookInstance>),
}

impl std::ops::Deref for Slot {
    type Target = HookInstance;
    fn deref(&self) -> &HookInstance {
        match self {
            Slot::Fresh(i) => i,
            Slot::Kept(g) => g,
        }
    }
}

impl std::ops::DerefMut for Slot {
    fn deref_mut(&mut self) -> &mut HookInstance {
        match self {
            Slot::Fresh(i) => i,
            Slot::Kept(g) => &mut *g,
        }
    }
}

/// Hooks, outermost first.
pub struct HookChain {
    layers: Vec<Arc<HookLayer>>,
    sandbox: Arc<Sandbox>,
}

/// A hook that has run `before-execute` and waits for `after-execute`.
struct Entered<'a> {
    layer: &'a HookLayer,
    limits: Limits,
    /// The instance that ran `before-execute`; `None` when that ran in another process
    /// (an agent's pre-tool hook), so `after-execute` gets a new one.
    instance: Option<Slot>,
    /// The call as this layer passed it inward.
    call: ToolCall,
}

/// A call on its way through the chain: the layers it entered, innermost last, and what
/// the host knows of it so far.
pub struct Passage<'a> {
    entered: Vec<Entered<'a>>,
    record: Record,
    /// Set when a layer refused the call (or a `closed` one failed): the tool must not
    /// run, and this is its result.
    pub refusal: Option<ToolResult>,
}

impl Passage<'_> {
    /// The layers entered, outermost first, each with the call as it passed it inward.
    pub fn entered(&self) -> impl Iterator<Item = (&str, &ToolCall)> {
        self.entered
            .iter()
            .map(|e| (e.layer.name.as_str(), &e.call))
    }
}

impl HookChain {
    pub fn new(layers: Vec<Arc<HookLayer>>, sandbox: Arc<Sandbox>) -> HookChain {
        HookChain { layers, sandbox }
    }

    pub fn layers(&self) -> &[Arc<HookLayer>] {
        &self.layers
    }

    /// The mounts the hooks that wrap a call of `tool` are granted, with their access.
    pub fn grants_around<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = (&'a str, Access)> {
        self.layers
            .iter()
            .filter(move |layer| layer.tools.matches(tool))
            .flat_map(|layer| layer.grants.iter())
            .map(|(path, access)| (path.as_str(), *access))
    }

    /// Runs `call` through the chain around `tool`; each layer's phase is observed by
    /// `trace`. Returns the result and the call's outcome (`done`, `tool-error`, `refused`
    /// or `failed`).
    pub async fn run(
        &self,
        caller: &Caller<'_>,
        mut ctx: CallContext,
        mut call: ToolCall,
        tool: &dyn Callee,
        trace: &mut CallTrace<'_>,
    ) -> (ToolResult, &'static str) {
        let mut passage = self.enter(caller, &mut ctx, &mut call, None, trace).await;
        let result = match passage.refusal.take() {
            Some(refused) => refused,
            None => {
                let result = self
                    .execute(tool, caller, &ctx, &call, &mut passage.record, trace)
                    .await;
                passage.record.set_tool_error(result.is_error);
                result
            }
        };
        self.leave(caller, &ctx, passage, result, trace).await
    }

    /// Runs every `before-execute` of the layers that wrap `call` (see [`HookLayer::wraps`]),
    /// outermost first, until one refuses: `ctx` and `call` leave as the innermost layer
    /// passed them to the tool.
    pub async fn enter(
        &self,
        caller: &Caller<'_>,
        ctx: &mut CallContext,
        call: &mut ToolCall,
        alias: Option<&str>,
        trace: &mut CallTrace<'_>,
    ) -> Passage<'_> {
        let mut record = Record::default();
        let mut entered: Vec<Entered<'_>> = Vec::new();
        let mut refusal = None;
        for layer in self.layers.iter().filter(|l| l.wraps(&call.name, alias)) {
            let limits = caller.limits().with(&layer.limits);
            let watch = trace
                .enter(&layer.name, Phase::Before, &granted(&layer.grants))
                .await;
            let step = match self.start(layer, caller, &limits).await {
                Ok(mut instance) => instance
                    .before(&layer.name, &limits, ctx, call)
                    .await
                    .map(|outcome| (instance, outcome)),
                Err(failure) => Err(failure),
            };
            let end = match &step {
                Ok((_, Ok(proceed))) => PhaseEnd::Passed {
                    rewrote: proceed.arguments.is_some(),
                    took_out: 0,
                },
                Ok((_, Err(message))) => PhaseEnd::Refused { message },
                Err(failure) => PhaseEnd::Failed { failure },
            };
            trace.leave(watch, end).await;
            match step {
                Ok((instance, Ok(proceed))) => {
                    if let Some(mut values) = proceed.values {
                        values.retain(|(k, _)| !k.starts_with(RESERVED_PREFIX));
                        ctx.values = values;
                    }
                    if let Some(arguments) = proceed.arguments {
                        call.arguments = arguments;
                    }
                    entered.push(Entered {
                        layer,
                        limits,
                        instance: Some(instance),
                        call: call.clone(),
                    });
                }
                Ok((_, Err(message))) => {
                    tracing::info!(hook = %layer.name, call_id = %call.id, "call refused");
                    record.refuse(&layer.name);
                    refusal = Some(ToolResult::error(message));
                    break;
                }
                Err(failure) => {
                    layer.forget(&caller.key());
                    hook_failed(&mut record, layer, "before-execute", call, &failure);
                    if layer.on_failure == FailurePolicy::Closed {
                        refusal = Some(ToolResult::error(format!(
                            "call refused: hook '{}' failed in before-execute ({})",
                            layer.name, failure.kind
                        )));
                        break;
                    }
                }
            }
        }
        Passage {
            entered,
            record,
            refusal,
        }
    }

    /// A passage whose `before-execute` phases ran elsewhere (an agent's pre-tool hook, in
    /// another process): `entered` names each layer that passed the call inward, with the
    /// call as it passed it. Layers the chain no longer has are skipped.
    pub fn resume<'a>(
        &'a self,
        caller: &Caller<'_>,
        entered: impl IntoIterator<Item = (String, ToolCall)>,
        tool_error: bool,
    ) -> Passage<'a> {
        let entered = entered
            .into_iter()
            .filter_map(|(name, call)| {
                let layer = self.layers.iter().find(|l| l.name == name)?;
                Some(Entered {
                    layer,
                    limits: caller.limits().with(&layer.limits),
                    instance: None,
                    call,
                })
            })
            .collect();
        Passage {
            entered,
            record: Record::tool_ran(tool_error),
            refusal: None,
        }
    }

    /// Runs the `after-execute` of every layer `passage` entered, innermost first, on
    /// `result`. Returns the result and the call's outcome (see [`HookChain::run`]).
    pub async fn leave(
        &self,
        caller: &Caller<'_>,
        ctx: &CallContext,
        passage: Passage<'_>,
        mut result: ToolResult,
        trace: &mut CallTrace<'_>,
    ) -> (ToolResult, &'static str) {
        let Passage {
            entered,
            mut record,
            ..
        } = passage;
        for Entered {
            layer,
            limits,
            instance,
            call,
        } in entered.into_iter().rev()
        {
            let watch = trace
                .enter(&layer.name, Phase::After, &granted(&layer.grants))
                .await;
            let instance = match instance {
                Some(instance) => Ok(instance),
                None => self.start(layer, caller, &limits).await,
            };
            let after = match instance {
                Ok(mut instance) => {
                    instance
                        .after(&layer.name, &limits, ctx, &call, &record, &result)
                        .await
                }
                Err(failure) => Err(failure),
            };
            let end = match &after {
                Ok(replaced) => PhaseEnd::Passed {
                    rewrote: replaced.is_some(),
                    took_out: replaced.as_ref().map_or(0, |r| {
                        result.output.len().saturating_sub(r.output.len()) as u64
                    }),
                },
                Err(failure) => PhaseEnd::Failed { failure },
            };
            trace.leave(watch, end).await;
            match after {
                Ok(Some(replaced)) => result = replaced,
                Ok(None) => {}
                Err(failure) => {
                    layer.forget(&caller.key());
                    hook_failed(&mut record, layer, "after-execute", &call, &failure);
                    if layer.on_failure == FailurePolicy::Closed {
                        result = ToolResult::error(format!(
                            "output withheld: hook '{}' failed in after-execute ({})",
                            layer.name, failure.kind
                        ));
                    }
                }
            }
        }
        (result, record.outcome_name())
    }

    /// Runs the tool at the centre; its failure becomes an error result, recorded.
    async fn execute(
        &self,
        tool: &dyn Callee,
        caller: &Caller<'_>,
        ctx: &CallContext,
        call: &ToolCall,
        record: &mut Record,
        trace: &mut CallTrace<'_>,
    ) -> ToolResult {
        let name = &tool.descriptor().name;
        let writable: Vec<(&str, bool)> = tool
            .writable_mounts()
            .into_iter()
            .map(|m| (m, true))
            .collect();
        let watch = trace.enter(name, Phase::Execute, &writable).await;
        let executed = tool.execute(caller, ctx, call).await;
        let end = match &executed {
            Ok(result) => PhaseEnd::Executed {
                is_error: result.is_error,
                output_bytes: result.output.len(),
            },
            Err(failure) => PhaseEnd::Failed { failure },
        };
        trace.leave(watch, end).await;
        executed.unwrap_or_else(|failure| {
            tracing::warn!(tool = %name, call_id = %call.id, %failure, "tool failed");
            record.failed(name, "execute", failure.kind, true);
            ToolResult::error(match failure.kind {
                // Says what the call wrote, for the agent to clean up.
                FailureKind::DiskQuota => failure.detail,
                _ => format!("tool '{name}' failed ({})", failure.kind),
            })
        })
    }

    async fn start(
        &self,
        layer: &HookLayer,
        caller: &Caller<'_>,
        limits: &Limits,
    ) -> Result<Slot, Failure> {
        if layer.instance == InstanceMode::PerCall {
            return self
                .instantiate(layer, caller, limits)
                .await
                .map(Slot::Fresh);
        }
        let key = caller.key();
        let existing = layer
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let kept = match existing {
            Some(kept) => kept,
            None => {
                let fresh = Arc::new(tokio::sync::Mutex::new(
                    self.instantiate(layer, caller, limits).await?,
                ));
                layer
                    .kept
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(key)
                    .or_insert(fresh)
                    .clone()
            }
        };
        let mut kept = kept.lock_owned().await;
        // A kept instance's requests are this call's (its log, its tenant's ceiling now).
        kept.store.data_mut().set_egress(self.egress(layer, caller));
        Ok(Slot::Kept(kept))
    }

    fn egress(&self, layer: &HookLayer, caller: &Caller<'_>) -> crate::network::Egress {
        self.sandbox
            .egress(&layer.name, layer.network.as_ref(), caller)
    }

    /// A fresh instance of `layer` for a call in `session` (what `component check` drives).
    ///
    /// # Errors
    ///
    /// A [`Failure`] when it cannot be instantiated within its limits.
    pub async fn fresh_instance(
        &self,
        layer: &HookLayer,
        caller: &Caller<'_>,
    ) -> Result<HookInstance, Failure> {
        let limits = caller.limits().with(&layer.limits);
        self.instantiate(layer, caller, &limits).await
    }

    async fn instantiate(
        &self,
        layer: &HookLayer,
        caller: &Caller<'_>,
        limits: &Limits,
    ) -> Result<HookInstance, Failure> {
        let mut store = self
            .sandbox
            .store(
                caller.mounts(),
                &layer.grants,
                &layer.settings,
                limits,
                self.egress(layer, caller),
            )
            .map_err(|e| Failure::new(FailureKind::Setup, e.to_string()))?;
        let hook = layer.pre.instantiate(&mut store, limits).await?;
        Ok(HookInstance {
            store,
            hook,
            last_said: String::new(),
        })
    }
}

/// A hook's grants as (virtual path, writable).
fn granted(grants: &Grants) -> Vec<(&str, bool)> {
    grants
        .iter()
        .map(|(path, access)| (path.as_str(), *access == Access::ReadWrite))
        .collect()
}

/// Logs a hook's failure and records it; a `closed` hook's failure fails the call.
fn hook_failed(
    record: &mut Record,
    layer: &HookLayer,
    phase: &'static str,
    call: &ToolCall,
    failure: &Failure,
) {
    tracing::warn!(
        hook = %layer.name,
        phase,
        tool = %call.name,
        call_id = %call.id,
        kind = %failure.kind,
        policy = %layer.on_failure,
        detail = %failure.detail,
        stderr = failure.stderr.as_deref().unwrap_or_default(),
        "hook failed"
    );
    let closed = layer.on_failure == FailurePolicy::Closed;
    record.failed(&layer.name, phase, failure.kind, closed);
}

/// One hook instance, serving both phases of one call (or every call of a session).
pub struct HookInstance {
    store: Store<StoreState>,
    hook: Hook,
    /// What it wrote to stderr in its last phase (logged already).
    last_said: String,
}

impl HookInstance {
    /// What the instance wrote to stderr in its last phase, or in the one that failed
    /// (bounded).
    pub fn stderr(&self) -> String {
        format!("{}{}", self.last_said, self.store.data().stderr())
    }

    /// Runs `before-execute` within `limits`; the outer `Err` is a failure of the hook,
    /// the inner one its refusal.
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap, a limit, or invalid output.
    pub async fn before(
        &mut self,
        layer: &str,
        limits: &Limits,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<Result<Proceed, String>, Failure> {
        sandbox::arm(&mut self.store, limits);
        let outcome = self.hook.before(&mut self.store, limits, ctx, call).await?;
        self.last_said = self
            .store
            .data_mut()
            .log_stderr(layer, "before-execute", &call.id);
        match &outcome {
            Ok(proceed) => {
                let values: usize = proceed
                    .values
                    .iter()
                    .flatten()
                    .map(|(k, v)| k.len() + v.len())
                    .sum();
                Failure::check_output(values, limits)?;
                if let Some(arguments) = &proceed.arguments {
                    validate_arguments(arguments)
                        .map_err(|why| Failure::new(FailureKind::InvalidOutput, why))?;
                }
            }
            Err(message) => Failure::check_output(message.len(), limits)?,
        }
        Ok(outcome)
    }

    /// Runs `after-execute` within `limits`: `None` keeps `result` as it is (a 0.2.0
    /// hook's `keep`). The hook is told `record` as its WIT version tells it (see
    /// [`crate::abi`]).
    ///
    /// # Errors
    ///
    /// A [`Failure`]: a trap, a limit, invalid output, or the hook's own `fail`.
    pub async fn after(
        &mut self,
        layer: &str,
        limits: &Limits,
        ctx: &CallContext,
        call: &ToolCall,
        record: &Record,
        result: &ToolResult,
    ) -> Result<Option<ToolResult>, Failure> {
        sandbox::arm(&mut self.store, limits);
        let replaced = match self
            .hook
            .after(&mut self.store, limits, ctx, call, record, result)
            .await?
        {
            After::Keep => None,
            After::Replace(replaced) => Some(replaced),
        };
        self.last_said = self
            .store
            .data_mut()
            .log_stderr(layer, "after-execute", &call.id);
        if let Some(replaced) = &replaced {
            replaced.check_size(limits)?;
        }
        Ok(replaced)
    }
}

/// Checks that `arguments` is the text of one JSON object, within the size limit: the rule
/// for the agent's arguments and for a hook's rewrite alike.
///
/// # Errors
///
/// A message saying what is wrong.
pub fn validate_arguments(arguments: &str) -> Result<(), String> {
    if arguments.len() > MAX_ARGUMENTS_BYTES {
        return Err(format!(
            "arguments are {} bytes, over the limit of {MAX_ARGUMENTS_BYTES}",
            arguments.len()
        ));
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err("arguments must be a JSON object".into()),
        Err(e) => Err(format!("arguments are not valid JSON: {e}")),
    }
}
