//! A tool implemented by a component of the `tool` world.

use super::{Callee, Tool};
use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult, tool, v0_2_0};
use crate::component::ToolPres;
use crate::failure::{Failure, FailureKind};
use crate::limits::{LimitOverrides, Limits};
use crate::sandbox::{Grants, Sandbox, Settings, StoreState};
use crate::sessions::{Session, SessionHolder};
use std::sync::Arc;
use wasmtime::Store;

/// A tool component, ready to instantiate: a fresh instance serves each call.
pub struct GuestTool {
    pre: ToolPres,
    descriptor: ToolDescriptor,
    sandbox: Arc<Sandbox>,
    grants: Grants,
    settings: Settings,
    /// The tool's own limits, over the tenant's.
    limits: LimitOverrides,
}

impl GuestTool {
    /// Instantiates the component once, with no grants, to read its descriptor; the tool
    /// is registered under `name`, the operator's name for it.
    ///
    /// # Errors
    ///
    /// A [`Failure`] when `describe` traps, times out or returns an oversized descriptor.
    pub async fn new(
        pre: ToolPres,
        name: &str,
        sandbox: Arc<Sandbox>,
        grants: Grants,
        settings: Settings,
        limits: LimitOverrides,
    ) -> Result<GuestTool, Failure> {
        let mut descriptor = GuestTool::describe(&pre, &sandbox, &settings, &limits).await?;
        descriptor.name = name.to_string();
        Ok(GuestTool {
            pre,
            descriptor,
            sandbox,
            grants,
            settings,
            limits,
        })
    }
}

impl GuestTool {
    /// The descriptor the component gives itself: instantiated once, with no grants.
    ///
    /// # Errors
    ///
    /// A [`Failure`] when `describe` traps, times out or returns an oversized descriptor.
    pub async fn describe(
        pre: &ToolPres,
        sandbox: &Sandbox,
        settings: &Settings,
        limits: &LimitOverrides,
    ) -> Result<ToolDescriptor, Failure> {
        let (mut store, limits) = sandbox.describe_store(settings, limits)?;
        let bound = Bound::instantiate(pre, &mut store, &limits).await?;
        let descriptor = match &bound {
            Bound::V0_1(b) => {
                Failure::bounded(&mut store, &limits, async |store| {
                    b.harness_hooks_tool_provider().call_describe(store).await
                })
                .await?
            }
            Bound::V0_2(b) => {
                Failure::bounded(&mut store, &limits, async |store| {
                    b.harness_hooks_tool_provider().call_describe(store).await
                })
                .await?
            }
        };
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

    async fn execute(
        &self,
        session: &Session,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        let limits = session.limits().with(&self.limits);
        let mut store = self
            .sandbox
            .store(session.mounts(), &self.grants, &self.settings, &limits)
            .map_err(|e| Failure::new(FailureKind::Setup, e.to_string()))?;
        let result = match Bound::instantiate(&self.pre, &mut store, &limits).await? {
            Bound::V0_1(b) => {
                Failure::bounded(&mut store, &limits, async |store| {
                    b.harness_hooks_tool_provider()
                        .call_execute(store, ctx, call)
                        .await
                })
                .await?
            }
            Bound::V0_2(b) => {
                Failure::bounded(&mut store, &limits, async |store| {
                    b.harness_hooks_tool_provider()
                        .call_execute(store, ctx, call)
                        .await
                })
                .await?
            }
        };
        store
            .data_mut()
            .log_stderr(&self.descriptor.name, "execute", &call.id);
        Failure::check_result(&result, &limits)?;
        Ok(result)
    }
}

/// An instance's exports, of the WIT version the tool was built for.
enum Bound {
    V0_1(tool::Tool),
    V0_2(v0_2_0::tool::Tool),
}

impl Bound {
    async fn instantiate(
        pre: &ToolPres,
        store: &mut Store<StoreState>,
        limits: &Limits,
    ) -> Result<Bound, Failure> {
        match pre {
            ToolPres::V0_1(pre) => Failure::bounded(store, limits, async |store| {
                pre.instantiate_async(store).await
            })
            .await
            .map(Bound::V0_1),
            ToolPres::V0_2(pre) => Failure::bounded(store, limits, async |store| {
                pre.instantiate_async(store).await
            })
            .await
            .map(Bound::V0_2),
        }
    }
}
