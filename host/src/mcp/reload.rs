//! Reloading a server's config without a restart: on SIGHUP, or on `POST /admin/reload`
//! (see `http.rs`). The file is read and checked again; what the server itself refuses to
//! serve (an HTTP server's rules for tokens) is checked; then [`Runtime::reload`] puts it
//! in effect for new calls. A config that fails any of it is refused, with the reason
//! logged, and the one in effect stays.

use crate::config::{Config, Plan};
use crate::runtime::{ReloadError, Reloaded, Runtime};
use std::path::PathBuf;
use std::sync::Arc;

/// Where a server's config comes from, to read it again.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    /// `--config` (or `HOOKHOST_CONFIG`); `None`: the built-in config.
    pub file: Option<PathBuf>,
    /// The config's `data` as the server started with it: only a restart changes it.
    pub data: Option<PathBuf>,
}

/// What a server refuses to serve, beyond what the config's own checks refuse.
pub type Accept = Box<dyn Fn(&Plan) -> Result<(), String> + Send + Sync>;

/// Reloads one server's config.
pub struct Reloader {
    runtime: Arc<Runtime>,
    source: ConfigSource,
    accept: Accept,
}

impl Reloader {
    pub fn new(runtime: Arc<Runtime>, source: ConfigSource, accept: Accept) -> Reloader {
        Reloader {
            runtime,
            source,
            accept,
        }
    }

    /// Reads the config again and puts it in effect; logs what changed, or why it was
    /// refused.
    ///
    /// # Errors
    ///
    /// [`ReloadError`]: the config in effect stays.
    pub async fn reload(&self) -> Result<Reloaded, ReloadError> {
        let reloaded = self.try_reload().await;
        match &reloaded {
            Ok(r) => tracing::info!(file = %r.file, changes = %r, "config reloaded"),
            Err(e) => {
                tracing::error!(error = %e, "config reload refused; the config in effect stays")
            }
        }
        reloaded
    }

    async fn try_reload(&self) -> Result<Reloaded, ReloadError> {
        let loaded = match &self.source.file {
            Some(file) => Config::load(file)?,
            None => Config::builtin(),
        };
        if loaded.config.data != self.source.data {
            return Err(ReloadError::NeedsRestart("data".into()));
        }
        (self.accept)(&loaded.plan).map_err(ReloadError::Refused)?;
        self.runtime.reload(loaded.plan).await
    }

    /// Reloads on every SIGHUP for as long as the process runs.
    ///
    /// # Errors
    ///
    /// When the signal handler cannot be installed.
    pub fn on_sighup(self: &Arc<Self>) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hup = signal(SignalKind::hangup())?;
        let reloader = self.clone();
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading the config");
                // Logged either way; the server serves on.
                let _ = reloader.reload().await;
            }
        });
        Ok(())
    }
}
