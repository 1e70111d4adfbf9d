//! The `audit` hook: one JSON line per event of every call it wraps, appended to a file in
//! its granted audit mount.
//!
//! Events: `start` (in `before-execute`), then in `after-execute` one of `done`, `refused`
//! (an inner hook refused the call), `failed` (a hook or the tool failed; `reason` says
//! how). Fields: `time` (RFC 3339), `event`, `tool`, `call_id`, `session`, `tenant`, and
//! after the call `duration_ms`, `is_error`, `output_bytes`. Put it outermost in the chain
//! to see every refusal.
//!
//! Settings: `file`, the log's path (default `/audit/audit.jsonl`). The log is opened once
//! per instance — both phases of a call, and every call of a per-session instance, share
//! it — and each line is one `write(2)` on the host's calling thread. A line that cannot be
//! appended (no grant, a missing directory, a read-only mount) fails the hook — it traps in
//! `before-execute` and fails with the reason in `after-execute` — so the operator's
//! `on_failure` policy decides: `open` lets the call through unaudited (logged by the
//! host), `closed` refuses it.

use hookhost_hook::files::Appender;
use hookhost_hook::{
    After, CallContext, CallOutcome, Describe, Hook, HookDescription, OutcomeKind, Phase, Proceed,
    ToolCall, ToolResult, settings,
};
use serde_json::{Map, Value, json};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

/// Where the log goes unless the setting `file` says otherwise.
pub const DEFAULT_FILE: &str = "/audit/audit.jsonl";
/// A refusal message longer than this is cut in the log.
const REASON_CHARS: usize = 500;

/// Start times of the calls this instance is in, by call id.
static STARTS: Mutex<BTreeMap<String, Instant>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// The open log and its path: opened by the first line, kept for the instance's life.
    static LOG: RefCell<Option<(String, Appender)>> = const { RefCell::new(None) };
}

struct Audit;

impl Hook for Audit {
    fn before_execute(ctx: CallContext, call: ToolCall) -> Result<Proceed, String> {
        STARTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(call.id.clone(), Instant::now());
        let mut line = event("start", &ctx, &call);
        line.insert("arguments_bytes".into(), json!(call.arguments.len()));
        if let Err(why) = append(line) {
            // before-execute fails by trapping; the message reaches the host's log.
            panic!("{why}");
        }
        Ok(Proceed::unchanged())
    }

    fn after_execute(
        ctx: CallContext,
        call: ToolCall,
        outcome: CallOutcome,
        result: ToolResult,
    ) -> After {
        let started = STARTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&call.id);
        let (kind, reason) = match outcome.kind {
            _ if !outcome.failures.is_empty() => ("failed", Some(failures(&outcome))),
            OutcomeKind::Refused => (
                "refused",
                Some(result.output.chars().take(REASON_CHARS).collect()),
            ),
            _ => ("done", None),
        };
        let mut line = event(kind, &ctx, &call);
        if let Some(started) = started {
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            line.insert("duration_ms".into(), json!((ms * 1000.0).round() / 1000.0));
        }
        line.insert("is_error".into(), json!(result.is_error));
        line.insert("output_bytes".into(), json!(result.output.len()));
        if let Some(by) = outcome.refused_by {
            line.insert("refused_by".into(), json!(by));
        }
        if let Some(reason) = reason {
            line.insert("reason".into(), json!(reason));
        }
        match append(line) {
            Ok(()) => After::Keep,
            Err(why) => After::Fail(why),
        }
    }
}

/// The call's failures: `hook 'NAME' PHASE: KIND` or `tool 'NAME': KIND`, `; `-separated.
fn failures(outcome: &CallOutcome) -> String {
    outcome
        .failures
        .iter()
        .map(|f| match f.phase {
            Phase::Execute => format!("tool '{}': {}", f.layer, f.kind.name()),
            phase => format!("hook '{}' {}: {}", f.layer, phase.name(), f.kind.name()),
        })
        .collect::<Vec<_>>()
        .join("; ")
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

/// Appends one line in one write, so lines of concurrent calls do not interleave (a line
/// longer than `files::APPEND_CHUNK` takes several).
///
/// # Errors
///
/// Why the line could not be appended.
fn append(line: Map<String, Value>) -> Result<(), String> {
    let file = settings::text_or("file", DEFAULT_FILE);
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    LOG.with_borrow_mut(|log| -> std::io::Result<()> {
        let (path, appender) = match log.take() {
            Some(open) if open.0 == file => open,
            _ => (file.clone(), Appender::open(&file)?),
        };
        // Kept only while it works: after a failure the next line opens the log again.
        appender.append(text.as_bytes())?;
        *log = Some((path, appender));
        Ok(())
    })
    .map_err(|e| format!("audit: cannot append to {file}: {e}"))
}

impl Describe for Audit {
    fn describe() -> HookDescription {
        HookDescription::new(
            "Appends one JSON line per event of every call it wraps to its audit log",
        )
        .text(
            "file",
            Some(DEFAULT_FILE),
            "the log's path, in a granted mount",
        )
    }
}

hookhost_hook::export_described!(Audit);
