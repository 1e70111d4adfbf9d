//! A call's way through the runtime: why one was not made ([`CallError`]), the gate every
//! call passes ([`Runtime::admit`]), and the call itself, around the chain.

use super::Runtime;
use super::served::Served;
use crate::abi::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::chain::{self, HookChain};
use crate::failure::Failure;
use crate::network::RequestLog;
use crate::sandbox::Access;
use crate::sessions::rate::Admitted;
use crate::sessions::{Action, Caller, InFlight, Tenant};
use crate::sessions::{QuotaCall, RateRefusal, Session, SessionError};
use crate::tools::{Callee, Extras, Tool};
use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::Instrument;

/// Why a call was not made. (A call that was made and failed is a [`ToolResult`] with
/// `is_error`.)
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool {name:?} (tools: {known})")]
    UnknownTool { name: String, known: String },
    #[error(
        "unknown tool {name:?}: {file} defines no tools (no [tools.NAME], `[bash] enabled = true` or [upstreams.NAME]); `hookhost config show` prints the built-in config to start from"
    )]
    NoTools { name: String, file: String },
    #[error("tool {tool:?}: {why}")]
    BadArguments { tool: String, why: String },
    #[error(transparent)]
    RateLimited(#[from] RateRefusal),
    /// Its session's tenant is no longer declared (a reload removed it).
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl Runtime {
    /// Calls `tool` with `arguments` (a JSON object's text) in `session`, through the chain.
    ///
    /// # Errors
    ///
    /// [`CallError`] when the tool is unknown or the arguments are not a JSON object. A
    /// call that ran and failed is an `Ok` result with `is_error` set.
    pub async fn call(
        &self,
        session: &Session,
        tool: &str,
        arguments: &str,
    ) -> Result<ToolResult, CallError> {
        self.call_with_extras(session, tool, arguments)
            .await
            .map(|(result, _)| result)
    }

    /// As [`Runtime::call`], with what the tool returned beside its text (see [`Extras`]).
    ///
    /// # Errors
    ///
    /// As [`Runtime::call`].
    pub async fn call_with_extras(
        &self,
        session: &Session,
        tool: &str,
        arguments: &str,
    ) -> Result<(ToolResult, Option<Extras>), CallError> {
        // The config in effect now serves this call to its end, whatever a reload does.
        let served = self.served.load_full();
        // A tenant a reload removed calls nothing, whatever the tool.
        served.tenants.get(&session.tenant)?;
        let target = match served.tool(tool) {
            Some(found) => Some(found),
            None => {
                let (instances, failed) = served.session_instances(session).await;
                let found = instances.iter().find_map(|instance| instance.tool(tool));
                // The tool may be one an instance that could not start would serve.
                if found.is_none() && !failed.is_empty() {
                    let why: Vec<String> = failed.iter().map(ToString::to_string).collect();
                    return Ok((ToolResult::error(why.join("; ")), None));
                }
                found.map(|found| Arc::new(found) as Arc<dyn Tool>)
            }
        };
        let target = target
            .filter(|_| {
                served
                    .tenants
                    .authorize(&session.tenant, Action::Call(tool))
            })
            .ok_or_else(|| {
                let name = tool.to_string();
                if served.tools.iter().next().is_none()
                    && served.upstreams.is_empty()
                    && served.pools.is_empty()
                {
                    return CallError::NoTools {
                        name,
                        file: served.config_file.clone(),
                    };
                }
                CallError::UnknownTool {
                    name,
                    known: self.tool_names(&session.tenant).join(", "),
                }
            })?;
        self.run_call(served, session, tool, arguments, target.as_ref())
            .await
    }

    /// Runs `target` as the call `tool` of `session` through the chain, as
    /// [`Runtime::call_with_extras`] does: an upstream's resource read or prompt served
    /// as a call (`resources.read`, `prompts.get`), so that hooks see it too.
    ///
    /// # Errors
    ///
    /// As [`Runtime::call`].
    pub async fn call_as(
        &self,
        session: &Session,
        tool: &str,
        arguments: &str,
        target: &dyn Tool,
    ) -> Result<(ToolResult, Option<Extras>), CallError> {
        self.run_call(self.served.load_full(), session, tool, arguments, target)
            .await
    }

    async fn run_call(
        &self,
        served: Arc<Served>,
        session: &Session,
        tool: &str,
        arguments: &str,
        target: &dyn Tool,
    ) -> Result<(ToolResult, Option<Extras>), CallError> {
        chain::validate_arguments(arguments).map_err(|why| CallError::BadArguments {
            tool: tool.to_string(),
            why,
        })?;
        let admitted = self.admit_under(served, session, tool, Rate::Counted)?;
        self.sessions.mark_active(session).await;
        let caller = admitted.caller(session);
        let chain = admitted.chain();
        // Its persistent directories loaded, and brought up to what other sessions
        // committed since; a call that cannot have them fails.
        let granted: BTreeSet<&str> = chain
            .grants_around(tool)
            .map(|(path, _)| path)
            .chain(target.granted_mounts())
            .collect();
        let prepared = self
            .prepare(session, |path| granted.contains(path), caller.requests)
            .await;
        let started = std::time::Instant::now();
        let ctx = CallContext {
            session_id: session.id.to_string(),
            tenant_id: session.tenant.to_string(),
            values: Vec::new(),
        };
        let call = ToolCall {
            id: uuid::Uuid::new_v4().to_string(),
            name: tool.to_string(),
            arguments: arguments.to_string(),
        };
        let call_id = call.id.clone();
        let span = tracing::info_span!(
            "call",
            otel.name = %format_args!("call {tool}"),
            tool,
            call_id = %call.id,
            tenant = %session.tenant,
            session = %session.id,
            outcome = tracing::field::Empty,
        );
        let mut trace = self.tracer.begin(&caller, &call_id, tool);
        // Only a tenant with a quota pays for measuring around its calls, and only the
        // mounts this call's hooks and tool may write in are measured.
        let quota = if caller.tenant.is_some_and(|t| t.quota.is_set()) {
            let tools: BTreeSet<&str> = target.writable_mounts().into_iter().collect();
            let writable: BTreeSet<&str> = chain
                .grants_around(tool)
                .filter(|(_, access)| *access == Access::ReadWrite)
                .map(|(path, _)| path)
                .chain(tools.iter().copied())
                .collect();
            self.sessions.admit(session, &writable, &tools).await
        } else {
            None
        };
        // A call the quota stopped or withheld the output of failed.
        let (result, outcome) = match (prepared, quota) {
            (Err(e), _) => (ToolResult::error(e.to_string()), "failed"),
            (_, None) => {
                chain
                    .run(&caller, ctx, call, target, &mut trace)
                    .instrument(span.clone())
                    .await
            }
            (_, Some(quota)) => {
                let bounded = WithinQuota {
                    tool: target,
                    quota: &quota,
                };
                let run = chain
                    .run(&caller, ctx, call, &bounded, &mut trace)
                    .instrument(span.clone());
                quota
                    .run(run)
                    .await
                    .unwrap_or_else(|message| (ToolResult::error(message), "failed"))
            }
        };
        // Persistent directories committed after every call publish this one's changes;
        // when they cannot be (a conflict), the model is told, and the changes stay in the
        // session's checkout.
        let mut result = result;
        if let Err(e) = self.after_call(session, &mut trace).await {
            result
                .output
                .push_str(&format!("\n[hookhost: not published: {e}]"));
        }
        span.record("outcome", outcome);
        trace.finish(outcome, result.output.len(), started.elapsed());
        self.sessions.mark_active(session).await;
        tracing::info!(
            tool,
            tenant = %session.tenant,
            session = %session.id,
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            outcome,
            output_bytes = result.output.len(),
            "call"
        );
        Ok((result, target.take_extras(&call_id)))
    }
}

/// Whether a call admitted by [`Runtime::admit`] counts against its tenant's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// A new call: it takes a place in the tenant's rate and among its calls at once.
    Counted,
    /// The second half of a call admitted before (an agent's post-tool event after its
    /// pre-tool event): it runs whatever the rate, since the tool ran already.
    Admitted,
}

/// A call let in by [`Runtime::admit`]: the config in effect when it was admitted, which
/// it reads its tenant and chain from to its end; its place among the tenant's calls at
/// once and its session's running calls, held until dropped.
pub struct Admission<'a> {
    tenant: Option<Arc<Tenant>>,
    chain: Arc<HookChain>,
    /// The network requests of the call's components, for its trace.
    requests: Arc<RequestLog>,
    _rate: Option<Admitted>,
    _running: InFlight<'a>,
}

impl Admission<'_> {
    /// `session` (the one admitted) as the caller of the call.
    pub fn caller<'s>(&'s self, session: &'s Session) -> Caller<'s> {
        Caller {
            session,
            tenant: self.tenant.as_deref(),
            requests: &self.requests,
        }
    }

    /// The hook chain of the call.
    pub fn chain(&self) -> &Arc<HookChain> {
        &self.chain
    }
}

impl Runtime {
    /// Admits a call of `tool` in `session`, the one gate every call passes, from MCP,
    /// `hookhost call` or an agent's hook alike: the tenant's rate and calls at once
    /// (unless `rate` says the call was admitted already), then the session marked active
    /// and counted as running, so it is not idle while the call runs.
    ///
    /// # Errors
    ///
    /// [`CallError::RateLimited`], logged and counted in the metrics;
    /// [`CallError::Session`] when the session's tenant is no longer declared.
    pub async fn admit(
        &self,
        session: &Session,
        tool: &str,
        rate: Rate,
    ) -> Result<Admission<'_>, CallError> {
        let admitted = self.admit_under(self.served.load_full(), session, tool, rate)?;
        self.sessions.mark_active(session).await;
        Ok(admitted)
    }

    /// [`Runtime::admit`] under `served`, the config the call began with, but for
    /// marking the session active, which the caller does.
    fn admit_under(
        &self,
        served: Arc<Served>,
        session: &Session,
        tool: &str,
        rate: Rate,
    ) -> Result<Admission<'_>, CallError> {
        let tenant = served.tenants.get(&session.tenant)?.cloned();
        let rate = match rate {
            Rate::Admitted => None,
            Rate::Counted => Some(served.tenants.admit_rate(&session.tenant).inspect_err(
                |refused| {
                    tracing::info!(tenant = %session.tenant, session = %session.id, tool, %refused, "call refused");
                    self.tracer
                        .metrics()
                        .rate_limited(session.tenant.as_str(), refused.reason());
                },
            )?),
        };
        Ok(Admission {
            tenant,
            chain: served.chain(&session.tenant).clone(),
            requests: Arc::default(),
            _rate: rate,
            _running: self.sessions.enter(session),
        })
    }
}

/// A tool run within its tenant's disk quota (see [`QuotaCall::tool`]).
pub(super) struct WithinQuota<'a> {
    tool: &'a dyn Callee,
    quota: &'a QuotaCall<'a>,
}

#[async_trait::async_trait]
impl Callee for WithinQuota<'_> {
    fn descriptor(&self) -> &ToolDescriptor {
        self.tool.descriptor()
    }

    async fn execute(
        &self,
        caller: &Caller<'_>,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        self.quota.tool(self.tool.execute(caller, ctx, call)).await
    }

    fn writable_mounts(&self) -> Vec<&str> {
        self.tool.writable_mounts()
    }

    fn granted_mounts(&self) -> Vec<&str> {
        self.tool.granted_mounts()
    }
}
