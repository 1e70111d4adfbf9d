//! Every limit and default of the host, in one place.
//!
//! A component call runs under [`Limits`]: the defaults below apply unless the operator's
//! config overrides them for a hook or a tool. They are chosen so that an untrusted
//! component can neither hold a worker for long nor exhaust the host's memory, while the
//! built-in hooks comfortably handle outputs of several megabytes.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Linear memory one component instance may grow to: 128 MiB. Large enough for a hook to
/// hold a 16 MiB output a few times over; an instance that grows past it fails the call.
pub const DEFAULT_MEMORY_BYTES: u64 = 128 * 1024 * 1024;

/// Wall-clock time one call into a component (one `before-execute`, one `after-execute`,
/// one tool `execute`) may take: 10 seconds, including its instantiation.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// The epoch tick: how often a running component is interrupted to check its deadline and
/// yield to other calls. 10 ms bounds both the overshoot of a deadline and how long a
/// busy component can keep another session's call waiting on the same worker thread, at
/// the cost of 100 wake-ups a second of one background thread.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The largest output a tool or hook may return, in bytes: 16 MiB. A guest returning more
/// fails its call; the `bash` tool truncates its capture here.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// What of a guest's stderr is kept per phase (more is dropped, never refused). Stderr is
/// for the log: at `debug` for a working hook, with the failure when it fails.
pub const GUEST_STDERR_BYTES: usize = 64 * 1024;

/// Outgoing HTTP requests one component call may make, granted hosts or not: enough for
/// a hook that ships a batch or follows a few redirects, not for one that floods a
/// service on the tenant's behalf.
pub const DEFAULT_NETWORK_REQUESTS: u32 = 32;

/// Bytes one component call's requests may move, request and response bodies together:
/// 16 MiB, as its output. A body past it fails (`HttpRequestBodySize`,
/// `HttpResponseBodySize`).
pub const DEFAULT_NETWORK_BYTES: u64 = 16 * 1024 * 1024;

/// How long a component's request may wait for its connection (and the guest may ask for
/// less): a host that does not answer fails the request, not the whole call.
pub const NETWORK_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the host waits on DNS for a component's request.
pub const NETWORK_DNS_TIMEOUT: Duration = Duration::from_secs(5);

/// Lookups the system resolver (`getaddrinfo`, on tokio's blocking threads) makes at once
/// for every component and `bash` proxy of the process: a lookup the timeout gave up on
/// still holds its thread until the resolver returns, and an attacker's name server that
/// never answers must not take the blocking threads the rest of the host needs. Past it,
/// a lookup waits its turn within [`NETWORK_DNS_TIMEOUT`]. (`[network] nameservers`
/// resolves asynchronously, without threads.)
pub const NETWORK_SYSTEM_LOOKUPS: usize = 16;

/// Requests of one call recorded one by one (for the trace and the metrics): a command or
/// a component that makes thousands of refused requests in a loop must not grow the host's
/// memory with each. Past it they are dropped (neither traced nor counted in the metrics),
/// and the host's log warns, once per call.
pub const MAX_RECORDED_REQUESTS: usize = 256;

/// The longest host name a request may name (DNS's limit); a longer one is refused before
/// it is resolved or recorded.
pub const MAX_HOST_BYTES: usize = 253;

/// Elements of one instance's WebAssembly tables (function references): bounds the host
/// memory behind them.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The most a guest's read or write of a file stream moves at once: a read reads what it
/// asked for up to this, `check-write` allows this much (wasmtime-wasi's own bounds). Both
/// run on the calling thread.
pub const WASI_FILE_STREAM_BYTES: usize = 64 * 1024;

/// The longest id (session, tenant, tool name) accepted, in bytes. Ids are encoded into
/// host path segments at up to three bytes per byte, which keeps them under the 255-byte
/// file name limit of common file systems.
pub const MAX_ID_BYTES: usize = 64;

/// The largest JSON argument text accepted for one tool call: 1 MiB.
pub const MAX_ARGUMENTS_BYTES: usize = 1024 * 1024;

/// How old a temporary file (`*.partial`, what a built-in writes before renaming it into
/// place) must be for `session gc` to remove it: a hook stopped mid-write leaves one. Far
/// longer than any call runs with the default limits.
pub const STALE_PARTIAL_AGE: Duration = Duration::from_secs(10 * 60);

/// How often a session's `last_active` is written at most: idleness is measured in
/// minutes, calls come in microseconds.
pub const TOUCH_INTERVAL: Duration = Duration::from_secs(1);

/// How old a session directory without a session must be before `session gc` removes it:
/// a session's row is written before its directories, but another process may be making
/// one right now; the row is read again just before removal as well.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60);

/// The `bash` tool's time limit when the call gives none.
pub const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest time limit a `bash` call may ask for.
pub const MAX_BASH_TIMEOUT: Duration = Duration::from_secs(600);

/// The paths where a `bash` sandbox keeps the system (read-only, or its own `/tmp`,
/// `/proc`, `/dev`): no mount a command sees may be named so, which the config checks.
pub const SYSTEM_PATHS: &[&str] = &[
    "/bin", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
    "/sys", "/tmp", "/usr", "/var",
];

/// Processes (and threads) one `bash` command may have at once, all its children
/// counted: a fork bomb stops here instead of filling the machine's process table
/// (`pid_max` is 32,768 on small machines). Enforced by `RLIMIT_NPROC` and, on a host
/// running as root, a `pids` cgroup per sandbox (see [`ShellLimits`]).
pub const DEFAULT_SHELL_PROCESSES: u64 = 256;

/// Memory a `bash` sandbox may use: 4 GiB. Where hookhost can make a memory cgroup per
/// sandbox (see `tools/bash/cgroup.rs`), what its processes, `/tmp`, `/dev/shm`, shared
/// memory and `memfd`s hold together; always also what each process may map privately and
/// writably (`RLIMIT_DATA`: heap and anonymous memory, not its program's code; address space
/// only reserved, `PROT_NONE`, as JavaScript engines do, does not count). Without a cgroup
/// the bound is per process only, which `hookhost config check` says.
pub const DEFAULT_SHELL_MEMORY_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// CPU time one process of a `bash` command may use (`RLIMIT_CPU`): the longest wall-clock
/// time limit, so that only a command that spins in many processes at once meets it.
pub const DEFAULT_SHELL_CPU_SECS: u64 = MAX_BASH_TIMEOUT.as_secs();

/// The largest file a `bash` command may write (`RLIMIT_FSIZE`): 1 GiB. A write past it
/// fails (`File too large`) and the writer gets `SIGXFSZ`. The tenant's disk quota bounds
/// the total.
pub const DEFAULT_SHELL_FILE_BYTES: u64 = 1024 * 1024 * 1024;

/// Files one process of a `bash` command may hold open (`RLIMIT_NOFILE`), never more than
/// the host's own hard limit.
pub const DEFAULT_SHELL_OPEN_FILES: u64 = 1024;

/// The size of a `bash` command's private `/tmp` (a `tmpfs`, in memory, gone with the
/// command): 256 MiB.
pub const DEFAULT_SHELL_TMP_BYTES: u64 = 256 * 1024 * 1024;

/// How long `hookhost hook` may take to answer an agent, by default (`--deadline-ms`):
/// well under the agents' own hook timeouts (Claude Code's and Codex's default 60 s,
/// Gemini CLI's 60 s, Cursor's and Copilot CLI's 30 s), so that hookhost, not the agent,
/// decides what a slow chain means: a pre-tool event past it is denied when a `closed`
/// layer wraps the tool, else let through; a post-tool event leaves the output as it is.
pub const DEFAULT_HOOK_DEADLINE: Duration = Duration::from_secs(10);

/// How long `hookhost hook` waits for a warm daemon before it answers by itself
/// (`--daemon-timeout-ms`): for `serve --hooks`' socket, to take the event (the chain then
/// has the hook's deadline); for `HOOKHOST_URL`, to answer it. A daemon takes an event in
/// well under a millisecond, so one that takes a second is hung, and every tool call
/// would otherwise wait for it twice.
pub const DEFAULT_HOOK_DAEMON_TIMEOUT: Duration = Duration::from_secs(1);

/// How long `hookhost hook doctor` waits for each event it runs through the agent's
/// installed entries: the hook's own deadline and a process start, with room to spare.
pub const HOOK_DOCTOR_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `hookhost hook` skips a daemon that did not answer within its timeout (the
/// breaker: a marker file beside the socket, so that every hook process of every agent
/// knows): the next event after it asks the daemon again.
pub const HOOK_DAEMON_BREAKER: Duration = Duration::from_secs(30);

/// The largest header line of a request on the hook daemon's socket (the agent, event,
/// tenant and options; the hook input follows it).
pub const MAX_HOOK_SOCKET_HEADER: u64 = 4096;

/// The largest hook input `hookhost hook` reads from an agent: a post-tool event carries
/// the tool's whole output (Gemini CLI sends it untruncated).
pub const MAX_HOOK_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Sandboxes kept waiting for their session's next `bash` command, across all sessions:
/// each is three processes (bubblewrap, its PID 1, hookhost's launcher), 1.9 MiB of
/// proportional set size here (the launcher's relocated program 1.2 MiB of it). Past it, the one waiting longest is ended; its
/// session's next command makes a new one (about 6 ms).
pub const MAX_IDLE_SHELLS: usize = 128;

/// Space a file system may allocate to a file beyond its size rounded up to a block (its
/// extent tree, indirect blocks) before the disk quota counts the allocation instead of
/// the size: 64 KiB. Space reserved past a file's end (`fallocate --keep-size`) beyond it
/// counts.
pub const ALLOCATION_SLACK: u64 = 64 * 1024;

/// Lines of a `bash` sandbox's own stderr (bubblewrap's, its launcher's, or what a command
/// writes through `/proc/1/fd/2`) that reach hookhost's log, labelled with the session,
/// over the sandbox's life; the rest is read and dropped, with one line saying so.
pub const MAX_SANDBOX_LOG_LINES: usize = 20;

/// The longest line of a sandbox's stderr logged; the rest of it is dropped.
pub const MAX_SANDBOX_LOG_LINE: usize = 1024;

/// How long a new `bash` sandbox may take to start before the command fails.
pub const SHELL_START_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts of a `bash` sandbox tried before its command fails: the kernel now and then
/// refuses bubblewrap's loopback setup in a new network namespace under load (`Failed
/// RTM_NEWADDR`), which a later start does not meet. Three in a row were seen once, in
/// the full test suite on 2 cores (2026-12-07).
pub const SHELL_START_ATTEMPTS: u32 = 5;

/// The wait before the second start of a sandbox; each later start waits this much longer
/// than the one before (at most 0.5 s in all).
pub const SHELL_START_RETRY_BACKOFF: Duration = Duration::from_millis(50);

/// The port inside a `bash` sandbox on which its allow-list proxy listens (127.0.0.1 of
/// the sandbox's own network namespace; see `tools::bash::proxy`): Squid's, which tools
/// and people recognise as a proxy's. The launcher binds it before any command runs, so
/// no command can take it first.
pub const SHELL_PROXY_PORT: u16 = 3128;

/// Connections one sandbox's proxy serves at once (CONNECT tunnels, plain-HTTP requests
/// and SOCKS5 tunnels together): enough for `pip` and `npm`, which open a few each, while
/// a command that opens thousands holds at most this many of the host's descriptors
/// (two each). Past it, a new connection waits in the listen queue until one ends.
pub const SHELL_PROXY_MAX_CONNECTIONS: usize = 64;

/// How long a proxied connection may pass no byte either way before the proxy closes it:
/// a tunnel a command forgot never outlives its use by long (and none outlives its
/// command, whose end closes them all).
pub const SHELL_PROXY_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a command's client has to send its request to the proxy (an HTTP request's
/// head, a SOCKS5 greeting and request) before the proxy closes the connection.
pub const SHELL_PROXY_HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest HTTP request head the proxy reads (hyper's smallest read buffer): a
/// request line and headers, never a body.
pub const SHELL_PROXY_MAX_HEAD: usize = 8 * 1024;

/// How long a sandbox's proxy waits after it failed to accept a connection (out of
/// descriptors, most likely) before it tries again.
pub const SHELL_PROXY_ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Refusals of one command the `bash` tool names in its output, one line each (the same
/// host and port said once); past them, one line counts the rest.
pub const SHELL_PROXY_MAX_NOTES: usize = 16;

/// Component instances the pooling allocator keeps slots for: every live instance (one per
/// hook and tool of each call in flight, plus each per-session instance) takes one.
pub const DEFAULT_POOL_INSTANCES: u32 = 1_000;

/// Bytes of each pooled linear memory kept resident (not returned to the OS) between
/// instances: faster instantiation, paid in RSS for every slot used so far.
pub const DEFAULT_KEEP_RESIDENT_BYTES: u64 = 4 * 1024 * 1024;

/// Resource handles (open files, streams, directory iterators…) one instance may hold at
/// once: bounds the host memory a guest can pin through handles. Opening one more file
/// fails in the guest (see `sandbox::refuse_special_files`, which wraps `open-at`); other
/// host calls that need a handle trap (wasmtime-wasi turns a full table into a trap).
pub const DEFAULT_MAX_RESOURCES: usize = 1_000;

/// Entries a trace walk of one mount visits: past it, changes go unseen and the walk says
/// it was cut short (`truncated` in `filesystem.mounted`).
pub const MAX_TRACED_ENTRIES: usize = 200_000;

/// The most entries of a mount the trace walks on the async executor (a new session's
/// mounts, nearly empty), or of the entries a watch reports touched that it stats there,
/// and the most bytes it reads there of them: of a file appended to, the bytes appended
/// (an audit log is not read again whole); nothing of a file that did not move, nor of
/// what a mount's first look leaves unread. More are looked at on a blocking thread, so
/// that no call waits behind a tenant's files: what the executor hashes of a look is
/// bounded by `INLINE_WALK_BYTES`.
pub const INLINE_WALK_ENTRIES: usize = 64;
pub const INLINE_WALK_BYTES: u64 = 256 * 1024;

/// Files a traced mount keeps open to read what is appended to them (audit logs): a
/// growing file is then read from where it was, with no `open` and `close` a call.
pub const MAX_TRACE_READERS: usize = 8;

/// Subdirectories of a traced mount whose descriptors the trace keeps, to stat an entry
/// they report by name (the mount's own is always kept); entries of the others are stat'ed
/// by path beneath the mount. Bounded so that a guest making many directories cannot make
/// the host hold as many descriptors.
pub const MAX_TRACE_DIR_FDS: usize = 4;

/// Directory levels a trace walk descends.
pub const MAX_TRACED_DEPTH: usize = 64;

/// The largest file a mount's first trace look reads (to know its hash before a call
/// changes it): the user's project may hold large files no call touches. A larger file is
/// read when it changes; its `before_sha256` is then unknown (null, with
/// `before_unhashed: "first-look"`). The host's own trace files are not read at a first
/// look at all, whatever their size (see `trace::files::Whose`).
pub const MAX_BASELINE_READ_BYTES: u64 = 1024 * 1024;

/// The most the trace reads and hashes of one changed file at one look: 64 MiB of its data
/// (and of holes hashed as zeros, see [`MAX_ZERO_FILLED_HOLE_BYTES`]; the holes of a sparse
/// file are not read and do not count). A file with more is not read: its `file.*` event
/// carries its size and mtime, `sha256` null and `unhashed: "file-cap"`.
pub const MAX_HASHED_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The data and hole extents the trace maps of one file (two `lseek`s each) to hash it by
/// extent: a file cut into more is reported as one over [`MAX_HASHED_FILE_BYTES`].
pub const MAX_HASHED_EXTENTS: usize = 4096;

/// The most the trace reads and hashes in one call, over all its phases and mounts:
/// 256 MiB, about 0.2 s of one core here (SHA-256 at some 1.2 GiB/s with the CPU's SHA
/// extensions), spent on a blocking thread, not an async worker. Files past it are
/// reported by size and mtime, `unhashed: "call-budget"`, and stay so until they change.
/// It bounds what a tenant's files cost the host per call, whatever they hold.
pub const MAX_HASHED_BYTES_PER_CALL: u64 = 256 * 1024 * 1024;

/// Holes a file may have in all and still be hashed as its content (the SHA-256
/// `sha256sum` prints), its holes hashed as zeros from memory: 1 MiB. A file with more
/// holes is hashed by extent (`sparse`; see `trace::hash`), its holes never read nor
/// hashed byte by byte.
pub const MAX_ZERO_FILLED_HOLE_BYTES: u64 = 1024 * 1024;

/// The largest text file whose content the trace keeps, to diff its next change.
pub const MAX_KEPT_TEXT: usize = 64 * 1024;

/// Text the trace keeps per mount of a session, for diffs; files past it are hashed only.
pub const MAX_KEPT_TEXT_PER_MOUNT: usize = 4 * 1024 * 1024;

/// How long the diffs of one call may search for the shortest edit, in all: 100 ms. A
/// diff of two 64 KiB texts of random lines takes some 130 ms here; past the time a diff
/// is still right, only longer (each then costs a few ms, linear in its texts, which
/// [`MAX_KEPT_TEXT`] and [`MAX_KEPT_TEXT_PER_MOUNT`] bound).
pub const MAX_DIFF_TIME_PER_CALL: Duration = Duration::from_millis(100);

/// The most text (both sides) the diffs of one look may have to be made on the async
/// executor: more is diffed on a blocking thread.
pub const INLINE_DIFF_BYTES: usize = 16 * 1024;

/// The default largest unified diff written inline in a `file.*` trace event; a larger one
/// is written under the session's `/artifacts/trace/diffs/` and referenced
/// (`[trace] diff_bytes`).
pub const DEFAULT_TRACE_DIFF_BYTES: usize = 4 * 1024;

/// A guest's stderr, a refusal's message or a failure's detail in a trace event.
pub const TRACE_TEXT_BYTES: usize = 2 * 1024;

/// Limits for calls into one component.
///
/// What applies to a call is layered, the most specific last: these defaults, then the
/// tenant's `limits`, then the hook's or tool's own `limits` (see [`LimitOverrides`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory cap, bytes.
    pub memory_bytes: u64,
    /// Wall-clock deadline per call, milliseconds.
    pub deadline_ms: u64,
    /// Cap on the output a call returns, bytes.
    pub max_output_bytes: u64,
    /// WebAssembly instructions (roughly) one call may execute; `None`: unmetered. Fuel
    /// makes execution deterministic to bound, at a cost of some speed, so it is off unless
    /// a config sets it somewhere.
    pub fuel: Option<u64>,
    /// Resource handles one instance may hold at once.
    pub max_resources: usize,
    /// Outgoing HTTP requests one call may make (see [`crate::network`]).
    pub network_requests: u32,
    /// Bytes one call's requests may move, request and response bodies together.
    pub network_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            deadline_ms: DEFAULT_DEADLINE.as_millis() as u64,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            fuel: None,
            max_resources: DEFAULT_MAX_RESOURCES,
            network_requests: DEFAULT_NETWORK_REQUESTS,
            network_bytes: DEFAULT_NETWORK_BYTES,
        }
    }
}

impl Limits {
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms)
    }

    /// These limits with the fields `overrides` sets replaced.
    pub fn with(self, overrides: &LimitOverrides) -> Limits {
        Limits {
            memory_bytes: overrides.memory_bytes.unwrap_or(self.memory_bytes),
            deadline_ms: overrides.deadline_ms.unwrap_or(self.deadline_ms),
            max_output_bytes: overrides.max_output_bytes.unwrap_or(self.max_output_bytes),
            fuel: overrides.fuel.or(self.fuel),
            max_resources: overrides.max_resources.unwrap_or(self.max_resources),
            network_requests: overrides.network_requests.unwrap_or(self.network_requests),
            network_bytes: overrides.network_bytes.unwrap_or(self.network_bytes),
        }
    }
}

/// A tenant's `rate = { … }` (see `sessions::rate`): how many calls a second it may
/// start, as a token bucket that holds `burst` (default `calls_per_second`), and how many
/// may run at once. Unbounded when left out; `0` is refused when the config is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Calls a second it may start, on average.
    pub calls_per_second: Option<std::num::NonZeroU32>,
    /// Calls it may start at once after a pause (the bucket's size); `calls_per_second`
    /// when left out.
    pub burst: Option<std::num::NonZeroU32>,
    /// Calls that may run at once; a call past it is refused, not queued.
    pub concurrent: Option<std::num::NonZeroU32>,
}

impl RateLimit {
    /// Whether any bound is set.
    pub fn is_set(&self) -> bool {
        self.calls_per_second.is_some() || self.concurrent.is_some()
    }
}

/// A `limits = { … }` table of the config: the fields it sets replace the layer below.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// A call's linear memory and tables, in bytes (`DEFAULT_MEMORY_BYTES` below all).
    pub memory_bytes: Option<u64>,
    /// A call's wall-clock time, in milliseconds (`DEFAULT_DEADLINE` below all).
    pub deadline_ms: Option<u64>,
    /// The largest output it may return, in bytes (`DEFAULT_MAX_OUTPUT_BYTES` below all).
    pub max_output_bytes: Option<u64>,
    /// Instructions a call may run (wasmtime fuel); no bound below all.
    pub fuel: Option<u64>,
    /// Resource handles a call may hold (`DEFAULT_MAX_RESOURCES` below all).
    pub max_resources: Option<usize>,
    /// Outgoing HTTP requests a call may make (`DEFAULT_NETWORK_REQUESTS` below all).
    pub network_requests: Option<u32>,
    /// Bytes a call's requests may move (`DEFAULT_NETWORK_BYTES` below all).
    pub network_bytes: Option<u64>,
}

impl LimitOverrides {
    /// The first value set outside what a component can run with (see
    /// [`COMPONENT_LIMIT_RANGES`]), said as `key = value: why`.
    pub fn out_of_range(&self) -> Option<String> {
        let set = [
            ("memory_bytes", self.memory_bytes),
            ("deadline_ms", self.deadline_ms),
            ("max_output_bytes", self.max_output_bytes),
            ("fuel", self.fuel),
            ("max_resources", self.max_resources.map(|n| n as u64)),
            ("network_requests", self.network_requests.map(u64::from)),
            ("network_bytes", self.network_bytes),
        ];
        out_of_range(&set, COMPONENT_LIMIT_RANGES)
    }
}

/// What each component limit may be set to, `(key, least, most)`. Below the least no
/// component can run: an instance needs a 64 KiB page of memory, a call some time, an
/// answer some bytes, a stream a handle. Above the most the value is a slip, not a limit:
/// a wasm32 memory cannot pass 4 GiB, a call is not let run for a day, an output past
/// 1 GiB would not fit where it goes. A config setting one outside is refused with the key
/// and its line (so `0` and `18446744073709551615` are never taken silently).
pub const COMPONENT_LIMIT_RANGES: &[(&str, u64, u64)] = &[
    ("memory_bytes", 64 * 1024, 4 * 1024 * 1024 * 1024),
    ("deadline_ms", 1, 24 * 60 * 60 * 1000),
    ("max_output_bytes", 1, 1024 * 1024 * 1024),
    ("fuel", 1, u64::MAX),
    ("max_resources", 1, 1_000_000),
    ("network_requests", 1, 1_000_000),
    ("network_bytes", 1, 1024 * 1024 * 1024 * 1024),
];

/// What each `bash` limit may be set to, `(key, least, most)`: below the least bash cannot
/// start (it maps some 16 MiB, opens a few files, is a process itself); above the most the
/// kernel's own bounds or a day of CPU. A `tmp_bytes` of 0 would make the `tmpfs` unbounded,
/// so it is refused too.
pub const SHELL_LIMIT_RANGES: &[(&str, u64, u64)] = &[
    ("processes", 1, 4 * 1024 * 1024),
    ("memory_bytes", 16 * 1024 * 1024, 1 << 40),
    ("cpu_secs", 1, 24 * 60 * 60),
    ("file_bytes", 1, 1 << 40),
    ("open_files", 8, 1 << 20),
    ("tmp_bytes", 1024 * 1024, 1 << 40),
];

/// The first of `set` outside its range in `ranges`.
fn out_of_range(set: &[(&str, Option<u64>)], ranges: &[(&str, u64, u64)]) -> Option<String> {
    set.iter().find_map(|&(key, value)| {
        let value = value?;
        let &(_, least, most) = ranges.iter().find(|(k, ..)| *k == key)?;
        if value < least {
            Some(format!(
                "{key} = {value}: no call can run with it (at least {least})"
            ))
        } else if value > most {
            Some(format!("{key} = {value}: at most {most}"))
        } else {
            None
        }
    })
}

/// Bounds of one `bash` command in its sandbox (see `tools::bash`).
///
/// Each applies to the command and every process it starts. What the kernel enforces per
/// process (`memory_bytes`, `cpu_secs`, `file_bytes`, `open_files`) is set with
/// `setrlimit` inside the sandbox before the command runs, as hard limits the command
/// cannot raise. `processes` is `RLIMIT_NPROC`, which the kernel counts per sandbox (each
/// has its own user namespace, and runs one command at a time) but does not enforce for a
/// host running as root; such a host also gives each sandbox a `pids` cgroup where it may
/// make one (cgroup v1 `pids` controller). Layered like [`Limits`]: these defaults, `[bash] limits`, then the
/// tenant's `[tenants.ID.bash] limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellLimits {
    pub processes: u64,
    pub memory_bytes: u64,
    pub cpu_secs: u64,
    pub file_bytes: u64,
    pub open_files: u64,
    pub tmp_bytes: u64,
}

impl Default for ShellLimits {
    fn default() -> Self {
        ShellLimits {
            processes: DEFAULT_SHELL_PROCESSES,
            memory_bytes: DEFAULT_SHELL_MEMORY_BYTES,
            cpu_secs: DEFAULT_SHELL_CPU_SECS,
            file_bytes: DEFAULT_SHELL_FILE_BYTES,
            open_files: DEFAULT_SHELL_OPEN_FILES,
            tmp_bytes: DEFAULT_SHELL_TMP_BYTES,
        }
    }
}

impl ShellLimits {
    /// These limits with the fields `overrides` sets replaced.
    pub fn with(self, overrides: &ShellLimitOverrides) -> ShellLimits {
        ShellLimits {
            processes: overrides.processes.unwrap_or(self.processes),
            memory_bytes: overrides.memory_bytes.unwrap_or(self.memory_bytes),
            cpu_secs: overrides.cpu_secs.unwrap_or(self.cpu_secs),
            file_bytes: overrides.file_bytes.unwrap_or(self.file_bytes),
            open_files: overrides.open_files.unwrap_or(self.open_files),
            tmp_bytes: overrides.tmp_bytes.unwrap_or(self.tmp_bytes),
        }
    }
}

/// Failed authentications — a wrong bearer token or a refused JWT on the MCP endpoint or
/// the agents' hook endpoint, a wrong admin token — one source address may make within
/// [`AUTH_FAILURE_WINDOW`] before every request from it is answered 429 (with
/// `Retry-After`) until that window ends: guessing a token is held to 20 tries a minute.
/// A request without a token (an OAuth client's first, which learns where to get one)
/// is counted in `hookhost_auth_failures_total` but not here.
pub const AUTH_FAILURES_PER_WINDOW: u32 = 20;

/// The window of [`AUTH_FAILURES_PER_WINDOW`].
pub const AUTH_FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// How many source addresses (IPv4, or IPv6 /64s) the authentication throttle keeps at
/// most; past it, windows that ended are dropped, else the oldest (memory stays bounded
/// under a flood from many addresses, and a new one is still counted).
pub const AUTH_THROTTLE_SOURCES: usize = 10_000;

/// The shortest bearer token accepted: 16 bytes, so a token cannot be guessed.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The mount `bash` runs in unless `[bash] mount` says otherwise.
pub const DEFAULT_BASH_MOUNT: &str = "/workspace";

/// The mount a sandboxed `bash` also sees, read-only, unless `[bash] grants` says
/// otherwise: the model reads offloaded outputs there.
pub const DEFAULT_BASH_RO_MOUNT: &str = "/artifacts";

/// What confines one sandbox beside its mounts: whether slirp4netns routes its network
/// namespace (`network = true`), and the limits of its commands. Made of
/// [`ShellNetwork`] and [`ShellLimits`] for each sandbox; an allow-list's sandbox is
/// closed here (`network: false`) and reaches out only through its proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShellPolicy {
    pub network: bool,
    pub limits: ShellLimits,
}

/// What a sandboxed command may reach: `[bash] network`, which a tenant's
/// `[tenants.ID.bash] network` replaces whole.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ShellNetwork {
    /// `false`, the default: a network namespace of its own with only a loopback.
    #[default]
    Closed,
    /// `true`: whatever the host reaches, through slirp4netns (never the host's loopback
    /// or abstract sockets).
    Open,
    /// `{ allow = [...] }`: its own namespace with only a loopback, on which the host's
    /// proxy ([`SHELL_PROXY_PORT`]) reaches the listed hosts and nothing else.
    Allow(std::sync::Arc<crate::network::Allow>),
}

impl ShellNetwork {
    /// Whether slirp4netns routes the sandbox.
    pub fn is_open(&self) -> bool {
        matches!(self, ShellNetwork::Open)
    }
}

/// A `[bash] limits = { … }` (or a tenant's) table: the fields it sets replace the layer
/// below.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellLimitOverrides {
    /// Processes a command may run at once (`DEFAULT_SHELL_PROCESSES` below all).
    pub processes: Option<u64>,
    /// Memory of a command's processes, in bytes (`DEFAULT_SHELL_MEMORY_BYTES`).
    pub memory_bytes: Option<u64>,
    /// CPU time of each process, in seconds (`DEFAULT_SHELL_CPU_SECS`).
    pub cpu_secs: Option<u64>,
    /// The largest file a process may write, in bytes (`DEFAULT_SHELL_FILE_BYTES`).
    pub file_bytes: Option<u64>,
    /// Files each process may hold open (`DEFAULT_SHELL_OPEN_FILES`).
    pub open_files: Option<u64>,
    /// The size of the command's `/tmp`, in bytes (`DEFAULT_SHELL_TMP_BYTES`).
    pub tmp_bytes: Option<u64>,
}

impl ShellLimitOverrides {
    /// The first value set outside what a command can run with (see
    /// [`SHELL_LIMIT_RANGES`]), said as `key = value: why`.
    pub fn out_of_range(&self) -> Option<String> {
        let set = [
            ("processes", self.processes),
            ("memory_bytes", self.memory_bytes),
            ("cpu_secs", self.cpu_secs),
            ("file_bytes", self.file_bytes),
            ("open_files", self.open_files),
            ("tmp_bytes", self.tmp_bytes),
        ];
        out_of_range(&set, SHELL_LIMIT_RANGES)
    }
}

// The serving side: MCP, upstream servers, the session tables.

/// How long an HTTP MCP session may stay idle before it is ended (and its hookhost session
/// deleted), unless the operator says otherwise.
pub const DEFAULT_MCP_IDLE: Duration = Duration::from_secs(30 * 60);

/// How long an agent's session that the agent ended keeps its files (offloaded outputs,
/// plans, its trace) for the agent to resume it (`claude --resume`), once idle; then
/// `session gc` deletes it (`[agents] keep_artifacts`). An agent that clears its
/// conversation (`reason: clear`) has its session deleted at once.
pub const DEFAULT_KEEP_ARTIFACTS: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// How long running calls may go on after a shutdown signal before the server's sessions
/// are ended (their commands killed, their files deleted), unless `[serve]
/// shutdown_grace` says. An HTTP server drains meanwhile: `/readyz` answers 503 at once
/// (a balancer moves away), every new request 503 with `Retry-After`, and a request that
/// was running when the signal came is answered when it finishes within the grace. Well
/// under systemd's default `TimeoutStopSec` (90 s; deploy/hookhost.service's 30 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The longest `[serve] shutdown_grace` a config may ask: 20 s, so that the drain, the
/// streams' close ([`SHUTDOWN_CLOSE`]) and the end of the server's sessions fit in
/// deploy/hookhost.service's `TimeoutStopSec=30`, after which systemd kills the process.
pub const MAX_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// How long a draining HTTP server, its requests answered (or the grace over), waits for
/// its connections to close once their MCP streams are ended.
pub const SHUTDOWN_CLOSE: Duration = Duration::from_secs(1);

/// How long a client of `serve --http` over TLS may take to finish its handshake; the
/// handshakes run beside each other, so a slow one holds no other client back.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How many connections whose TLS handshake is done may wait to be served.
pub const TLS_ACCEPTED_QUEUE: usize = 64;

/// How long fetching a JWKS (`[auth] jwks`) may take, and how large it may be.
pub const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// How often at most the JWKS is fetched again because a token names a key it lacks (a
/// provider rotating its keys): tokens made up with random key ids cannot make hookhost
/// hammer the provider, and a new key is taken within this long of its first use.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(5);

/// How far a token's `exp` and `nbf` may be off, for clocks that differ.
pub const JWT_LEEWAY_SECS: u64 = 30;

/// How long `/readyz` waits for the session table to answer before it says the host is
/// not ready.
pub const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a one-shot command (`call`, `hook`, `session …`) waits at exit for its last
/// spans to reach the OTLP collector: a collector that is down or slow must not make every
/// command slow. Spans not sent by then are dropped, with one warning.
/// `OTEL_BSP_EXPORT_TIMEOUT` (milliseconds) overrides it and the server's. (A local collector
/// answers in a few ms; with one that refuses, a `hookhost call` took 118 ms against 13 ms
/// without a collector under a 100 ms bound: the exporter retries after a backoff.)
pub const OTLP_FLUSH_AT_EXIT: Duration = Duration::from_millis(80);

/// The same for a server shutting down, which happens rarely and has more spans to lose.
pub const OTLP_FLUSH_AT_SHUTDOWN: Duration = Duration::from_secs(2);

/// How often a client's watcher of tool changes checks that the client is still there.
pub const MCP_PEER_CHECK: Duration = Duration::from_secs(10);

/// The largest HTTP request body read: rmcp's own limit (4 MiB), above the 1 MiB of tool
/// arguments a call may carry.
pub const MAX_HTTP_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The most of a session's trace file (`trace/events.jsonl`) the admin page's timeline
/// reads: its last events, whole lines only.
pub const ADMIN_TRACE_BYTES: u64 = 8 * 1024 * 1024;

/// Connections a host keeps to the database at most (and as many again for the locks of
/// persistent directories' backing trees, each held for one load or commit).
pub const PG_POOL_SIZE: usize = 16;

/// How long a load or commit of a persistent directory waits for its backing tree's lock
/// in a fleet's database before it fails (the tree is then untouched).
pub const STORE_LOCK_WAIT: Duration = Duration::from_secs(120);

/// What a tenant at or over its disk quota — its calls admitted on probation, so that
/// the agent can look and delete — may hold beyond what it used when it went over (its
/// hooks' audit lines, a tool's temporary file) before a call is stopped: 256 KiB, for
/// all its calls until it is under its quota again. A call's tool directories must also
/// end holding no more than they began with, or its output is withheld (see
/// `Sessions::admit`).
pub const QUOTA_PROBATION_BYTES: u64 = 256 * 1024;

/// The entries such a call may make more while it runs.
pub const QUOTA_PROBATION_ENTRIES: u64 = 32;

/// How often a running call of a tenant with a quota has its directories measured.
pub const QUOTA_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// How many of the files a call wrote are named to the agent when the call went over its
/// tenant's disk quota (the largest).
pub const QUOTA_REPORTED_FILES: usize = 5;

/// How long a call waits for another process holding the database.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How many pages the session table's write-ahead log grows to before a write folds it
/// into the database (SQLite's `wal_autocheckpoint`; its default is 1000). The log is left
/// in place when the last connection closes, and the first process to open the table
/// after that reads all of it again (one `pread` a page, ~10 µs each): at 32 pages that
/// is at most ~0.3 ms of a one-shot command's start, and the fold (two fsyncs) comes
/// every few commands, instead of every command's two fsyncs and two unlinks at its close.
pub const SQLITE_WAL_PAGES: u32 = 32;

/// How long an upstream may take to start, and each call, unless its config says.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest wait between two restarts of a dead upstream, or two tries of one that
/// did not start.
pub const MAX_UPSTREAM_BACKOFF: Duration = Duration::from_secs(60);

/// How many times one request to an upstream of MCP 2026-07-28 may be answered
/// `input_required` with questions (fulfilled through the client, and sent again) before
/// hookhost gives up on it with an error: a bound on an upstream that never finishes
/// asking. Rounds that carry only state are not counted: the call's timeout bounds them.
pub const UPSTREAM_INPUT_ROUNDS: usize = 8;

/// How long hookhost waits before sending back an `input_required` answer that asks
/// nothing (only its state): the upstream is still working, and is polled at this pace.
pub const UPSTREAM_STATE_ONLY_PAUSE: Duration = Duration::from_millis(100);

/// How long a call of an MCP 2026-07-28 client that was answered `input_required` (an
/// upstream asked it something) may wait, from its start, for the client to send the
/// request again with the answers: the call is held, its hooks mid-chain, until then, and
/// dropped after (as a cancelled one is; the retry is then told its `requestState` is
/// unknown). Elicitation waits on a person, so minutes, not seconds. The time the client
/// takes does not count against the upstream's timeout.
pub const INPUT_WAIT: Duration = Duration::from_secs(600);

/// How many requests of one tenant may wait on their client's input at once (see
/// [`INPUT_WAIT`]); one more is answered with an error instead of waiting.
pub const INPUT_WAITING_PER_TENANT: usize = 64;

/// How many of those may be one JWT subject's (or the tenant token's), so that one
/// subject cannot take all of its tenant's.
pub const INPUT_WAITING_PER_SUBJECT: usize = 16;

/// The shortest time hookhost keeps an upstream's list of tools that came with a time to
/// live (MCP 2026-07-28's `ttlMs` cache hint) before it lists them again: a `ttlMs` of 0
/// would have it list them without pause. A list without one is kept until the upstream
/// says it changed, or reconnects.
pub const UPSTREAM_RELIST_MIN: Duration = Duration::from_secs(5);

/// How long hookhost waits before it opens its listener (`subscriptions/listen`) to an
/// upstream of MCP 2026-07-28 again, once one ended or failed, or the resources it
/// follows changed.
pub const UPSTREAM_RELISTEN_PAUSE: Duration = Duration::from_millis(100);

/// An upstream that stayed up this long is healthy again: its next restart waits 1 s.
pub const UPSTREAM_HEALTHY_AFTER: Duration = Duration::from_secs(30);

/// How many of an upstream's progress notifications are held for one call on their way to
/// the client (more are dropped: progress is advisory), and how many are held, for all
/// its calls, that came before their call was watched.
pub const UPSTREAM_PROGRESS_QUEUE: usize = 256;

/// How long a call to an upstream waits, once answered, for the progress notifications
/// the upstream sent before its answer to reach the client.
pub const UPSTREAM_PROGRESS_SETTLE: Duration = Duration::from_millis(500);

/// How long a connection to an HTTP upstream is kept open unused for the next request:
/// below the 5 s after which uvicorn and Node close an idle one, so that a request is not
/// sent on a connection its server is closing.
pub const UPSTREAM_IDLE_CONNECTION: Duration = Duration::from_secs(4);

/// How many redirects an HTTP upstream's request follows (307 and 308 to the same origin
/// only: a Python SDK server mounted at `/mcp` answers `/mcp/`).
pub const UPSTREAM_REDIRECTS: usize = 10;

/// How many resource updates and list changes of the upstream servers an MCP client may
/// be behind before it misses some (it is then told that the lists changed, so it reads
/// them again).
pub const UPSTREAM_NOTICE_QUEUE: usize = 1024;

/// How many instances of a `scope = "tenant"` or `"session"` upstream may run at once
/// when its `max_instances` is left out.
pub const DEFAULT_UPSTREAM_INSTANCES: usize = 64;

/// How often an unsandboxed command's guard looks whether what the command left running
/// has ended (it notices the host going at once).
pub const GUARD_REAP_INTERVAL: Duration = Duration::from_secs(1);

/// How many times a guard kills its children (whose children then become its own) before
/// it gives up on a command that forks faster than it kills.
pub const GUARD_KILL_ROUNDS: usize = 64;

/// How long the host waits for an unsandboxed command's guard to end it (timeout, a
/// failed guard) before it kills the guard's process group itself.
pub const GUARD_END_GRACE: Duration = Duration::from_secs(2);

// Host walks of a session's trees (see `crate::beneath`).

/// Directory descriptors one walk of a session's tree keeps open: the levels nearest its
/// root. Deeper ones are closed on the way down and reopened through `..` on the way up,
/// checked to be the directory left, so a tree of any depth is walked, counted and removed
/// (no `PATH_MAX`, no recursion) without running the host out of descriptors.
pub const WALK_OPEN_DIRS: usize = 64;

/// How many times removing a tree starts again when the session's files changed under it
/// (a directory not empty any more, an entry swapped): a session whose processes are gone
/// cannot keep that up.
pub const REMOVE_ATTEMPTS: usize = 4;

// Components from OCI registries (see `crate::registry`).

/// The largest component a registry may give: a manifest announcing a larger layer is
/// refused before any of it is read, and a registry sending more than it announced is cut
/// off. A componentize-py hook is about 40 MB; a C or Rust one well under 1 MB.
pub const MAX_PULLED_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// How long a connection to a registry may take to open.
pub const REGISTRY_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a registry may leave a read waiting, mid-response.
pub const REGISTRY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How long getting one component from its registry may take in all (resolving, the
/// manifest, the layer): a registry that trickles cannot hold a start or a reload.
pub const REGISTRY_FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// The most signatures of one component read (layers of its `sha256-….sig` manifest):
/// beyond them, a registry could have each load check signatures without end.
pub const MAX_SIGNATURES: usize = 16;

/// The largest signature payload read (cosign's simple-signing JSON is about 250 bytes).
pub const MAX_SIGNATURE_PAYLOAD_BYTES: u64 = 64 * 1024;
