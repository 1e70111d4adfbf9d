//! Helpers for the integration tests: the fixture components, a runtime in a temporary
//! data directory, and a host-native `echo` tool that shows what reached it.

use hookhost::failure::Failure;
use hookhost::sessions::Caller;
use hookhost::tools::{Callee, Tool};
use hookhost::{CallContext, Config, Runtime, Session, TenantId, ToolCall};
use hookhost::{ToolDescriptor, ToolResult};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tempfile::TempDir;

/// Paths of the fixture components, built by `build.rs`.
pub mod postgres;

pub mod fixtures {
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}

/// A runtime over a fresh temporary data directory, with the `echo` tool registered.
pub struct TestHost {
    pub runtime: Runtime,
    pub echo: Arc<EchoTool>,
    pub data: TempDir,
}

impl TestHost {
    /// A runtime from config text.
    pub async fn new(config: &str) -> TestHost {
        let config = Config::parse(config, "test.toml").expect("test config is valid");
        TestHost::with_plan(config.plan).await
    }

    /// A runtime from the built-in config.
    pub async fn builtin() -> TestHost {
        TestHost::with_plan(Config::builtin().plan).await
    }

    async fn with_plan(plan: hookhost::config::Plan) -> TestHost {
        let data = tempfile::tempdir().expect("temp dir");
        let mut runtime = Runtime::new(plan, data.path())
            .await
            .expect("runtime starts");
        let echo = Arc::new(EchoTool::default());
        runtime.register_tool(echo.clone()).expect("echo registers");
        TestHost {
            runtime,
            echo,
            data,
        }
    }

    /// A new session of the default tenant.
    pub async fn session(&self) -> Session {
        self.runtime
            .sessions()
            .create(TenantId::default_tenant(), None, None)
            .await
            .expect("session")
    }

    /// Calls `tool` with `arguments` (JSON) in `session`; panics if the call is not made.
    pub async fn call(
        &self,
        session: &Session,
        tool: &str,
        arguments: serde_json::Value,
    ) -> ToolResult {
        self.runtime
            .call(session, tool, &arguments.to_string())
            .await
            .expect("call is made")
    }
}

/// Where the virtual path `virtual_path` (`/artifacts/tool-results/x.txt`) of `session`
/// lives on the host; panics unless it is under one of the session's mounts.
pub fn host_path(session: &Session, virtual_path: &str) -> std::path::PathBuf {
    let (mount, rest) = virtual_path[1..]
        .split_once('/')
        .map(|(m, r)| (format!("/{m}"), r))
        .expect("a path inside a mount");
    session
        .host_dir(&mount)
        .unwrap_or_else(|| panic!("{mount} is not a mount"))
        .join(rest)
}

/// A host-native tool named `echo`. With `{"output": TEXT}` it returns TEXT (an error when
/// `"fail": true`); otherwise it returns `tool(args=ARGUMENTS, trace=TRACE)`, TRACE being
/// the context value `trace` the probe hooks build.
pub struct EchoTool {
    descriptor: ToolDescriptor,
    calls: AtomicUsize,
}

impl Default for EchoTool {
    fn default() -> Self {
        EchoTool {
            descriptor: ToolDescriptor {
                name: "echo".into(),
                description: "Returns what it was given.".into(),
                input_schema: r#"{"type":"object"}"#.into(),
            },
            calls: AtomicUsize::new(0),
        }
    }
}

impl EchoTool {
    /// How many times it ran.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl hookhost::sessions::SessionHolder for EchoTool {}

impl Tool for EchoTool {}

#[async_trait::async_trait]
impl Callee for EchoTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        _caller: &Caller<'_>,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        Ok(self.answer(ctx, call))
    }
}

impl EchoTool {
    fn answer(&self, ctx: &CallContext, call: &ToolCall) -> ToolResult {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        if let Some(output) = args.get("output").and_then(|o| o.as_str()) {
            let fail = args.get("fail").and_then(|f| f.as_bool()).unwrap_or(false);
            return ToolResult {
                output: output.to_string(),
                is_error: fail,
                media_type: None,
            };
        }
        let trace = ctx
            .values
            .iter()
            .find(|(k, _)| k == "trace")
            .map(|(_, v)| v.as_str())
            .unwrap_or("");
        ToolResult::text(format!("tool(args={}, trace={trace})", call.arguments))
    }
}

/// Config text for a chain of probe hooks: each `(tag, mode, on_failure)`.
pub fn probe_chain(layers: &[(&str, &str, &str)]) -> String {
    let mut config = String::new();
    for (tag, mode, on_failure) in layers {
        config.push_str(&format!(
            "[[hooks]]\nname = {tag:?}\ncomponent = {:?}\non_failure = {on_failure:?}\nsettings = {{ tag = {tag:?}, mode = {mode:?} }}\n\n",
            fixtures::PROBE_HOOK
        ));
    }
    config
}
