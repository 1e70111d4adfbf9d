//! What a client is told changed: the tools hookhost serves (a reload, an upstream's list)
//! and what the upstreams announce (their prompts, resources, and updates of a resource).
//!
//! One follower serves both eras: a 2025 session is told for as long as it is connected
//! (from `initialized` on), a 2026 client for as long as its `subscriptions/listen` request
//! lasts, each notification then tagged with the request's id by rmcp's sink, which drops
//! what the accepted filter does not name (rmcp narrows it to the capabilities hookhost
//! declares). A 2026 listener that names resources has each subscribed upstream while it
//! listens (in a session of its own, as a 2025 session's `resources/subscribe`) and is
//! told their updates.

use crate::runtime::Runtime;
use crate::tools::upstream::Notice;
use tokio::sync::{broadcast, watch};

/// One change a client may be told of.
pub(super) enum Change {
    Tools,
    Prompts,
    Resources,
    ResourceUpdated(String),
}

/// The runtime's signals, subscribed to: what changes from now on is followed.
pub(super) struct Changes {
    tools: watch::Receiver<u64>,
    notices: broadcast::Receiver<Notice>,
}

impl Changes {
    pub(super) fn follow(runtime: &Runtime) -> Changes {
        Changes {
            tools: runtime.tools_changed(),
            notices: runtime.upstream_notices(),
        }
    }

    /// Hands each change to `tell` until it answers false, `stop` resolves, or the runtime
    /// is gone. Notices missed for being slow are told as changes of the prompts and the
    /// resources, so the client reads its lists again.
    pub(super) async fn forward<Told: Future<Output = bool>>(
        mut self,
        stop: impl Future<Output = ()>,
        mut tell: impl FnMut(Change) -> Told,
    ) {
        tokio::pin!(stop);
        loop {
            let change = tokio::select! {
                changed = self.tools.changed() => match changed {
                    Ok(()) => Change::Tools,
                    Err(_) => return,
                },
                notice = self.notices.recv() => match notice {
                    Ok(Notice::ResourceUpdated(uri)) => Change::ResourceUpdated(uri),
                    Ok(Notice::PromptsChanged) => Change::Prompts,
                    Ok(Notice::ResourcesChanged) => Change::Resources,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if !tell(Change::Prompts).await {
                            return;
                        }
                        Change::Resources
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                () = &mut stop => return,
            };
            if !tell(change).await {
                return;
            }
        }
    }
}
