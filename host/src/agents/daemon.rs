//! The warm daemons `hookhost hook` forwards an agent's event to, so that the chain's
//! compiled components and per-session instances stay loaded across the agent's hook
//! processes:
//!
//! - **The socket** `DATA/run/hooks.sock` of `hookhost serve --hooks` on the same data
//!   directory: found without any setting, reachable only by the user who runs it (the
//!   socket is `0600` in a `0700` directory, and each peer's uid is checked).
//! - **A URL**, `HOOKHOST_URL` (with `HOOKHOST_TOKEN`): `serve --http`'s
//!   `POST /hooks/AGENT/EVENT`, for a daemon elsewhere or serving tenants.
//!
//! A daemon that does not answer within the timeout (`--daemon-timeout-ms`, default
//! [`DEFAULT_HOOK_DAEMON_TIMEOUT`](crate::limits::DEFAULT_HOOK_DAEMON_TIMEOUT)) trips a breaker: a marker file that every hook process
//! reads, so that the daemon is skipped for [`HOOK_DAEMON_BREAKER`] instead of costing each
//! event the timeout again. A daemon that is absent, down or skipped costs nothing: the
//! process answers by itself.
//!
//! The timeout bounds how long the daemon takes to take a connection, which it says with
//! one byte at once; its answer then has the hook's deadline.
//!
//! The socket speaks one request per connection: the daemon's byte `+`, a JSON header line (`{"agent", "event",
//! "tenant", "rewrite_allows"}`, at most [`MAX_HOOK_SOCKET_HEADER`] bytes), then the hook
//! input until the writer shuts down; the answer is a JSON line (`{"exit", "stderr"}`)
//! followed by what the agent reads on stdout.

use super::protocol::{self, Answer, Options};
use super::{Agent, Event, HookSettings};
use crate::ids::TenantId;
use crate::limits::{
    DEFAULT_HOOK_DEADLINE, HOOK_DAEMON_BREAKER, MAX_HOOK_INPUT_BYTES, MAX_HOOK_SOCKET_HEADER,
};
use crate::runtime::Runtime;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// Set (to `1`) by `hookhost-agent` for the `hookhost` it runs after the socket's daemon
/// took the event and gave no answer: `hookhost` then answers without asking it again.
pub const ASKED_ENV: &str = "HOOKHOST_SOCKET_ASKED";

/// The socket `serve --hooks` listens on, in the data directory `data`.
pub fn socket_path(data: &Path) -> PathBuf {
    data.join("run").join("hooks.sock")
}

/// A running `hookhost serve --http` that answers hooks (`HOOKHOST_URL`, with
/// `HOOKHOST_TOKEN` when its tenants have tokens).
#[derive(Debug, Clone)]
pub struct Daemon {
    /// The server's root (`http://HOST:PORT`), or the MCP endpoint it announces.
    pub url: String,
    pub token: Option<String>,
}

/// The header of a hook answer that carries the exit code the agent expects.
pub const EXIT_HEADER: &str = "x-hookhost-exit";
/// The header of a hook answer that carries the line for the agent's stderr.
pub const STDERR_HEADER: &str = "x-hookhost-stderr";

/// Where the daemon at `url` (its root, or the MCP endpoint it announces) answers
/// `agent`'s `event`.
pub fn hook_url(url: &str, agent: Agent, event: Event) -> String {
    format!(
        "{}/hooks/{}/{}",
        url.trim_end_matches('/').trim_end_matches("/mcp"),
        agent.name(),
        event.name()
    )
}

impl Daemon {
    /// The daemon the environment names, if any.
    pub fn from_env() -> Option<Daemon> {
        let url = std::env::var("HOOKHOST_URL")
            .ok()
            .filter(|u| !u.is_empty())?;
        Some(Daemon {
            url,
            token: std::env::var("HOOKHOST_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
        })
    }

    /// The daemon's answer to `bytes`.
    ///
    /// # Errors
    ///
    /// When it cannot be reached or answers something else than a hook answer (then the
    /// caller answers itself).
    pub async fn ask(
        &self,
        agent: Agent,
        event: Event,
        bytes: &[u8],
        deadline: Duration,
    ) -> anyhow::Result<Answer> {
        self.post(&hook_url(&self.url, agent, event), bytes, deadline)
            .await
    }

    /// The answer of the hook endpoint `url` (`BASE/hooks/AGENT/EVENT`) to `bytes`.
    ///
    /// # Errors
    ///
    /// As [`Daemon::ask`].
    pub async fn post(
        &self,
        url: &str,
        bytes: &[u8],
        deadline: Duration,
    ) -> anyhow::Result<Answer> {
        let client = reqwest::Client::builder()
            .timeout(deadline)
            .no_proxy()
            .build()?;
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .body(bytes.to_vec());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await?;
        let exit = response
            .headers()
            .get(EXIT_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no hook answer ({})", response.status()))?;
        let stderr = response
            .headers()
            .get(STDERR_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let stdout = response.text().await?;
        Ok(Answer {
            stdout,
            exit,
            stderr,
        })
    }
}

/// What became of an event offered to `serve --hooks` (see [`Forward::offer`]).
#[derive(Debug)]
pub enum Offered {
    /// No daemon to ask: the hook input is still unread on stdin.
    NotAsked,
    /// The daemon's answer (or the answer to input that could not be read).
    Answered(Answer),
    /// The daemon did not answer; the hook input it was offered.
    Unanswered(Vec<u8>),
}

/// The daemons a hook process may forward to, in the order it tries them.
#[derive(Debug, Clone)]
pub struct Forward {
    /// `serve --hooks`' socket in this process's data directory.
    pub socket: PathBuf,
    /// `HOOKHOST_URL`.
    pub url: Option<Daemon>,
    /// How long each may take (see
    /// [`DEFAULT_HOOK_DAEMON_TIMEOUT`](crate::limits::DEFAULT_HOOK_DAEMON_TIMEOUT)).
    pub timeout: Duration,
}

/// What a hook process asks the socket, before the hook input.
#[derive(Debug, Serialize, Deserialize)]
struct Ask {
    agent: String,
    event: String,
    tenant: String,
    rewrite_allows: bool,
}

/// The socket's answer line, before what the agent reads on stdout.
#[derive(Debug, Serialize, Deserialize)]
struct Told {
    exit: u8,
    stderr: Option<String>,
}

impl Forward {
    /// The daemons of the data directory `data` and the environment.
    pub fn new(data: &Path, timeout: Duration) -> Forward {
        Forward {
            socket: socket_path(data),
            url: Daemon::from_env(),
            timeout,
        }
    }

    /// Whether the socket is there to ask (and not skipped by its breaker).
    pub fn socket_answers(&self) -> bool {
        // No socket: no daemon, and no breaker to read.
        self.socket.exists() && !Breaker::beside(&self.socket).is_open()
    }

    /// Offers the event on stdin to `serve --hooks`' socket, when it is there to ask: the
    /// hook input is read (within `deadline`) only then. Made for a hook process before
    /// anything else starts in it: no async runtime, no logging.
    pub fn offer(
        &self,
        agent: Agent,
        event: Event,
        settings: &HookSettings,
        deadline: Duration,
    ) -> Offered {
        if !self.socket_answers() {
            return Offered::NotAsked;
        }
        let bytes = match read_stdin(deadline) {
            Ok(bytes) => bytes,
            Err(why) => return Offered::Answered(protocol::unreadable(agent, &why)),
        };
        match self.ask_socket(agent, event, settings, &bytes, deadline) {
            Some(answer) => Offered::Answered(answer),
            None => Offered::Unanswered(bytes),
        }
    }

    /// The socket daemon's answer to `bytes`, if it gives one: the daemon must say it is
    /// there within the timeout, and answer within `deadline`. Asked without an async
    /// runtime, before the hook process starts one, once [`Forward::socket_answers`] said
    /// to ask.
    pub fn ask_socket(
        &self,
        agent: Agent,
        event: Event,
        settings: &HookSettings,
        bytes: &[u8],
        deadline: Duration,
    ) -> Option<Answer> {
        let breaker = Breaker::beside(&self.socket);
        match ask_socket(
            &self.socket,
            self.timeout,
            deadline,
            agent,
            event,
            settings,
            bytes,
        ) {
            Ok(answer) => {
                breaker.close();
                Some(answer)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                tracing::warn!(socket = %self.socket.display(), timeout_ms = self.timeout.as_millis() as u64, "the hook daemon did not answer in time; skipping it");
                breaker.trip();
                None
            }
            Err(e) => {
                tracing::debug!(socket = %self.socket.display(), error = %e, "no hook daemon on the socket");
                None
            }
        }
    }

    /// The `HOOKHOST_URL` daemon's answer to `bytes`, if it gives one within the timeout
    /// (and `left`).
    pub async fn ask_url(
        &self,
        agent: Agent,
        event: Event,
        bytes: &[u8],
        left: Duration,
    ) -> Option<Answer> {
        let daemon = self.url.as_ref()?;
        let breaker = Breaker::beside(&self.socket.with_file_name("url"));
        if breaker.is_open() {
            return None;
        }
        match daemon
            .ask(agent, event, bytes, self.timeout.min(left))
            .await
        {
            Ok(answer) => {
                breaker.close();
                Some(answer)
            }
            Err(e) => {
                tracing::info!(url = %daemon.url, error = %e, "the hook daemon did not answer; answering here");
                if e.downcast_ref::<reqwest::Error>()
                    .is_some_and(reqwest::Error::is_timeout)
                {
                    breaker.trip();
                }
                None
            }
        }
    }
}

/// The hook input on stdin (at most [`MAX_HOOK_INPUT_BYTES`]), read within `deadline`.
///
/// # Errors
///
/// What kept it from being read, as one line.
pub fn read_stdin(deadline: Duration) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    // A thread, so that an agent that never closes stdin costs the deadline, not forever.
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = std::io::stdin()
            .take(MAX_HOOK_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes);
        let _ = tx.send(read);
    });
    match rx.recv_timeout(deadline) {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(format!("cannot read stdin: {e}")),
        Err(_) => Err(format!(
            "stdin did not close within {} ms",
            deadline.as_millis()
        )),
    }
}

/// A marker file that says a daemon was skipped, and since when.
struct Breaker {
    marker: PathBuf,
}

impl Breaker {
    fn beside(target: &Path) -> Breaker {
        let mut marker = target.as_os_str().to_owned();
        marker.push(".down");
        Breaker {
            marker: marker.into(),
        }
    }

    /// Whether the daemon is being skipped.
    fn is_open(&self) -> bool {
        let tripped = std::fs::metadata(&self.marker).and_then(|m| m.modified());
        tripped.is_ok_and(|at| {
            SystemTime::now()
                .duration_since(at)
                .is_ok_and(|age| age < HOOK_DAEMON_BREAKER)
        })
    }

    fn trip(&self) {
        if let Err(e) = std::fs::write(&self.marker, b"") {
            tracing::debug!(marker = %self.marker.display(), error = %e, "cannot mark the daemon skipped");
        }
    }

    fn close(&self) {
        let _ = std::fs::remove_file(&self.marker);
    }
}

/// One request on the socket: the daemon's first byte (sent as it takes the connection)
/// within `timeout`, each later read and write within `deadline`.
#[allow(clippy::too_many_arguments)]
fn ask_socket(
    socket: &Path,
    timeout: Duration,
    deadline: Duration,
    agent: Agent,
    event: Event,
    settings: &HookSettings,
    bytes: &[u8],
) -> std::io::Result<Answer> {
    use std::io::{BufRead, Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(timeout))?;
    let mut here = [0u8];
    stream.read_exact(&mut here)?;
    stream.set_read_timeout(Some(deadline))?;
    stream.set_write_timeout(Some(deadline))?;
    let ask = Ask {
        agent: agent.name().into(),
        event: event.name().into(),
        tenant: settings.tenant.to_string(),
        rewrite_allows: settings.options.rewrite_allows,
    };
    let mut header = serde_json::to_vec(&ask)?;
    header.push(b'\n');
    stream.write_all(&header)?;
    stream.write_all(bytes)?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut reader = std::io::BufReader::new(stream);
    let mut line = String::new();
    (&mut reader)
        .take(MAX_HOOK_SOCKET_HEADER)
        .read_line(&mut line)?;
    let told: Told = serde_json::from_str(&line)?;
    let mut stdout = String::new();
    reader
        .take(MAX_HOOK_INPUT_BYTES)
        .read_to_string(&mut stdout)?;
    Ok(Answer {
        stdout,
        exit: told.exit,
        stderr: told.stderr,
    })
}

/// Errors of [`listen`].
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("another hookhost already answers hooks at {0}")]
    Taken(PathBuf),
    #[error("cannot listen at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Binds `serve --hooks`' socket in `data` (see [`socket_path`]): its directory made
/// `0700`, a stale socket of a daemon gone replaced.
///
/// # Errors
///
/// When a live daemon holds it, or it cannot be made.
pub async fn listen(data: &Path) -> Result<(UnixListener, PathBuf), ListenError> {
    use std::os::unix::fs::PermissionsExt;
    let path = socket_path(data);
    let io = |source| ListenError::Io {
        path: path.clone(),
        source,
    };
    let dir = path.parent().expect("the socket is in run/");
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    if UnixStream::connect(&path).await.is_ok() {
        return Err(ListenError::Taken(path));
    }
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
        _ => {}
    }
    let listener = UnixListener::bind(&path).map_err(io)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    Breaker::beside(&path).close();
    Ok((listener, path))
}

/// Answers hook requests on `listener` with `runtime`'s chain until `stop` resolves,
/// then waits for the answers under way (the agents wait for them) and removes the
/// socket at `path`.
pub async fn serve(
    runtime: Arc<Runtime>,
    listener: UnixListener,
    path: PathBuf,
    stop: impl Future<Output = &'static str>,
) {
    let mut running = tokio::task::JoinSet::new();
    let me = rustix::process::geteuid().as_raw();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            signal = &mut stop => {
                tracing::info!(signal, answering = running.len(), "stopping: no new hook requests");
                break;
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Another user (root aside) reaches the socket only if its
                    // directory's mode was changed; it is refused all the same.
                    let uid = stream.peer_cred().map(|c| c.uid());
                    if !matches!(uid, Ok(u) if u == me || u == 0) {
                        tracing::warn!(uid = ?uid, "a hook request from another user refused");
                        continue;
                    }
                    running.spawn(answer_one(runtime.clone(), stream));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a hook request");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&path);
    while running.join_next().await.is_some() {}
}

async fn answer_one(runtime: Arc<Runtime>, stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    // "Here": what tells a hook process that the daemon is alive, however long the chain
    // then takes.
    if write.write_all(b"+").await.is_err() {
        return;
    }
    let mut reader = BufReader::new(read);
    let answer = match read_ask(&mut reader).await {
        Ok((agent, event, settings, bytes)) => {
            tracing::debug!(agent = agent.name(), event = event.name(), tenant = %settings.tenant, "answering a hook");
            let runtime = runtime.clone();
            super::answer(
                agent,
                event,
                &settings,
                DEFAULT_HOOK_DEADLINE,
                &bytes,
                || async { Ok(runtime) },
            )
            .await
        }
        Err(why) => protocol::unreadable(Agent::ClaudeCode, &why),
    };
    tracing::debug!(exit = answer.exit, stderr = ?answer.stderr, bytes = answer.stdout.len(), "answered a hook");
    let told = Told {
        exit: answer.exit,
        stderr: answer.stderr,
    };
    let mut out = serde_json::to_vec(&told).expect("JSON");
    out.push(b'\n');
    out.extend_from_slice(answer.stdout.as_bytes());
    if let Err(e) = write.write_all(&out).await {
        tracing::debug!(error = %e, "the hook process left before its answer");
    }
}

async fn read_ask(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
) -> Result<(Agent, Event, HookSettings, Vec<u8>), String> {
    let mut line = String::new();
    reader
        .take(MAX_HOOK_SOCKET_HEADER)
        .read_line(&mut line)
        .await
        .map_err(|e| format!("cannot read the request: {e}"))?;
    let ask: Ask = serde_json::from_str(&line).map_err(|e| format!("not a hook request: {e}"))?;
    let agent = <Agent as clap::ValueEnum>::from_str(&ask.agent, false)
        .map_err(|_| format!("no agent {:?}", ask.agent))?;
    let event = Event::parse(&ask.event).ok_or_else(|| format!("no event {:?}", ask.event))?;
    let tenant = TenantId::new(ask.tenant).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    reader
        .take(MAX_HOOK_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| format!("cannot read the hook input: {e}"))?;
    let settings = HookSettings {
        tenant,
        subject: None,
        options: Options {
            rewrite_allows: ask.rewrite_allows,
        },
        // The socket's peer is this user, as the agent that ran the command form is.
        trust_cwd: true,
        // The daemon's chain says which tools a closed layer wraps.
        closed_tools: None,
    };
    Ok((agent, event, settings, bytes))
}
