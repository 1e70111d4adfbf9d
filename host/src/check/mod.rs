//! `hookhost component check`: does a component conform, and if not, what to fix.
//!
//! A component is compiled (through the data directory's compiled-code cache), its world,
//! WIT version and imports are named, and then it is run in the real sandbox, with
//! scratch mounts, through what a chain will ask of it: for a hook, `before-execute` and
//! `after-execute` of an ordinary call, an empty output, Unicode, a 1 MiB output, a tool's
//! error and an inner hook's refusal, each on a fresh instance within the default limits;
//! for a tool, its descriptor and one call; for a persistent directory's store
//! (`harness:store`), loads and commits through sessions, a conflict, and its versions
//! when it keeps them. Each finding is one line; the component conforms when none is a
//! failure.

use crate::chain::{FailurePolicy, InstanceMode};
use crate::component::{ComponentLoader, ComponentRef, Import};
use crate::config::{
    ComponentPlan, HookPlan, Plan, TraceConfig, WrittenSetting, setting_problem, setting_text,
};
use crate::failure::Failure;
use crate::ids::ToolMatch;
use crate::limits::{LimitOverrides, Limits};
use crate::mounts::{MountSpec, MountTable, Scope};
use crate::network::Allow;
use crate::sandbox::{Access, Grants};
use crate::{Runtime, TenantId};
use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod hook;
mod store;
mod tool;

/// The worlds a component may implement: `hook` and `tool` of `harness:hooks`, `store` of
/// `harness:store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum World {
    Hook,
    Tool,
    Store,
}

impl World {
    /// The interface a component of this world exports.
    fn export(self) -> &'static str {
        match self {
            World::Hook => "harness:hooks/tool-hook@",
            World::Tool => "harness:hooks/tool-provider@",
            World::Store => "harness:store/store@",
        }
    }

    /// The WIT package of its world.
    fn package(self) -> &'static str {
        match self {
            World::Hook | World::Tool => "harness:hooks",
            World::Store => "harness:store",
        }
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            World::Hook => "hook",
            World::Tool => "tool",
            World::Store => "store",
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
    /// Hosts its `wasi:http` requests may reach (`network = { allow = [...] }`); none
    /// when empty.
    pub allow: Vec<String>,
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
        [World::Hook, World::Tool, World::Store]
            .into_iter()
            .find_map(|w| {
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
                format!("does not load: {}", crate::failure::error_line(&e)),
            );
            return Ok(report);
        }
    };
    report.add(Verdict::Pass, inspection.summary());
    let Some((world, version)) = inspection.world.clone() else {
        report.add(
            Verdict::Fail,
            "exports neither harness:hooks/tool-hook nor harness:hooks/tool-provider (nor \
             harness:store/store): build it for the `hook` or `tool` world of wit/hooks@0.2.0 \
             (wit-bindgen: `world: \"hook\"`; componentize-py: `-w hook`; componentize-js: \
             `--world-name hook`), or a store for wit/store@0.1.0",
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
        format!(
            "implements the `{world}` world of {}@{version}",
            world.package()
        ),
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
    let requests_http = met.iter().any(|i| i.name.starts_with(HTTP_OUTGOING));
    if requests_http {
        report.add(
            Verdict::Pass,
            match options.allow.is_empty() {
                true => format!(
                    "imports {HTTP_OUTGOING}: its requests reach only the hosts a `network` \
                     grant names; none here (`--allow HOST`), so each one it makes is refused \
                     with HttpRequestDenied"
                ),
                false => format!(
                    "imports {HTTP_OUTGOING}: its requests reach only {}",
                    options.allow.join(", ")
                ),
            },
        );
    }
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
    if world == World::Store {
        store::suite(component, options, &scratch, &mut report).await;
        return Ok(report);
    }

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
                format!("does not load: {}", crate::failure::error_line(&e)),
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
    let made = match world {
        World::Hook => {
            let requests = Arc::default();
            hook::check(&runtime, &session, options, &requests, &mut report).await;
            requests.take().into_iter().map(Made::from).collect()
        }
        World::Tool => {
            tool::check(&runtime, component, &session, options, &mut report).await;
            traced_requests(&session)
        }
        // Checked by its own suite, above.
        World::Store => Vec::new(),
    };
    if requests_http {
        network_findings(&mut report, &made);
    }
    Ok(report)
}

/// The `wasi:http` interface whose import lets a component make requests.
const HTTP_OUTGOING: &str = "wasi:http/outgoing-handler";

/// A request the component made during the check: `METHOD host:port`, how it ended, why.
struct Made {
    what: String,
    outcome: String,
    reason: Option<String>,
}

impl From<crate::network::Request> for Made {
    fn from(r: crate::network::Request) -> Made {
        Made {
            what: format!("{} {}:{}", r.method, r.host, r.port),
            outcome: r.outcome.as_str().to_string(),
            reason: r.reason,
        }
    }
}

/// The requests a tool's calls made, from the scratch session's trace (a tool's calls
/// go through the whole call path, which traces them).
fn traced_requests(session: &crate::sessions::Session) -> Vec<Made> {
    let mount = TraceConfig::default().mount;
    let Some(dir) = session.host_dir(&mount) else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(dir.join(crate::trace::EVENTS_FILE)).unwrap_or_default();
    crate::trace::events(&text, None)
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| e["kind"] == "network.request")
        .map(|e| Made {
            what: format!(
                "{} {}:{}",
                e["method"].as_str().unwrap_or_default(),
                e["host"].as_str().unwrap_or_default(),
                e["port"]
            ),
            outcome: e["outcome"].as_str().unwrap_or_default().to_string(),
            reason: e["reason"].as_str().map(String::from),
        })
        .collect()
}

/// What the component's requests met: each one said, a refused one with why (a refusal is
/// the host keeping its rules, not the component's failure).
fn network_findings(report: &mut Report, made: &[Made]) {
    if made.is_empty() {
        report.add(
            Verdict::Note,
            format!(
                "imports {HTTP_OUTGOING} but made no request in these cases: what a grant \
                 or its absence does to it was not seen"
            ),
        );
        return;
    }
    let said: Vec<String> = made
        .iter()
        .map(|m| match &m.reason {
            Some(why) => format!("{} {} ({why})", m.what, m.outcome),
            None => format!("{} {}", m.what, m.outcome),
        })
        .collect();
    report.add(
        Verdict::Pass,
        format!(
            "made {} request(s) over wasi:http, each checked against its grant: {}",
            made.len(),
            said.join("; ")
        ),
    );
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
        DiskQuota => failure.detail.clone(),
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
            persistent: None,
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
    // A hook's settings are checked when it loads, against what it says it takes.
    if let Some(declared) = component.builtin_tool_settings() {
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
        setting_values: options
            .settings
            .iter()
            .map(|(k, v)| {
                let written = WrittenSetting {
                    value: v.clone(),
                    line: None,
                };
                (k.clone(), written)
            })
            .collect(),
        limits,
        allow_unknown_imports: !unprovided.is_empty(),
        require_signature: None,
        network: match options.allow.is_empty() {
            true => None,
            false => Some(Arc::new(
                Allow::parse(&options.allow).map_err(|why| format!("--allow: {why}"))?,
            )),
        },
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
        World::Store => return Err("a store is checked by its own suite".into()),
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
        // Absolute, or a relative `--data` would leave the link pointing nowhere.
        let cache = cache.canonicalize()?;
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

        // A built-in tool's settings are known before it loads (a hook's, when it loads).
        options.settings.insert("fiel".into(), "x".into());
        let todo = ComponentRef::Builtin("todo_write".into());
        let refused = scratch_plan(&todo, World::Tool, &options, &[]).unwrap_err();
        assert!(refused.contains("has no setting \"fiel\""), "{refused}");
        assert!(scratch_plan(&offload, World::Hook, &options, &[]).is_ok());
        options.settings.remove("fiel");
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
