//! Every limit and default of the host, in one place.
//!
//! A component call runs under [`Limits`]: the defaults below apply unless the operator's
//! config overrides them for a hook or a tool. They are chosen so that an untrusted
//! component can neither hold a worker for long nor exhaust the host's memory, while the
//! built-in hooks comfortably handle outputs of several megabytes.

use serde::Deserialize;
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

/// What one guest may write to its stderr per call before writes fail. Stderr is kept only
/// to explain failures in the log.
pub const GUEST_STDERR_BYTES: usize = 64 * 1024;

/// Entries in one store's resource table (open files, streams...): bounds host memory a
/// guest can pin through handles.
pub const MAX_TABLE_ELEMENTS: usize = 10_000;

/// The longest id (session, tenant, tool name) accepted, in bytes. Ids are encoded into
/// host path segments at up to three bytes per byte, which keeps them under the 255-byte
/// file name limit of common file systems.
pub const MAX_ID_BYTES: usize = 64;

/// The largest JSON argument text accepted for one tool call: 1 MiB.
pub const MAX_ARGUMENTS_BYTES: usize = 1024 * 1024;

/// The `bash` tool's time limit when the call gives none.
pub const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest time limit a `bash` call may ask for.
pub const MAX_BASH_TIMEOUT: Duration = Duration::from_secs(600);

/// Limits for calls into one component. Any field left out of the config keeps its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Linear memory cap, bytes.
    pub memory_bytes: u64,
    /// Wall-clock deadline per call, milliseconds.
    pub deadline_ms: u64,
    /// Cap on the output a call returns, bytes.
    pub max_output_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            deadline_ms: DEFAULT_DEADLINE.as_millis() as u64,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

impl Limits {
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms)
    }
}
