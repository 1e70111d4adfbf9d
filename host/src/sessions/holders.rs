//! What keeps state for sessions, and is told when one ends.
//!
//! Everything that holds per-session state implements [`SessionHolder`] and is registered
//! once with [`crate::sessions::Sessions::hold`]: kept hook instances (`chain::HookLayer`),
//! the trace (`trace::Tracer`), every tool (`bash`'s sandboxes and process groups), and a
//! server's MCP sessions (`mcp`'s gate). When a session ends — deleted here, or found gone
//! from a fleet's shared table (see `Sessions::forget_ended_elsewhere`) — every holder
//! forgets it, so that nothing a session held outlives it on any host.

use super::SessionKey;
use std::sync::{Arc, Mutex, Weak};

/// Something that keeps state for sessions.
pub trait SessionHolder: Send + Sync {
    /// The sessions it holds state for now: asked on a fleet, to find those another host
    /// ended. Nothing, by default.
    fn held(&self) -> Vec<SessionKey> {
        Vec::new()
    }

    /// Drops or stops what it holds for `key`: the session ended, and its directories are
    /// about to be deleted (here) or are gone (on another host).
    fn forget(&self, _key: &SessionKey) {}
}

/// State kept per session in a map: the session's entry is what it holds.
impl<V: Send> SessionHolder for Mutex<std::collections::HashMap<SessionKey, V>> {
    fn held(&self) -> Vec<SessionKey> {
        let map = self.lock().unwrap_or_else(|e| e.into_inner());
        map.keys().cloned().collect()
    }

    fn forget(&self, key: &SessionKey) {
        // Dropped outside the lock: what it holds may take time to let go.
        let entry = self.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        drop(entry);
    }
}

/// The registered holders. Held weakly: a holder's owner (the runtime, a server) decides
/// how long it lives.
#[derive(Default)]
pub(super) struct Holders(Mutex<Vec<Weak<dyn SessionHolder>>>);

impl Holders {
    pub(super) fn add(&self, holder: Weak<dyn SessionHolder>) {
        let mut holders = self.0.lock().unwrap_or_else(|e| e.into_inner());
        holders.retain(|h| h.strong_count() > 0);
        holders.push(holder);
    }

    fn live(&self) -> Vec<Arc<dyn SessionHolder>> {
        let holders = self.0.lock().unwrap_or_else(|e| e.into_inner());
        holders.iter().filter_map(Weak::upgrade).collect()
    }

    /// Every holder forgets `key`.
    pub(super) fn forget(&self, key: &SessionKey) {
        for holder in self.live() {
            holder.forget(key);
        }
    }

    /// Every session any holder holds state for.
    pub(super) fn held(&self) -> std::collections::BTreeSet<SessionKey> {
        self.live().iter().flat_map(|h| h.held()).collect()
    }
}
