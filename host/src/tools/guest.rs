//! A tool implemented by a component of the `tool` world.

use super::{Callee, Tool};
use crate::abi::{CallContext, ToolCall, ToolDescriptor, ToolPre, ToolResult};
use crate::config::ComponentPlan;
use crate::failure::{Failure, FailureKind};
use crate::limits::LimitOverrides;
use crate::network::Allow;
use crate::sandbox::{Grants, Sandbox, Settings};
use crate::sessions::{Caller, SessionHolder};
use std::sync::Arc;

/// A tool component, ready to instantiate: a fresh instance serves each call.
pub struct GuestTool {
    pre: ToolPre,
    descriptor: ToolDescriptor,
    sandbox: Arc<Sandbox>,
    grants: Grants,
    settings: Settings,
    /// The tool's own limits, over the tenant's.
    limits: LimitOverrides,
    /// The hosts it may reach.
    network: Option<Arc<Allow>>,
}

impl GuestTool {
    /// The tool `pre` as `descriptor` (what [`GuestTool::describe`] said of it, or what
    /// was remembered of that), as `spec` configures it: under the operator's name for
    /// it, with its grants, settings, limits and network.
    pub fn new(
        pre: ToolPre,
        spec: &ComponentPlan,
        mut descriptor: ToolDescriptor,
        sandbox: Arc<Sandbox>,
    ) -> GuestTool {
        descriptor.name = spec.name.clone();
        GuestTool {
            pre,
            descriptor,
            sandbox,
            grants: spec.grants.clone(),
            settings: spec.settings.clone(),
            limits: spec.limits,
            network: spec.network.clone(),
        }
    }
}

impl GuestTool {
    /// The descriptor the component gives itself: instantiated once, with no grants.
    ///
    /// # Errors
    ///
    /// A [`Failure`] when `describe` traps, times out or returns an oversized descriptor.
    pub async fn describe(
        pre: &ToolPre,
        sandbox: &Sandbox,
        settings: &Settings,
        limits: &LimitOverrides,
    ) -> Result<ToolDescriptor, Failure> {
        let (mut store, limits) = sandbox.describe_store(settings, limits)?;
        let descriptor = pre
            .instantiate(&mut store, &limits)
            .await?
            .describe(&mut store, &limits)
            .await?;
        let size =
            descriptor.name.len() + descriptor.description.len() + descriptor.input_schema.len();
        Failure::check_output(size, &limits)?;
        Ok(descriptor)
    }
}

/// Holds nothing per session.
impl SessionHolder for GuestTool {}

impl Tool for GuestTool {}

#[async_trait::async_trait]
impl Callee for GuestTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn writable_mounts(&self) -> Vec<&str> {
        crate::sandbox::writable(&self.grants).collect()
    }

    fn granted_mounts(&self) -> Vec<&str> {
        self.grants.keys().map(String::as_str).collect()
    }

    async fn execute(
        &self,
        caller: &Caller<'_>,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        let limits = caller.limits().with(&self.limits);
        let mut store = self
            .sandbox
            .store(
                caller.mounts(),
                &self.grants,
                &self.settings,
                &limits,
                self.sandbox
                    .egress(&self.descriptor.name, self.network.as_ref(), caller),
            )
            .map_err(|e| Failure::new(FailureKind::Setup, e.to_string()))?;
        let result = self
            .pre
            .instantiate(&mut store, &limits)
            .await?
            .execute(&mut store, &limits, ctx, call)
            .await?;
        store
            .data_mut()
            .log_stderr(&self.descriptor.name, "execute", &call.id);
        result.check_size(&limits)?;
        Ok(result)
    }
}
