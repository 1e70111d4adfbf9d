//! MCP on stdin/stdout: one session, ended when the client leaves.

use super::{McpServer, ServeOptions, shutdown_signal};
use crate::ids::TenantId;
use crate::runtime::Runtime;
use rmcp::ServiceExt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Serves MCP on stdin/stdout as one session of `tenant`, until the client disconnects or a
/// shutdown signal; then ends the session (its commands killed, its files deleted unless
/// kept).
///
/// # Errors
///
/// When the session cannot be made, or the transport fails.
pub async fn serve_stdio(
    runtime: Arc<Runtime>,
    tenant: TenantId,
    options: ServeOptions,
) -> anyhow::Result<()> {
    let signal = shutdown_signal()?;
    let reloader = super::Reloader::new(
        runtime.clone(),
        options.config.clone(),
        super::reload::nothing_to_prepare(),
    );
    Arc::new(reloader).on_sighup()?;
    let workdir = options.workdir(&runtime, &tenant)?;
    let session = Arc::new(
        runtime
            .sessions()
            .create(tenant.clone(), None, workdir.as_deref())
            .await?,
    );
    tracing::info!(session = %session.id, workdir = ?workdir, "serving MCP on stdio");
    let gone = CancellationToken::new();
    let waiting = Arc::new(super::waiting::Waiting::default());
    let server = McpServer {
        runtime: runtime.clone(),
        session: Some(session.clone()),
        tenant,
        gone: gone.clone(),
        subscriptions: Default::default(),
        declared: Default::default(),
        waiting: waiting.clone(),
    };
    let served = async {
        let stdin = UntilEnd {
            inner: tokio::io::stdin(),
            gone,
        };
        let running = server
            .serve((stdin, tokio::io::stdout()))
            .await
            .map_err(|e| anyhow::anyhow!("MCP handshake failed: {e}"))?;
        let stop = running.cancellation_token();
        let waiting = running.waiting();
        tokio::pin!(waiting);
        tokio::select! {
            done = &mut waiting => { done?; }
            name = signal => {
                tracing::info!(signal = name, "shutting down");
                stop.cancel();
                // rmcp lets running calls answer for a moment, then cancels them.
                let _ = tokio::time::timeout(options.shutdown_grace, waiting).await;
            }
        }
        anyhow::Ok(())
    };
    let served = served.await;
    // Calls held for the client's input end with it.
    waiting.clear();
    if !options.keep_session {
        runtime
            .end_session(&session.tenant, &session.id, false)
            .await?;
        tracing::info!(session = %session.id, "session ended and deleted");
    }
    served
}

/// A reader that cancels `gone` when it reaches its end: stdin's end is a stdio client's
/// disconnect. Without it, rmcp would let the calls still running go on for seconds before
/// the session could end, while the client (the Python SDK waits 2 s, then sends SIGTERM,
/// then SIGKILL) is killing hookhost, and with it the chance to stop the session's commands.
struct UntilEnd<R> {
    inner: R,
    gone: CancellationToken,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for UntilEnd<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(result) = &polled
            && (result.is_err() || buf.filled().len() == before)
            && buf.remaining() > 0
        {
            self.gone.cancel();
        }
        polled
    }
}
