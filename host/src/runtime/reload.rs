//! A reload: what only a restart changes ([`Fixed`]), what a reload changed
//! ([`Reloaded`]), and [`Runtime::reload`].

use super::Runtime;
use super::load::StartError;
use super::served::Served;
use crate::config::{BashPlan, ComponentPlan, ConfigError, HookPlan, Plan};
use crate::mounts::MountTable;
use crate::secret::Secret;
use crate::sessions::{Tenant, Tenants};
use crate::tools::Callee;
use crate::tools::bash::Unavailable;
use crate::tools::upstream;
use crate::trace::TraceSettings;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The parts of a config only a restart puts in effect: the sessions' mounts and store,
/// and how calls are traced. A reload that changes one is refused (see [`Fixed::changed_by`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fixed {
    pub(super) mounts: MountTable,
    pub(super) session_store: Option<Secret>,
    pub(super) trace: TraceSettings,
    pub(super) otlp_endpoint: Option<String>,
}

impl Fixed {
    pub(super) fn of(plan: &Plan) -> Fixed {
        Fixed {
            mounts: plan.mounts.clone(),
            session_store: plan.session_store.clone(),
            trace: plan.trace.clone(),
            otlp_endpoint: plan.otlp_endpoint.clone(),
        }
    }

    /// The tables of `plan` that differ from these: each needs a restart.
    pub(super) fn changed_by(&self, plan: &Plan) -> Vec<&'static str> {
        let new = Fixed::of(plan);
        [
            ("[mounts]", self.mounts != new.mounts),
            ("session_store", self.session_store != new.session_store),
            ("[trace]", self.trace != new.trace),
            ("[telemetry]", self.otlp_endpoint != new.otlp_endpoint),
        ]
        .into_iter()
        .filter_map(|(table, changed)| changed.then_some(table))
        .collect()
    }
}

/// Why a reload was refused; the config in effect stays.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0} changed: only a restart puts that in effect")]
    NeedsRestart(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Bash(#[from] Unavailable),
}

/// What changed of one kind of thing (hooks, tools, upstream servers, tenants), by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl Changes {
    /// Between `old` and `new`, each a list of (name, settings).
    fn between<'a, T: PartialEq + 'a>(
        old: impl IntoIterator<Item = (&'a str, T)>,
        new: impl IntoIterator<Item = (&'a str, T)>,
    ) -> Changes {
        let old: BTreeMap<&str, T> = old.into_iter().collect();
        let new: BTreeMap<&str, T> = new.into_iter().collect();
        let names = |names: Vec<&&str>| names.into_iter().map(|n| n.to_string()).collect();
        Changes {
            added: names(new.keys().filter(|n| !old.contains_key(*n)).collect()),
            removed: names(old.keys().filter(|n| !new.contains_key(*n)).collect()),
            changed: names(
                new.iter()
                    .filter(|(n, v)| old.get(*n).is_some_and(|o| o != *v))
                    .map(|(n, _)| n)
                    .collect(),
            ),
        }
    }

    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

impl std::fmt::Display for Changes {
    /// `+added -removed ~changed`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let marked = [
            ("+", &self.added),
            ("-", &self.removed),
            ("~", &self.changed),
        ];
        let words: Vec<String> = marked
            .iter()
            .flat_map(|(mark, names)| names.iter().map(move |n| format!("{mark}{n}")))
            .collect();
        f.write_str(&words.join(" "))
    }
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reloaded {
    /// The file the config was read from.
    pub file: String,
    pub hooks: Changes,
    /// Components, `bash` and the embedder's tools (not the upstream servers').
    pub tools: Changes,
    pub upstreams: Changes,
    pub tenants: Changes,
}

impl Reloaded {
    fn between(old: &Served, new: &Served) -> Self {
        // A layer loaded anew (its component rebuilt, or another engine) changed too.
        let hooks = |s: &Served| -> Vec<(String, (HookPlan, usize))> {
            s.hooks
                .iter()
                .map(|(plan, layer)| {
                    let loaded = Arc::as_ptr(layer) as usize;
                    (layer.name.clone(), (plan.clone(), loaded))
                })
                .collect()
        };
        let (old_hooks, new_hooks) = (hooks(old), hooks(new));
        type ToolState = (Option<ComponentPlan>, Option<BashPlan>, usize);
        let tools = |s: &Served| -> Vec<(String, ToolState)> {
            s.tools
                .iter()
                .map(|tool| {
                    let name = tool.descriptor().name.clone();
                    let component = s.guest_tools.iter().find(|(p, _)| p.name == name);
                    let bash = s.bash.as_ref().filter(|(_, b)| b.descriptor().name == name);
                    let loaded = Arc::as_ptr(tool) as *const () as usize;
                    let state = (
                        component.map(|c| c.0.clone()),
                        bash.map(|b| b.0.clone()),
                        loaded,
                    );
                    (name, state)
                })
                .collect()
        };
        let (old_tools, new_tools) = (tools(old), tools(new));
        let tenants = |t: &Tenants| -> Vec<(String, Tenant)> {
            t.iter()
                .map(|(id, t)| (id.to_string(), t.clone()))
                .collect()
        };
        let (old_tenants, new_tenants) = (tenants(&old.tenants), tenants(&new.tenants));
        Reloaded {
            file: new.config_file.clone(),
            hooks: Changes::between(
                old_hooks.iter().map(|(n, p)| (n.as_str(), p)),
                new_hooks.iter().map(|(n, p)| (n.as_str(), p)),
            ),
            tools: Changes::between(
                old_tools.iter().map(|(n, state)| (n.as_str(), state)),
                new_tools.iter().map(|(n, state)| (n.as_str(), state)),
            ),
            upstreams: Changes::between(old.upstream_specs(), new.upstream_specs()),
            tenants: Changes::between(
                old_tenants.iter().map(|(n, t)| (n.as_str(), t)),
                new_tenants.iter().map(|(n, t)| (n.as_str(), t)),
            ),
        }
    }
}

impl std::fmt::Display for Reloaded {
    /// `hooks: +audit; tenants: ~alpha`, or `nothing changed`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = [
            ("hooks", &self.hooks),
            ("tools", &self.tools),
            ("upstreams", &self.upstreams),
            ("tenants", &self.tenants),
        ]
        .iter()
        .filter(|(_, changes)| !changes.is_empty())
        .map(|(what, changes)| format!("{what}: {changes}"))
        .collect();
        match parts.is_empty() {
            true => f.write_str("nothing changed"),
            false => f.write_str(&parts.join("; ")),
        }
    }
}

impl Runtime {
    /// Puts `plan` in effect for the calls that begin from now on; calls running finish on
    /// the config they began with, and sessions stay open. Hooks, tools and upstream
    /// servers whose settings are unchanged are kept as they are (with their kept
    /// instances and processes); an upstream no longer listed is stopped once the last
    /// call that may use it ends. Clients are told the tools may have changed.
    ///
    /// # Errors
    ///
    /// [`ReloadError`] when `plan` changes what only a restart changes, or a component of
    /// it cannot be loaded, or its `bash` cannot run: then nothing changed.
    pub async fn reload(&self, plan: Plan) -> Result<Reloaded, ReloadError> {
        let _one_at_a_time = self.reloading.lock().await;
        let restart = self.fixed.changed_by(&plan);
        if !restart.is_empty() {
            return Err(ReloadError::NeedsRestart(restart.join(", ")));
        }
        let kept = self.served.load_full();
        let (served, holders) = Served::build(
            plan,
            self.sessions.dirs(),
            &self.embedded,
            Some(&kept),
            &self.signals,
        )
        .await?;
        if let Some((_, bash)) = &served.bash
            && !kept
                .bash
                .as_ref()
                .is_some_and(|(_, old)| Arc::ptr_eq(old, bash))
        {
            bash.readiness().await?;
        }
        let reloaded = Reloaded::between(&kept, &served);
        for holder in holders {
            self.sessions.hold(holder);
        }
        // Tenants, rates, chains, stores and JWT keys, in effect at once.
        self.served.store(Arc::new(served));
        // A tenant given a quota is measured now; the others keep their measure.
        if let Err(e) = self.sessions.measure_quotas().await {
            tracing::warn!(error = %e, "measuring tenants' disk use after a reload failed");
        }
        self.signals.tools_changed.send_modify(|n| *n += 1);
        let _ = self
            .signals
            .notices
            .send(upstream::Notice::ResourcesChanged);
        let _ = self.signals.notices.send(upstream::Notice::PromptsChanged);
        Ok(reloaded)
    }
}
