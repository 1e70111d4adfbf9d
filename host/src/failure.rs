//! How a call into a component (or a tool) fails: the kind, which each layer's failure
//! policy handles, and what is known about it. Tools that are not sandboxed fail this way
//! too; the sandbox names the failures of component calls (see
//! [`crate::sandbox`]). Any error reaches a log or an answer as one line
//! ([`error_line`]).

use crate::limits::Limits;
use std::fmt;

/// Why a call into a component failed; each is handled by the layer's failure policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The call passed its deadline.
    Timeout,
    /// The call used up its fuel.
    Fuel,
    /// The component tried to grow its memory past the cap.
    Memory,
    /// The component returned more than the output cap.
    OutputTooLarge,
    /// The component returned something the ABI allows but the host does not, such as
    /// rewritten arguments that are not a JSON object.
    InvalidOutput,
    /// The component trapped (a panic, an unreachable, a failed import...).
    Trap,
    /// The component could not be instantiated or given its grants.
    Setup,
    /// The component said it failed (a 0.2.0 hook's `after::fail`).
    Declared,
    /// The tool took its tenant over its disk quota (see `sessions::quota`).
    DiskQuota,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Fuel => "fuel",
            FailureKind::Memory => "memory",
            FailureKind::OutputTooLarge => "output-too-large",
            FailureKind::InvalidOutput => "invalid-output",
            FailureKind::Trap => "trap",
            FailureKind::Setup => "setup",
            FailureKind::Declared => "declared",
            FailureKind::DiskQuota => "disk-quota",
        })
    }
}

/// A failed call into a component: what kind of failure, what is known about it, and
/// what the guest wrote to stderr before it failed (trimmed, bounded; `None` when
/// nothing). Displayed as `KIND: DETAIL; stderr: SAID`.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub detail: String,
    pub stderr: Option<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)?;
        match &self.stderr {
            Some(said) => write!(f, "; stderr: {said}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Failure {}

impl Failure {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Failure {
        Failure {
            kind,
            detail: detail.into(),
            stderr: None,
        }
    }

    /// This failure with what the guest wrote to stderr, when it wrote anything.
    pub fn with_stderr(mut self, said: &str) -> Failure {
        let said = said.trim();
        self.stderr = (!said.is_empty()).then(|| said.to_string());
        self
    }

    /// Fails with [`FailureKind::OutputTooLarge`] when `len` bytes exceed the cap.
    pub fn check_output(len: usize, limits: &Limits) -> Result<(), Failure> {
        if len as u64 > limits.max_output_bytes {
            Err(Failure::new(
                FailureKind::OutputTooLarge,
                format!(
                    "returned {len} bytes, over the limit of {}",
                    limits.max_output_bytes
                ),
            ))
        } else {
            Ok(())
        }
    }
}

/// An error and its causes on one line, `: `-separated, each said once: a cause whose text
/// its parent's message already includes (errors that print their source) is not repeated.
pub fn error_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut last = line.clone();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !last.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        last = text;
        source = cause.source();
    }
    line
}
