//! What the upstream servers serve beside tools, through hookhost: resources (list,
//! templates, read, subscribe), prompts (list, get), completions and logging.
//!
//! - **Names.** A prompt is served under its upstream's prefix, as its tools are
//!   (`NAME__PROMPT`, or its own name with `prefix = ""`; the first upstream in the
//!   config serves a name two would). A resource keeps the URI its upstream made (agents and tool results
//!   quote URIs, so a renamed URI would break them); a read goes to the only upstream that
//!   serves resources, else to the first that lists that URI, else to one whose template
//!   matches it. When two upstreams list the same URI, the first in the
//!   config serves it and the second's is not listed (a warning says so).
//! - **Tenants.** `[tenants.ID] resources` (URIs) and `prompts` (names as served) are
//!   allow-lists as `tools` is: what a tenant may not use is neither listed nor served.
//! - **Hooks.** A resource read and a prompt get run through the tenant's chain as calls
//!   named [`READ_RESOURCE`] (`{"uri": …}`) and [`GET_PROMPT`] (`{"name": …,
//!   "arguments": …}`): hooks see them as they see tool calls (audit records them; offload
//!   stores a 2 MB resource in the session's artifacts and the client gets the pointer and
//!   preview as the resource's text). Their output, as hooks see it, is the text contents
//!   joined, each binary one named by a line; when no hook changed it, the client gets what
//!   the upstream answered, unchanged.
//! - **Capabilities.** hookhost declares resources, prompts, completions and logging only
//!   when an upstream serving them is up when the client initializes.
//! - **Notices.** `notifications/resources/updated` reaches the sessions subscribed to
//!   the URI; list changes reach every session. Logging: `logging/setLevel` goes to every
//!   upstream that offers logging; an upstream's log lines go to the session whose request
//!   it is serving (see [`crate::tools::upstream`]).

// hookhost speaks MCP 2025-11-25, where logging and resources/subscribe are current; rmcp
// marks them deprecated by the 2026-07-28 draft.
#![allow(deprecated)]

use super::McpServer;
use super::waiting::{Owner, Waited};
use crate::abi::{CallContext, ToolCall, ToolDescriptor, ToolResult};
use crate::failure::Failure;
use crate::runtime::CallError;
use crate::sessions::Action;
use crate::sessions::{Caller, Principal, Session, SessionHolder};
use crate::tools::upstream::{CLIENT, Client, Running};
use crate::tools::{Callee, Tool};
use rmcp::model::{
    ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult, GetPromptRequest,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequiredResult,
    InputResponses, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    PromptMessage, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, ResourceContents, ResultType, Role, ServerCapabilities,
    ServerResult, SetLevelRequest, SetLevelRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The call name hooks see for a resource read.
pub const READ_RESOURCE: &str = "resources.read";
/// The call name hooks see for a prompt get.
pub const GET_PROMPT: &str = "prompts.get";

/// The capabilities the upstreams that are up add to hookhost's own.
pub(super) fn capabilities(upstreams: &[Arc<Running>]) -> ServerCapabilities {
    let offered: Vec<ServerCapabilities> =
        upstreams.iter().filter_map(|u| u.capabilities()).collect();
    let mut capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_tool_list_changed()
        .build();
    if offered.iter().any(|c| c.resources.is_some()) {
        let mut resources = rmcp::model::ResourcesCapability::default();
        resources.list_changed = Some(true);
        resources.subscribe = Some(offered.iter().any(|c| {
            c.resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true))
        }));
        capabilities.resources = Some(resources);
    }
    if offered.iter().any(|c| c.prompts.is_some()) {
        let mut prompts = rmcp::model::PromptsCapability::default();
        prompts.list_changed = Some(true);
        capabilities.prompts = Some(prompts);
    }
    if offered.iter().any(|c| c.completions.is_some()) {
        capabilities.completions = Some(Default::default());
    }
    if offered.iter().any(|c| c.logging.is_some()) {
        capabilities.logging = Some(Default::default());
    }
    capabilities
}

/// The resource URIs a client subscribed to, with the upstream of each. When the client
/// goes (its connection or MCP session ended), what it did not unsubscribe is
/// unsubscribed, so an upstream is not kept subscribed for no one.
#[derive(Default)]
pub(super) struct Subscriptions(Mutex<HashMap<String, Arc<Running>>>);

impl Subscriptions {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Running>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn contains(&self, uri: &str) -> bool {
        self.map().contains_key(uri)
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        let left = std::mem::take(&mut *self.map());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for (uri, upstream) in left {
            runtime.spawn(async move {
                if let Err(e) = upstream.subscription(&uri, false).await {
                    tracing::debug!(upstream = upstream.name(), %uri, error = %e.message, "unsubscribing a client that went failed");
                }
            });
        }
    }
}

/// Whether `uri` is one `template` (RFC 6570, the simple and reserved expansions MCP
/// servers use) can make.
fn template_matches(template: &str, uri: &str) -> bool {
    let mut rest = uri;
    let mut parts = template.split('{');
    let Some(first) = parts.next() else {
        return false;
    };
    let Some(after) = rest.strip_prefix(first) else {
        return false;
    };
    rest = after;
    for part in parts {
        let Some((expression, literal)) = part.split_once('}') else {
            return false;
        };
        let reserved = expression.starts_with('+') || expression.starts_with('#');
        // The variable takes what comes before the next literal (at its last place when
        // it is the end); a simple one takes no `/`.
        let end = if literal.is_empty() {
            rest.len()
        } else {
            match rest.find(literal) {
                Some(end) => end,
                None => return false,
            }
        };
        let value = &rest[..end];
        if !reserved && value.contains('/') {
            return false;
        }
        rest = &rest[end + literal.len()..];
    }
    rest.is_empty()
}

/// An upstream's resource read or prompt get as a call through the chain.
struct Forwarded {
    descriptor: ToolDescriptor,
    upstream: Arc<Running>,
    request: ClientRequest,
    /// What the upstream answered, and the text hooks saw of it.
    answered: Mutex<Option<(Result<ServerResult, McpError>, String)>>,
}

impl Forwarded {
    fn new(name: &str, upstream: Arc<Running>, request: ClientRequest) -> Forwarded {
        Forwarded {
            descriptor: ToolDescriptor {
                name: name.to_string(),
                description: String::new(),
                input_schema: r#"{"type":"object"}"#.into(),
            },
            upstream,
            request,
            answered: Mutex::new(None),
        }
    }

    /// Runs through `session`'s chain; returns the upstream's answer when no hook changed
    /// what it saw of it, else `Err` with the output the hooks left.
    async fn run(
        &self,
        server: &McpServer,
        session: &Session,
        arguments: serde_json::Value,
    ) -> Result<Result<ServerResult, String>, McpError> {
        let name = self.descriptor.name.clone();
        let called = server
            .runtime
            .call_as(session, &name, &arguments.to_string(), self)
            .await;
        let (result, _) = called.map_err(|e| match e {
            CallError::RateLimited(_) => super::refused(e),
            e => McpError::invalid_params(e.to_string(), None),
        })?;
        let answered = self
            .answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match answered {
            Some((answer, seen)) if seen == result.output => answer.map(Ok),
            _ if result.is_error => Err(McpError::internal_error(result.output, None)),
            _ => Ok(Err(result.output)),
        }
    }
}

impl SessionHolder for Forwarded {}

#[async_trait::async_trait]
impl Callee for Forwarded {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    async fn execute(
        &self,
        _caller: &Caller<'_>,
        _ctx: &CallContext,
        _call: &ToolCall,
    ) -> Result<ToolResult, Failure> {
        let answer = self.upstream.forward(self.request.clone()).await;
        let result = match &answer {
            Ok(ServerResult::ReadResourceResult(read)) => ToolResult {
                output: contents_text(&read.contents),
                is_error: false,
                media_type: None,
            },
            Ok(ServerResult::GetPromptResult(prompt)) => ToolResult {
                output: prompt_text(&prompt.messages),
                is_error: false,
                media_type: None,
            },
            Ok(_) => ToolResult::error("the upstream answered something else"),
            Err(e) => ToolResult::error(e.message.to_string()),
        };
        *self.answered.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((answer, result.output.clone()));
        Ok(result)
    }
}

impl Tool for Forwarded {}

/// The answer to a forwarded resource read or prompt get: the question asked of the
/// client; or the upstream's answer, passed on whole (`pick` takes it out and marks it
/// `resultType: complete`, which rmcp takes off for a 2025 client), whatever era the
/// upstream speaks; or, when a hook changed it, the hooks' output as `made` makes it.
fn settled<R, A: From<R> + From<InputRequiredResult>>(
    ran: Waited<Result<Result<ServerResult, String>, McpError>>,
    pick: impl FnOnce(ServerResult) -> Option<R>,
    made: impl FnOnce(String) -> R,
) -> Result<A, McpError> {
    match ran {
        Waited::Asks(asks) => Ok(asks.into()),
        Waited::Done(ran) => match ran? {
            Ok(answer) => pick(answer).map(A::from).ok_or_else(|| {
                McpError::internal_error("the upstream answered something else", None)
            }),
            Err(output) => Ok(made(output).into()),
        },
    }
}

/// Who sent `context`'s request over HTTP, as the gate authenticated it (none over stdio).
fn principal_of(context: &RequestContext<RoleServer>) -> Option<Principal> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>().cloned())
}

/// The client of `context`'s request, in `session`.
fn client_of(session: &Session, context: &RequestContext<RoleServer>) -> Client {
    let modern = super::is_2026(context);
    Client {
        peer: context.peer.clone(),
        tenant: session.tenant.to_string(),
        subject: principal_of(context).and_then(|principal| principal.subject),
        request: context.id.clone(),
        progress: context.meta.get_progress_token(),
        workdir: session.workdir.clone(),
        asks: !modern,
        asker: None,
        capabilities: context.client_capabilities().unwrap_or_default(),
        logs_from: match modern {
            true => context.meta.log_level(),
            false => Some(rmcp::model::LoggingLevel::Debug),
        },
    }
}

/// A resource's contents as hooks see them: text as it is, binary as a `data:` line (see
/// [`crate::tools::rich`]), so what reaches the model is what they judged.
fn contents_text(contents: &[ResourceContents]) -> String {
    contents
        .iter()
        .map(|c| match c {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            other => crate::tools::rich::contents(other),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A prompt's messages as hooks see them: `role: ` and the content's text, or its
/// rendering (see [`crate::tools::rich`]).
fn prompt_text(messages: &[PromptMessage]) -> String {
    messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            format!("{role}: {}", crate::tools::rich::render(&m.content))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl McpServer {
    /// Runs `work` as the request of `context`'s client: what an upstream sends that
    /// client meanwhile reaches it; an upstream's question for a client of MCP 2026-07-28
    /// is answered with an error (see [`asking_client`](Self::asking_client)).
    pub(super) async fn as_client<T>(
        &self,
        session: &Session,
        context: &RequestContext<RoleServer>,
        work: impl Future<Output = T>,
    ) -> T {
        CLIENT.scope(Some(client_of(session, context)), work).await
    }

    /// Runs `work` (a tool call, a resource read or a prompt get, named by `request`) as
    /// [`as_client`](Self::as_client) does, until the client cancels its request; but a
    /// client of MCP 2026-07-28 is asked an upstream's questions in the answer to its
    /// request (the ones its `responses` do not answer already), and `work` waits
    /// meanwhile for the retry that brings the answers (see [`super::waiting`] and
    /// [`resumed`](Self::resumed)).
    pub(super) async fn asking_client<T: Send + 'static>(
        &self,
        session: &Arc<Session>,
        context: &RequestContext<RoleServer>,
        request: String,
        responses: Option<InputResponses>,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<Waited<T>, McpError> {
        let stopped = self.stopped(context, request.clone());
        let client = client_of(session, context);
        if client.asks {
            return tokio::select! {
                done = CLIENT.scope(Some(client), work) => Ok(Waited::Done(done)),
                () = stopped => Err(McpError::internal_error("the call was cancelled", None)),
            };
        }
        let keep = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(super::http::ephemeral)
            .map(|keep| Box::new(keep) as Box<dyn std::any::Any + Send>);
        let begin = move |asker| {
            let client = Client {
                asker: Some(asker),
                ..client
            };
            Box::pin(CLIENT.scope(Some(client), work)) as _
        };
        let owner = self.owner(context, request);
        self.waiting
            .begin(owner, session.id.clone(), responses, begin, keep, stopped)
            .await
    }

    /// The retry of a request of MCP 2026-07-28 (named `request`) that was answered
    /// `input_required`: its call, held under `state`, goes on with the answers.
    pub(super) async fn resumed<T: Send + 'static>(
        &self,
        context: &RequestContext<RoleServer>,
        request: String,
        state: &str,
        responses: Option<InputResponses>,
    ) -> Result<Waited<T>, McpError> {
        let stopped = self.stopped(context, request.clone());
        // The session the retry names by its id, if any (one that names none, or `new`,
        // is given none: see `http/stateless.rs`).
        let named = self.session_for(context).ok().map(|s| s.id.clone());
        let owner = self.owner(context, request);
        let (runtime, principal) = (self.runtime.clone(), owner.principal.clone());
        let alive = |id| async move { runtime.sessions().open_for(&principal, &id).await.is_ok() };
        self.waiting
            .resume(owner, named.as_ref(), state, responses, alive, stopped)
            .await
    }

    /// Whoever sends `context`'s request (named `request`): its tenant, and the subject
    /// of its JWT.
    fn owner(&self, context: &RequestContext<RoleServer>, request: String) -> Owner {
        let principal =
            principal_of(context).unwrap_or_else(|| Principal::tenant(self.tenant_of(context)));
        Owner { principal, request }
    }

    /// `forwarded` run through `session`'s chain with `arguments` (the request `what` of
    /// `context`'s client, who may be asked: see [`asking_client`](Self::asking_client)).
    async fn forward_asking(
        &self,
        forwarded: Forwarded,
        session: &Arc<Session>,
        arguments: serde_json::Value,
        context: &RequestContext<RoleServer>,
        what: String,
        responses: Option<InputResponses>,
    ) -> Result<Waited<Result<Result<ServerResult, String>, McpError>>, McpError> {
        let (server, owned) = (self.clone(), session.clone());
        let work = async move { forwarded.run(&server, &owned, arguments).await };
        self.asking_client(session, context, what, responses, work)
            .await
    }

    /// The upstreams `session` uses that serve `capability`.
    async fn serving(
        &self,
        session: &Session,
        capability: impl Fn(&ServerCapabilities) -> bool,
    ) -> Vec<Arc<Running>> {
        let mut upstreams = self.runtime.upstreams_for(session).await;
        upstreams.retain(|u| u.capabilities().as_ref().is_some_and(&capability));
        upstreams
    }

    /// The session's upstreams that serve resources or prompts (`capability`) for a
    /// listing of them: none is a method hookhost does not have (-32601), as its
    /// capabilities say, not an empty list.
    async fn listing(
        &self,
        session: &Session,
        capability: impl Fn(&ServerCapabilities) -> bool,
        method: &str,
    ) -> Result<Vec<Arc<Running>>, McpError> {
        let upstreams = self.serving(session, capability).await;
        if upstreams.is_empty() {
            return Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("{method}: no upstream of this server serves it"),
                None,
            ));
        }
        Ok(upstreams)
    }

    pub(super) async fn list_upstream_resources(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let session = &*self.session_for(context)?;
        let upstreams = self
            .listing(session, |c| c.resources.is_some(), "resources/list")
            .await?;
        let mut groups = Vec::new();
        for upstream in &upstreams {
            groups.push((upstream.name(), upstream.resources().await?));
        }
        let tenants = self.runtime.tenants();
        let listed = crate::tools::listed(
            groups,
            |r| &r.uri,
            |uri| tenants.authorize(&session.tenant, Action::Read(uri)),
        );
        Ok(ListResourcesResult::with_all_items(listed))
    }

    pub(super) async fn list_upstream_templates(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let session = &*self.session_for(context)?;
        let mut listed = Vec::new();
        let upstreams = self
            .listing(
                session,
                |c| c.resources.is_some(),
                "resources/templates/list",
            )
            .await?;
        for upstream in upstreams {
            listed.extend(upstream.resource_templates().await?);
        }
        Ok(ListResourceTemplatesResult::with_all_items(listed))
    }

    /// The upstream that serves `uri` (see the module's doc).
    async fn resource_upstream(
        &self,
        session: &Session,
        uri: &str,
    ) -> Result<Arc<Running>, McpError> {
        let serving = self.serving(session, |c| c.resources.is_some()).await;
        // One upstream serving resources serves them all: no listing to ask.
        if let [only] = serving.as_slice() {
            return Ok(only.clone());
        }
        for upstream in &serving {
            if upstream.resources().await?.iter().any(|r| r.uri == uri) {
                return Ok(upstream.clone());
            }
        }
        for upstream in &serving {
            let templates = upstream.resource_templates().await?;
            if templates
                .iter()
                .any(|t| template_matches(&t.uri_template, uri))
            {
                return Ok(upstream.clone());
            }
        }
        Err(not_found(uri))
    }

    pub(super) async fn read_upstream_resource(
        &self,
        mut request: ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        let what = format!("resources/read {uri}");
        let responses = request.input_responses.take();
        let ran = match request.request_state.take() {
            Some(state) => self.resumed(context, what, &state, responses).await?,
            None => {
                let session = self.session_for(context)?;
                if !self
                    .runtime
                    .tenants()
                    .authorize(&session.tenant, Action::Read(&uri))
                {
                    return Err(not_found(&uri));
                }
                let upstream = self.resource_upstream(&session, &uri).await?;
                let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request));
                let forwarded = Forwarded::new(READ_RESOURCE, upstream, request);
                let arguments = serde_json::json!({ "uri": uri });
                self.forward_asking(forwarded, &session, arguments, context, what, responses)
                    .await?
            }
        };
        settled(
            ran,
            |answer| match answer {
                ServerResult::ReadResourceResult(mut read) => {
                    read.result_type = Some(ResultType::COMPLETE);
                    Some(read)
                }
                _ => None,
            },
            |output| ReadResourceResult::new(vec![ResourceContents::text(output, uri)]),
        )
    }

    /// `resources/subscribe` (or unsubscribe) of a 2025 session's client.
    pub(super) async fn subscribe_upstream(
        &self,
        uri: String,
        subscribe: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribe_in(&self.subscriptions, uri, subscribe, context)
            .await
    }

    /// Subscribes `uri` upstream for `context`'s client, kept in `subscriptions` (which
    /// unsubscribes what is left when dropped); or unsubscribes it.
    pub(super) async fn subscribe_in(
        &self,
        subscriptions: &Subscriptions,
        uri: String,
        subscribe: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let session = self.session_for(context)?;
        if !self
            .runtime
            .tenants()
            .authorize(&session.tenant, Action::Read(&uri))
        {
            return Err(not_found(&uri));
        }
        let upstream = self.resource_upstream(&session, &uri).await?;
        let changed = if subscribe {
            subscriptions
                .map()
                .insert(uri.clone(), upstream.clone())
                .is_none()
        } else {
            subscriptions.map().remove(&uri).is_some()
        };
        if changed {
            self.as_client(&session, context, upstream.subscription(&uri, subscribe))
                .await?;
        }
        Ok(())
    }

    /// The upstream and its own name of the prompt served as `name`: the first, in the
    /// config's order, that lists it.
    async fn prompt_upstream(
        &self,
        session: &Session,
        name: &str,
    ) -> Result<Option<(Arc<Running>, String)>, McpError> {
        let mut candidates = self.serving(session, |c| c.prompts.is_some()).await;
        candidates.retain(|u| name.starts_with(&u.prefix()));
        // One upstream whose prefix fits: it answers for the name (no listing to ask).
        if let [only] = candidates.as_slice() {
            let remote = &name[only.prefix().len()..];
            return Ok(Some((only.clone(), remote.to_string())));
        }
        for upstream in candidates {
            let remote = &name[upstream.prefix().len()..];
            if upstream.prompts().await?.iter().any(|p| p.name == remote) {
                return Ok(Some((upstream.clone(), remote.to_string())));
            }
        }
        Ok(None)
    }

    pub(super) async fn list_upstream_prompts(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let session = &*self.session_for(context)?;
        let upstreams = self
            .listing(session, |c| c.prompts.is_some(), "prompts/list")
            .await?;
        let mut groups = Vec::new();
        for upstream in &upstreams {
            let mut prompts = upstream.prompts().await?;
            for prompt in &mut prompts {
                prompt.name = format!("{}{}", upstream.prefix(), prompt.name);
            }
            groups.push((upstream.name(), prompts));
        }
        let tenants = self.runtime.tenants();
        let listed = crate::tools::listed(
            groups,
            |p| &p.name,
            |name| tenants.authorize(&session.tenant, Action::Prompt(name)),
        );
        Ok(ListPromptsResult::with_all_items(listed))
    }

    pub(super) async fn get_upstream_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let served = request.name.clone();
        let what = format!("prompts/get {served}");
        let responses = request.input_responses.take();
        let ran = match request.request_state.take() {
            Some(state) => self.resumed(context, what, &state, responses).await?,
            None => {
                let session = self.session_for(context)?;
                let unknown =
                    || McpError::invalid_params(format!("unknown prompt {served:?}"), None);
                if !self
                    .runtime
                    .tenants()
                    .authorize(&session.tenant, Action::Prompt(&served))
                {
                    return Err(unknown());
                }
                let (upstream, remote) = self
                    .prompt_upstream(&session, &served)
                    .await?
                    .ok_or_else(unknown)?;
                request.name = remote;
                let arguments =
                    serde_json::json!({ "name": served, "arguments": request.arguments });
                let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(request));
                let forwarded = Forwarded::new(GET_PROMPT, upstream, request);
                self.forward_asking(forwarded, &session, arguments, context, what, responses)
                    .await?
            }
        };
        settled(
            ran,
            |answer| match answer {
                ServerResult::GetPromptResult(mut prompt) => {
                    prompt.result_type = Some(ResultType::COMPLETE);
                    Some(prompt)
                }
                _ => None,
            },
            |output| GetPromptResult::new(vec![PromptMessage::new_text(Role::User, output)]),
        )
    }

    pub(super) async fn complete_upstream(
        &self,
        mut request: CompleteRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let session = self.session_for(context)?;
        let tenants = self.runtime.tenants();
        let upstream = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let found = if tenants.authorize(&session.tenant, Action::Prompt(&prompt.name)) {
                    self.prompt_upstream(&session, &prompt.name).await?
                } else {
                    None
                };
                let (upstream, remote) = found.ok_or_else(|| {
                    McpError::invalid_params(format!("unknown prompt {:?}", prompt.name), None)
                })?;
                prompt.name = remote;
                upstream
            }
            Reference::Resource(template) => {
                let mut found = None;
                for upstream in self.serving(&session, |c| c.resources.is_some()).await {
                    let templates = upstream.resource_templates().await?;
                    if templates.iter().any(|t| t.uri_template == template.uri) {
                        found = Some(upstream);
                        break;
                    }
                }
                found.ok_or_else(|| not_found(&template.uri))?
            }
            _ => {
                return Err(McpError::invalid_params(
                    "an unknown kind of reference",
                    None,
                ));
            }
        };
        if upstream
            .capabilities()
            .is_none_or(|c| c.completions.is_none())
        {
            return Ok(CompleteResult::default());
        }
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(request));
        match self
            .as_client(&session, context, upstream.forward(request))
            .await?
        {
            ServerResult::CompleteResult(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                Ok(result)
            }
            _ => Err(McpError::internal_error(
                "the upstream answered something else",
                None,
            )),
        }
    }

    pub(super) async fn set_upstream_level(
        &self,
        request: SetLevelRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let session = self.session_for(context)?;
        let serving = self.serving(&session, |c| c.logging.is_some()).await;
        if serving.is_empty() {
            return Err(McpError::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        }
        for upstream in serving {
            let request = ClientRequest::SetLevelRequest(SetLevelRequest::new(request.clone()));
            self.as_client(&session, context, upstream.forward(request))
                .await?;
        }
        Ok(())
    }
}

fn not_found(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!("Resource not found: {uri}"),
        Some(serde_json::json!({ "uri": uri })),
    )
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn templates_match_the_uris_they_make() {
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/7/data"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/7/x"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/a/b/data"
        ));
        assert!(template_matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(!template_matches("file:///{path}", "file:///a/b"));
        assert!(template_matches("plain://x", "plain://x"));
        assert!(!template_matches("plain://x", "plain://xy"));
    }
}
