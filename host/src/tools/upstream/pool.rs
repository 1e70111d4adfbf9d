//! Upstream servers with one instance per tenant or per session (`scope = "tenant"` or
//! `"session"`), so that a stateful server (a memory, a filesystem) keeps each tenant's
//! state apart.
//!
//! An instance starts on its first use by a session of its tenant (or by its session), with
//! `{tenant}`, `{session}`, `{workdir}` and `{data}` in its `args`, `env` and `url`
//! replaced by that session's; it stops when the last session that used it ends (a
//! `session` one with its session). At most `max_instances` run at once per upstream
//! ([`DEFAULT_UPSTREAM_INSTANCES`] when left out); a session that would start one more is
//! answered with an error naming the bound.

use super::{Notice, Running, UpstreamError, connect};
use crate::config::{UpstreamConfig, UpstreamScope};
use crate::limits::DEFAULT_UPSTREAM_INSTANCES;
use crate::secret::Secret;
use crate::sessions::{Session, SessionHolder, SessionKey};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// The instances of one scoped upstream.
pub struct Pool {
    name: String,
    spec: UpstreamConfig,
    data_root: PathBuf,
    notices: tokio::sync::broadcast::Sender<Notice>,
    instances: Mutex<HashMap<String, Instance>>,
}

/// One instance, started once however many calls ask for it at the same time.
struct Instance {
    running: Arc<OnceCell<Arc<Running>>>,
    /// The sessions that used it: it stops when the last ends.
    sessions: HashSet<SessionKey>,
}

impl Pool {
    pub fn new(
        name: &str,
        spec: &UpstreamConfig,
        data_root: PathBuf,
        notices: tokio::sync::broadcast::Sender<Notice>,
    ) -> Pool {
        Pool {
            name: name.to_string(),
            spec: spec.clone(),
            data_root,
            notices,
            instances: Mutex::default(),
        }
    }

    /// Its settings as configured.
    pub fn spec(&self) -> &UpstreamConfig {
        &self.spec
    }

    /// Its name as configured.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn instances(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instance>> {
        self.instances.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many of its instances started are in each state (`up`, `down`: died and being
    /// restarted): counts, not which tenant's or session's, so that a probe anyone may ask
    /// names no tenant.
    pub fn states(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut states = std::collections::BTreeMap::new();
        for instance in self.instances().values() {
            if let Some(running) = instance.running.get() {
                *states.entry(running.state()).or_default() += 1;
            }
        }
        states
    }

    /// How many instances run now.
    pub fn running(&self) -> usize {
        self.instances()
            .values()
            .filter(|i| i.running.initialized())
            .count()
    }

    /// The instance `session` uses, started when it is not running yet.
    ///
    /// # Errors
    ///
    /// [`UpstreamError`] when it cannot be started, or the upstream has its maximum of
    /// instances running.
    pub async fn instance(&self, session: &Session) -> Result<Arc<Running>, UpstreamError> {
        let key = match self.spec.scope {
            UpstreamScope::Session => format!("{}/{}", session.tenant, session.id),
            _ => session.tenant.to_string(),
        };
        let cell = {
            let mut instances = self.instances();
            let max = self
                .spec
                .max_instances
                .unwrap_or(DEFAULT_UPSTREAM_INSTANCES);
            if !instances.contains_key(&key) && instances.len() >= max {
                return Err(UpstreamError {
                    name: self.name.clone(),
                    what: format!("has its maximum of {max} instances running (`max_instances`)"),
                });
            }
            let instance = instances.entry(key.clone()).or_insert_with(|| Instance {
                running: Arc::default(),
                sessions: HashSet::new(),
            });
            instance.sessions.insert(session.key());
            instance.running.clone()
        };
        let spec = self.spec_for(session);
        let started = cell
            .get_or_try_init(|| async {
                let running = connect(&self.name, &spec, &self.notices).await?;
                tracing::info!(upstream = %self.name, instance = %key, "upstream instance started");
                Ok::<_, UpstreamError>(Arc::new(running))
            })
            .await;
        match started {
            Ok(running) => Ok(running.clone()),
            Err(e) => {
                // Not started: the next call tries again.
                let mut instances = self.instances();
                if instances
                    .get(&key)
                    .is_some_and(|i| !i.running.initialized())
                {
                    instances.remove(&key);
                }
                Err(e)
            }
        }
    }

    /// Its settings for `session`'s instance: placeholders replaced, and its names served
    /// with the upstream's prefix (an instance is not another upstream).
    fn spec_for(&self, session: &Session) -> UpstreamConfig {
        let data = self.data_root.to_string_lossy();
        let workdir = session
            .workdir
            .as_ref()
            .map(|w| w.to_string_lossy().into_owned())
            .unwrap_or_default();
        let fill = |text: &str| {
            text.replace("{tenant}", session.tenant.as_str())
                .replace("{session}", session.id.as_str())
                .replace("{workdir}", &workdir)
                .replace("{data}", &data)
        };
        let mut spec = self.spec.clone();
        spec.args = spec.args.iter().map(|a| fill(a)).collect();
        for value in spec.env.values_mut().chain(spec.headers.values_mut()) {
            *value = Secret::from(fill(value.expose()));
        }
        spec.url = spec.url.as_ref().map(|u| Secret::from(fill(u.expose())));
        spec.prefix = Some(
            self.spec
                .prefix
                .clone()
                .unwrap_or_else(|| format!("{}{}", self.name, super::SEPARATOR)),
        );
        spec
    }
}

/// An instance stops when the last session that used it ends.
impl SessionHolder for Pool {
    fn held(&self) -> Vec<SessionKey> {
        let instances = self.instances();
        instances
            .values()
            .flat_map(|i| i.sessions.iter().cloned())
            .collect()
    }

    fn forget(&self, key: &SessionKey) {
        let ended: Vec<Instance> = {
            let mut instances = self.instances();
            instances.values_mut().for_each(|i| {
                i.sessions.remove(key);
            });
            let done: Vec<String> = instances
                .iter()
                .filter(|(_, i)| i.sessions.is_empty())
                .map(|(k, _)| k.clone())
                .collect();
            done.iter().filter_map(|k| instances.remove(k)).collect()
        };
        // Dropped outside the lock: an instance stops when the last call using it ends.
        for instance in ended {
            if instance.running.initialized() {
                tracing::info!(upstream = %self.name, "upstream instance stopping: its last session ended");
            }
        }
    }
}
