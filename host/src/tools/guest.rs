//! A tool implemented by a component of the `tool` world.

use super::Tool;
use crate::bindings::tool::ToolPre;
use crate::bindings::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::limits::Limits;
use crate::sandbox::{self, Failure, FailureKind, Grants, Settings, StoreState};
use crate::session::Session;
use std::path::PathBuf;

/// A tool component, ready to instantiate: a fresh instance serves each call.
pub struct GuestTool {
    pre: ToolPre<StoreState>,
    descriptor: ToolDescriptor,
    data_root: PathBuf,
    grants: Grants,
    settings: Settings,
    limits: Limits,
}

impl GuestTool {
    /// Instantiates the component once, with no grants, to read its descriptor; the tool
    /// is registered under `name`, the operator's name for it.
    ///
    /// # Errors
    ///
    /// A [`Failure`] when `describe` traps, times out or returns an oversized descriptor.
    pub async fn new(
        pre: ToolPre<StoreState>,
        name: &str,
        data_root: PathBuf,
        grants: Grants,
        settings: Settings,
        limits: Limits,
    ) -> Result<GuestTool, Failure> {
        let mut store = sandbox::new_store(
            pre.engine(),
            &data_root,
            &[],
            &Grants::new(),
            &settings,
            &limits,
        )
        .map_err(|e| Failure::new(FailureKind::Setup, e.to_string()))?;
        let bindings = pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| Failure::from_call(&store, e))?;
        let mut descriptor = bindings
            .harness_hooks_tool_provider()
            .call_describe(&mut store)
            .await
            .map_err(|e| Failure::from_call(&store, e))?;
        let size =
            descriptor.name.len() + descriptor.description.len() + descriptor.input_schema.len();
        Failure::check_output(size, &limits)?;
        descriptor.name = name.to_string();
        Ok(GuestTool {
            pre,
            descriptor,
            data_root,
            grants,
            settings,
            limits,
        })
    }
}

#[async_trait::async_trait]
impl Tool for GuestTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        session: &Session,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        let mut store = sandbox::new_store(
            self.pre.engine(),
            &self.data_root,
            session.mounts(),
            &self.grants,
            &self.settings,
            &self.limits,
        )
        .map_err(|e| Failure::new(FailureKind::Setup, e.to_string()))?;
        let bindings = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| Failure::from_call(&store, e))?;
        let result = bindings
            .harness_hooks_tool_provider()
            .call_execute(&mut store, ctx, call)
            .await
            .map_err(|e| Failure::from_call(&store, e))?;
        Failure::check_output(result.output.len(), &self.limits)?;
        Ok(result)
    }
}
