//! Reloading a server's config without a restart: on SIGHUP, or on
//! `POST /admin/api/reload` (see `admin.rs`). The file is read and checked again; the
//! server checks what it alone refuses to serve (an HTTP server's rules for tokens) and
//! prepares what it alone puts in effect (its TLS certificate, read again); then
//! [`Runtime::reload`] puts the config in effect for new calls, and the server's part
//! follows. A config that fails any of it is refused, with the reason logged, and the one
//! in effect stays.

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

/// A server's own part of a reload: refuses what it will not serve, beyond what the
/// config's own checks refuse, or prepares what it puts in effect itself once the runtime
/// took the config.
pub type Prepare = Box<dyn Fn(&Plan) -> Result<Apply, String> + Send + Sync>;

/// What [`Prepare`] prepared.
pub type Apply = Box<dyn FnOnce() + Send>;

/// A server with nothing of its own to check or apply.
pub fn nothing_to_prepare() -> Prepare {
    Box::new(|_| Ok(Box::new(|| ())))
}

/// Reloads one server's config.
pub struct Reloader {
    runtime: Arc<Runtime>,
    source: ConfigSource,
    prepare: Prepare,
    /// One reload at a time, its server's part included (SIGHUP and the admin page may
    /// come together): the last one read is the one in effect.
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl Reloader {
    pub fn new(runtime: Arc<Runtime>, source: ConfigSource, prepare: Prepare) -> Reloader {
        Reloader {
            runtime,
            source,
            prepare,
            one_at_a_time: tokio::sync::Mutex::new(()),
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
        let _one = self.one_at_a_time.lock().await;
        let loaded = match &self.source.file {
            Some(file) => Config::load(file)?,
            None => Config::builtin(),
        };
        if loaded.config.data != self.source.data {
            return Err(ReloadError::NeedsRestart("data".into()));
        }
        let apply = (self.prepare)(&loaded.plan).map_err(ReloadError::Refused)?;
        let reloaded = self.runtime.reload(loaded.plan).await?;
        apply();
        Ok(reloaded)
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
