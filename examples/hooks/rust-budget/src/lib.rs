//! rust-budget: refuses a session's calls beyond a budget, so a runaway agent loop stops.
//!
//! The count lives in a file of the hook's own session mount (`/budget/calls` unless the
//! setting `file` says otherwise), so it holds whether the hook keeps one instance per
//! session or gets a fresh one per call. Settings: `max_calls` (default 200), `file`; the
//! hook describes them (`Describe`), so a config giving it another is refused at load.
//! Grant: `/budget` read-write, scope `session`.

use hookhost_hook::{
    CallContext, Describe, Hook, HookDescription, Proceed, ToolCall, files, settings,
};

/// Calls a session may make unless the setting `max_calls` says otherwise.
const MAX_CALLS: u64 = 200;
/// Where the count is kept unless the setting `file` says otherwise.
const FILE: &str = "/budget/calls";

struct Budget;

impl Hook for Budget {
    fn before_execute(_ctx: CallContext, call: ToolCall) -> Result<Proceed, String> {
        let max = settings::count("max_calls", MAX_CALLS)?;
        let file = settings::text_or("file", FILE);
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

impl Describe for Budget {
    fn describe() -> HookDescription {
        HookDescription::new("Refuses a session's calls beyond a budget")
            .count("max_calls", MAX_CALLS, "the calls a session may make")
            .text(
                "file",
                Some(FILE),
                "where the count is kept, in the granted /budget mount",
            )
    }
}

hookhost_hook::export_described!(Budget);
