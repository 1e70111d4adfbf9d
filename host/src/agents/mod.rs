//! hookhost's chain as the hook runtime of coding agents that run their own tools
//! (`hookhost hook AGENT EVENT`): the agent starts hookhost around each tool call with
//! its hook JSON on stdin, and reads a decision from stdout.
//!
//! - **Session**: the agent's session id names a hookhost session of the tenant, made on
//!   first use with the agent's working directory as its workdir (so `/workspace` is the
//!   user's project). At the agent's session end it ends but keeps its files, for the
//!   agent to resume it, until `session gc` collects it (`[agents] keep_artifacts`); a
//!   cleared conversation's is deleted at once.
//! - **Pre-tool**: every layer's `before-execute` that wraps the tool, outermost first. A
//!   refusal, or a `closed` layer's failure, is the agent's deny; rewritten arguments are
//!   its updated input. What the layers passed inward (each layer's call, the context
//!   values) is kept per call for the post-tool event, in another process.
//! - **Post-tool**: the agent's tool response becomes a tool result
//!   ([`tools::result`]), every layer's `after-execute` runs on it, innermost first, and a
//!   replaced output goes back in the shape the agent accepts ([`protocol`]). An offload
//!   reference names the file's host path and how to page it with the agent's own tools.
//! - Tools keep the agent's names, with hookhost's canonical ones as aliases
//!   ([`tools::canonical`]): a layer's `tools = ["bash"]` wraps every agent's shell tool.

pub mod daemon;
pub mod doctor;
pub mod install;
pub mod invocation;
pub mod protocol;
pub mod tools;

pub use daemon::{Daemon, EXIT_HEADER, Forward, Offered, STDERR_HEADER, hook_url};
pub use invocation::HookCommand;

use crate::abi::{CallContext, ToolCall, ToolResult};
use crate::chain::{FailurePolicy, HookChain};
use crate::ids::{SessionId, TenantId};
use crate::limits::MAX_HOOK_INPUT_BYTES;
use crate::mounts::CommitAt;
use crate::runtime::{Rate, Runtime};
use crate::sessions::{Caller, Principal, Session, hook_calls_dir};
use crate::trace::CallTrace;
use protocol::{AgentCall, Answer, Decision, HookInput, Options};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The agents whose hook protocols hookhost speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
    Copilot,
}

impl Agent {
    /// The name on hookhost's command line.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Cursor => "cursor",
            Agent::Copilot => "copilot",
        }
    }

    /// The product's name.
    pub fn title(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex CLI",
            Agent::Gemini => "Gemini CLI",
            Agent::Cursor => "Cursor",
            Agent::Copilot => "Copilot CLI",
        }
    }

    fn session_field(self) -> &'static str {
        match self {
            Agent::Cursor => "conversation_id",
            Agent::Copilot => "sessionId or cwd",
            _ => "session_id",
        }
    }

    /// The agent's own name of `event`, as its hook settings spell it (`None`: the agent
    /// has no such event).
    pub fn event_name(self, event: Event) -> Option<&'static str> {
        Some(match (self, event) {
            (Agent::ClaudeCode | Agent::Codex, Event::PreTool) => "PreToolUse",
            (Agent::ClaudeCode | Agent::Codex, Event::PostTool) => "PostToolUse",
            // Claude Code tells a failed tool apart; the others send their post-tool
            // event for it, the failure in its response.
            (Agent::ClaudeCode, Event::PostToolFailure) => "PostToolUseFailure",
            (_, Event::PostToolFailure) => return None,
            (Agent::ClaudeCode | Agent::Codex | Agent::Gemini, Event::SessionStart) => {
                "SessionStart"
            }
            (Agent::ClaudeCode | Agent::Gemini, Event::SessionEnd) => "SessionEnd",
            (Agent::Codex, Event::SessionEnd) => return None,
            (Agent::Gemini, Event::PreTool) => "BeforeTool",
            (Agent::Gemini, Event::PostTool) => "AfterTool",
            (Agent::Cursor | Agent::Copilot, Event::PreTool) => "preToolUse",
            (Agent::Cursor | Agent::Copilot, Event::PostTool) => "postToolUse",
            (Agent::Cursor | Agent::Copilot, Event::SessionStart) => "sessionStart",
            (Agent::Cursor | Agent::Copilot, Event::SessionEnd) => "sessionEnd",
            (Agent::ClaudeCode | Agent::Codex, Event::TurnEnd) => "Stop",
            (Agent::Gemini, Event::TurnEnd) => "AfterAgent",
            (Agent::Cursor, Event::TurnEnd) => "stop",
            (Agent::Copilot, Event::TurnEnd) => "agentStop",
        })
    }
}

/// The events hookhost answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    PreTool,
    PostTool,
    /// The tool failed: what it said of the failure is its output, an error.
    PostToolFailure,
    SessionStart,
    SessionEnd,
    /// The agent finished answering a prompt: its turn's end, where persistent
    /// directories with `commit = "turn"` are published.
    TurnEnd,
}

impl Event {
    pub const ALL: [Event; 6] = [
        Event::PreTool,
        Event::PostTool,
        Event::PostToolFailure,
        Event::SessionStart,
        Event::SessionEnd,
        Event::TurnEnd,
    ];

    /// An event by hookhost's name (`pre-tool`) or any agent's (`PreToolUse`,
    /// `pre-tool-use`, `BeforeTool`, `preToolUse`), case and `-`/`_` aside.
    pub fn parse(name: &str) -> Option<Event> {
        let folded: String = name
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .flat_map(char::to_lowercase)
            .collect();
        Some(match folded.as_str() {
            "pretool" | "pretooluse" | "beforetool" => Event::PreTool,
            "posttool" | "posttooluse" | "aftertool" => Event::PostTool,
            "posttoolfailure" | "posttoolusefailure" => Event::PostToolFailure,
            "sessionstart" => Event::SessionStart,
            "sessionend" => Event::SessionEnd,
            "turnend" | "stop" | "afteragent" | "agentstop" => Event::TurnEnd,
            _ => return None,
        })
    }

    /// Whether it is an event of one tool call (a matcher in the agent's settings picks
    /// the tools it is sent for).
    pub fn is_tool(self) -> bool {
        matches!(
            self,
            Event::PreTool | Event::PostTool | Event::PostToolFailure
        )
    }

    /// Whether it comes after the agent ran its tool.
    pub fn is_post_tool(self) -> bool {
        matches!(self, Event::PostTool | Event::PostToolFailure)
    }

    /// hookhost's name.
    pub fn name(self) -> &'static str {
        match self {
            Event::PreTool => "pre-tool",
            Event::PostTool => "post-tool",
            Event::PostToolFailure => "post-tool-failure",
            Event::SessionStart => "session-start",
            Event::SessionEnd => "session-end",
            Event::TurnEnd => "turn-end",
        }
    }
}

/// How `hookhost hook` runs.
#[derive(Debug, Clone)]
pub struct HookSettings {
    pub tenant: TenantId,
    /// The subject of the JWT the hook endpoint was called with, if it was: the agent's
    /// session is then that subject's alone (see [`crate::sessions::Principal`]).
    pub subject: Option<String>,
    pub options: Options,
    /// Whether the agent's `cwd` becomes a new session's working directory (`/workspace`
    /// is then that directory). True for the command form, which the agent runs as its
    /// user; a daemon serving tenants takes no directory from a request (a tenant could
    /// name any directory of the server's user), as MCP clients choose none.
    pub trust_cwd: bool,
    /// The agent's tools a `closed` layer wrapped when the hooks were installed
    /// (`--closed-tools`): what is denied when hookhost cannot run the chain at all (its
    /// config broken, a component missing), since the chain itself cannot say then.
    pub closed_tools: Option<crate::ids::ToolMatch>,
}

/// What a pre-tool event leaves for the call's post-tool event: each layer the call
/// entered with the call as it passed it inward, and the context values.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    entered: Vec<(String, String, String)>,
    values: Vec<(String, String)>,
}

/// `hookhost hook AGENT EVENT`: answers the agent's input `bytes` (read by
/// [`daemon::read_stdin`]) within `deadline`: through the URL daemon of `forward` when it
/// answers (see [`daemon`]; the socket is asked before, by [`Forward::offer`]), else with
/// the chain of the runtime `start` makes. Never fails: what goes wrong is the agent's
/// non-blocking error, or, past the deadline, the answer
/// [`crate::limits::DEFAULT_HOOK_DEADLINE`] describes.
pub async fn answer_hook<F, R>(
    agent: Agent,
    event: Event,
    settings: &HookSettings,
    deadline: Duration,
    bytes: &[u8],
    forward: Option<&Forward>,
    start: F,
) -> Answer
where
    F: FnOnce() -> R,
    R: Future<Output = anyhow::Result<Runtime>>,
{
    let started = Instant::now();
    if let Some(forward) = forward
        && let Some(answer) = forward.ask_url(agent, event, bytes, deadline).await
    {
        return answer;
    }
    let left = deadline.saturating_sub(started.elapsed());
    answer(agent, event, settings, left, bytes, start).await
}

/// Answers the hook input `bytes` with the chain of the runtime `start` gives, within
/// `deadline` (see [`answer_hook`]); what `serve --http` answers at
/// `POST /hooks/AGENT/EVENT`.
pub async fn answer<F, R, T>(
    agent: Agent,
    event: Event,
    settings: &HookSettings,
    deadline: Duration,
    bytes: &[u8],
    start: F,
) -> Answer
where
    F: FnOnce() -> R,
    R: Future<Output = anyhow::Result<T>>,
    T: std::borrow::Borrow<Runtime>,
{
    if bytes.len() as u64 > MAX_HOOK_INPUT_BYTES {
        return protocol::unreadable(
            agent,
            &format!("the hook input is larger than {MAX_HOOK_INPUT_BYTES} bytes"),
        );
    }
    let input = match protocol::parse(agent, event, bytes) {
        Ok(input) => input,
        Err(why) => return protocol::unreadable(agent, &why),
    };
    let tool = input.tool.as_ref().map(|t| t.name.clone());
    let mut runtime = None;
    let answered = tokio::time::timeout(deadline, async {
        let started = start().await?;
        let runtime: &Runtime = runtime.insert(started).borrow();
        handle(runtime, agent, event, input, settings).await
    })
    .await;
    let why = match answered {
        Ok(Ok(answer)) => return answer,
        Ok(Err(e)) => crate::failure::error_line(e.as_ref()),
        Err(_) => format!(
            "the chain did not answer within {} ms",
            deadline.as_millis()
        ),
    };
    match (&runtime, &tool) {
        (Some(runtime), Some(tool)) => {
            let closed = closed_for(runtime.borrow(), &settings.tenant, agent, tool);
            unanswered(agent, event, Some(tool), closed, settings, &why)
        }
        // Not started: what the hooks' installation said.
        _ => unanswered_input(agent, event, bytes, settings, &why),
    }
}

/// The answer to the hook input `bytes` when the chain could not run for it (`why`): as
/// [`unanswered`], the tools a `closed` layer wraps being those the hooks' installation
/// named (`--closed-tools`).
pub fn unanswered_input(
    agent: Agent,
    event: Event,
    bytes: &[u8],
    settings: &HookSettings,
    why: &str,
) -> Answer {
    let input = protocol::parse(agent, event, bytes).ok();
    let tool = input
        .as_ref()
        .and_then(|i| i.tool.as_ref())
        .map(|t| t.name.as_str());
    let closed = tool.is_some_and(|tool| {
        let closed = settings.closed_tools.as_ref();
        closed.is_some_and(|closed| closed.matches(tool))
    });
    unanswered(agent, event, tool, closed, settings, why)
}

/// The answer to an event the chain could not run for (`why`): a pre-tool event of a
/// tool that a `closed` layer wraps is denied, with `why` for the user; any other is the
/// agent's non-blocking error (the call goes on as without hookhost).
fn unanswered(
    agent: Agent,
    event: Event,
    tool: Option<&str>,
    closed: bool,
    settings: &HookSettings,
    why: &str,
) -> Answer {
    if event != Event::PreTool || !closed {
        return protocol::unreadable(agent, why);
    }
    let mut answer = protocol::answer(
        agent,
        event,
        tool.unwrap_or_default(),
        Decision::Deny {
            reason: format!("call refused: {why}, and a `closed` hook wraps this tool"),
        },
        settings.options,
    );
    answer.stderr = Some(format!("hookhost hook {}: {why}", agent.name()));
    answer
}

/// Answers `event` for `input`, running the chain of `runtime`.
///
/// # Errors
///
/// When the session cannot be opened or made (the answer is then the agent's
/// non-blocking error, see [`protocol::unreadable`]).
pub async fn handle(
    runtime: &Runtime,
    agent: Agent,
    event: Event,
    input: HookInput,
    settings: &HookSettings,
) -> anyhow::Result<Answer> {
    let nothing = || protocol::answer(agent, event, "", Decision::Pass, settings.options);
    let id = SessionId::new(session_id(&input.session))?;
    let sessions = runtime.sessions();
    let principal = Principal {
        tenant: settings.tenant.clone(),
        subject: settings.subject.clone(),
    };
    // Another subject's session is none of this one's: not ended, not committed (a
    // turn's end and a tool's event find it by `open_for`, which refuses it).
    if event == Event::SessionEnd {
        match sessions.record(&settings.tenant, &id).await {
            Ok(record) if !principal.may_use(&record) => return Ok(nothing()),
            Ok(_) | Err(crate::sessions::SessionError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // A conversation the user cleared is gone; any other end may be resumed
        // (`claude --resume`), so the session's files are kept for it (see
        // `Sessions::close`).
        let ended = match input.reason.as_deref() {
            Some("clear") => sessions.delete(&settings.tenant, &id).await,
            _ => sessions.close(&settings.tenant, &id).await,
        };
        match ended {
            Ok(()) | Err(crate::sessions::SessionError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(nothing());
    }
    if event == Event::TurnEnd {
        // The turn's changes to persistent directories are published; one that cannot be
        // (a conflict) is the agent's non-blocking error, which the user sees, and stays in
        // the session's checkout.
        let session = match sessions.open_for(&principal, &id).await {
            Ok(session) => session,
            Err(crate::sessions::SessionError::NotFound { .. }) => return Ok(nothing()),
            Err(e) => return Err(e.into()),
        };
        return Ok(
            match runtime.commit(&session, Some(CommitAt::Turn), None).await {
                Ok(_) => nothing(),
                Err(e) => protocol::unreadable(agent, &e.to_string()),
            },
        );
    }
    let workdir = input.cwd.as_deref().filter(|_| settings.trust_cwd);
    let session = sessions.open_or_create(&principal, &id, workdir).await?;
    let Some(call) = input.tool else {
        return Ok(nothing());
    };
    // Every call passes the runtime's one gate: a pre-tool event starts a call; a
    // post-tool event ends the call its pre-tool event admitted (the tool ran meanwhile,
    // so the rate cannot stop it), or, when none ran, is a call of its own.
    let rate = match event {
        _ if event.is_post_tool()
            && pending_file(runtime.data_root(), &session, &call.id).exists() =>
        {
            Rate::Admitted
        }
        _ => Rate::Counted,
    };
    let admitted = match runtime.admit(&session, &call.name, rate).await {
        Ok(admitted) => admitted,
        Err(refused) if event == Event::PreTool => {
            let reason = format!("hookhost refused the call: {refused}");
            let refusal = Decision::Deny { reason };
            let options = settings.options;
            return Ok(protocol::answer(agent, event, &call.name, refusal, options));
        }
        Err(refused) => return Ok(protocol::unreadable(agent, &refused.to_string())),
    };
    let canonical = tools::canonical(agent, &call.name);
    let tool_call = ToolCall {
        id: call.id.clone(),
        name: canonical.unwrap_or(&call.name).to_string(),
        arguments: call.input.to_string(),
    };
    // Its persistent directories the hooks may reach loaded, and brought up to what other
    // sessions committed; the agent runs the tool, so no tool's mounts are readied.
    let caller = admitted.caller(&session);
    let chain = admitted.chain().clone();
    let granted: Vec<&str> = chain
        .grants_around(&tool_call.name)
        .map(|(p, _)| p)
        .collect();
    runtime
        .prepare(&session, |path| granted.contains(&path), caller.requests)
        .await?;
    let alias = canonical.map(|_| call.name.as_str());
    let ctx = CallContext {
        session_id: session.id.to_string(),
        tenant_id: session.tenant.to_string(),
        values: Vec::new(),
    };
    let traced_name = tool_call.name.clone();
    let trace = runtime.tracer().begin(&caller, &call.id, &traced_name);
    let mut turn = Turn {
        runtime,
        agent,
        caller,
        chain,
        tool_call,
        canonical,
        alias,
        ctx,
        started: Instant::now(),
    };
    let decision = match event {
        Event::PreTool => turn.pre_tool(trace).await,
        Event::PostTool | Event::PostToolFailure => turn.post_tool(event, &call, trace).await?,
        Event::SessionStart | Event::SessionEnd | Event::TurnEnd => Decision::Pass,
    };
    Ok(protocol::answer(
        agent,
        event,
        &call.name,
        decision,
        settings.options,
    ))
}

/// One tool event of an agent's session, on its way through the chain.
struct Turn<'r> {
    runtime: &'r Runtime,
    agent: Agent,
    /// The session, with its tenant as the config in effect when the event was admitted.
    caller: Caller<'r>,
    chain: std::sync::Arc<HookChain>,
    /// The call as the chain sees it: the canonical tool's name when there is one.
    tool_call: ToolCall,
    /// The name of the hookhost tool the agent's tool is, if any.
    canonical: Option<&'static str>,
    /// The agent's own name for it, when it has a canonical one.
    alias: Option<&'r str>,
    ctx: CallContext,
    started: Instant,
}

impl Turn<'_> {
    /// Before the agent runs its tool: the `before-execute` phases, kept for the post-tool
    /// event, or the refusal.
    async fn pre_tool(&mut self, mut trace: CallTrace<'_>) -> Decision {
        let original = self.tool_call.arguments.clone();
        let passage = self
            .chain
            .enter(
                &self.caller,
                &mut self.ctx,
                &mut self.tool_call,
                self.alias,
                &mut trace,
            )
            .await;
        let decision = match &passage.refusal {
            Some(refused) => Decision::Deny {
                reason: refused.output.clone(),
            },
            None if self.tool_call.arguments != original => {
                match serde_json::from_str(&self.tool_call.arguments) {
                    Ok(input) => Decision::Rewrite { input },
                    Err(_) => Decision::Pass,
                }
            }
            None => Decision::Pass,
        };
        if passage.refusal.is_none() {
            let pending = Pending {
                entered: passage
                    .entered()
                    .map(|(layer, c)| (layer.to_string(), c.name.clone(), c.arguments.clone()))
                    .collect(),
                values: self.ctx.values.clone(),
            };
            save_pending(
                self.runtime.data_root(),
                self.caller.session,
                &self.tool_call.id,
                &pending,
            );
        }
        // The `after-execute` of the layers entered runs at the post-tool event; a
        // refused call has none, so they run now, as in hookhost's own calls.
        if let Some(refused) = passage.refusal.clone() {
            let mut passage = passage;
            passage.refusal = None;
            self.chain
                .leave(&self.caller, &self.ctx, passage, refused, &mut trace)
                .await;
        }
        self.runtime.trace_loads(self.caller.session, &mut trace);
        trace.finish("pre-tool", 0, self.started.elapsed());
        decision
    }

    /// After the agent ran its tool: the `after-execute` phases of the layers its pre-tool
    /// event entered (or of every layer that wraps the tool, when there was none).
    async fn post_tool(
        &mut self,
        event: Event,
        call: &AgentCall,
        mut trace: CallTrace<'_>,
    ) -> anyhow::Result<Decision> {
        let response = call.response.as_ref().unwrap_or(&serde_json::Value::Null);
        let result = match (self.agent, call.name.as_str()) {
            (Agent::ClaudeCode, "TaskCreate" | "TaskUpdate") => {
                let dir = hook_calls_dir(
                    self.runtime.data_root(),
                    &self.caller.session.tenant,
                    &self.caller.session.id,
                );
                let todos = tools::claude_tasks(&dir, &call.name, &call.input, response)?;
                ToolResult::text(serde_json::json!({ "todos": todos }).to_string())
            }
            _ => tools::result(self.canonical, &call.input, response),
        };
        let result = ToolResult {
            is_error: result.is_error || event == Event::PostToolFailure,
            ..result
        };
        let pending = take_pending(self.runtime.data_root(), self.caller.session, &call.id);
        let entered: Vec<(String, ToolCall)> = match pending {
            Some(pending) => {
                self.ctx.values = pending.values;
                pending
                    .entered
                    .into_iter()
                    .map(|(layer, name, arguments)| {
                        let call = ToolCall {
                            id: call.id.clone(),
                            name,
                            arguments,
                        };
                        (layer, call)
                    })
                    .collect()
            }
            // No pre-tool event ran for this call: every layer that wraps the tool
            // gets its `after-execute` with the call as the agent made it.
            None => self
                .chain
                .layers()
                .iter()
                .filter(|l| l.wraps(&self.tool_call.name, self.alias))
                .map(|l| (l.name.clone(), self.tool_call.clone()))
                .collect(),
        };
        let passage = self.chain.resume(&self.caller, entered, result.is_error);
        let original = result.output.clone();
        let (result, outcome) = self
            .chain
            .leave(&self.caller, &self.ctx, passage, result, &mut trace)
            .await;
        // A checkout committed after every call that cannot be published stays as it is;
        // the agent's tool already ran, and the next commit tries again.
        if let Err(e) = self
            .runtime
            .after_call(self.caller.session, &mut trace)
            .await
        {
            tracing::warn!(session = %self.caller.session.id, error = %e, "not published");
        }
        trace.finish(outcome, result.output.len(), self.started.elapsed());
        if result.output == original {
            return Ok(Decision::Pass);
        }
        let offloaded = offloaded_file(self.caller.session, &result.output);
        if let Some((_, file)) = &offloaded
            && !protocol::replaces(self.agent, event, &call.name)
        {
            // The agent would show the model the whole output and the reference beside
            // it: the output alone costs it less.
            if let Err(e) = std::fs::remove_file(file) {
                tracing::warn!(file = %file.display(), error = %e, "an offloaded output the agent cannot use was not removed");
            }
            return Ok(Decision::Pass);
        }
        Ok(Decision::Replace {
            output: match offloaded {
                Some((virtual_path, file)) => {
                    for_agent(self.agent, &result.output, &virtual_path, &file)
                }
                None => result.output,
            },
        })
    }
}

/// Whether a layer that wraps `tool` (an agent's, with its canonical alias) refuses calls
/// when it fails: then a pre-tool event hookhost could not answer is a denial.
pub fn closed_for(runtime: &Runtime, tenant: &TenantId, agent: Agent, tool: &str) -> bool {
    let canonical = tools::canonical(agent, tool);
    runtime.chain(tenant).layers().iter().any(|l| {
        l.on_failure == FailurePolicy::Closed
            && l.wraps(canonical.unwrap_or(tool), canonical.map(|_| tool))
    })
}

/// An agent's session id as a hookhost session id: as it is when hookhost accepts it,
/// else a hash of it.
fn session_id(agent_id: &str) -> String {
    if SessionId::new(agent_id).is_ok() {
        agent_id.to_string()
    } else {
        protocol::short_hash(agent_id)
    }
}

/// The file an offload reference names, as the model saw its path and as it is on the
/// host, when `output` is one and its file is in one of `session`'s mounts.
fn offloaded_file(session: &Session, output: &str) -> Option<(String, PathBuf)> {
    let virtual_path = hookhost_formats::offloaded_path(output)?;
    session.mounts().iter().find_map(|m| {
        let rest = virtual_path.strip_prefix(&m.virtual_path)?;
        let file = m.host.join(rest.trim_start_matches('/'));
        Some((virtual_path.to_string(), file))
    })
}

/// An offload `reference` as the agent's tools can follow it: the file's host path, and
/// how to page it with the agent's reader in pages under the threshold it was offloaded
/// over (Claude Code's `Read` by lines; a shell, its path quoted, for the other agents and
/// for lines too long to page by lines).
fn for_agent(agent: Agent, reference: &str, virtual_path: &str, file: &Path) -> String {
    use hookhost_formats::Page;
    let host = file.to_string_lossy();
    let page = Page::of_reference(reference).unwrap_or(Page::Lines(hookhost_formats::PAGE_LINES));
    let hint = match (agent, page) {
        (Agent::ClaudeCode, Page::Lines(lines)) => {
            hookhost_formats::line_read_hint("Read", "file_path", &host, lines)
        }
        _ => hookhost_formats::shell_read_hint(&host, page),
    };
    hookhost_formats::for_agent(reference, virtual_path, &host, &hint)
}

fn pending_file(data: &Path, session: &Session, call: &str) -> PathBuf {
    hook_calls_dir(data, &session.tenant, &session.id)
        .join(format!("{}.json", protocol::short_hash(call)))
}

fn save_pending(data: &Path, session: &Session, call: &str, pending: &Pending) {
    let path = pending_file(data, session, call);
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            let text = serde_json::to_vec(pending).map_err(std::io::Error::other)?;
            let partial = path.with_extension("partial");
            std::fs::write(&partial, text)?;
            std::fs::rename(&partial, &path)
        });
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "cannot keep the call's hook state for its post-tool event");
    }
}

fn take_pending(data: &Path, session: &Session, call: &str) -> Option<Pending> {
    let path = pending_file(data, session, call);
    let text = std::fs::read(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    serde_json::from_slice(&text).ok()
}
