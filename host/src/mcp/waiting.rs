//! Requests of MCP 2026-07-28 that wait on their client's input. An upstream asks the
//! client something (elicitation, sampling) in the middle of a call; a client of that era
//! cannot be sent a request, so it is asked in the answer to its own
//! (`resultType: "input_required"`, SEP-2322) and answers by sending its request again
//! with `inputResponses` and the `requestState` it was given.
//!
//! hookhost does not end the call there and begin another at the retry: the hooks would
//! see two calls, and a tool's effects could happen twice. The running call (its chain
//! half way, the upstream's question pending) is held here, under a random id that is the
//! `requestState`, and goes on when the retry brings the answers:
//! - **Bound to whoever began it**: its tenant, JWT subject and request (method and name),
//!   and its session when the retry names one by id (a retry that names none, or `new`,
//!   opens no session: the call's goes on; an ephemeral one lives until the call ends). A
//!   retry that differs, or a state that is not one of this process's held calls
//!   (tampered with, used, expired, or given by another host of a fleet), is refused with
//!   -32602. Nothing is read out of a state, so there is nothing to forge.
//! - **Single use**: a state is taken when presented; a call that asks again is held under
//!   a new one. A retry whose answers miss a key, or whose answer is not of the kind asked,
//!   is answered `input_required` again for what is missing; keys not asked are ignored.
//! - **Bounded**: at most [`INPUT_WAITING_PER_TENANT`] held per tenant and
//!   [`INPUT_WAITING_PER_SUBJECT`] per JWT subject, each at most [`INPUT_WAIT`] from its
//!   start however often it asks; one that expires, or whose session ended, is dropped as
//!   a cancelled call is; all are dropped when the server stops.
//! - A first request that carries `inputResponses` already (a client that knows the
//!   questions) has the questions they answer answered at once.
//!
//! A held call lives in the process that began it: in a fleet, the retry must reach the
//! host that answered `input_required` (docs/mcp.md).

// A 2026 request's input requests include sampling and roots, which rmcp marks
// deprecated (SEP-2577) while MCP 2026-07-28 still has them.
#![allow(deprecated)]

use crate::ids::SessionId;
use crate::limits::{INPUT_WAIT, INPUT_WAITING_PER_SUBJECT, INPUT_WAITING_PER_TENANT};
use crate::sessions::Principal;
use crate::tools::upstream::{Asker, Question};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateMessageResult, ElicitResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ListRootsResult,
};
use std::any::Any;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// The calls of one server waiting on their clients' input, by their `requestState`.
#[derive(Default)]
pub(super) struct Waiting {
    held: Mutex<HashMap<String, Held>>,
}

/// Who may go on with a held call: whoever began it, with the same request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    pub principal: Principal,
    /// The request: its method and what it names (a tool, a prompt, a resource).
    pub request: String,
}

/// What every `requestState` hookhost gives begins with; a request of MCP 2026-07-28
/// that carries one is a retry, and needs no session of its own (`http/stateless.rs`).
pub const STATE_PREFIX: &str = "hookhost-wait-";

/// What became of a request: answered, or waiting for its client's input.
pub(super) enum Waited<T> {
    Done(T),
    Asks(InputRequiredResult),
}

/// A call that may ask its client, and what it holds on to until it ends (an ephemeral
/// session's end, say).
struct Running<T> {
    call: Pin<Box<dyn Future<Output = T> + Send>>,
    questions: mpsc::UnboundedReceiver<Question>,
    /// The session it runs in.
    session: SessionId,
    /// When it is dropped if still held: [`INPUT_WAIT`] after it began, however many
    /// times it was held.
    expires: tokio::time::Instant,
    _keep: Option<Box<dyn Any + Send>>,
}

/// A call held for its client's answers.
struct Held {
    owner: Owner,
    session: SessionId,
    /// Its [`Running`], whose output type the owner's request fixes.
    running: Box<dyn Any + Send>,
    /// The question asked, all of its keys; the answers given so far.
    asked: InputRequests,
    given: InputResponses,
    answers: oneshot::Sender<InputResponses>,
    /// The task that drops it when it expires, stopped when it is taken.
    expiry: tokio::task::AbortHandle,
}

impl Waiting {
    /// Begins a call that may ask its client (through the [`Asker`] `begin` is given), in
    /// `session`; answers once it ends, once it asks something `responses` (the request's
    /// own `inputResponses`, if any) do not answer, or with an error when `cancelled`
    /// resolves first. `keep` is held as long as the call.
    pub(super) async fn begin<T: Send + 'static>(
        self: &Arc<Self>,
        owner: Owner,
        session: SessionId,
        responses: Option<InputResponses>,
        begin: impl FnOnce(Asker) -> Pin<Box<dyn Future<Output = T> + Send>>,
        keep: Option<Box<dyn Any + Send>>,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Waited<T>, McpError> {
        let (asker, questions) = Asker::new();
        let running = Box::new(Running {
            call: begin(asker),
            questions,
            session,
            expires: tokio::time::Instant::now() + INPUT_WAIT,
            _keep: keep,
        });
        self.drive(owner, running, responses.unwrap_or_default(), cancelled)
            .await
    }

    /// Goes on with the call held under `state` for `owner`, given the retry's
    /// `responses`, as [`begin`](Self::begin) does. A retry that names a session by its id
    /// (`named`) must name the call's.
    pub(super) async fn resume<T: Send + 'static, Alive: Future<Output = bool>>(
        self: &Arc<Self>,
        owner: Owner,
        named: Option<&SessionId>,
        state: &str,
        responses: Option<InputResponses>,
        alive: impl FnOnce(SessionId) -> Alive,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Waited<T>, McpError> {
        let held = self.take(state, &owner, named)?;
        // Its session may have ended meanwhile (deleted, collected): the call ends with it.
        if !alive(held.session.clone()).await {
            return Err(McpError::invalid_params(
                "requestState: the session of the request waiting under it has ended",
                None,
            ));
        }
        let running = held
            .running
            .downcast::<Running<T>>()
            .map_err(|_| unknown_state())?;
        let mut given = held.given;
        given.extend(answering(&held.asked, &responses.unwrap_or_default()));
        match answered(held.asked, given) {
            Ok(answers) => {
                let _ = held.answers.send(answers);
                self.drive(owner, running, InputResponses::new(), cancelled)
                    .await
            }
            Err((asked, given)) => self.hold(owner, running, asked, given, held.answers),
        }
    }

    /// Polls `running` until it ends, or asks what `given` does not answer.
    async fn drive<T: Send + 'static>(
        self: &Arc<Self>,
        owner: Owner,
        mut running: Box<Running<T>>,
        given: InputResponses,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Waited<T>, McpError> {
        tokio::pin!(cancelled);
        loop {
            // Questions first: a call that asked what its client did not declare fails,
            // whatever the upstream then made of the refusal (even when the call ended in
            // the same poll that asked).
            let question = tokio::select! {
                biased;
                Some(question) = running.questions.recv() => question,
                done = &mut running.call => match running.questions.try_recv() {
                    Ok(Question::Undeclared(needed)) => {
                        return Err(McpError::missing_required_client_capability(needed));
                    }
                    _ => return Ok(Waited::Done(done)),
                },
                () = &mut cancelled => {
                    return Err(McpError::internal_error("the call was cancelled", None));
                }
            };
            let (requests, answers) = match question {
                Question::Input { requests, answers } => (requests, answers),
                Question::Undeclared(needed) => {
                    return Err(McpError::missing_required_client_capability(needed));
                }
            };
            let already = answering(&requests, &given);
            match answered(requests, already) {
                Ok(all) => {
                    let _ = answers.send(all);
                }
                Err((asked, given)) => return self.hold(owner, running, asked, given, answers),
            }
        }
    }

    /// Holds `running` until its client answers what of `asked` is not `given` yet, under
    /// a new `requestState`; answers the request with the questions.
    fn hold<T: Send + 'static>(
        self: &Arc<Self>,
        owner: Owner,
        running: Box<Running<T>>,
        asked: InputRequests,
        given: InputResponses,
        answers: oneshot::Sender<InputResponses>,
    ) -> Result<Waited<T>, McpError> {
        let missing: InputRequests = asked
            .iter()
            .filter(|(key, _)| !given.contains_key(*key))
            .map(|(key, request)| (key.clone(), request.clone()))
            .collect();
        let state = format!("{STATE_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let tenant = &owner.principal.tenant;
        let (of_tenant, of_subject) = held
            .values()
            .filter(|h| &h.owner.principal.tenant == tenant)
            .fold((0, 0), |(t, s), h| {
                (t + 1, s + usize::from(h.owner.principal == owner.principal))
            });
        if of_tenant >= INPUT_WAITING_PER_TENANT || of_subject >= INPUT_WAITING_PER_SUBJECT {
            tracing::warn!(%tenant, of_tenant, of_subject, "a request's question refused: too many waiting for input");
            return Err(McpError::internal_error(
                format!(
                    "{of_tenant} requests of this tenant ({of_subject} of its subject) already \
                     wait for their client's input"
                ),
                None,
            ));
        }
        tracing::debug!(%tenant, request = %owner.request, keys = ?missing.keys(), "waiting for the client's input");
        let waiting = Arc::downgrade(self);
        let (expiring, expires) = (state.clone(), running.expires);
        let expiry = tokio::spawn(async move {
            tokio::time::sleep_until(expires).await;
            let Some(waiting) = waiting.upgrade() else {
                return;
            };
            let expired = waiting.held.lock().map(|mut h| h.remove(&expiring));
            if let Ok(Some(held)) = expired {
                tracing::info!(tenant = %held.owner.principal.tenant, request = %held.owner.request, "a request waited too long for its client's input: its call is dropped");
            }
        })
        .abort_handle();
        held.insert(
            state.clone(),
            Held {
                owner,
                session: running.session.clone(),
                running,
                asked,
                given,
                answers,
                expiry,
            },
        );
        Ok(Waited::Asks(InputRequiredResult::new(
            Some(missing),
            Some(state),
        )))
    }

    /// Drops every held call: the server is going, no retry can come (their ephemeral
    /// sessions end with them).
    pub(super) fn clear(&self) {
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|e| e.into_inner()));
        for h in held.values() {
            h.expiry.abort();
        }
        drop(held);
    }

    /// Takes the call held under `state` for `owner` (in the session `named`, when the
    /// retry names one); a call held for another stays.
    fn take(
        &self,
        state: &str,
        owner: &Owner,
        named: Option<&SessionId>,
    ) -> Result<Held, McpError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = held.get(state)
            && (&h.owner != owner || named.is_some_and(|named| named != &h.session))
        {
            tracing::info!(tenant = %owner.principal.tenant, request = %owner.request, held_for = %h.owner.request, "a requestState presented by another than its owner, or with another request");
            return Err(unknown_state());
        }
        let taken = held.remove(state).ok_or_else(unknown_state)?;
        taken.expiry.abort();
        Ok(taken)
    }
}

/// The error of a `requestState` that names no call this process holds for the request.
fn unknown_state() -> McpError {
    McpError::invalid_params(
        "requestState: no request of yours waits under it here (tampered with, used already, \
         expired after INPUT_WAIT, or given by another host): send the request again without it",
        None,
    )
}

/// Of `given`, the answers to `asked`: of a key asked, and of the kind asked for.
fn answering(asked: &InputRequests, given: &InputResponses) -> InputResponses {
    given
        .iter()
        .filter(|(key, answer)| {
            asked.get(*key).is_some_and(|request| {
                let answer = (*answer).clone();
                match request {
                    InputRequest::Elicitation(_) => {
                        serde_json::from_value::<ElicitResult>(answer).is_ok()
                    }
                    InputRequest::CreateMessage(_) => {
                        serde_json::from_value::<CreateMessageResult>(answer).is_ok()
                    }
                    InputRequest::ListRoots(_) => {
                        serde_json::from_value::<ListRootsResult>(answer).is_ok()
                    }
                    _ => false,
                }
            })
        })
        .map(|(key, answer)| (key.clone(), answer.clone()))
        .collect()
}

/// The answers to every key of `asked`, when `given` has them all; else both back.
fn answered(
    asked: InputRequests,
    given: InputResponses,
) -> Result<InputResponses, (InputRequests, InputResponses)> {
    if asked.keys().all(|key| given.contains_key(key)) {
        Ok(given)
    } else {
        Err((asked, given))
    }
}
