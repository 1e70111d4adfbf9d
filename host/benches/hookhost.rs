//! The cost of the hook layer, each figure beside a native-Rust implementation of the same
//! hook logic called the same way, and the ratio: `cargo bench -p hookhost --bench
//! hookhost` (about 15 s, and 2 min more for the `agent-turn` rows of whole `claude -p`
//! turns) prints one Markdown table; `-- --only GROUP` runs one group of rows (e.g. under
//! a profiler), `-- --heavy FILE` measures another component as the heavy hook.
//!
//! The chain is the built-in one — offload → audit → plan-writer (plan-writer matches only
//! `todo_write`, so it is skipped at no cost) — around host-native tools that return a
//! fixed output, so what is measured is the hooks. The native baseline does what the
//! guests do: offload counts characters (and, over the threshold, lines, then writes the
//! file beside its place and renames it, and builds the reference), audit appends a start
//! and a done JSON line to a log it opens once per call (fresh instances) or keeps open
//! (per-session instances). The heavy-hook rows measure a 10 MB component shaped like one
//! built from an interpreted language (`tests/fixtures/heavy-hook`), or the component
//! given with `--heavy`.
//!
//! Files go to a tmpfs (`/dev/shm`) when there is one, so that what is measured is the hook
//! layer, not the disk's writeback.

#[path = "hookhost/agent_turn.rs"]
mod agent_turn;

use anyhow::{Context, Result};
use clap::Parser;
use hookhost::config::Plan;
use hookhost::failure::Failure;
use hookhost::tools::{Callee, Tool};
use hookhost::{
    CallContext, Config, Runtime, Session, TenantId, ToolCall, ToolDescriptor, ToolResult,
};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A count of the bench: what a run measures with, and what a quick run (`--quick`, as
/// `.ci/run` runs it: every group once, in seconds, to keep it running) makes do with.
#[derive(Clone, Copy)]
struct Count {
    full: usize,
    quick: usize,
}

/// Whether this is a quick run (`--quick`): its figures mean nothing.
static QUICK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn quick() -> bool {
    QUICK.load(std::sync::atomic::Ordering::Relaxed)
}

impl Count {
    const fn new(full: usize, quick: usize) -> Count {
        Count { full, quick }
    }

    fn get(self) -> usize {
        if quick() { self.quick } else { self.full }
    }
}

/// Calls measured per latency figure (after as many warm-up calls as a tenth of it).
const CALLS: Count = Count::new(2_000, 20);
/// Sessions calling at once for the throughput figure, and calls each.
const SESSIONS: Count = Count::new(64, 4);
const CALLS_PER_SESSION: Count = Count::new(200, 5);
/// Idle sessions for the memory figure.
const IDLE_SESSIONS: Count = Count::new(1_000, 10);
/// Process starts timed for the start-up figure.
const STARTS: Count = Count::new(10, 2);
/// Sandboxes started one after another for the sandbox-start row.
const SANDBOX_STARTS: Count = Count::new(200, 3);

/// Sessions calling `bash` at once for the bash figure, and calls each.
const BASH_SESSIONS: Count = Count::new(4, 2);
const BASH_CALLS_PER_SESSION: Count = Count::new(50, 3);
const MIB: usize = 1024 * 1024;
/// The heavy hook's heap, and the page it touches once per call (see its source).
const HEAVY_HEAP_BYTES: usize = 10 * MIB;
const PAGE: usize = 4096;
/// Files in a traced call's writable mount, for the trace rows.
const TRACED_FILES: [usize; 3] = [0, 100, 10_000];

include!(concat!(env!("OUT_DIR"), "/bench_fixtures.rs"));

/// A host-native tool returning `output` whatever it is asked.
struct Fixed {
    descriptor: ToolDescriptor,
    output: Arc<str>,
}

impl Fixed {
    fn new(name: &str, output: &str) -> Arc<Fixed> {
        Arc::new(Fixed {
            descriptor: ToolDescriptor {
                name: name.into(),
                description: "returns a fixed output".into(),
                input_schema: r#"{"type":"object"}"#.into(),
            },
            output: output.into(),
        })
    }
}

impl hookhost::sessions::SessionHolder for Fixed {}

impl Tool for Fixed {}

#[async_trait::async_trait]
impl Callee for Fixed {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        _: &hookhost::sessions::Caller<'_>,
        _: &CallContext,
        _: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        Ok(ToolResult::text(self.output.as_ref()))
    }
}

struct Row {
    what: String,
    hookhost: String,
    native: String,
    ratio: String,
    goal: &'static str,
}

impl Row {
    /// A row comparing the eras of MCP: 2026-07-28's p50 and p99 against 2025-11-25's.
    fn eras(
        what: &str,
        (new, new99): (Duration, Duration),
        (old, old99): (Duration, Duration),
        goal: &'static str,
    ) -> Row {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Row {
            what: what.into(),
            hookhost: format!(
                "{:.2} / {:.2} ms; {:.2} / {:.2} ms",
                ms(new),
                ms(old),
                ms(new99),
                ms(old99)
            ),
            native: String::new(),
            ratio: format!(
                "{} p50; {} p99",
                ratio(ms(new), ms(old)),
                ratio(ms(new99), ms(old99))
            ),
            goal,
        }
    }

    /// A row of two median latencies and their ratio.
    fn latency(what: &str, hookhost: Duration, native: Duration, goal: &'static str) -> Row {
        Row {
            what: what.into(),
            hookhost: micros(hookhost),
            native: micros(native),
            ratio: ratio(hookhost.as_secs_f64(), native.as_secs_f64()),
            goal,
        }
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn ratio(a: f64, b: f64) -> String {
    format!("{:.2}×", a / b)
}

fn median_f64(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The built-in config with bash off, the offload threshold at `threshold`, and every hook
/// kept per session when `per_session`.
fn config(threshold: usize, per_session: bool, pool_instances: u32) -> Result<Plan> {
    Ok(Config::parse(
        &config_text(threshold, per_session, pool_instances),
        "<bench config>",
    )?
    .plan)
}

/// The text of [`config`].
fn config_text(threshold: usize, per_session: bool, pool_instances: u32) -> String {
    let mut text = hookhost::config::DEFAULT_CONFIG.replace("enabled = true", "enabled = false");
    text = text.replace("threshold = 10000", &format!("threshold = {threshold}"));
    if per_session {
        text = text.replace(
            "on_failure = \"open\"\n",
            "on_failure = \"open\"\ninstance = \"per-session\"\n",
        );
    }
    text.push_str(&format!(
        "\n[engine]\npool_instances = {pool_instances}\n{}\n",
        std::env::var("HOOKHOST_BENCH_ENGINE").unwrap_or_default()
    ));
    text
}

async fn runtime(data: &Path, plan: &Plan) -> Result<Runtime> {
    let mut runtime = Runtime::new(plan.clone(), data).await?;
    runtime.register_tool(Fixed::new("noop", &"x".repeat(100)))?;
    runtime.register_tool(Fixed::new("big", &"y".repeat(MIB)))?;
    Ok(runtime)
}

/// Median latency of `calls` calls of `tool` in one session.
async fn latency(runtime: &Runtime, tool: &str, calls: usize) -> Result<Duration> {
    let session = runtime
        .sessions()
        .create(TenantId::default_tenant(), None, None)
        .await?;
    latency_in(runtime, &session, tool, calls).await
}

/// Median latency of `calls` calls of `tool` in `session`.
async fn latency_in(
    runtime: &Runtime,
    session: &Session,
    tool: &str,
    calls: usize,
) -> Result<Duration> {
    let session = session.clone();
    for _ in 0..calls / 10 {
        runtime.call(&session, tool, "{}").await?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let r = runtime.call(&session, tool, "{}").await?;
        samples.push(start.elapsed());
        anyhow::ensure!(!r.is_error, "{tool} failed: {}", r.output);
    }
    Ok(median(samples))
}

/// Calls per second of `sessions` tasks at once, each started by `spawn(index)` and making
/// `calls_each` calls.
async fn calls_per_second(
    sessions: usize,
    calls_each: usize,
    spawn: impl Fn(usize) -> tokio::task::JoinHandle<Result<()>>,
) -> Result<f64> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..sessions).map(spawn).collect();
    for task in tasks {
        task.await??;
    }
    Ok((sessions * calls_each) as f64 / start.elapsed().as_secs_f64())
}

/// `noop` calls per second of [`SESSIONS`] new sessions calling at once.
async fn sessions_throughput(runtime: &Arc<Runtime>) -> Result<f64> {
    throughput(
        runtime,
        SESSIONS.get(),
        CALLS_PER_SESSION.get(),
        "noop",
        "{}",
    )
    .await
}

/// `bash` calls per second, [`BASH_SESSIONS`] sessions calling at once.
async fn bash_throughput(runtime: &Arc<Runtime>) -> Result<f64> {
    let command = r#"{"command":"true"}"#;
    throughput(
        runtime,
        BASH_SESSIONS.get(),
        BASH_CALLS_PER_SESSION.get(),
        "bash",
        command,
    )
    .await
}

/// Calls of `tool` per second, `sessions` new sessions making `calls_each` at once; each
/// call must succeed.
async fn throughput(
    runtime: &Arc<Runtime>,
    sessions: usize,
    calls_each: usize,
    tool: &'static str,
    arguments: &'static str,
) -> Result<f64> {
    calls_per_second(sessions, calls_each, |_| {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let session = runtime
                .sessions()
                .create(TenantId::default_tenant(), None, None)
                .await?;
            for _ in 0..calls_each {
                let r = runtime.call(&session, tool, arguments).await?;
                anyhow::ensure!(!r.is_error, "{tool} failed: {}", r.output);
            }
            Ok(())
        })
    })
    .await
}

/// The same `bash -c true` spawned and waited for natively, at the same concurrency.
async fn native_bash_throughput() -> Result<f64> {
    calls_per_second(BASH_SESSIONS.get(), BASH_CALLS_PER_SESSION.get(), |_| {
        tokio::task::spawn_blocking(|| {
            for _ in 0..BASH_CALLS_PER_SESSION.get() {
                let status = std::process::Command::new("bash")
                    .args(["-c", "true"])
                    .status()?;
                anyhow::ensure!(status.success(), "bash failed");
            }
            Ok(())
        })
    })
    .await
}

/// The start of one sandbox: a new sandbox (bubblewrap, the generated `/etc`, its pids
/// cgroup, hookhost's launcher, and slirp4netns when `network` is open) running
/// `bash -c true`, as a session's first `bash` call makes it, and `bash -c true` natively;
/// median of each, one at a time.
async fn sandbox_start(data: &Path, network: bool) -> Result<(Duration, Duration)> {
    use hookhost::limits::ShellPolicy;
    use hookhost::tools::bash::ShellSandbox;
    use hookhost::tools::bash::launcher::Reply;
    let shell = ShellSandbox::new(None, data);
    let ready = shell.ready().await?;
    let policy = ShellPolicy {
        network,
        limits: Default::default(),
    };
    let mut sandboxed = Vec::with_capacity(SANDBOX_STARTS.get());
    let mut native = Vec::with_capacity(SANDBOX_STARTS.get());
    for _ in 0..SANDBOX_STARTS.get() {
        let start = Instant::now();
        let shell = ready
            .start(&[], "/", &policy, "bench")
            .await
            .map_err(anyhow::Error::msg)?;
        drop(shell.send("true", "/").await?);
        let reply = shell.reply().await?;
        sandboxed.push(start.elapsed());
        anyhow::ensure!(
            matches!(reply, Reply::Ended { code: Some(0), .. }),
            "the sandbox failed: {reply:?}"
        );
        let start = Instant::now();
        tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .status()
            .await?;
        native.push(start.elapsed());
    }
    Ok((median(sandboxed), median(native)))
}

/// System calls timed for the seccomp row.
const SYSCALLS: Count = Count::new(1_000_000, 1000);

/// What the sandbox's system-call filter costs: [`SYSCALLS`] `getppid` calls in a child
/// process, without the filter and then with it (the filter cannot be removed, hence the
/// child); the times of both.
fn seccomp_cost() -> Result<(Duration, Duration)> {
    let program = hookhost::tools::bash::seccomp::program()?;
    let (read, write) = std::io::pipe()?;
    // SAFETY: the child makes system calls, writes to the pipe and exits.
    let pid = unsafe { libc::fork() };
    anyhow::ensure!(pid >= 0, "fork failed");
    if pid == 0 {
        let time = || {
            let start = Instant::now();
            for _ in 0..SYSCALLS.get() {
                // SAFETY: getppid has no arguments and cannot fail.
                unsafe { libc::getppid() };
            }
            start.elapsed().as_nanos() as u64
        };
        let unfiltered = time();
        let filtered = match seccompiler::apply_filter(&program) {
            Ok(()) => time(),
            Err(_) => 0,
        };
        let mut write = write;
        let _ = write.write_all(format!("{filtered} {unfiltered}").as_bytes());
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    drop(write);
    let mut said = String::new();
    let mut read = read;
    read.read_to_string(&mut said)?;
    // SAFETY: reaps the child forked above.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    let mut times = said
        .split_whitespace()
        .map(|n| n.parse::<u64>().map(Duration::from_nanos));
    let (Some(Ok(filtered)), Some(Ok(unfiltered))) = (times.next(), times.next()) else {
        anyhow::bail!("the filtered child said {said:?}");
    };
    anyhow::ensure!(!filtered.is_zero(), "the filter could not be installed");
    Ok((filtered, unfiltered))
}

/// The same hook logic, natively: audit's two lines, offload's check (and write).
struct NativeChain {
    dir: PathBuf,
    threshold: usize,
    /// The audit log, when it is kept open across calls (as per-session instances keep it).
    log: Option<File>,
}

impl NativeChain {
    fn new(dir: &Path, threshold: usize) -> NativeChain {
        NativeChain {
            dir: dir.to_path_buf(),
            threshold,
            log: None,
        }
    }

    fn kept_open(dir: &Path, threshold: usize) -> Result<NativeChain> {
        Ok(NativeChain {
            log: Some(Self::open_log(dir)?),
            ..NativeChain::new(dir, threshold)
        })
    }

    fn open_log(dir: &Path) -> Result<File> {
        Ok(OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("audit.jsonl"))?)
    }

    fn call(&self, session: &str, tool: &str, output: &str) -> Result<String> {
        let id = uuid::Uuid::new_v4().to_string();
        let start = Instant::now();
        let opened;
        let log = match &self.log {
            Some(kept) => kept,
            None => {
                opened = Self::open_log(&self.dir)?;
                &opened
            }
        };
        let audit = |line: serde_json::Value| -> Result<()> {
            let mut text = line.to_string();
            text.push('\n');
            (&*log).write_all(text.as_bytes())?;
            Ok(())
        };
        audit(
            serde_json::json!({"event": "start", "tool": tool, "call_id": id, "session": session}),
        )?;
        let result = output.to_string();
        audit(
            serde_json::json!({"event": "done", "tool": tool, "call_id": id, "session": session,
            "duration_ms": start.elapsed().as_secs_f64() * 1e3, "is_error": false, "output_bytes": result.len()}),
        )?;
        if result.len() <= self.threshold {
            return Ok(result);
        }
        let chars = result.chars().count();
        if chars <= self.threshold {
            return Ok(result);
        }
        let lines = result.bytes().filter(|&b| b == b'\n').count();
        let dir = self.dir.join("tool-results").join(tool);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{id}.txt"));
        anyhow::ensure!(
            path.symlink_metadata().is_err(),
            "{} exists",
            path.display()
        );
        let partial = dir.join(format!(".{id}.txt.partial"));
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?
            .write_all(result.as_bytes())?;
        std::fs::rename(&partial, &path)?;
        let preview: Vec<&str> = result.lines().take(20).collect();
        Ok(format!(
            "[Output offloaded: {chars} characters]\nFull output: {}\nSize: {} bytes, {lines} lines\n\nPreview:\n{}\n",
            path.display(),
            result.len(),
            preview.join("\n")
        ))
    }
}

/// The heavy hook's work, natively: read a byte of every page of its heap, write one in four.
fn native_heavy(heap: &mut [u8]) {
    let mut sum = 0u8;
    for (page, byte) in heap.iter_mut().step_by(PAGE).enumerate() {
        sum = sum.wrapping_add(*byte);
        if page % 4 == 0 {
            *byte = byte.wrapping_add(1);
        }
    }
    std::hint::black_box(sum);
}

/// The median time of `runs` runs of `f`.
fn median_time(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed());
    }
    Ok(median(samples))
}

fn native_latency(chain: &NativeChain, tool: &str, output: &str, calls: usize) -> Result<Duration> {
    median_time(calls, || {
        std::hint::black_box(chain.call("s", tool, output)?);
        Ok(())
    })
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// A config of one hook, `component`, around the bench's tools.
fn one_hook_config(component: &Path, per_session: bool) -> Result<Plan> {
    let instance = if per_session {
        "per-session"
    } else {
        "per-call"
    };
    let text = format!(
        "[bash]\nenabled = false\n\n[[hooks]]\nname = \"heavy\"\ncomponent = {:?}\ninstance = {instance:?}\n",
        component.display().to_string()
    );
    Ok(Config::parse(&text, "<bench config>")?.plan)
}

/// The URL a `serve --http` child announces on stderr (the rest of its stderr is drained,
/// so its log writes never block).
fn announced(child: &mut std::process::Child) -> Result<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().context("stderr")?;
    let mut lines = std::io::BufReader::new(stderr).lines();
    for line in lines.by_ref().take(100) {
        let line = line?;
        if let Some(url) = line.strip_prefix("hookhost: serving MCP at ") {
            std::thread::spawn(move || lines.for_each(drop));
            return Ok(url.trim().to_string());
        }
    }
    anyhow::bail!("the server did not announce its address")
}

/// How long `program args` takes, from its start to its exit, with `stdin` written to it
/// and its output thrown away; an error when it fails.
fn run_once(program: &Path, args: &[&str], stdin: &[u8]) -> Result<Duration> {
    let start = Instant::now();
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // A process that does not read its stdin may close it first.
    let _ = child.stdin.take().context("stdin")?.write_all(stdin);
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "{} {args:?} failed", program.display());
    Ok(start.elapsed())
}

/// The median of [`STARTS`] runs of [`run_once`].
fn runs_median(program: &Path, args: &[&str], stdin: &[u8]) -> Result<Duration> {
    Ok(median(
        (0..STARTS.get())
            .map(|_| run_once(program, args, stdin))
            .collect::<Result<_>>()?,
    ))
}

/// An MCP client of one server process, for the end-to-end rows: over the server's stdio,
/// or over Streamable HTTP on one kept-alive connection. The server is killed when the
/// peer is dropped.
enum Peer {
    Stdio {
        child: std::process::Child,
        stdin: std::process::ChildStdin,
        stdout: std::io::BufReader<std::process::ChildStdout>,
    },
    Http {
        child: std::process::Child,
        client: reqwest::Client,
        url: String,
        session: Option<String>,
    },
}

impl Drop for Peer {
    fn drop(&mut self) {
        let (Peer::Stdio { child, .. } | Peer::Http { child, .. }) = self;
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Peer {
    fn stdio(mut command: std::process::Command) -> Result<Peer> {
        use std::process::Stdio;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = std::io::BufReader::new(child.stdout.take().context("stdout")?);
        Ok(Peer::Stdio {
            child,
            stdin,
            stdout,
        })
    }

    fn http(child: std::process::Child, url: String) -> Peer {
        Peer::Http {
            child,
            client: reqwest::Client::new(),
            url,
            session: None,
        }
    }

    /// Sends a JSON-RPC message; the response to it when it has an `id`.
    async fn send(&mut self, message: serde_json::Value) -> Result<Option<serde_json::Value>> {
        let id = message.get("id").cloned();
        match self {
            Peer::Stdio { stdin, stdout, .. } => {
                use std::io::BufRead;
                writeln!(stdin, "{message}")?;
                stdin.flush()?;
                let Some(id) = id else { return Ok(None) };
                let mut line = String::new();
                // Notifications and log messages may come first: bounded, as the server is.
                for _ in 0..1_000 {
                    line.clear();
                    anyhow::ensure!(stdout.read_line(&mut line)? > 0, "the server ended");
                    let reply: serde_json::Value = serde_json::from_str(&line)?;
                    if reply.get("id") == Some(&id) {
                        return Ok(Some(reply));
                    }
                }
                anyhow::bail!("no response to {id}")
            }
            Peer::Http {
                client,
                url,
                session,
                ..
            } => {
                let mut request = client
                    .post(url.as_str())
                    .header("accept", "application/json, text/event-stream")
                    .header("content-type", "application/json")
                    .body(message.to_string());
                if let Some(session) = session.as_deref() {
                    request = request
                        .header("mcp-session-id", session)
                        .header("mcp-protocol-version", "2025-11-25");
                }
                let response = request.send().await?.error_for_status()?;
                if let Some(given) = response.headers().get("mcp-session-id") {
                    *session = Some(given.to_str()?.to_string());
                }
                let text = response.text().await?;
                let Some(id) = id else { return Ok(None) };
                reply_in(&text, &id).map(Some)
            }
        }
    }

    /// As [`Peer::round_trips`], in requests of MCP 2026-07-28 (over HTTP: no
    /// `initialize`, no MCP session, the version in each request's `_meta` and headers):
    /// the first names the hookhost session `new` (not timed), the rest the one it made.
    async fn modern_round_trips(
        &mut self,
        tool: &str,
        arguments: serde_json::Value,
        calls: usize,
    ) -> Result<(Duration, Duration)> {
        use serde_json::json;
        let Peer::Http { client, url, .. } = self else {
            anyhow::bail!("MCP 2026-07-28 is measured over HTTP");
        };
        let mut session = "new".to_string();
        let mut took = Vec::with_capacity(calls);
        for i in 0..=calls + calls / 10 {
            let id = json!(i + 1);
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": tool, "arguments": arguments, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}});
            let start = Instant::now();
            let response = client
                .post(url.as_str())
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", tool)
                .header("hookhost-session", session.as_str())
                .body(call.to_string())
                .send()
                .await?
                .error_for_status()?;
            if let Some(given) = response.headers().get("hookhost-session") {
                session = given.to_str()?.to_string();
            }
            let reply = reply_in(&response.text().await?, &id)?;
            let elapsed = start.elapsed();
            succeeded(tool, &reply)?;
            if i > calls / 10 {
                took.push(elapsed);
            }
        }
        Ok(p50_p99(took))
    }

    /// Initialises the session, then times `calls` calls of `tool` with `arguments`
    /// (after a tenth as many not timed): their median and 99th percentile.
    async fn round_trips(
        &mut self,
        tool: &str,
        arguments: serde_json::Value,
        calls: usize,
    ) -> Result<(Duration, Duration)> {
        self.initialize().await?;
        self.timed(tool, &arguments, calls / 10).await?;
        Ok(p50_p99(self.timed(tool, &arguments, calls).await?.0))
    }

    /// Opens an MCP session of 2025-11-25.
    async fn initialize(&mut self) -> Result<()> {
        use serde_json::json;
        self.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}),
        )
        .await?;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(())
    }

    /// The round trips of `calls` calls of `tool` with `arguments`, one after another, and
    /// the size of the last answer.
    async fn timed(
        &mut self,
        tool: &str,
        arguments: &serde_json::Value,
        calls: usize,
    ) -> Result<(Vec<Duration>, usize)> {
        let mut took = Vec::with_capacity(calls);
        let mut size = 0;
        for i in 0..calls {
            let call = serde_json::json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}});
            let start = Instant::now();
            let reply = self.send(call).await?.context("no response")?;
            took.push(start.elapsed());
            succeeded(tool, &reply)?;
            size = reply["result"].to_string().len();
        }
        Ok((took, size))
    }
}

/// Whether `reply`, an answer to a call of `tool`, is a result that is not an error.
fn succeeded(tool: &str, reply: &serde_json::Value) -> Result<()> {
    anyhow::ensure!(
        reply["result"]["isError"] != true && reply.get("error").is_none(),
        "{tool} failed: {reply}"
    );
    Ok(())
}

/// The median and 99th percentile of `took`.
fn p50_p99(mut took: Vec<Duration>) -> (Duration, Duration) {
    took.sort();
    (took[took.len() / 2], took[took.len() * 99 / 100])
}

/// The response to `id` in an HTTP answer's body: JSON, or server-sent events of which one
/// carries it.
fn reply_in(text: &str, id: &serde_json::Value) -> Result<serde_json::Value> {
    text.lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|m| m.get("id") == Some(id))
        .with_context(|| format!("no response to {id} in {text}"))
}

/// A free port on 127.0.0.1 (for a server that cannot announce the one it took).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A child process killed (by its pid) when dropped: a group that fails, or panics,
/// stops what it started.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits, at most 20 s, until something listens on `port`.
fn wait_listening(port: u16) -> Result<()> {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    anyhow::bail!("nothing listens on port {port}")
}

/// The groups of rows, in the order they run; `--only GROUP` runs one (to profile it).
const GROUPS: &[&str] = &[
    "fresh",
    "passthrough",
    "bash",
    "per-session",
    "heavy",
    "startup",
    "agent-hook",
    "agent-turn",
    "trace",
    "trace-cost",
    "persistent",
    "end-to-end",
    "gateway",
    "registry",
    "network",
];

/// Measure the hook layer against a native implementation of the same hooks; prints a
/// Markdown table.
#[derive(Parser)]
struct Args {
    /// Measure this component as the heavy hook (e.g. one built with componentize-py)
    /// instead of the built-in 10 MB stand-in.
    #[arg(long, value_name = "FILE")]
    heavy: Option<PathBuf>,
    /// Where the `persistent` rows put their tree [default: the scratch directory, a tmpfs
    /// when there is one]: a directory on XFS or Btrfs measures loads that share blocks.
    #[arg(long, value_name = "DIR")]
    persistent_dir: Option<PathBuf>,
    /// Run every group once with a few calls each, in seconds, and judge nothing: what
    /// `.ci/run` does, so that the bench cannot break unseen. Its figures mean nothing.
    #[arg(long)]
    quick: bool,
    /// Run one group of rows only, e.g. under a profiler.
    #[arg(long, value_name = "GROUP", value_parser = clap::builder::PossibleValuesParser::new(GROUPS))]
    only: Option<String>,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HOOKHOST_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    hookhost::install_crypto_provider();
    let args = Args::parse();
    QUICK.store(args.quick, std::sync::atomic::Ordering::Relaxed);
    run(args.heavy, args.only.as_deref(), args.persistent_dir).await
}

/// Files and bytes per file of the persistent directory measured.
const PERSISTENT_FILES: Count = Count::new(10_000, 1000);
const PERSISTENT_FILE_BYTES: usize = 10_000;
/// Loads measured (each of the whole tree), and commits of 10 files.
const PERSISTENT_LOADS: Count = Count::new(3, 1);
const PERSISTENT_COMMITS: Count = Count::new(20, 2);

/// A persistent directory of 10,000 files (100 MB): its load into a checkout, beside a
/// plain copy of the same files; a commit of 10 changed files in it, beside what finding
/// and publishing them costs at least — a stat of every file, and the 10 copied and renamed
/// into place, fsynced, as a careful writer does; and a call that touches no persistent
/// directory with one declared, beside the same call with none.
async fn persistent_rows(base: &Path) -> Result<Vec<Row>> {
    use hookhost::persistent::{Backing, OnConflict, Room};
    let tree = base.join("store");
    for n in 0..PERSISTENT_FILES.get() {
        let dir = tree.join(format!("d{}", n / 100));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join(format!("{n}.txt")),
            vec![b'p'; PERSISTENT_FILE_BYTES],
        )?;
    }
    let backing = Backing::new(tree.clone());
    let (mut loads, mut copies) = (Vec::new(), Vec::new());
    let checkout = base.join("checkout");
    let mut manifest = None;
    for round in 0..PERSISTENT_LOADS.get() {
        let _ = std::fs::remove_dir_all(&checkout);
        let started = Instant::now();
        manifest = Some(backing.load(&checkout)?.0);
        loads.push(started.elapsed());
        let copy = base.join(format!("copy-{round}"));
        let started = Instant::now();
        copy_tree(&tree, &copy)?;
        copies.push(started.elapsed());
        std::fs::remove_dir_all(&copy)?;
    }
    let mut manifest = manifest.context("loaded")?;
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    let (load, copy) = (median(loads), median(copies));
    let mut rows = vec![Row {
        what: "load of a 10,000-file, 100 MB persistent directory into a checkout (median of 3)"
            .into(),
        hookhost: ms(load),
        native: format!("{} (a plain copy)", ms(copy)),
        ratio: ratio(load.as_secs_f64(), copy.as_secs_f64()),
        goal: "≈ a copy (ms where blocks are shared: XFS, Btrfs)",
    }];

    let (mut commits, mut natives) = (Vec::new(), Vec::new());
    for round in 0..PERSISTENT_COMMITS.get() {
        let changed: Vec<PathBuf> = (0..10)
            .map(|i| PathBuf::from(format!("d{i}/{}.txt", i * 100 + round)))
            .collect();
        for path in &changed {
            std::fs::write(checkout.join(path), format!("round {round}\n"))?;
        }
        let started = Instant::now();
        backing.commit(&checkout, &mut manifest, OnConflict::Fail, Room::default())?;
        commits.push(started.elapsed());
        // Finding what changed is a stat of every file, as `find -printf '%i %s %T@'`.
        let started = Instant::now();
        let mut seen = 0;
        walk_stat(&checkout, &mut seen)?;
        std::hint::black_box(seen);
        for path in &changed {
            let target = tree.join(path);
            let staged = target.with_extension("native");
            std::fs::copy(checkout.join(path), &staged)?;
            File::open(&staged)?.sync_all()?;
            std::fs::rename(&staged, &target)?;
        }
        natives.push(started.elapsed());
    }
    let native = median(natives);
    rows.push(Row {
        native: format!(
            "{} (a stat of every file, and the 10 copied into place)",
            micros(native)
        ),
        ..Row::latency(
            "commit of 10 changed files in that directory, found among its 10,000 (median of 20)",
            median(commits),
            native,
            "≈ a stat of the tree",
        )
    });

    let plain = runtime(&base.join("plain"), &config(10_000, false, 1_000)?).await?;
    let declared = config_text(10_000, false, 1_000)
        + "\n[persistent.\"/persistent/notes\"]\nbacking = \"{data}/tenants/{tenant}/notes\"\n";
    let declared = Config::parse(&declared, "<bench config>")?.plan;
    let declared = runtime(&base.join("declared"), &declared).await?;
    let without = latency(&plain, "noop", CALLS.get()).await?;
    let with = latency(&declared, "noop", CALLS.get()).await?;
    rows.push(Row::latency(
        "call touching no persistent directory: one declared / none (median)",
        with,
        without,
        "unchanged (1.0×)",
    ));
    Ok(rows)
}

/// Stats every regular file under `dir` (the count in `seen`), as `find -printf` does.
fn walk_stat(dir: &Path, seen: &mut usize) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            walk_stat(&entry.path(), seen)?;
        } else {
            std::hint::black_box(entry.metadata()?.len());
            *seen += 1;
        }
    }
    Ok(())
}

/// Copies the regular files under `from` to `to`, as `cp -r` does.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// Runs the measurements (those of group `only`, or all) and prints the table (Markdown)
/// on stdout. `heavy` replaces the built-in heavy hook for its two rows.
async fn run(
    heavy: Option<PathBuf>,
    only: Option<&str>,
    persistent_dir: Option<PathBuf>,
) -> Result<()> {
    let wanted = |group: &str| only.is_none_or(|only| only == group);
    let shm = Path::new("/dev/shm");
    let scratch = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .context("scratch directory")?;
    let native_dir = scratch.path().join("native");
    std::fs::create_dir_all(&native_dir)?;
    let native = NativeChain::new(&native_dir, 10_000);
    let native_passthrough = NativeChain::new(&native_dir, 2 * MIB);
    let small = "x".repeat(100);
    let large = "y".repeat(MIB);
    let mut rows = Vec::new();

    if wanted("fresh") {
        let data = scratch.path().join("fresh");
        let fresh = runtime(&data, &config(10_000, false, 1_000)?).await?;
        let hh = latency(&fresh, "noop", CALLS.get()).await?;
        let nat = native_latency(&native, "noop", &small, CALLS.get())?;
        rows.push(Row::latency(
            "call, 3-hook chain, 100 B, fresh instances (median)",
            hh,
            nat,
            "≤ 4× native",
        ));

        let hh = latency(&fresh, "big", CALLS.get() / 10).await?;
        let nat = native_latency(&native, "big", &large, CALLS.get() / 10)?;
        rows.push(Row::latency(
            "call, 1 MiB output, offloaded (median)",
            hh,
            nat,
            "≤ 1.5× native",
        ));

        let throughput = sessions_throughput(&Arc::new(fresh)).await?;
        let chain = Arc::new(NativeChain::new(&native_dir, 10_000));
        let native_throughput = calls_per_second(SESSIONS.get(), CALLS_PER_SESSION.get(), |s| {
            let chain = chain.clone();
            let small = small.clone();
            tokio::task::spawn_blocking(move || {
                for _ in 0..CALLS_PER_SESSION.get() {
                    chain.call(&s.to_string(), "noop", &small)?;
                }
                Ok(())
            })
        })
        .await?;
        rows.push(Row {
            what: "calls per second, 64 sessions at once, 3 hooks".into(),
            hookhost: format!("{throughput:.0}/s"),
            native: format!("{native_throughput:.0}/s"),
            ratio: ratio(native_throughput, throughput),
            goal: "≥ 30,000/s",
        });
    }

    if wanted("passthrough") {
        let data = scratch.path().join("passthrough");
        let passthrough = runtime(&data, &config(2 * MIB, false, 1_000)?).await?;
        let hh = latency(&passthrough, "big", CALLS.get() / 10).await?;
        let nat = native_latency(&native_passthrough, "big", &large, CALLS.get() / 10)?;
        rows.push(Row::latency(
            "call, 1 MiB output through 3 hooks, not offloaded (median)",
            hh,
            nat,
            "≤ 150 µs",
        ));
        drop(passthrough);
    }

    if wanted("bash") {
        let data = scratch.path().join("bash");
        let with_bash = {
            let text = config_text(10_000, false, 1_000).replacen(
                "[bash]\nenabled = false",
                "[bash]\nenabled = true",
                1,
            );
            let plan = Config::parse(&text, "<bench config>")?.plan;
            Arc::new(runtime(&data, &plan).await?)
        };
        let hh = bash_throughput(&with_bash).await?;
        let nat = native_bash_throughput().await?;
        rows.push(Row {
            what: "bash calls per second (`true`), 4 sessions at once, 3 hooks".into(),
            hookhost: format!("{hh:.0}/s"),
            native: format!("{nat:.0}/s (spawn + wait)"),
            ratio: ratio(nat, hh),
            goal: "≥ 500/s",
        });
        drop(with_bash);
        let (sandboxed, native) = sandbox_start(&data, false).await?;
        rows.push(Row::latency(
            "one bash sandbox's start: `bash -c true` in a new sandbox (median)",
            sandboxed,
            native,
            "—",
        ));
        let (sandboxed, native) = sandbox_start(&data, true).await?;
        rows.push(Row::latency(
            "the same with the network open (slirp4netns) (median)",
            sandboxed,
            native,
            "—",
        ));
        let (filtered, unfiltered) = seccomp_cost()?;
        rows.push(Row {
            what: "system call (`getppid`) under the sandbox's seccomp filter (mean of 10^6)"
                .into(),
            hookhost: format!(
                "{:.1} ns",
                filtered.as_nanos() as f64 / SYSCALLS.get() as f64
            ),
            native: format!(
                "{:.1} ns unfiltered",
                unfiltered.as_nanos() as f64 / SYSCALLS.get() as f64
            ),
            ratio: ratio(
                SYSCALLS.get() as f64 / unfiltered.as_secs_f64(),
                SYSCALLS.get() as f64 / filtered.as_secs_f64(),
            ),
            goal: "—",
        });
    }

    if wanted("per-session") {
        let data = scratch.path().join("per-session");
        let kept = runtime(&data, &config(10_000, true, 4_096)?).await?;
        let hh = latency(&kept, "noop", CALLS.get()).await?;
        let native_kept = NativeChain::kept_open(&native_dir, 10_000)?;
        let nat = native_latency(&native_kept, "noop", &small, CALLS.get())?;
        rows.push(Row::latency(
            "call, 3-hook chain, 100 B, per-session instances (median)",
            hh,
            nat,
            "≤ 2× native",
        ));

        let before = rss_bytes();
        let mut idle = Vec::with_capacity(IDLE_SESSIONS.get());
        for _ in 0..IDLE_SESSIONS.get() {
            let session = kept
                .sessions()
                .create(TenantId::default_tenant(), None, None)
                .await?;
            kept.call(&session, "noop", "{}").await?;
            idle.push(session);
        }
        let after = rss_bytes();
        rows.push(Row {
            what: "RSS, 1,000 idle sessions with per-session instances".into(),
            hookhost: format!("{:.0} MiB", after as f64 / MIB as f64),
            native: format!("{:.0} MiB before them", before as f64 / MIB as f64),
            ratio: format!(
                "+{:.0} MiB",
                (after.saturating_sub(before)) as f64 / MIB as f64
            ),
            goal: "≤ 200 MiB",
        });
        drop(idle);
        drop(kept);
    }

    if wanted("heavy") {
        let (heavy, heavy_name) = match heavy {
            Some(path) => {
                let name = path.file_name().map_or_else(
                    || path.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                (path, name)
            }
            None => (PathBuf::from(HEAVY_HOOK), "heavy-hook".to_string()),
        };
        let stand_in = heavy == Path::new(HEAVY_HOOK);
        let size = std::fs::metadata(&heavy)
            .with_context(|| format!("the heavy hook {}", heavy.display()))?
            .len();
        let mut heap = vec![1u8; HEAVY_HEAP_BYTES];
        let nat = median_time(CALLS.get() / 10, || {
            native_heavy(&mut heap);
            Ok(())
        })?;
        for (per_session, instance) in [(false, "fresh instance"), (true, "per-session instance")] {
            let data = scratch.path().join(format!("heavy-{per_session}"));
            let runtime = runtime(&data, &one_hook_config(&heavy, per_session)?).await?;
            let hh = latency(&runtime, "noop", CALLS.get() / 10).await?;
            rows.push(Row {
                what: format!(
                    "call, one heavy hook ({heavy_name}, {:.1} MB), {instance} (median)",
                    size as f64 / 1e6
                ),
                hookhost: micros(hh),
                // What another component does natively is not known.
                native: if stand_in {
                    format!("{} (its heap walk)", micros(nat))
                } else {
                    "—".into()
                },
                ratio: if stand_in {
                    ratio(hh.as_secs_f64(), nat.as_secs_f64())
                } else {
                    "—".into()
                },
                goal: "—",
            });
        }
    }

    if wanted("startup") {
        let exe = Path::new(env!("CARGO_BIN_EXE_hookhost"));
        let data = scratch.path().join("startup");
        let data_arg = data.to_string_lossy().into_owned();
        let with_data = |args: &[&'static str]| [&["--data", data_arg.as_str()][..], args].concat();
        let cold = run_once(exe, &with_data(&["tools"]), b"")?; // fills the compiled-code cache
        let warm = runs_median(exe, &with_data(&["tools"]), b"")?;
        let bare = runs_median(exe, &["--version"], b"")?;
        rows.push(Row {
            what: "process start to ready, warm compiled-code cache (median)".into(),
            hookhost: format!("{:.1} ms", warm.as_secs_f64() * 1e3),
            native: format!("{:.1} ms (no runtime)", bare.as_secs_f64() * 1e3),
            ratio: format!("cold: {:.0} ms", cold.as_secs_f64() * 1e3),
            goal: "≤ 50 ms",
        });
        // One-shot commands, as a script runs them: a `read_file` call in a session made
        // before, and `session list`, beside a process that does nothing.
        let nothing = runs_median(Path::new("/bin/true"), &[], b"")?;
        let made = std::process::Command::new(exe)
            .arg("--data")
            .arg(&data)
            .args([
                "call",
                "write_file",
                r#"{"path": "/workspace/f.txt", "content": "hello"}"#,
            ])
            .output()?;
        let said = String::from_utf8_lossy(&made.stderr);
        let session = said
            .split_whitespace()
            .skip_while(|w| *w != "session")
            .nth(1)
            .context("`call` named no session")?
            .to_string();
        let read = [
            "--data",
            data_arg.as_str(),
            "call",
            "--session",
            session.as_str(),
            "read_file",
            r#"{"path": "/workspace/f.txt"}"#,
        ];
        let list = with_data(&["session", "list"]);
        for (what, args) in [
            (
                "one-shot `hookhost call read_file` in a session, warm cache (median)",
                &read[..],
            ),
            (
                "one-shot `hookhost session list`, warm cache (median)",
                &list[..],
            ),
        ] {
            let took = runs_median(exe, args, b"")?;
            rows.push(Row {
                what: what.into(),
                hookhost: format!("{:.1} ms", took.as_secs_f64() * 1e3),
                native: format!("{:.1} ms (`/bin/true`)", nothing.as_secs_f64() * 1e3),
                ratio: ratio(took.as_secs_f64(), nothing.as_secs_f64()),
                goal: "≤ 5 ms",
            });
        }
    }

    if wanted("agent-hook") {
        // What an agent pays per tool call for a command hook: `hookhost hook claude-code
        // pre-tool` with the built-in chain (the session already made, the compiled-code
        // cache warm), beside a process that does nothing and a Python hook that only
        // parses its stdin (what users write today).
        let exe = Path::new(env!("CARGO_BIN_EXE_hookhost"));
        let data = scratch.path().join("agent-hook");
        let input = serde_json::json!({
            "session_id": "bench-agent-session", "cwd": scratch.path(), "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_bench",
        })
        .to_string();
        let data_arg = data.to_string_lossy().into_owned();
        let hook = [
            "--data",
            data_arg.as_str(),
            "hook",
            "claude-code",
            "pre-tool",
        ];
        let input = input.as_bytes();
        run_once(exe, &hook, input)?; // fills the compiled-code cache and makes the session
        let runs = |program: &Path, args: &[&str]| runs_median(program, args, input);
        let hookhost = runs(exe, &hook)?;
        let nothing = runs(Path::new("/bin/true"), &[])?;
        let python = runs(
            Path::new("/usr/bin/python3"),
            &["-c", "import json, sys; json.load(sys.stdin)"],
        )?;
        // The same through a warm daemon: `serve --http`'s `POST /hooks/…`, one kept-alive
        // connection.
        let mut server = Killed(
            std::process::Command::new(exe)
                .args([
                    "--data",
                    data_arg.as_str(),
                    "serve",
                    "--http",
                    "127.0.0.1:0",
                ])
                .arg("--unauthenticated-bash")
                .stderr(std::process::Stdio::piped())
                .spawn()?,
        );
        let served = async {
            let url = announced(&mut server.0)?;
            let client = reqwest::Client::new();
            let hook = hookhost::agents::hook_url(
                &url,
                hookhost::agents::Agent::ClaudeCode,
                hookhost::agents::Event::PreTool,
            );
            let mut took = Vec::with_capacity(CALLS.get());
            for i in 0..CALLS.get() + 10 {
                let start = Instant::now();
                let response = client.post(&hook).body(input.to_vec()).send().await?;
                anyhow::ensure!(response.status().is_success(), "{}", response.status());
                response.bytes().await?;
                if i >= 10 {
                    took.push(start.elapsed());
                }
            }
            Ok::<_, anyhow::Error>(median(took))
        }
        .await;
        drop(server);
        let daemon = served?;
        rows.push(Row::latency(
            "agent hook through the daemon: `POST /hooks/claude-code/pre-tool`, kept-alive (median)",
            daemon,
            nothing,
            "≤ 1 ms",
        ));
        // The same process forwarding to `serve --hooks` on its data directory's socket
        // (another directory: the sessions above are the killed server's).
        let socket_data = scratch.path().join("agent-hook-socket");
        let socket_arg = socket_data.to_string_lossy().into_owned();
        let hooks_daemon = Killed(
            std::process::Command::new(exe)
                .args(["--data", socket_arg.as_str(), "serve", "--hooks"])
                .stderr(std::process::Stdio::null())
                .spawn()?,
        );
        let socket = hookhost::agents::daemon::socket_path(&socket_data);
        for _ in 0..600 {
            if socket.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let forward = [
            "--data",
            socket_arg.as_str(),
            "hook",
            "claude-code",
            "pre-tool",
        ];
        // What `hook install` writes: `hookhost-agent`, which links no wasmtime; and
        // `hookhost` itself doing the same.
        let forwarder = Path::new(env!("CARGO_BIN_EXE_hookhost-agent"));
        let forwarded = run_once(forwarder, &forward, input)
            .and_then(|_| Ok((runs(forwarder, &forward)?, runs(exe, &forward)?)));
        drop(hooks_daemon);
        let (forwarded, by_hookhost) = forwarded?;
        rows.push(Row {
            what: "agent hook: one `hookhost-agent … hook claude-code pre-tool` process forwarded to `serve --hooks` (median)".into(),
            hookhost: format!("{:.1} ms", forwarded.as_secs_f64() * 1e3),
            native: format!("{:.1} ms (`/bin/true`)", nothing.as_secs_f64() * 1e3),
            ratio: ratio(forwarded.as_secs_f64(), nothing.as_secs_f64()),
            goal: "≤ 3 ms over `/bin/true`",
        });
        rows.push(Row {
            what: "agent hook: the same forwarded by `hookhost` itself (median)".into(),
            hookhost: format!("{:.1} ms", by_hookhost.as_secs_f64() * 1e3),
            native: format!("{:.1} ms (`/bin/true`)", nothing.as_secs_f64() * 1e3),
            ratio: ratio(by_hookhost.as_secs_f64(), nothing.as_secs_f64()),
            goal: "",
        });
        rows.push(Row {
            what: "agent hook: one `hookhost hook claude-code pre-tool` process, built-in chain, warm cache (median)".into(),
            hookhost: format!("{:.1} ms", hookhost.as_secs_f64() * 1e3),
            native: format!(
                "{:.1} ms (`/bin/true`); {:.1} ms (Python parsing stdin)",
                nothing.as_secs_f64() * 1e3,
                python.as_secs_f64() * 1e3
            ),
            ratio: ratio(hookhost.as_secs_f64(), python.as_secs_f64()),
            goal: "≤ 15 ms",
        });
    }

    if wanted("agent-turn") {
        rows.extend(agent_turn::rows(scratch.path())?);
    }

    if wanted("trace") {
        // What detecting file changes costs a call that writes nothing: one hook (offload,
        // under its threshold), granted /artifacts read-write, where FILES files lie;
        // the same call in an untraced tenant beside it.
        let data = scratch.path().join("trace");
        let text = "[bash]\nenabled = false\n\n[[hooks]]\nname = \"offload\"\ncomponent = \"builtin:offload\"\ngrants = { \"/artifacts\" = \"rw\" }\n\n[tenants.traced]\n\n[tenants.untraced]\ntrace = false\n";
        let traced = runtime(&data, &Config::parse(text, "<bench trace config>")?.plan).await?;
        // A quick run skips the 10,000 files.
        for files in TRACED_FILES.into_iter().filter(|f| !quick() || *f <= 100) {
            let mut medians = Vec::new();
            for tenant in ["traced", "untraced"] {
                let session = traced
                    .sessions()
                    .create(TenantId::new(tenant)?, None, None)
                    .await?;
                let artifacts = session.host_dir("/artifacts").context("no /artifacts")?;
                for i in 0..files {
                    let dir = artifacts.join(format!("d{}", i / 100));
                    std::fs::create_dir_all(&dir)?;
                    std::fs::write(dir.join(format!("f{i}")), "z".repeat(100))?;
                }
                let calls = if files > 1_000 {
                    CALLS.get() / 10
                } else {
                    CALLS.get()
                };
                medians.push(latency_in(&traced, &session, "noop", calls).await?);
            }
            rows.push(Row {
                what: format!(
                    "call writing nothing, 1 hook, {files} files in its writable mount: traced / untraced (median)"
                ),
                hookhost: micros(medians[0]),
                native: micros(medians[1]),
                ratio: ratio(medians[0].as_secs_f64(), medians[1].as_secs_f64()),
                goal: "see Observability",
            });
        }
    }

    if wanted("trace-cost") {
        // What the session trace (on by default) costs the built-in chain, in one run: the
        // same calls in a runtime that traces and in one that does not, taken in turns
        // (ROUNDS of each), each figure the median of its rounds.
        const ROUNDS: usize = 3;
        let make = |name: &'static str, per_session: bool, traced: bool| {
            let data = scratch.path().join(format!("trace-cost-{name}-{traced}"));
            async move {
                let mut plan = config(10_000, per_session, 1_000)?;
                plan.trace.enabled = traced;
                Ok::<_, anyhow::Error>(Arc::new(runtime(&data, &plan).await?))
            }
        };
        let figures = [
            (
                "per-session",
                "call, 3-hook chain, 100 B, per-session instances: trace on / off (median)",
                "≤ 1.5×",
            ),
            (
                "fresh",
                "call, 3-hook chain, 100 B, fresh instances: trace on / off (median)",
                "≤ 1.3×",
            ),
        ];
        for (name, what, goal) in figures {
            let per_session = name == "per-session";
            let traced = make(name, per_session, true).await?;
            let untraced = make(name, per_session, false).await?;
            let (mut on, mut off) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                on.push(latency(&traced, "noop", CALLS.get()).await?.as_secs_f64());
                off.push(latency(&untraced, "noop", CALLS.get()).await?.as_secs_f64());
            }
            let (on, off) = (median_f64(on), median_f64(off));
            rows.push(Row {
                what: what.into(),
                hookhost: micros(Duration::from_secs_f64(on)),
                native: micros(Duration::from_secs_f64(off)),
                ratio: ratio(on, off),
                goal,
            });
        }
        let traced = make("sessions", false, true).await?;
        let untraced = make("sessions", false, false).await?;
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            on.push(sessions_throughput(&traced).await?);
            off.push(sessions_throughput(&untraced).await?);
        }
        let (on, off) = (median_f64(on), median_f64(off));
        rows.push(Row {
            what: "calls per second, 64 sessions at once, 3 hooks: trace on / off".into(),
            hookhost: format!("{on:.0}/s"),
            native: format!("{off:.0}/s"),
            ratio: ratio(off, on),
            goal: "≥ 15,000/s traced",
        });
    }

    if wanted("persistent") {
        let base = match &persistent_dir {
            Some(dir) => tempfile::tempdir_in(dir).context("--persistent-dir")?,
            None => tempfile::tempdir_in(scratch.path())?,
        };
        rows.extend(persistent_rows(base.path()).await?);
    }

    if wanted("end-to-end") {
        // A `tools/call` as an agent makes it, through a real client connection: over
        // stdio and over HTTP kept alive, for a 100-byte `read_file` and for `bash true`;
        // hookhost with its built-in chain, hookhost with no hooks, and a minimal Python
        // MCP server exposing the same two tools (no hooks, no sandbox, no trace).
        let python = ci_python()?;
        let server_py = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/python_server.py");
        let base = scratch.path().join("end-to-end");
        let project = base.join("project");
        std::fs::create_dir_all(&project)?;
        std::fs::write(project.join("f.txt"), "z".repeat(100))?;
        let unhooked = base.join("no-hooks.toml");
        std::fs::write(&unhooked, without_hooks())?;
        const E2E_CALLS: Count = Count::new(500, 10);
        let read_here = serde_json::json!({ "path": "/workspace/f.txt" });
        let read_python = serde_json::json!({ "path": project.join("f.txt") });
        let bash = serde_json::json!({ "command": "true" });
        let hookhost = |config: Option<&Path>, data: &str, http: bool| -> Result<Peer> {
            serve(&base.join(data), config, &project, http)
        };
        let yardstick = |http: bool| -> Result<Peer> {
            let mut command = std::process::Command::new(&python);
            command.arg(&server_py);
            if !http {
                command.arg("stdio");
                return Peer::stdio(command);
            }
            let port = free_port()?;
            let child = command
                .args(["http", &port.to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()?;
            let peer = Peer::http(child, format!("http://127.0.0.1:{port}/mcp"));
            wait_listening(port)?;
            Ok(peer)
        };
        for http in [false, true] {
            let transport = if http { "HTTP kept alive" } else { "stdio" };
            for (tool, label) in [
                ("read_file", "100-byte `read_file`"),
                ("bash", "`bash true`"),
            ] {
                let ours = |peer: Peer| (peer, if tool == "bash" { &bash } else { &read_here });
                let mut figures = Vec::new();
                for (mut peer, arguments) in [
                    ours(hookhost(None, "chain", http)?),
                    ours(hookhost(Some(&unhooked), "unhooked", http)?),
                    (
                        yardstick(http)?,
                        if tool == "bash" { &bash } else { &read_python },
                    ),
                ] {
                    figures.push(
                        peer.round_trips(tool, arguments.clone(), E2E_CALLS.get())
                            .await?,
                    );
                }
                let [(chain, chain99), (bare, bare99), (py, py99)] = figures[..] else {
                    unreachable!("three servers")
                };
                let ms = |d: Duration| d.as_secs_f64() * 1e3;
                rows.push(Row {
                    what: format!(
                        "`tools/call` round trip, {label}, {transport}: built-in chain / no hooks (p50; p99)"
                    ),
                    hookhost: format!(
                        "{:.2} / {:.2} ms; {:.2} / {:.2} ms",
                        ms(chain),
                        ms(bare),
                        ms(chain99),
                        ms(bare99)
                    ),
                    native: format!("{:.2} ms; {:.2} ms (Python `mcp` server)", ms(py), ms(py99)),
                    ratio: format!(
                        "{} chain / no hooks; {} chain / Python",
                        ratio(ms(chain), ms(bare)),
                        ratio(ms(chain), ms(py))
                    ),
                    goal: "≤ 1.2× no hooks, < Python",
                });
            }
        }
        // The same call in a request of MCP 2026-07-28 (stateless: its hookhost session
        // named in a header) beside a 2025-11-25 session's, on one server.
        let mut peer = hookhost(None, "eras", true)?;
        let (old, old99) = peer
            .round_trips("read_file", read_here.clone(), E2E_CALLS.get())
            .await?;
        let (new, new99) = peer
            .modern_round_trips("read_file", read_here.clone(), E2E_CALLS.get())
            .await?;
        rows.push(Row::eras(
            "`tools/call` round trip, 100-byte `read_file`, HTTP kept alive, built-in chain: an MCP 2026-07-28 request / a 2025-11-25 session's (p50; p99)",
            (new, new99),
            (old, old99),
            "≤ 1.0× (no slower)",
        ));

        // The same upstream (the TypeScript SDK v2's `echo`, tests/mcp/modern_upstream.cjs)
        // reached by hookhost without hooks in either era: discovered, every request
        // carrying its `_meta`, or through an `initialize`d session.
        let node_modules =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-node/node_modules");
        anyhow::ensure!(
            node_modules.exists(),
            "{} is missing: `.ci/run` installs the TypeScript SDK v2 there",
            node_modules.display()
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/modern_upstream.cjs");
        let upstream = |name: &str, args: &str, protocol: &str| {
            format!(
                "\n[upstreams.{name}]\ncommand = \"node\"\nargs = [{script:?}, {args}]\n\
                 env = {{ NODE_PATH = {node_modules:?} }}\nprotocol = {protocol:?}\n"
            )
        };
        let eras = base.join("upstream-eras.toml");
        std::fs::write(
            &eras,
            format!(
                "{}{}{}",
                std::fs::read_to_string(&unhooked)?,
                upstream("new", "\"stdio\"", "2026-07-28"),
                upstream("old", "\"stdio\", \"both\"", "2025-11-25"),
            ),
        )?;
        let echo = serde_json::json!({ "text": "z".repeat(100) });
        let mut figures = Vec::new();
        for tool in ["new__echo", "old__echo"] {
            let mut peer = hookhost(Some(&eras), tool, false)?;
            figures.push(
                peer.round_trips(tool, echo.clone(), E2E_CALLS.get())
                    .await?,
            );
        }
        let [(new, new99), (old, old99)] = figures[..] else {
            unreachable!("two upstreams")
        };
        rows.push(Row::eras(
            "`tools/call` round trip, stdio, no hooks, to a stdio upstream's `echo` (TypeScript SDK v2): spoken to in MCP 2026-07-28 / in 2025-11-25 (p50; p99)",
            (new, new99),
            (old, old99),
            "≤ 1.1× (`_meta` on each request costs little)",
        ));
    }

    if wanted("gateway") {
        rows.extend(gateway(&scratch.path().join("gateway")).await?);
    }

    if wanted("registry") {
        rows.extend(registry(&scratch.path().join("registry"))?);
    }

    if wanted("network") {
        rows.extend(network(&scratch.path().join("network")).await?);
    }

    println!("| measure | hookhost | native | ratio | goal |");
    println!("|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.what, r.hookhost, r.native, r.ratio, r.goal
        );
    }
    Ok(())
}

/// The built-in config without its hooks.
fn without_hooks() -> &'static str {
    let builtin = include_str!("../src/config/default.toml");
    builtin
        .split_once("[[hooks]]")
        .map_or(builtin, |(unhooked, _)| unhooked)
}

/// The Python of `target/ci-venv`, where `.ci/run` installs the MCP SDK.
fn ci_python() -> Result<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-venv/bin/python");
    anyhow::ensure!(
        python.exists(),
        "{} is missing: `.ci/run` installs the Python MCP SDK there",
        python.display()
    );
    Ok(python)
}

/// `hookhost serve` with its data in `data`, `config` (else the built-in one) and `workdir`,
/// as a peer over its stdio or over HTTP.
fn serve(data: &Path, config: Option<&Path>, workdir: &Path, http: bool) -> Result<Peer> {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hookhost"));
    command.arg("--data").arg(data);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command.args(["serve", "--workdir"]).arg(workdir);
    if !http {
        return Peer::stdio(command);
    }
    let mut child = command
        .args(["--http", "127.0.0.1:0", "--unauthenticated-bash"])
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let url = announced(&mut child)?;
    Ok(Peer::http(child, url))
}

/// The `gateway` rows: one upstream — the Python SDK's `MCPServer` (benches/python_server.py:
/// `echo`, and `big`, 200 KB) — called over Streamable HTTP on one kept-alive connection,
/// directly, through `mcp-proxy` (when `.ci/run` installed it) and through hookhost (no
/// hooks / the built-in chain; the upstream on stdio / HTTP), in alternating rounds.
async fn gateway(base: &Path) -> Result<Vec<Row>> {
    const CALLS: Count = Count::new(500, 10);
    const ROUNDS: usize = 5;
    let python = ci_python()?;
    let server_py = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/python_server.py");
    let workdir = base.join("project");
    std::fs::create_dir_all(&workdir)?;
    let port = free_port()?;
    let direct_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream = std::process::Command::new(&python)
        .arg(&server_py)
        .args(["http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // The direct peer holds the upstream: dropped, it is killed.
    let direct = Peer::http(upstream, direct_url.clone());
    wait_listening(port)?;
    let http_upstream = format!("\n[upstreams.py]\nurl = {direct_url:?}\n");
    let stdio_upstream =
        format!("\n[upstreams.py]\ncommand = {python:?}\nargs = [{server_py:?}, \"stdio\"]\n");
    let builtin = include_str!("../src/config/default.toml");
    // (label, peer, prefix of the tools' names, goal against direct)
    let mut targets: Vec<(String, Peer, &str, &'static str)> =
        vec![("direct".into(), direct, "", "")];
    let proxy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-mcp-proxy/bin/mcp-proxy");
    if proxy.exists() {
        let port = free_port()?;
        let child = std::process::Command::new(&proxy)
            .args(["--port", &port.to_string(), "--"])
            .arg(&python)
            .arg(&server_py)
            .arg("stdio")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let peer = Peer::http(child, format!("http://127.0.0.1:{port}/mcp"));
        wait_listening(port)?;
        targets.push(("mcp-proxy, stdio upstream".into(), peer, "", ""));
    }
    for (name, hooks, upstream, goal) in [
        (
            "no hooks, stdio upstream",
            without_hooks(),
            &stdio_upstream,
            "≤ 1.1× direct, < mcp-proxy",
        ),
        (
            "no hooks, HTTP upstream",
            without_hooks(),
            &http_upstream,
            "≤ 1.3× direct, < mcp-proxy",
        ),
        (
            "built-in chain, stdio upstream",
            builtin,
            &stdio_upstream,
            "≤ 1.2× no hooks",
        ),
        (
            "built-in chain, HTTP upstream",
            builtin,
            &http_upstream,
            "≤ 1.2× no hooks",
        ),
    ] {
        let dir = base.join(name.replace([' ', ','], "-"));
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("hookhost.toml");
        std::fs::write(&config, format!("{hooks}{upstream}"))?;
        let peer = serve(&dir.join("data"), Some(&config), &workdir, true)?;
        targets.push((format!("hookhost, {name}"), peer, "py__", goal));
    }
    for (_, peer, _, _) in &mut targets {
        peer.initialize().await?;
    }
    let mut rows = Vec::new();
    for (tool, arguments) in [
        ("echo", serde_json::json!({ "text": "z".repeat(100) })),
        ("big", serde_json::json!({})),
    ] {
        let mut samples = vec![(Vec::new(), 0); targets.len()];
        for (_, peer, prefix, _) in &mut targets {
            peer.timed(&format!("{prefix}{tool}"), &arguments, CALLS.get() / 10)
                .await?;
        }
        for _ in 0..ROUNDS {
            for ((_, peer, prefix, _), (took, size)) in targets.iter_mut().zip(&mut samples) {
                let (more, last) = peer
                    .timed(&format!("{prefix}{tool}"), &arguments, CALLS.get() / ROUNDS)
                    .await?;
                took.extend(more);
                *size = last;
            }
        }
        let figures: Vec<((Duration, Duration), usize)> = samples
            .into_iter()
            .map(|(took, size)| (p50_p99(took), size))
            .collect();
        let ((direct, direct99), _) = figures[0];
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        for ((label, _, _, goal), ((p50, p99), size)) in targets.iter().zip(&figures).skip(1) {
            rows.push(Row {
                what: format!(
                    "gateway: `{tool}` of a Python SDK upstream, {label}; client over HTTP kept alive (p50; p99; bytes of the answer)"
                ),
                hookhost: format!("{:.2} ms; {:.2} ms; {size} B", ms(*p50), ms(*p99)),
                native: format!(
                    "{:.2} ms; {:.2} ms; {} B (direct)",
                    ms(direct),
                    ms(direct99),
                    figures[0].1
                ),
                ratio: format!("{} direct", ratio(ms(*p50), ms(direct))),
                goal,
            });
        }
    }
    Ok(rows)
}

/// The four example hooks (one per language, as `.ci/run` builds them) with the settings
/// each needs.
const EXAMPLE_HOOKS: [(&str, &str); 4] = [
    ("rust-budget", "settings = { file = \"/session/calls\" }\n"),
    ("c-guard", ""),
    ("js-footer", ""),
    ("python-redactor", ""),
];

/// Start to ready with the four example hooks pulled from a registry (Debian's
/// `docker-registry` on 127.0.0.1), pinned by digest, beside the same four as local files;
/// and a cold pull of the four.
fn registry(dir: &Path) -> Result<Vec<Row>> {
    let exe = Path::new(env!("CARGO_BIN_EXE_hookhost"));
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/example-hooks");
    std::fs::create_dir_all(dir)?;
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog: {{ level: info, accesslog: {{ disabled: true }} }}\n\
             storage:\n  filesystem: {{ rootdirectory: {} }}\nhttp: {{ addr: \"127.0.0.1:0\" }}\n",
            dir.join("storage").display()
        ),
    )?;
    let mut server = std::process::Command::new("/usr/bin/docker-registry")
        .arg("serve")
        .arg(&config)
        .env("REGISTRY_HTTP_SECRET", "bench")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("starting docker-registry (apt-get install docker-registry)")?;
    let stderr = server.stderr.take().context("stderr")?;
    let killed = Killed(server);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let address = loop {
        let line = lines.next().context("docker-registry said nothing")??;
        if let Some((_, rest)) = line.split_once("listening on ") {
            break rest
                .split(['"', ' '])
                .next()
                .unwrap_or_default()
                .to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let data = dir.join("data");
    let data_arg = data.to_string_lossy().into_owned();
    let (mut local, mut pinned) = (String::from(without_hooks()), String::from(without_hooks()));
    let mut references = Vec::new();
    for (name, settings) in EXAMPLE_HOOKS {
        let file = hooks
            .join(format!("{name}.wasm"))
            .to_string_lossy()
            .into_owned();
        let tagged = format!("oci://{address}/hooks/{name}:bench");
        let pushed = std::process::Command::new(exe)
            .args(["--data", &data_arg, "component", "push", &file, &tagged])
            .args(["--insecure", "--force"])
            .output()?;
        anyhow::ensure!(pushed.status.success(), "pushing {name}: {pushed:?}");
        let by_digest = String::from_utf8(pushed.stdout)?.trim().to_string();
        let hook = |component: &str| {
            format!("\n[[hooks]]\nname = \"{name}\"\ncomponent = \"{component}\"\n{settings}")
        };
        local.push_str(&hook(&file));
        pinned.push_str(&hook(&by_digest));
        references.push(by_digest);
    }
    pinned.push_str(&format!("\n[registries.\"{address}\"]\ninsecure = true\n"));
    // The same, each signed, its signature required (a key made by openssl).
    let key = dir.join("bench.pem");
    let public = dir.join("bench.pub");
    for args in [
        vec![
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
        ],
        vec!["ec", "-pubout", "-out", &public.to_string_lossy(), "-in"],
    ] {
        let made = std::process::Command::new("openssl")
            .args(&args)
            .arg(&key)
            .output()
            .context("openssl")?;
        anyhow::ensure!(made.status.success(), "openssl {args:?}: {made:?}");
    }
    for reference in &references {
        let key = key.to_string_lossy();
        let args = [
            "--data",
            &data_arg,
            "component",
            "sign",
            reference,
            "--key",
            &key,
        ];
        run_once(exe, &[&args[..], &["--insecure"]].concat(), b"")?;
    }
    let signed = format!(
        "{pinned}require_signature = {{ keys = [\"{}\"] }}\n",
        public.display()
    );
    let (local_file, pinned_file) = (dir.join("local.toml"), dir.join("pinned.toml"));
    let signed_file = dir.join("signed.toml");
    std::fs::write(&local_file, local)?;
    std::fs::write(&pinned_file, pinned)?;
    std::fs::write(&signed_file, signed)?;
    let start = |config: &Path| {
        let config = config.to_string_lossy().into_owned();
        let args = ["--data", &data_arg, "--config", &config, "tools"];
        run_once(exe, &args, b"")?; // compiles, pulls: the cache warm
        runs_median(exe, &args, b"")
    };
    let (from_files, from_registry) = (start(&local_file)?, start(&pinned_file)?);
    let verified = start(&signed_file)?;
    let cold = median(
        (0..STARTS.get())
            .map(|run| {
                let fresh = dir.join(format!("cold-{run}"));
                let fresh = fresh.to_string_lossy().into_owned();
                let began = Instant::now();
                for reference in &references {
                    let out = format!("{fresh}/out.wasm");
                    let args = ["--data", &fresh, "component", "pull", reference];
                    run_once(exe, &[&args[..], &["--insecure", "-o", &out]].concat(), b"")?;
                }
                Ok(began.elapsed())
            })
            .collect::<Result<_>>()?,
    );
    drop(killed);
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    Ok(vec![
        Row {
            what: "start to ready, four example hooks from a registry by digest, warm cache (median)"
                .into(),
            hookhost: ms(from_registry),
            native: format!("{} (the same as local files)", ms(from_files)),
            ratio: ratio(from_registry.as_secs_f64(), from_files.as_secs_f64()),
            goal: "≤ 1.1×",
        },
        Row {
            what: "the same, each one's signature required and verified from the cache (median)"
                .into(),
            hookhost: ms(verified),
            native: format!("{} (the same as local files)", ms(from_files)),
            ratio: ratio(verified.as_secs_f64(), from_files.as_secs_f64()),
            goal: "≤ 1.1×",
        },
        Row {
            what: "pull of the four example hooks (31 MB) into an empty cache, registry on 127.0.0.1 (median)".into(),
            hookhost: ms(cold),
            native: "—".into(),
            ratio: "—".into(),
            goal: "—",
        },
    ])
}

/// Requests timed by each `network` row.
const NETWORK_CALLS: Count = Count::new(200, 3);

/// An HTTP server on a port of 127.0.0.1 answering every request `200 ok` on a connection
/// of its own (`Connection: close`), as a collector would; it serves until the bench ends.
fn collector() -> Result<std::net::SocketAddr> {
    use std::io::{BufRead, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || -> std::io::Result<()> {
                let mut reader = std::io::BufReader::new(&stream);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                reader.read_exact(&mut vec![0; length])?;
                (&stream).write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                )
            });
        }
    });
    Ok(address)
}

/// The same POST made natively: a fresh connection, the request, the whole answer.
fn native_post(address: std::net::SocketAddr, body: &str) -> Result<()> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    write!(
        stream,
        "POST /lines HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    anyhow::ensure!(answer.starts_with(b"HTTP/1.1 200"), "the collector failed");
    Ok(())
}

/// What a network grant costs: a call whose hook (the example `rust-audit-shipper`)
/// POSTs its audit line over `wasi:http` to a granted collector, beside the same POST made
/// natively; and a `bash` `curl` through the allow-list proxy (in a kept sandbox), beside
/// the same `curl` run directly.
async fn network(dir: &Path) -> Result<Vec<Row>> {
    let address = collector()?;
    let shipper = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/example-hooks/rust-audit-shipper.wasm");
    anyhow::ensure!(
        shipper.is_file(),
        "{}: build the example hooks first (examples/hooks/build.sh target/example-hooks)",
        shipper.display()
    );
    let text = format!(
        "[[hooks]]\nname = \"ship\"\ncomponent = {:?}\non_failure = \"closed\"\n\
         settings = {{ url = \"http://{address}/lines\" }}\n\
         network = {{ allow = [\"{address}\"] }}\n",
        shipper.display().to_string()
    );
    let plan = Config::parse(&text, "<bench config>")?.plan;
    let shipping = runtime(&dir.join("hook"), &plan).await?;
    let hh = latency(&shipping, "noop", NETWORK_CALLS.get()).await?;
    drop(shipping);
    let line = r#"{"tenant":"default","session":"00000000-0000-0000-0000-000000000000","call":"c","tool":"noop","outcome":"done","is_error":false,"output_bytes":100}"#;
    let nat = median_time(NETWORK_CALLS.get(), || native_post(address, line))?;
    let mut rows = vec![Row::latency(
        "a call whose hook POSTs to a granted collector over wasi:http (median)",
        hh,
        nat,
        "—",
    )];
    // The same hook without its grant: each request refused before any lookup or
    // connection, so the call is what the hook costs without the network (`open`: the
    // hook's failure keeps the output).
    let refused = text
        .replace("on_failure = \"closed\"", "on_failure = \"open\"")
        .replace(&format!("network = {{ allow = [\"{address}\"] }}\n"), "");
    let plan = Config::parse(&refused, "<bench config>")?.plan;
    let refusing = runtime(&dir.join("refused"), &plan).await?;
    let without = latency(&refusing, "noop", NETWORK_CALLS.get()).await?;
    drop(refusing);
    rows.push(Row {
        what: "the same call, the hook not granted: its request refused at once (median)".into(),
        hookhost: micros(without),
        native: "—".into(),
        ratio: format!("{} of the call above", micros(hh.saturating_sub(without))),
        goal: "—",
    });

    let text = config_text(10_000, false, 1_000)
        .replacen("[bash]\nenabled = false", "[bash]\nenabled = true", 1)
        .replacen(
            "\n# network = false\n",
            &format!("\nnetwork = {{ allow = [\"{address}\"] }}\n"),
            1,
        );
    let plan = Config::parse(&text, "<bench config>")?.plan;
    let proxied = runtime(&dir.join("bash"), &plan).await?;
    let session = proxied
        .sessions()
        .create(TenantId::default_tenant(), None, None)
        .await?;
    let curl = format!("curl -sS -o /dev/null -X POST --data-raw '{line}' http://{address}/lines");
    let arguments = serde_json::json!({ "command": curl }).to_string();
    let mut samples = Vec::with_capacity(NETWORK_CALLS.get());
    // The first call starts the sandbox; the rest reuse it.
    for i in 0..=NETWORK_CALLS.get() {
        let start = Instant::now();
        let r = proxied.call(&session, "bash", &arguments).await?;
        anyhow::ensure!(
            !r.is_error && !r.output.contains("hookhost"),
            "curl failed: {}",
            r.output
        );
        if i > 0 {
            samples.push(start.elapsed());
        }
    }
    let hh = median(samples);
    drop(proxied);
    let nat = median_time(NETWORK_CALLS.get(), || {
        let status = std::process::Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-X", "POST", "--data-raw", line])
            .arg(format!("http://{address}/lines"))
            .status()?;
        anyhow::ensure!(status.success(), "curl failed");
        Ok(())
    })?;
    rows.push(Row::latency(
        "a bash call: `curl` POST through the allow-list proxy, beside `curl` run directly (median)",
        hh,
        nat,
        "—",
    ));
    Ok(rows)
}
