//! `hookhost component check`: does a component conform, and if not, what to fix.
//!
//! A component is compiled (through the data directory's compiled-code cache), its world,
//! WIT version and imports are named, and then it is run in the real sandbox, with
//! scratch mounts, through what a chain will ask of it: for a hook, `before-execute` and
//! `after-execute` of an ordinary call, an empty output, Unicode, a 1 MiB output, a tool's
//! error and an inner hook's refusal, each on a fresh instance within the default limits;
//! for a tool, its descriptor and one call. Each finding is one line; the component
//! conforms when none is a failure.

use crate::abi::RESERVED_PREFIX;
use crate::abi::v0_2::describe_hook;
use crate::abi::{CallContext, ToolCall, ToolResult};
use crate::chain::{FailurePolicy, InstanceMode, Record};
use crate::component::{ComponentLoader, ComponentRef, Import};
use crate::config::{ComponentPlan, HookPlan, Plan, setting_problem, setting_text};
use crate::failure::Failure;
use crate::ids::ToolMatch;
use crate::limits::{LimitOverrides, Limits};
use crate::mounts::{MountSpec, MountTable, Scope};
use crate::sandbox::{Access, Grants};
use crate::sessions::Session;
use crate::tools::guest::GuestTool;
use crate::{Runtime, TenantId};
use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The worlds of `harness:hooks` a component may implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum World {
    Hook,
    Tool,
}

impl World {
    /// The interface a component of this world exports.
    fn export(self) -> &'static str {
        match self {
            World::Hook => "harness:hooks/tool-hook@",
            World::Tool => "harness:hooks/tool-provider@",
        }
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            World::Hook => "hook",
            World::Tool => "tool",
        })
    }
}

/// The virtual paths a checked component is granted (read-write, scratch, deleted after):
/// those the built-in config declares, and any the caller adds.
pub const SCRATCH_MOUNTS: &[&str] = &["/workspace", "/artifacts", "/audit", "/plans", "/session"];

/// What to check a component with.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The world it must implement; `None` accepts either.
    pub world: Option<World>,
    /// Settings, as the config gives them.
    pub settings: toml::Table,
    /// More virtual paths to grant, besides [`SCRATCH_MOUNTS`].
    pub grants: Vec<String>,
    /// The arguments of the ordinary call (a JSON object); the default suits `bash`.
    pub call: Option<String>,
    /// The tool the calls a hook sees are for.
    pub tool: String,
    /// The deadline of each phase, in milliseconds [default: the host's default].
    pub deadline_ms: Option<u64>,
    /// Imports the host does not provide are a note (they trap when called), not a
    /// failure: as `allow_unknown_imports = true` in a config.
    pub allow_unknown_imports: bool,
    /// One more output a hook's after-execute is given: one the author's hook changes.
    pub output: Option<String>,
}

/// How a finding bears on conformance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Note,
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Finding {
    pub verdict: Verdict,
    pub text: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.verdict {
            Verdict::Pass => "ok  ",
            Verdict::Note => "note",
            Verdict::Fail => "FAIL",
        };
        write!(f, "{tag} {}", self.text)
    }
}

/// The findings about one component.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether no finding is a failure.
    pub fn conforms(&self) -> bool {
        self.findings.iter().all(|f| f.verdict != Verdict::Fail)
    }

    fn add(&mut self, verdict: Verdict, text: impl Into<String>) {
        self.findings.push(Finding {
            verdict,
            text: text.into(),
        });
    }
}

/// What can keep a check from running at all (a component that fails it is a [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot make a scratch directory: {0}")]
    Scratch(#[from] std::io::Error),
    #[error("cannot make an engine")]
    Engine(#[source] wasmtime::Error),
}

/// What a component is, as compiled: its size, compile time, world and imports.
#[derive(Debug)]
pub struct Inspection {
    pub size: usize,
    pub took: Duration,
    pub cached: bool,
    /// The world and the `harness:hooks` version it implements, when it implements one.
    pub world: Option<(World, String)>,
    pub imports: Vec<Import>,
}

impl Inspection {
    /// `1.2 MB, compiled in 3.1 s` / `… from the cache in 12 ms`.
    pub fn summary(&self) -> String {
        format!(
            "{}, {} in {}",
            bytes(self.size),
            if self.cached {
                "loaded from the compiled-code cache"
            } else {
                "compiled"
            },
            millis(self.took)
        )
    }

    /// The imports, one per line: provided, types only, or not provided.
    pub fn import_lines(&self) -> impl Iterator<Item = String> + '_ {
        self.imports.iter().map(|i| {
            let how = if i.types_only {
                "types only"
            } else if i.provided {
                "provided"
            } else {
                "NOT provided"
            };
            format!("{} ({how})", i.name)
        })
    }
}

/// A loader to [`inspect`] components with: a plain engine (no pool, no fuel) compiling
/// through the cache of the data directory `data`.
///
/// # Errors
///
/// When wasmtime cannot make an engine here.
pub fn inspector(data: &Path) -> Result<ComponentLoader, CheckError> {
    ComponentLoader::new(&crate::component::EngineOptions {
        fuel: false,
        pool_instances: None,
        max_memory_bytes: Limits::default().memory_bytes,
        keep_resident_bytes: 0,
        cache_dir: Some(data.join(crate::runtime::CACHE_DIR)),
    })
    .map_err(CheckError::Engine)
}

/// Compiles `component` with `loader` and says what it is.
///
/// # Errors
///
/// The load error when it is not a component that can be read and compiled.
pub fn inspect(
    loader: &ComponentLoader,
    component: &ComponentRef,
) -> Result<Inspection, crate::component::LoadError> {
    let compiled = loader.compile_ref(component)?;
    let ty = compiled.component.component_type();
    let world = ty.exports(loader.engine()).find_map(|(name, _)| {
        [World::Hook, World::Tool].into_iter().find_map(|w| {
            name.strip_prefix(w.export())
                .map(|version| (w, version.to_string()))
        })
    });
    Ok(Inspection {
        size: compiled.size,
        took: compiled.took,
        cached: compiled.cached,
        world,
        imports: loader.imports(&compiled.component),
    })
}

/// Checks `component`, compiling through `{data}/cache` and running it in a scratch data
/// directory that is removed afterwards.
///
/// # Errors
///
/// A [`CheckError`] when the check itself cannot run.
pub async fn check(
    component: &ComponentRef,
    options: &CheckOptions,
    data: &Path,
) -> Result<Report, CheckError> {
    let scratch = Scratch::new(data)?;
    let mut report = Report::default();
    let loader = inspector(scratch.path())?;

    let inspection = match inspect(&loader, component) {
        Ok(inspection) => inspection,
        Err(e) => {
            report.add(
                Verdict::Fail,
                format!("does not load: {}", crate::error_line(&e)),
            );
            return Ok(report);
        }
    };
    report.add(Verdict::Pass, inspection.summary());
    let Some((world, version)) = inspection.world.clone() else {
        report.add(
            Verdict::Fail,
            "exports neither harness:hooks/tool-hook nor harness:hooks/tool-provider: build it \
             for the `hook` or `tool` world of wit/hooks@0.2.0 (wit-bindgen: `world: \"hook\"`; \
             componentize-py: `-w hook`; componentize-js: `--world-name hook`)",
        );
        return Ok(report);
    };
    if let Some(wanted) = options.world.filter(|w| *w != world) {
        report.add(
            Verdict::Fail,
            format!(
                "implements the `{world}` world, not `{wanted}`: build it for `--world {wanted}`"
            ),
        );
        return Ok(report);
    }
    report.add(
        Verdict::Pass,
        format!("implements the `{world}` world of harness:hooks@{version}"),
    );
    let (met, unmet): (Vec<&Import>, Vec<&Import>) = inspection
        .imports
        .iter()
        .partition(|i| i.provided || i.types_only);
    report.add(
        Verdict::Pass,
        format!(
            "imports what the host provides: {}",
            met.iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    for import in &unmet {
        let name = &import.name;
        if options.allow_unknown_imports {
            report.add(
                Verdict::Note,
                format!("imports {name}, which the host does not provide: calls to it trap"),
            );
        } else {
            report.add(
                Verdict::Fail,
                format!(
                    "imports {name}, which the host does not provide: build it without that \
                     import{}, or set allow_unknown_imports = true for it in the config (calls \
                     to it then trap)",
                    if name.starts_with("wasi:http/") {
                        " (componentize-js: `-d http -d fetch-event`)"
                    } else {
                        ""
                    }
                ),
            );
        }
    }
    let unprovided: Vec<String> = unmet.iter().map(|i| i.name.clone()).collect();

    let plan = match scratch_plan(component, world, options, &unprovided) {
        Ok(plan) => plan,
        Err(e) => {
            report.add(Verdict::Fail, format!("refused: {e}"));
            return Ok(report);
        }
    };
    let runtime = match Runtime::new(plan, scratch.path()).await {
        Ok(runtime) => runtime,
        Err(e) => {
            report.add(
                Verdict::Fail,
                format!("does not load: {}", crate::error_line(&e)),
            );
            return Ok(report);
        }
    };
    let session = match runtime
        .sessions()
        .create(TenantId::default_tenant(), None, None)
        .await
    {
        Ok(session) => session,
        Err(e) => {
            report.add(Verdict::Fail, format!("no scratch session: {e}"));
            return Ok(report);
        }
    };
    match world {
        World::Hook => check_hook(&runtime, &session, options, &mut report).await,
        World::Tool => check_tool(&runtime, component, &session, options, &mut report).await,
    }
    Ok(report)
}

/// The behaviour suite of a hook: each case on a fresh instance, as a call gets one.
async fn check_hook(
    runtime: &Runtime,
    session: &Session,
    options: &CheckOptions,
    report: &mut Report,
) {
    let chain = runtime.chain(&TenantId::default_tenant());
    let Some(layer) = chain.layers().first() else {
        unreachable!("the scratch config has the checked hook as its only layer");
    };
    let limits = session.limits().with(&layer.limits);
    if let Some(describe) = layer.pre.describer() {
        // Loading it already checked the settings against this description.
        match describe_hook(describe, runtime.sandbox(), &layer.settings, &layer.limits).await {
            Ok(d) => {
                let settings: Vec<String> = d
                    .settings
                    .iter()
                    .map(|s| format!("{} ({})", s.name, s.setting_type()))
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
                format!("describe: {}", failed("describe", &failure, &limits)),
            ),
        }
    }
    let arguments = options
        .call
        .clone()
        .unwrap_or_else(|| r#"{"command":"echo hello"}"#.to_string());
    let mib: String = (0..)
        .map(|i| format!("line {i:06} of a large output\n"))
        .take(1024 * 1024 / 29)
        .collect();
    // (case, the result after-execute gets, whether an inner hook refused the call).
    // Besides the ordinary and the extreme, outputs hooks are written to change (secrets,
    // terminal colours, JSON), so that their `replace` runs here and not first in a chain.
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
        let mut instance = match chain.fresh_instance(layer, session).await {
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

/// A tool: its descriptor, and one call.
async fn check_tool(
    runtime: &Runtime,
    component: &ComponentRef,
    session: &Session,
    options: &CheckOptions,
    report: &mut Report,
) {
    let descriptor = match runtime
        .loader()
        .tool(component, options.allow_unknown_imports)
    {
        Ok(pre) => {
            GuestTool::describe(
                &pre,
                runtime.sandbox(),
                &options
                    .settings
                    .iter()
                    .map(|(k, v)| (k.clone(), crate::config::setting_text(v)))
                    .collect(),
                &Default::default(),
            )
            .await
        }
        Err(e) => {
            report.add(Verdict::Fail, format!("does not load: {e}"));
            return;
        }
    };
    let descriptor = match descriptor {
        Ok(d) => d,
        Err(failure) => {
            report.add(
                Verdict::Fail,
                format!(
                    "its descriptor: {}",
                    failed("describe", &failure, &Limits::default())
                ),
            );
            return;
        }
    };
    let name_ok = !descriptor.name.is_empty()
        && descriptor.name.len() <= 64
        && descriptor
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    report.add(
        if name_ok {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        if name_ok {
            format!("describes itself as `{}`", descriptor.name)
        } else {
            format!(
                "names itself {:?}: a tool name is 1 to 64 letters, digits, `_` or `-`",
                descriptor.name
            )
        },
    );
    if descriptor.description.trim().is_empty() {
        report.add(
            Verdict::Fail,
            "has an empty description: the model chooses tools by it",
        );
    }
    match schema_problem(&descriptor.input_schema) {
        None => report.add(
            Verdict::Pass,
            "its input schema is a JSON Schema of an object",
        ),
        Some(problem) => report.add(Verdict::Fail, format!("its input schema {problem}")),
    }
    let arguments = options.call.clone().unwrap_or_else(|| "{}".into());
    let started = Instant::now();
    match runtime.call(session, "checked", &arguments).await {
        Ok(result) => report.add(
            Verdict::Pass,
            format!(
                "a call with {arguments} returned {}{} in {}: {}",
                bytes(result.output.len()),
                if result.is_error { " (an error)" } else { "" },
                millis(started.elapsed()),
                first_line(&result.output)
            ),
        ),
        Err(e) => report.add(Verdict::Fail, format!("a call with {arguments}: {e}")),
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

/// What is wrong with a tool's input schema, if anything: MCP wants the JSON Schema of an
/// object, whose `properties` are schemas and whose `required` names some of them.
fn schema_problem(schema: &str) -> Option<String> {
    let value: serde_json::Value = match serde_json::from_str(schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("is not JSON: {e}")),
    };
    let Some(object) = value.as_object() else {
        return Some("is not a JSON object".into());
    };
    if object.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Some("must say `\"type\": \"object\"` (arguments are a JSON object)".into());
    }
    let properties = match object.get("properties") {
        None => None,
        Some(serde_json::Value::Object(p)) => Some(p),
        Some(_) => return Some("has `properties` that is not an object".into()),
    };
    if let Some((name, _)) = properties
        .into_iter()
        .flatten()
        .find(|(_, s)| !s.is_object() && !s.is_boolean())
    {
        return Some(format!(
            "has property `{name}` whose schema is not an object"
        ));
    }
    match object.get("required") {
        None => None,
        Some(serde_json::Value::Array(names)) => names.iter().find_map(|n| match n.as_str() {
            Some(n) if properties.is_some_and(|p| p.contains_key(n)) => None,
            Some(n) => Some(format!("requires `{n}`, which is not among its properties")),
            None => Some("has a `required` entry that is not a string".into()),
        }),
        Some(_) => Some("has `required` that is not a list".into()),
    }
}

/// Reports a failed case; the same failure as the case before joins its line.
fn case_failed(report: &mut Report, what: &str, why: String) {
    if let Some(last) = report.findings.last_mut()
        && last.verdict == Verdict::Fail
        && let Some(cases) = last.text.strip_suffix(&format!(": {why}"))
    {
        last.text = format!("{cases}, {what}: {why}");
        return;
    }
    report.add(Verdict::Fail, format!("{what}: {why}"));
}

/// Why a phase failed, with what to do about it.
fn failed(phase: &str, failure: &Failure, limits: &Limits) -> String {
    use crate::failure::FailureKind::*;
    let fix = match failure.kind {
        Timeout => format!(
            "it did not return within the deadline of {}: does it loop, or wait on something?",
            millis(limits.deadline())
        ),
        Fuel => "it ran out of fuel: it does too much work per call".into(),
        Memory => format!(
            "it tried to grow its memory past {}: does it copy the output many times?",
            bytes(usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX))
        ),
        OutputTooLarge => format!(
            "it returned more than {}",
            bytes(usize::try_from(limits.max_output_bytes).unwrap_or(usize::MAX))
        ),
        InvalidOutput => format!("it returned something the host refuses: {}", failure.detail),
        // wasmtime's trap message ends with the cause, after a backtrace; the guest's
        // stderr is on the finding's line already.
        Trap => format!(
            "it trapped: {}",
            failure
                .detail
                .rsplit_once(">: ")
                .map_or(failure.detail.as_str(), |(_, cause)| cause)
                .trim()
        ),
        Setup => format!("it could not be set up: {}", failure.detail),
        Declared => format!("it said so: {}", failure.detail),
    };
    format!("{phase} failed ({}): {fix}", failure.kind)
}

/// What the guest wrote to stderr, on the finding's line: lines joined by ` ⏎ `, cut.
fn stderr_note(stderr: &str) -> String {
    const CHARS: usize = 300;
    let joined = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ⏎ ");
    if joined.is_empty() {
        return String::new();
    }
    let mut cut: String = joined.chars().take(CHARS).collect();
    if cut.len() < joined.len() {
        cut.push('…');
    }
    format!("; stderr: {cut}")
}

fn first_line(text: &str) -> String {
    const CHARS: usize = 160;
    let line = text.lines().next().unwrap_or("");
    let mut cut: String = line.chars().take(CHARS).collect();
    if cut.len() < line.len() || text.lines().nth(1).is_some() {
        cut.push('…');
    }
    cut
}

fn millis(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1000.0)
    }
}

fn bytes(n: usize) -> String {
    match n {
        n if n >= 1024 * 1024 => format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0)),
        n if n >= 1024 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// The plan a component is checked in: scratch mounts (and `--grant`s) granted
/// read-write, the component as the only hook (or as the tool `checked`), with its
/// settings and deadline checked as a config's are; no bash, no compiled-code pool.
///
/// # Errors
///
/// What is refused: a grant that is not a mount path, a setting the component does not
/// take, a deadline out of range.
fn scratch_plan(
    component: &ComponentRef,
    world: World,
    options: &CheckOptions,
    unprovided: &[String],
) -> Result<Plan, String> {
    let mut mounts = BTreeMap::new();
    let mut grants = Grants::new();
    let paths = SCRATCH_MOUNTS
        .iter()
        .map(|p| p.to_string())
        .chain(options.grants.iter().cloned());
    for (i, path) in paths.enumerate() {
        let spec = MountSpec {
            host: format!("{{data}}/check/{{tenant}}/{{session}}/mount-{i}"),
            in_workdir: None,
            in_git_workdir: None,
            scope: Scope::Session,
        };
        mounts.insert(path.clone(), spec);
        grants.insert(path, Access::ReadWrite);
    }
    let mounts = MountTable::new(mounts).map_err(|e| format!("--grant: {e}"))?;
    let limits = LimitOverrides {
        deadline_ms: options.deadline_ms,
        ..LimitOverrides::default()
    };
    if let Some(why) = limits.out_of_range() {
        return Err(format!("--deadline-ms: {why}"));
    }
    if let Some(declared) = component.declared_settings() {
        let name = component.to_string();
        for (key, value) in &options.settings {
            if let Some(problem) = setting_problem(&name, declared, key, value) {
                return Err(format!("settings{problem}"));
            }
        }
    }
    let checked = ComponentPlan {
        name: "checked".into(),
        component: component.clone(),
        grants,
        settings: options
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), setting_text(v)))
            .collect(),
        setting_values: options.settings.clone().into_iter().collect(),
        limits,
        allow_unknown_imports: !unprovided.is_empty(),
    };
    let mut plan = Plan::new(mounts, "component check");
    plan.engine.pooling = false;
    match world {
        World::Hook => plan.hooks.push(HookPlan {
            component: checked,
            on_failure: FailurePolicy::default(),
            tools: ToolMatch::all(),
            instance: InstanceMode::default(),
        }),
        World::Tool => plan.tools.push(checked),
    }
    Ok(plan)
}

/// A scratch data directory whose compiled-code cache is the real data directory's: a
/// component checked twice is compiled once. Removed when dropped.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// # Errors
    ///
    /// When the directory, or the cache in `data`, cannot be made.
    pub fn new(data: &Path) -> Result<Scratch, CheckError> {
        let dir = tempfile::Builder::new()
            .prefix("hookhost-check-")
            .tempdir()?;
        let cache: PathBuf = data.join(crate::runtime::CACHE_DIR);
        // Private, as the runtime makes the data directory: the cache holds native code.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&cache)?;
        std::os::unix::fs::symlink(&cache, dir.path().join(crate::runtime::CACHE_DIR))?;
        Ok(Scratch { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_schemas_are_judged_as_mcp_needs_them() {
        assert_eq!(schema_problem(r#"{"type":"object"}"#), None);
        assert_eq!(
            schema_problem(
                r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#
            ),
            None
        );
        for (bad, says) in [
            ("{", "is not JSON"),
            ("[]", "is not a JSON object"),
            (r#"{"type":"string"}"#, "type"),
            (r#"{"type":"object","properties":[]}"#, "`properties`"),
            (r#"{"type":"object","properties":{"a":1}}"#, "`a`"),
            (r#"{"type":"object","required":["x"]}"#, "requires `x`"),
        ] {
            let problem = schema_problem(bad).unwrap_or_default();
            assert!(problem.contains(says), "{bad}: {problem}");
        }
    }

    #[test]
    fn the_scratch_plan_holds_the_component_and_refuses_what_a_config_would() {
        let offload = ComponentRef::Builtin("offload".into());
        let mut options = CheckOptions {
            tool: "bash".into(),
            ..Default::default()
        };
        options.settings.insert("threshold".into(), 10.into());
        options.grants.push("/extra".into());
        let plan = scratch_plan(&offload, World::Hook, &options, &[]).unwrap();
        let hook = &plan.hooks[0].component;
        assert_eq!(hook.settings["threshold"], "10");
        assert!(hook.grants.contains_key("/extra"));
        assert!(plan.tools.is_empty() && plan.bash.is_none() && !plan.engine.pooling);
        let plan = scratch_plan(&offload, World::Tool, &options, &["x".into()]).unwrap();
        assert!(plan.hooks.is_empty() && plan.tools[0].allow_unknown_imports);

        options.settings.insert("thresold".into(), 10.into());
        let refused = scratch_plan(&offload, World::Hook, &options, &[]).unwrap_err();
        assert!(refused.contains("has no setting \"thresold\""), "{refused}");
        options.settings.remove("thresold");
        options.deadline_ms = Some(0);
        let refused = scratch_plan(&offload, World::Hook, &options, &[]).unwrap_err();
        assert!(
            refused.contains("--deadline-ms: deadline_ms = 0"),
            "{refused}"
        );
        options.deadline_ms = None;
        options.grants.push("relative".into());
        let refused = scratch_plan(&offload, World::Hook, &options, &[]).unwrap_err();
        assert!(refused.starts_with("--grant: "), "{refused}");
    }
}
