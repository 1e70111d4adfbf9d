//! rust-audit-shipper: ships one JSON line per tool call to an HTTP collector.
//!
//! After each call it POSTs `{"tenant","session","call","tool","outcome","is_error",
//! "output_bytes"}` as `application/json` to the setting `url`. The operator grants it that
//! collector and nothing else (`network = { allow = ["collector.example:443"] }`); any
//! other host it tried would be refused by hookhost with `HttpRequestDenied`. A line that
//! cannot be shipped — a refusal, a collector down, a status other than 2xx — fails the
//! hook's phase (`After::Fail`), and the operator's `on_failure` decides: `open` keeps the
//! call's output, `closed` withholds it, so no call goes unaudited.

use hookhost_hook::{
    After, CallContext, CallOutcome, Describe, Hook, HookDescription, OutcomeKind, ToolCall,
    ToolResult, http, settings,
};

struct Shipper;

impl Hook for Shipper {
    fn after_execute(
        ctx: CallContext,
        call: ToolCall,
        outcome: CallOutcome,
        result: ToolResult,
    ) -> After {
        let Some(url) = settings::text("url") else {
            return After::Fail("rust-audit-shipper: the setting `url` is missing".into());
        };
        let line = serde_json::json!({
            "tenant": ctx.tenant_id,
            "session": ctx.session_id,
            "call": call.id,
            "tool": call.name,
            "outcome": match outcome.kind {
                OutcomeKind::Done => "done",
                OutcomeKind::ToolError => "tool-error",
                OutcomeKind::Refused => "refused",
                OutcomeKind::Failed => "failed",
            },
            "is_error": result.is_error,
            "output_bytes": result.output.len(),
        });
        match http::post(&url, "application/json", line.to_string().as_bytes()) {
            Ok(answer) if answer.is_success() => After::Keep,
            Ok(answer) => After::Fail(format!(
                "the collector at {url} answered {} to an audit line",
                answer.status
            )),
            Err(e) => After::Fail(format!("cannot ship an audit line to {url}: {e}")),
        }
    }
}

impl Describe for Shipper {
    fn describe() -> HookDescription {
        HookDescription::new("Ships one JSON line per tool call to an HTTP collector").text(
            "url",
            None,
            "the collector's URL (http:// or https://), which the hook must be granted",
        )
    }
}

hookhost_hook::export_described!(Shipper);
