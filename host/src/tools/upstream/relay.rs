//! What passes between an upstream and the MCP client whose request it is serving: the
//! upstream's progress and log notifications, relayed to that client in the order the
//! upstream sent them and before the answer, and its requests to the client
//! (`elicitation/create`, `sampling/createMessage`), forwarded to that client and answered
//! with what the client answered.
//!
//! Every request hookhost forwards upstream on behalf of a client (a tool call, a resource
//! read, a prompt, a completion, a log level) is *routed* from before it is sent until it
//! is answered: by the progress token hookhost sent with it, and by its request id. Which
//! routed request an upstream's message belongs to:
//! - progress: its token;
//! - a request over HTTP: the response stream it came on (rmcp marks it), so exact;
//! - a log line, or a request over stdio, where MCP carries no association: the request
//!   that began last, when all the requests the upstream is serving are one tenant's and
//!   one JWT subject's (the tenant is hookhost's boundary: its sessions share its files,
//!   audit and quota; a call held for a 2026 client's input counts as serving). When
//!   requests of several run at once on one upstream, a log line is dropped
//!   (logged at debug) and a request is refused with an error, so that nothing of one
//!   tenant reaches another; an upstream with `scope = "tenant"` or `"session"` never has
//!   that ambiguity.
//!
//! A client that did not declare elicitation (or sampling) is never asked: the upstream
//! gets the error MCP prescribes (`-32601`), never an answer made up by hookhost.
//!
//! An upstream of MCP 2026-07-28 asks within its answer instead (a multi-round-trip
//! request): a `tools/call`, `prompts/get` or `resources/read` answered `input_required`
//! has each of its input requests asked of the client as above, and is sent again with the
//! answers and the upstream's `requestState`, at most [`UPSTREAM_INPUT_ROUNDS`] times;
//! the client sees the requests, the hooks see one call with its final answer.
//!
//! A client whose own request is of MCP 2026-07-28 cannot be sent requests (that era has
//! no stream for them): it is asked as that era asks, in an `input_required` answer to its
//! own request, and answers by sending the request again. The questions, an upstream's of
//! either era, go to its [`Asker`]; `mcp::waiting` holds the call meanwhile, answers the
//! request, and hands the answers back when the client retries. The capabilities sent with
//! a request to an upstream of MCP 2026-07-28 are the client's (elicitation and sampling as
//! it declared them; roots as the operator allows), so that such an upstream asks only
//! what the client can answer.

// hookhost serves 2025-era clients, where logging, sampling and roots are current; rmcp
// marks them deprecated by 2026-07-28.
#![allow(deprecated)]

use crate::limits::{
    UPSTREAM_INPUT_ROUNDS, UPSTREAM_PROGRESS_QUEUE, UPSTREAM_PROGRESS_SETTLE,
    UPSTREAM_STATE_ONLY_PAUSE,
};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, ErrorCode, GetExtensions, Implementation, InputRequest, InputRequests,
    InputResponses, JsonRpcMessage, ListRootsResult, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, RequestMetaObject, Root,
    ServerNotification, ServerRequest, ServerResult,
};
use rmcp::service::{
    InboundStreamOrigin, OriginatingRequestId, Peer, PeerRequestOptions, RequestContext,
    RxJsonRpcMessage, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, RoleServer, ServiceError};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The MCP client a request forwarded upstream came from.
#[derive(Clone)]
pub struct Client {
    /// Its connection.
    pub peer: Peer<RoleServer>,
    /// Its hookhost session's tenant, and the subject of its JWT if it came with one:
    /// what an upstream sends is never guessed across them.
    pub tenant: String,
    pub subject: Option<String>,
    /// Its request, so that what hookhost sends it rides that request's stream.
    pub request: RequestId,
    /// The progress token it gave, if it asked for progress.
    pub progress: Option<ProgressToken>,
    /// Its session's working directory: its root, for an upstream allowed to ask.
    pub workdir: Option<std::path::PathBuf>,
    /// Whether it can be sent requests: a 2025-era session's client can; a request of MCP
    /// 2026-07-28 has no stream for them, and is asked through its `asker`.
    pub asks: bool,
    /// Where the questions for a client of MCP 2026-07-28 go (see the module's doc); none
    /// where its request cannot wait for them.
    pub asker: Option<Asker>,
    /// What it declared it handles: in its `initialize` (2025), or its request's `_meta`.
    pub capabilities: ClientCapabilities,
    /// The least severe of an upstream's log lines it gets: `Debug` (all) for a 2025-era
    /// session's client, which set its level with `logging/setLevel` (sent upstream); for
    /// a request of MCP 2026-07-28, the level its `_meta` names
    /// (`io.modelcontextprotocol/logLevel`), and none when it names none, as that
    /// revision requires.
    pub logs_from: Option<LoggingLevel>,
}

tokio::task_local! {
    /// The client whose request the code running in this task serves.
    pub static CLIENT: Option<Client>;
}

/// The client of the request running in this task, if any.
pub fn current_client() -> Option<Client> {
    CLIENT.try_with(Clone::clone).ok().flatten()
}

/// Questions for a client of MCP 2026-07-28, asked in the answer to its request: sent by
/// the relay, received by whatever holds the request (`mcp::waiting`). Unbounded, and
/// never full: each question waits for its answer, and a refusal is one per request.
#[derive(Clone)]
pub struct Asker {
    questions: mpsc::UnboundedSender<Question>,
    /// How long the client took to answer: not counted against the upstream's timeout (see
    /// [`within`]).
    waited: Arc<Mutex<Waited>>,
}

/// The time a client took to answer, in all, and since when it has questions unanswered.
#[derive(Default)]
struct Waited {
    total: Duration,
    unanswered: usize,
    since: Option<std::time::Instant>,
}

impl Waited {
    fn lock(waited: &Mutex<Waited>) -> std::sync::MutexGuard<'_, Waited> {
        waited.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The time waited so far, the wait going on included.
    fn so_far(&self) -> Duration {
        self.total + self.since.map_or(Duration::ZERO, |since| since.elapsed())
    }
}

/// What a call asks of a client of MCP 2026-07-28.
pub enum Question {
    /// Input requests, by the keys the client answers them by, and where the answers go.
    Input {
        requests: InputRequests,
        answers: oneshot::Sender<InputResponses>,
    },
    /// What the upstream asked needs a capability the client did not declare: its request
    /// fails with MCP's -32021, naming it.
    Undeclared(ClientCapabilities),
}

impl Asker {
    /// An asker, and the receiving end of its questions.
    pub fn new() -> (Asker, mpsc::UnboundedReceiver<Question>) {
        let (questions, receiver) = mpsc::unbounded_channel();
        let waited = Arc::default();
        (Asker { questions, waited }, receiver)
    }

    /// The client's answers to `requests`.
    async fn ask(&self, requests: InputRequests) -> Result<InputResponses, McpError> {
        let gone = || McpError::internal_error("the client's request is no longer waiting", None);
        let (answers, answered) = oneshot::channel();
        self.questions
            .send(Question::Input { requests, answers })
            .map_err(|_| gone())?;
        {
            let mut waited = Waited::lock(&self.waited);
            waited.unanswered += 1;
            waited.since.get_or_insert_with(std::time::Instant::now);
        }
        let answers = answered.await.map_err(|_| gone());
        let mut waited = Waited::lock(&self.waited);
        waited.unanswered -= 1;
        if waited.unanswered == 0
            && let Some(since) = waited.since.take()
        {
            waited.total += since.elapsed();
        }
        answers
    }

    /// Fails the client's request for a capability it did not declare.
    fn refuse(&self, needed: ClientCapabilities) {
        let _ = self.questions.send(Question::Undeclared(needed));
    }
}

/// `work`, given `limit` of time (an upstream's timeout) not counting the time the client of
/// this task took to answer questions asked in its request's answer: a person may take
/// minutes to answer, and the call is held meanwhile (`mcp::waiting` bounds that).
pub(super) async fn within<T>(
    limit: Duration,
    work: impl Future<Output = T>,
) -> Result<T, tokio::time::error::Elapsed> {
    let waited = current_client()
        .and_then(|client| client.asker)
        .map(|asker| asker.waited);
    let waited = || {
        waited
            .as_ref()
            .map_or(Duration::ZERO, |w| Waited::lock(w).so_far())
    };
    let started = tokio::time::Instant::now();
    tokio::pin!(work);
    loop {
        let before = waited();
        match tokio::time::timeout_at(started + limit + before, &mut work).await {
            Ok(done) => return Ok(done),
            Err(elapsed) if waited() == before => return Err(elapsed),
            Err(_) => {}
        }
    }
}

/// What an upstream tells every client, not one request's: a resource changed, or its
/// lists of resources or prompts did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    ResourceUpdated(String),
    ResourcesChanged,
    PromptsChanged,
}

/// An upstream connection's side of the relay (see the module's doc).
#[derive(Clone)]
pub(super) struct Relay {
    routes: Arc<Mutex<Routes>>,
    notices: tokio::sync::broadcast::Sender<Notice>,
    /// Whether the upstream may ask for the client's roots (`roots = true`).
    roots: bool,
    /// Told when the upstream says its tools changed: they are listed again.
    pub(super) relist: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct Routes {
    /// The routes, by their number (newest highest).
    routed: HashMap<u64, Route>,
    /// Token sent upstream → the route of the request that sent it.
    tokens: HashMap<ProgressToken, u64>,
    /// Request id sent upstream → the route of that request.
    ids: HashMap<RequestId, u64>,
    /// Progress that came before its request was routed (rmcp picks the token as it sends
    /// the request, so an upstream may report before [`Relay::route`] runs); at most
    /// [`UPSTREAM_PROGRESS_QUEUE`], oldest dropped first.
    early: VecDeque<ProgressNotificationParam>,
    /// The number of the next route.
    next: u64,
}

/// What is relayed to a client, in the order the upstream sent it.
enum Relayed {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
}

/// One forwarded request: its client, and the queue of what goes to that client.
struct Route {
    client: Client,
    queue: mpsc::Sender<Relayed>,
    /// How many are queued and not yet sent.
    unsent: Arc<watch::Sender<usize>>,
}

impl Route {
    /// Queues a message; dropped if the client is [`UPSTREAM_PROGRESS_QUEUE`] behind.
    fn push(&self, relayed: Relayed) {
        if self.queue.try_send(relayed).is_ok() {
            self.unsent.send_modify(|n| *n += 1);
        }
    }
}

impl Routes {
    /// The newest route of the one tenant the upstream is serving; `None` when it serves
    /// none, or several tenants at once. A request whose client is gone (its session ended
    /// while the upstream still works on it) counts for none.
    fn only_tenant(&self) -> Option<&Route> {
        // A call held for its client's input is live though the request that began it was
        // answered: its questions go through its asker, not that request's stream.
        let mut live = self
            .routed
            .iter()
            .filter(|(_, r)| r.client.asker.is_some() || !r.client.peer.is_transport_closed());
        let first = live.next()?;
        let mut newest = first;
        for route in live {
            if (&route.1.client.tenant, &route.1.client.subject)
                != (&first.1.client.tenant, &first.1.client.subject)
            {
                return None;
            }
            if route.0 > newest.0 {
                newest = route;
            }
        }
        Some(newest.1)
    }
}

impl Relay {
    pub(super) fn new(notices: tokio::sync::broadcast::Sender<Notice>, roots: bool) -> Self {
        Self {
            routes: Arc::default(),
            notices,
            roots,
            relist: Arc::default(),
        }
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Routes to `client` what the upstream sends while a request of it runs, until the
    /// guard drops: made before the request is sent (an upstream may ask or log before
    /// the sender hears its request went), then [`Routing::bind`]s to it.
    pub(super) fn route(&self, client: Client) -> Routing {
        let (queue, queued) = mpsc::channel(UPSTREAM_PROGRESS_QUEUE);
        let unsent = Arc::new(watch::Sender::new(0));
        tokio::spawn(forward(client.clone(), queued, unsent.clone()));
        let mut routes = self.routes();
        routes.next += 1;
        let number = routes.next;
        let route = Route {
            client,
            queue,
            unsent: unsent.clone(),
        };
        routes.routed.insert(number, route);
        Routing {
            relay: self.clone(),
            number,
            bound: None,
            unsent: unsent.subscribe(),
        }
    }

    /// Routes a notification read off the connection.
    fn notified(&self, notification: &ServerNotification) {
        let mut routes = self.routes();
        match notification {
            ServerNotification::ProgressNotification(n) => {
                let params = n.params.clone();
                let route = routes.tokens.get(&params.progress_token);
                match route.and_then(|n| routes.routed.get(n)) {
                    Some(route) => route.push(Relayed::Progress(params)),
                    None => {
                        if routes.early.len() == UPSTREAM_PROGRESS_QUEUE {
                            routes.early.pop_front();
                        }
                        routes.early.push_back(params);
                    }
                }
            }
            ServerNotification::LoggingMessageNotification(n) => match routes.only_tenant() {
                Some(route) => route.push(Relayed::Log(n.params.clone())),
                None => tracing::debug!("an upstream's log line no one tenant caused, dropped"),
            },
            ServerNotification::ResourceUpdatedNotification(n) => {
                let _ = self
                    .notices
                    .send(Notice::ResourceUpdated(n.params.uri.clone()));
            }
            ServerNotification::ResourceListChangedNotification(_) => {
                let _ = self.notices.send(Notice::ResourcesChanged);
            }
            ServerNotification::PromptListChangedNotification(_) => {
                let _ = self.notices.send(Notice::PromptsChanged);
            }
            ServerNotification::ToolListChangedNotification(_) => self.relist.notify_one(),
            _ => {}
        }
    }

    /// The client an upstream's request is for, when it declared the capability `what`
    /// (`declared` of its capabilities); else MCP's error for an undeclared capability.
    fn client_declaring(
        &self,
        context: &RequestContext<RoleClient>,
        what: &str,
    ) -> Result<Client, McpError> {
        declaring(self.client_for(context)?, what)
    }

    /// The session's working directory, as its one root, when the operator allows the
    /// upstream to ask (`roots = true`); else MCP's error for an undeclared capability.
    fn roots_of(&self, client: &Client) -> Result<ListRootsResult, McpError> {
        if !self.roots {
            return Err(undeclared("roots"));
        }
        let roots = client
            .workdir
            .iter()
            .filter_map(|dir| url::Url::from_directory_path(dir).ok())
            .map(|url| Root::new(url.to_string()))
            .collect();
        Ok(ListRootsResult::new(roots))
    }

    /// The answers of `client` to the input requests of an `input_required` answer, by
    /// their keys: roots answered here; the others asked of a 2025-era session's client one
    /// by one, or of a 2026 client all at once, under the upstream's keys.
    async fn fulfil(
        &self,
        client: Option<Client>,
        requests: InputRequests,
    ) -> Result<InputResponses, McpError> {
        let client = client.ok_or_else(|| {
            McpError::invalid_request(
                "the upstream asks for input, and no MCP client's request is there to ask",
                None,
            )
        })?;
        let mut responses = InputResponses::new();
        let mut asked = InputRequests::new();
        for (key, request) in requests {
            let (what, asked_now) = match &request {
                InputRequest::ListRoots(_) => {
                    let roots = serde_json::to_value(self.roots_of(&client)?);
                    let roots = roots.map_err(|e| McpError::internal_error(e.to_string(), None))?;
                    responses.insert(key, roots);
                    continue;
                }
                InputRequest::Elicitation(r) => {
                    ("elicitation", ServerRequest::ElicitRequest(r.clone()))
                }
                InputRequest::CreateMessage(r) => {
                    ("sampling", ServerRequest::CreateMessageRequest(r.clone()))
                }
                _ => {
                    return Err(McpError::invalid_params(
                        "the upstream asks for input of a kind hookhost does not know",
                        None,
                    ));
                }
            };
            let client = declaring(client.clone(), what)?;
            if client.asks {
                let answer = serde_json::to_value(ask(client, asked_now).await?)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                responses.insert(key, answer);
            } else {
                asked.insert(key, request);
            }
        }
        if let (false, Some(asker)) = (asked.is_empty(), &client.asker) {
            responses.extend(asker.ask(asked).await?);
        }
        Ok(responses)
    }

    /// The client an upstream's request is for (see the module's doc).
    fn client_for(&self, context: &RequestContext<RoleClient>) -> Result<Client, McpError> {
        let routes = self.routes();
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = context.extensions.get()
            && let Some(route) = routes.ids.get(id).and_then(|n| routes.routed.get(n))
        {
            return Ok(route.client.clone());
        }
        match routes.only_tenant() {
            Some(route) => Ok(route.client.clone()),
            None if routes.routed.is_empty() => Err(McpError::invalid_request(
                "hookhost forwards a server's requests only while it serves a client's request",
                None,
            )),
            None => Err(McpError::invalid_request(
                "hookhost cannot tell which of its clients this request is for: requests of \
                 several tenants run on this server at once (give it `scope = \"tenant\"`)",
                None,
            )),
        }
    }
}

/// Sends a request's progress and logs to its client in the order queued. A progress
/// notification that does not advance the progress is dropped (what the client sees only
/// increases, as MCP requires, whatever the upstream sends); so is progress the client did
/// not ask for.
async fn forward(
    client: Client,
    mut queued: mpsc::Receiver<Relayed>,
    unsent: Arc<watch::Sender<usize>>,
) {
    let mut last = None;
    while let Some(relayed) = queued.recv().await {
        match relayed {
            Relayed::Progress(params) => {
                if let Some(token) = &client.progress
                    && last.is_none_or(|last| params.progress > last)
                {
                    last = Some(params.progress);
                    let mut relayed =
                        ProgressNotificationParam::new(token.clone(), params.progress);
                    relayed.total = params.total;
                    relayed.message = params.message;
                    let _ = client.peer.notify_progress(relayed).await;
                }
            }
            Relayed::Log(params) => {
                if client
                    .logs_from
                    .is_some_and(|least| params.level as u8 >= least as u8)
                {
                    let _ = client.peer.notify_logging_message(params).await;
                }
            }
        }
        unsent.send_modify(|n| *n -= 1);
    }
}

/// A request being routed; dropped, its route goes (it was answered, or dropped).
pub(super) struct Routing {
    relay: Relay,
    number: u64,
    /// The request's id and progress token, once sent.
    bound: Option<(RequestId, ProgressToken)>,
    unsent: watch::Receiver<usize>,
}

impl Routing {
    /// Binds the route to the request sent as `id` with `token`; its progress that came
    /// early goes first.
    pub(super) fn bind(&mut self, id: RequestId, token: ProgressToken) {
        let mut routes = self.relay.routes();
        let early = std::mem::take(&mut routes.early);
        let (mine, others): (VecDeque<_>, VecDeque<_>) =
            early.into_iter().partition(|p| p.progress_token == token);
        routes.early = others;
        if let Some(route) = routes.routed.get(&self.number) {
            mine.into_iter()
                .for_each(|params| route.push(Relayed::Progress(params)));
        }
        routes.tokens.insert(token.clone(), self.number);
        routes.ids.insert(id.clone(), self.number);
        self.bound = Some((id, token));
    }

    /// Waits, at most [`UPSTREAM_PROGRESS_SETTLE`], until what the upstream sent before
    /// its answer has reached the client, so the client sees it before the answer.
    pub(super) async fn settle(mut self) {
        let drained = self.unsent.wait_for(|unsent| *unsent == 0);
        if tokio::time::timeout(UPSTREAM_PROGRESS_SETTLE, drained)
            .await
            .is_err()
        {
            tracing::debug!(
                route = self.number,
                "an upstream's progress still unsent at its answer"
            );
        }
    }
}

impl Drop for Routing {
    fn drop(&mut self) {
        let mut routes = self.relay.routes();
        routes.routed.remove(&self.number);
        if let Some((id, token)) = &self.bound {
            routes.tokens.remove(token);
            routes.ids.remove(id);
        }
    }
}

/// An upstream's connection, with its notifications routed as they are read: in the order
/// the upstream sent them and before the answer that follows them (rmcp would hand each to
/// a task of its own, and a fast upstream's answer, or its next notification, could
/// overtake it).
pub(super) struct Routed<T> {
    pub(super) inner: T,
    pub(super) relay: Relay,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Routed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(n) = &message {
            self.relay.notified(&n.notification);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// `client`, when it declared the capability `what` (`elicitation` or `sampling`) and can
/// be asked; else MCP's error for an undeclared capability, or one saying it cannot be
/// asked.
fn declaring(client: Client, what: &str) -> Result<Client, McpError> {
    if !client.asks && client.asker.is_none() {
        return Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "the client's request is of MCP 2026-07-28, which has no stream for a \
                 server's requests: hookhost cannot pass this {what} request on to it"
            ),
            None,
        ));
    }
    let mut needed = ClientCapabilities::default();
    let declared = match what {
        "elicitation" => {
            needed.elicitation = Some(Default::default());
            client.capabilities.elicitation.is_some()
        }
        _ => {
            needed.sampling = Some(Default::default());
            client.capabilities.sampling.is_some()
        }
    };
    if !declared {
        // A 2026 request fails for it (the upstream's question goes unanswered anyway).
        if let Some(asker) = &client.asker {
            asker.refuse(needed);
        }
        return Err(undeclared(what));
    }
    Ok(client)
}

/// The capabilities sent upstream with a request of `client`'s, to an upstream of MCP
/// 2026-07-28: elicitation and sampling as the client declared them, roots when the
/// operator lets the upstream ask.
fn narrowed(client: &Client, roots: bool) -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = client.capabilities.elicitation.clone();
    capabilities.sampling = client.capabilities.sampling.clone();
    if roots {
        capabilities.roots = Some(Default::default());
    }
    capabilities
}

/// The client's answer was not of the kind asked for.
fn answered_otherwise() -> McpError {
    McpError::internal_error("the client answered something else", None)
}

/// The error MCP prescribes for a request the client did not declare it handles.
fn undeclared(what: &str) -> McpError {
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("the client did not declare the {what} capability"),
        None,
    )
}

/// Sends `request` to `client` on the stream of its request, and returns its answer; a
/// client of MCP 2026-07-28 is asked in its request's answer instead (see [`Asker`]).
/// Runs in a task of its own: rmcp marks a request sent from a task that serves a request
/// with that request's id, and this task serves the upstream's, not the client's.
async fn ask(client: Client, mut request: ServerRequest) -> Result<ClientResult, McpError> {
    if !client.asks {
        return ask_in_answer(&client, request).await;
    }
    request
        .extensions_mut()
        .insert(OriginatingRequestId(client.request.clone()));
    let asked = tokio::spawn(async move {
        let handle = client
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        handle.await_response().await
    });
    match asked.await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(ServiceError::McpError(e))) => Err(e),
        Ok(Err(e)) => Err(McpError::internal_error(format!("the client: {e}"), None)),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

/// A 2025-era upstream's request, asked of a client of MCP 2026-07-28 as the one input
/// request of its request's answer, under the key `elicitation` or `sampling`.
async fn ask_in_answer(client: &Client, request: ServerRequest) -> Result<ClientResult, McpError> {
    let asker = client.asker.as_ref().ok_or_else(|| {
        McpError::internal_error("the client's request cannot wait for input", None)
    })?;
    let (key, input) = match request {
        ServerRequest::ElicitRequest(r) => ("elicitation", InputRequest::Elicitation(r)),
        ServerRequest::CreateMessageRequest(r) => ("sampling", InputRequest::CreateMessage(r)),
        _ => return Err(undeclared("this kind of request")),
    };
    let mut answers = asker
        .ask(InputRequests::from([(key.into(), input)]))
        .await?;
    let answer = answers
        .remove(key)
        .ok_or_else(|| McpError::internal_error("the client's answer is missing", None))?;
    let bad =
        |e: serde_json::Error| McpError::invalid_params(format!("the client's answer: {e}"), None);
    Ok(match key {
        "elicitation" => ClientResult::ElicitResult(serde_json::from_value(answer).map_err(bad)?),
        _ => ClientResult::CreateMessageResult(Box::new(
            serde_json::from_value(answer).map_err(bad)?,
        )),
    })
}

/// hookhost as an upstream's client: it names itself, offers `initialize` the newest
/// protocol version that has it (for a 2025-era server; the lifecycle asks a 2026 one
/// with `server/discover` first), and declares elicitation and sampling, which it
/// forwards to the client whose request the upstream serves.
impl ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::builder()
            .enable_sampling()
            .enable_elicitation()
            .build();
        if self.roots {
            capabilities.roots = Some(Default::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("hookhost", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let client = self.client_declaring(&context, "elicitation")?;
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match ask(client, request).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(answered_otherwise()),
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let client = self.client_declaring(&context, "sampling")?;
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match ask(client, request).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(answered_otherwise()),
        }
    }

    /// The session's working directory, as its one root, when the operator allows the
    /// upstream to ask (`roots = true`); else MCP's error for an undeclared capability.
    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        if !self.roots {
            return Err(undeclared("roots"));
        }
        self.roots_of(&self.client_for(&context)?)
    }
}

/// Sends `request` upstream on behalf of the client of this task (if any), routing what the
/// upstream sends meanwhile to that client, and returns the answer once what came before it
/// has reached the client.
pub(super) async fn request(
    peer: &Peer<RoleClient>,
    relay: &Relay,
    mut request: ClientRequest,
) -> Result<ServerResult, ServiceError> {
    let mut asked_rounds = 0;
    loop {
        let answer = match request_once(peer, relay, request.clone()).await {
            Ok(answer) => answer,
            Err(ServiceError::McpError(e)) => return Err(ServiceError::McpError(refused(e))),
            Err(e) => return Err(e),
        };
        let ServerResult::InputRequiredResult(asked) = answer else {
            return Ok(answer);
        };
        let requests = asked.input_requests.unwrap_or_default();
        let responses = if requests.is_empty() {
            // Only its state to send back: the upstream is still working. Not at once,
            // nothing asked of any client, and not counted as a question: the call's
            // timeout bounds these rounds.
            tokio::time::sleep(UPSTREAM_STATE_ONLY_PAUSE).await;
            InputResponses::new()
        } else {
            asked_rounds += 1;
            if asked_rounds > UPSTREAM_INPUT_ROUNDS {
                return Err(ServiceError::McpError(McpError::internal_error(
                    format!("the upstream asked for input more than {UPSTREAM_INPUT_ROUNDS} times"),
                    None,
                )));
            }
            relay
                .fulfil(current_client(), requests)
                .await
                .map_err(ServiceError::McpError)?
        };
        request = retried(request, responses, asked.request_state)?;
    }
}

/// An upstream's error, passed on: one saying the client lacks a capability (which the
/// upstream knows from the capabilities hookhost sent for it) fails a 2026 client's
/// request with the same error, as a question hookhost could not ask would.
fn refused(e: McpError) -> McpError {
    if e.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        && let Some(asker) = current_client().and_then(|client| client.asker)
    {
        let needed = e
            .data
            .as_ref()
            .and_then(|data| data.get("requiredCapabilities"))
            .and_then(|needed| serde_json::from_value(needed.clone()).ok())
            .unwrap_or_default();
        asker.refuse(needed);
    }
    e
}

/// `request` again, with the client's answers and the upstream's state of its
/// `input_required` answer; only the three requests that can be answered so can be retried.
fn retried(
    request: ClientRequest,
    responses: InputResponses,
    state: Option<String>,
) -> Result<ClientRequest, ServiceError> {
    let responses = (!responses.is_empty()).then_some(responses);
    let mut request = request;
    match &mut request {
        ClientRequest::CallToolRequest(r) => {
            (r.params.input_responses, r.params.request_state) = (responses, state);
        }
        ClientRequest::GetPromptRequest(r) => {
            (r.params.input_responses, r.params.request_state) = (responses, state);
        }
        ClientRequest::ReadResourceRequest(r) => {
            (r.params.input_responses, r.params.request_state) = (responses, state);
        }
        _ => return Err(ServiceError::UnexpectedResponse),
    }
    Ok(request)
}

/// One round of [`request`].
async fn request_once(
    peer: &Peer<RoleClient>,
    relay: &Relay,
    request: ClientRequest,
) -> Result<ServerResult, ServiceError> {
    let client = current_client();
    let mut options = PeerRequestOptions::no_options();
    if let Some(client) = &client
        && peer.peer_info().is_some_and(|info| {
            info.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
        })
    {
        let mut meta = RequestMetaObject::default();
        meta.set_client_capabilities(narrowed(client, relay.roots));
        options = options.with_meta(meta);
    }
    let mut routing = client.map(|client| relay.route(client));
    let handle = peer.send_request_with_option(request, options).await?;
    if let Some(routing) = &mut routing {
        routing.bind(handle.id.clone(), handle.progress_token.clone());
    }
    let response = handle.await_response().await?;
    if let Some(routing) = routing {
        routing.settle().await;
    }
    Ok(response)
}
