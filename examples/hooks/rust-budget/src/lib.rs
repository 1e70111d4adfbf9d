//! rust-budget: refuses a session's calls beyond a budget, so a runaway agent loop stops.
//!
//! The count lives in a file of the hook's own session mount (`/budget/calls` unless the
//! setting `file` says otherwise), so it holds whether the hook keeps one instance per
//! session or gets a fresh one per call. Settings: `max_calls` (default 200), `file`.
//! Grant: `/budget` read-write, scope `session`.

use hookhost_hook::{CallContext, Hook, Proceed, ToolCall, files, settings};

struct Budget;

impl Hook for Budget {
    fn before_execute(_ctx: CallContext, call: ToolCall) -> Result<Proceed, String> {
        let max = settings::count("max_calls", 200)?;
        let file = settings::text_or("file", "/budget/calls");
        let used: u64 = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0);
        if used >= max {
            return Err(format!(
                "this session has used its budget of {max} tool calls; {} was not run",
                call.name
            ));
        }
        // A count that cannot be kept must not become an unlimited budget: trap, and the
        // operator's on_failure policy decides. (`files::write` is one call on the host's
        // thread; `std::fs::write` would hop to a blocking thread.)
        if let Err(e) = files::write(&file, (used + 1).to_string().as_bytes()) {
            panic!("rust-budget: cannot write {file}: {e}");
        }
        Ok(Proceed::unchanged())
    }
}

hookhost_hook::export!(Budget);
