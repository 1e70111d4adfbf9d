//! The behaviour suite of a hook: its description (a 0.2.0 hook's `hook-info`), then each
//! case — ordinary and extreme outputs, a tool's error, an inner refusal, and outputs a
//! hook is likely to change — on a fresh instance, as a call gets one.

use super::{
    CheckOptions, Report, Verdict, bytes, case_failed, failed, first_line, millis, stderr_note,
};
use crate::abi::v0_2::describe_hook;
use crate::abi::{CallContext, RESERVED_PREFIX, ToolCall, ToolResult};
use crate::chain::{HookLayer, Record};
use crate::failure::Failure;
use crate::limits::Limits;
use crate::network::RequestLog;
use crate::sessions::{Caller, Session};
use crate::{Runtime, TenantId};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The behaviour suite of a hook: each case on a fresh instance, as a call gets one.
// One loop over the cases, longer than most functions here: each case's phases share
// one instance and its timings, and a failure ends the case or (a timeout) the suite.
pub(super) async fn check(
    runtime: &Runtime,
    session: &Session,
    options: &CheckOptions,
    requests: &Arc<RequestLog>,
    report: &mut Report,
) {
    let chain = runtime.chain(&TenantId::default_tenant());
    let Some(layer) = chain.layers().first() else {
        unreachable!("the scratch config has the checked hook as its only layer");
    };
    // The scratch config declares no tenant; the hook's requests are the check's to say.
    let caller = Caller {
        session,
        tenant: None,
        requests,
    };
    let limits = caller.limits().with(&layer.limits);
    describe(runtime, layer, &limits, report).await;
    let arguments = options
        .call
        .clone()
        .unwrap_or_else(|| r#"{"command":"echo hello"}"#.to_string());
    let cases = cases(options);
    let mut slowest_start = Duration::ZERO;
    let mut replaced = 0;
    for (what, result, refused) in cases {
        let call = ToolCall {
            id: uuid::Uuid::new_v4().to_string(),
            name: options.tool.clone(),
            arguments: arguments.clone(),
        };
        let mut ctx = CallContext {
            session_id: session.id.to_string(),
            tenant_id: session.tenant.to_string(),
            values: Vec::new(),
        };
        let started = Instant::now();
        let mut instance = match chain.fresh_instance(layer, &caller).await {
            Ok(instance) => instance,
            Err(failure) => {
                case_failed(report, what, failed("instantiation", &failure, &limits));
                continue;
            }
        };
        slowest_start = slowest_start.max(started.elapsed());
        let before_started = Instant::now();
        let before = instance.before(&layer.name, &limits, &ctx, &call).await;
        let before_took = before_started.elapsed();
        let said_before = instance.stderr();
        let proceed = match before {
            Err(failure) => {
                let stderr = stderr_note(&instance.stderr());
                let why = failed("before-execute", &failure, &limits);
                case_failed(report, what, format!("{why}{stderr}"));
                if stop_after(&failure, report) {
                    return;
                }
                continue;
            }
            Ok(Err(message)) => {
                report.add(
                    Verdict::Pass,
                    format!(
                        "{what}: before-execute refused it in {}: {}",
                        millis(before_took),
                        first_line(&message)
                    ),
                );
                continue;
            }
            Ok(Ok(proceed)) => proceed,
        };
        if let Some(mut values) = proceed.values {
            values.retain(|(k, _)| !k.starts_with(RESERVED_PREFIX));
            ctx.values = values;
        }
        let mut call = call;
        if let Some(rewritten) = proceed.arguments {
            call.arguments = rewritten;
        }
        // What the host tells after-execute.
        let record = if refused {
            Record::refused("inner-hook")
        } else {
            Record::tool_ran(result.is_error)
        };
        let in_bytes = result.output.len();
        let after_started = Instant::now();
        let after = instance
            .after(&layer.name, &limits, &ctx, &call, &record, &result)
            .await;
        let after_took = after_started.elapsed();
        let stderr = stderr_note(&format!("{said_before}{}", instance.stderr()));
        match after {
            Ok(out) => report.add(
                Verdict::Pass,
                format!(
                    "{what}: before-execute {}, after-execute {} ({}){stderr}",
                    millis(before_took),
                    millis(after_took),
                    match out {
                        None => format!("{} kept", bytes(in_bytes)),
                        Some(out) => {
                            replaced += 1;
                            format!(
                                "{} → {}{}",
                                bytes(in_bytes),
                                bytes(out.output.len()),
                                if out.is_error { ", an error" } else { "" }
                            )
                        }
                    },
                ),
            ),
            Err(failure) => {
                let why = failed("after-execute", &failure, &limits);
                case_failed(report, what, format!("{why}{stderr}"));
                if stop_after(&failure, report) {
                    return;
                }
            }
        }
    }
    if replaced == 0 {
        report.add(
            Verdict::Note,
            "after-execute kept every output it was given, so its `replace` did not run: \
             give `--output TEXT|@FILE` with one your hook changes",
        );
    }
    if slowest_start > Duration::from_millis(1) {
        report.add(
            Verdict::Note,
            format!(
                "an instance takes up to {} to start: consider `instance = \"per-session\"` \
                 in the config, so a session's calls share one",
                millis(slowest_start)
            ),
        );
    }
}

/// Whether the suite stops after `failure`: after a timeout, every later case would wait
/// for the deadline too.
fn stop_after(failure: &Failure, report: &mut Report) -> bool {
    let stop = failure.kind == crate::failure::FailureKind::Timeout;
    if stop {
        report.add(
            Verdict::Note,
            "the remaining cases were not run: each would wait for the deadline",
        );
    }
    stop
}

/// A hook that describes itself (0.2.0's `hook-info`): its summary and settings.
async fn describe(runtime: &Runtime, layer: &HookLayer, limits: &Limits, report: &mut Report) {
    if let Some(describe) = layer.pre.describer() {
        // Loading it already checked the settings against this description.
        match describe_hook(describe, &runtime.sandbox(), &layer.settings, &layer.limits).await {
            Ok(d) => {
                let settings: Vec<String> = d
                    .settings
                    .iter()
                    .map(|s| match &s.default {
                        Some(default) => {
                            format!("{} ({}, default {default})", s.name, s.setting_type())
                        }
                        None => format!("{} ({})", s.name, s.setting_type()),
                    })
                    .collect();
                report.add(
                    Verdict::Pass,
                    format!(
                        "describes itself: {}; settings: {}",
                        first_line(&d.summary),
                        if settings.is_empty() {
                            "none".to_string()
                        } else {
                            settings.join(", ")
                        }
                    ),
                );
            }
            Err(failure) => report.add(
                Verdict::Fail,
                format!("describe: {}", failed("describe", &failure, limits)),
            ),
        }
    }
}

/// The cases: (what, the result after-execute gets, whether an inner hook refused the
/// call). Besides the ordinary and the extreme, outputs hooks are written to change
/// (secrets, terminal colours, JSON), so that their `replace` runs here and not first in a
/// chain; and the output `--output` gives.
fn cases(options: &CheckOptions) -> Vec<(&'static str, ToolResult, bool)> {
    let mib: String = (0..)
        .map(|i| format!("line {i:06} of a large output\n"))
        .take(1024 * 1024 / 29)
        .collect();
    let mut cases = vec![
        ("an ordinary call", ToolResult::text("hello\n"), false),
        ("an empty output", ToolResult::text(""), false),
        (
            "a Unicode output",
            ToolResult::text("héllo wörld — 日本語 — 🎉\n"),
            false,
        ),
        ("a 1 MiB output", ToolResult::text(mib), false),
        (
            "a tool's error",
            ToolResult::error("command failed\n[exit code: 3]"),
            false,
        ),
        (
            "an inner hook's refusal",
            ToolResult::error("refused by policy"),
            true,
        ),
        (
            "an output with secrets",
            ToolResult::text(
                "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789\n\
                 password = hunter2hunter2\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz\n",
            ),
            false,
        ),
        (
            "an output with terminal colours",
            ToolResult::text("\u{1b}[31merror\u{1b}[0m: \u{1b}[1mfailed\u{1b}[0m\n"),
            false,
        ),
        (
            "a JSON output",
            ToolResult::text(r#"{"items":[{"id":1,"name":"a"},{"id":2,"name":"b"}]}"#),
            false,
        ),
    ];
    if let Some(text) = &options.output {
        cases.push(("the given output", ToolResult::text(text.clone()), false));
    }
    cases
}
