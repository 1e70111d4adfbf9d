//! The `audit` hook: one JSON line per event of every call it wraps, appended to a file in
//! its granted audit mount.
//!
//! Events: `start` (in `before-execute`), then in `after-execute` one of `done`, `refused`
//! (an inner hook refused the call), `failed` (a hook or the tool failed; `reason` says
//! how). Fields: `time` (RFC 3339), `event`, `tool`, `call_id`, `session`, `tenant`, and
//! after the call `duration_ms`, `is_error`, `output_bytes`. Put it outermost in the chain
//! to see every refusal.
//!
//! Settings: `file`, the log's path (default `/audit/audit.jsonl`). A line that cannot be
//! appended (no grant, a missing directory, a read-only mount) fails the hook — it traps,
//! saying why on stderr — so the operator's `on_failure` policy decides: `open` lets the
//! call through unaudited (logged by the host), `closed` refuses it.

wit_bindgen::generate!({
    path: "../../wit/hooks@0.1.0",
    world: "hook",
    generate_all,
});

use exports::harness::hooks::tool_hook::{Guest, Proceed};
use harness::hooks::types::{CallContext, ToolCall, ToolResult};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

/// Where the log goes unless the setting `file` says otherwise.
pub const DEFAULT_FILE: &str = "/audit/audit.jsonl";
/// A refusal message longer than this is cut in the log.
const REASON_CHARS: usize = 500;

/// Start times of the calls this instance is in, by call id.
static STARTS: Mutex<BTreeMap<String, Instant>> = Mutex::new(BTreeMap::new());

struct Audit;

impl Guest for Audit {
    fn before_execute(ctx: CallContext, call: ToolCall) -> Result<Proceed, String> {
        STARTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(call.id.clone(), Instant::now());
        let mut line = event("start", &ctx, &call);
        line.insert("arguments_bytes".into(), json!(call.arguments.len()));
        append(line);
        Ok(Proceed {
            values: None,
            arguments: None,
        })
    }

    fn after_execute(ctx: CallContext, call: ToolCall, outcome: ToolResult) -> ToolResult {
        let started = STARTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&call.id);
        let value = |key: &str| {
            ctx.values
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let (kind, reason) = match (
            value("hookhost.outcome").as_deref(),
            value("hookhost.failure"),
        ) {
            (_, Some(failure)) => ("failed", Some(failure)),
            (Some("refused"), None) => (
                "refused",
                Some(outcome.output.chars().take(REASON_CHARS).collect()),
            ),
            _ => ("done", None),
        };
        let mut line = event(kind, &ctx, &call);
        if let Some(started) = started {
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            line.insert("duration_ms".into(), json!((ms * 1000.0).round() / 1000.0));
        }
        line.insert("is_error".into(), json!(outcome.is_error));
        line.insert("output_bytes".into(), json!(outcome.output.len()));
        if let Some(by) = value("hookhost.refused-by") {
            line.insert("refused_by".into(), json!(by));
        }
        if let Some(reason) = reason {
            line.insert("reason".into(), json!(reason));
        }
        append(line);
        outcome
    }
}

fn event(kind: &str, ctx: &CallContext, call: &ToolCall) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert(
        "time".into(),
        json!(humantime::format_rfc3339_millis(SystemTime::now()).to_string()),
    );
    line.insert("event".into(), json!(kind));
    line.insert("tool".into(), json!(call.name));
    line.insert("call_id".into(), json!(call.id));
    line.insert("session".into(), json!(ctx.session_id));
    line.insert("tenant".into(), json!(ctx.tenant_id));
    line
}

/// Appends one line in one write, so lines of concurrent calls do not interleave.
fn append(line: Map<String, Value>) {
    let file = wasi::config::store::get("file")
        .ok()
        .flatten()
        .unwrap_or_else(|| DEFAULT_FILE.to_string());
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        // A trap is how a 0.1.0 hook fails; the message reaches the host's log.
        panic!("audit: cannot append to {file}: {e}");
    }
}

export!(Audit);
