//! What one config makes ([`Served`]): its tenants, engine, components, tools, chains,
//! upstream servers and bearer JWTs' keys, and the listings built from them.

use super::CACHE_DIR;
use super::load::{
    Signals, StartError, UpstreamEntry, compile_stores, connect_upstreams, load_hooks, load_tools,
};
use crate::chain::{HookChain, HookLayer};
use crate::component::{ComponentLoader, EngineOptions};
use crate::config::{BashPlan, ComponentPlan, HookPlan, Plan, UpstreamConfig, UpstreamScope};
use crate::ids::TenantId;
use crate::jwt::Jwt;
use crate::sandbox::Sandbox;
use crate::secret::TokenDigest;
use crate::sessions::{MountDirs, Session, SessionHolder, Tenants};
use crate::stores::StoreComponent;
use crate::tools::bash::BashTool;
use crate::tools::upstream;
use crate::tools::{Tool, ToolRegistry};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

/// What one config makes: its tenants, engine, components, tools, chains, upstream servers
/// and JWT keys, each with the plan it was made from, so that a reload can keep what did
/// not change. It is the runtime's one snapshot of the config in effect: a reload swaps
/// it whole, and a call reads all of it from the one it began with.
#[derive(Clone)]
pub(super) struct Served {
    /// The tenants, with their rates' state.
    pub(super) tenants: Arc<Tenants>,
    /// Bearer JWTs naming tenants (`[auth]`), with the keys fetched so far.
    pub(super) jwt: Option<Arc<Jwt>>,
    pub(super) engine: EngineOptions,
    pub(super) loader: Arc<ComponentLoader>,
    pub(super) sandbox: Arc<Sandbox>,
    /// The layers, outermost first.
    pub(super) hooks: Vec<(HookPlan, Arc<HookLayer>)>,
    /// The chain of tenants that declare none of their own.
    pub(super) chain: Arc<HookChain>,
    /// The chains of tenants that declare their own (`[tenants.ID] hooks`).
    pub(super) tenant_chains: BTreeMap<TenantId, Arc<HookChain>>,
    /// The configured tool components.
    pub(super) guest_tools: Vec<(ComponentPlan, Arc<dyn Tool>)>,
    /// The `bash` tool, when enabled.
    pub(super) bash: Option<(BashPlan, Arc<BashTool>)>,
    /// Every tool but the upstream servers': the components, `bash` and the embedder's.
    pub(super) tools: ToolRegistry,
    /// Upstream MCP servers, by name, with their tools' state.
    pub(super) upstreams: Vec<UpstreamEntry>,
    /// The upstream servers with an instance per tenant or per session.
    pub(super) pools: Vec<Arc<upstream::Pool>>,
    /// The store components of persistent directories, by virtual path.
    pub(super) stores: BTreeMap<String, Arc<StoreComponent>>,
    /// The file the config was read from.
    pub(super) config_file: String,
    /// The admin page's token (see [`Runtime::admin_token`]).
    pub(super) admin_token: Option<TokenDigest>,
}

impl Served {
    /// Makes what `plan` describes, with the embedder's tools beside its own. What `kept`
    /// (the config in effect, on a reload) has with the same settings is taken from it: a
    /// component is kept only with the same engine, a tenant's rate state only with the
    /// same limits, the JWT keys only with the same `[auth]`. Returns it with the session
    /// holders it made anew, to register.
    pub(super) async fn build(
        mut plan: Plan,
        dirs: &Arc<MountDirs>,
        embedded: &[Arc<dyn Tool>],
        kept: Option<&Served>,
        signals: &Signals,
    ) -> Result<(Served, Vec<Weak<dyn SessionHolder>>), StartError> {
        let tenants = Tenants::new(std::mem::take(&mut plan.tenants), plan.serve_workdir.take());
        let tenants = match kept {
            Some(k) => tenants.after(&k.tenants),
            None => tenants,
        };
        let jwt = plan.jwt.take().map(|wanted| {
            let same = kept
                .and_then(|k| k.jwt.as_ref())
                .filter(|j| *j.plan() == wanted);
            same.cloned().unwrap_or_else(|| Arc::new(Jwt::new(wanted)))
        });
        let engine = EngineOptions {
            fuel: plan.fuel,
            pool_instances: plan.engine.pooling.then_some(plan.engine.pool_instances),
            max_memory_bytes: plan.max_memory_bytes,
            keep_resident_bytes: plan.engine.keep_resident_bytes,
            cache_dir: plan.engine.cache.then(|| dirs.data_root().join(CACHE_DIR)),
        };
        let same_engine = kept.filter(|k| k.engine == engine);
        let (loader, sandbox) = match same_engine {
            Some(k) => (k.loader.clone(), k.sandbox.clone()),
            None => {
                let loader = ComponentLoader::new(&engine).map_err(StartError::Engine)?;
                let sandbox = Sandbox::new(loader.engine().clone(), dirs.clone(), plan.fuel);
                (Arc::new(loader), Arc::new(sandbox))
            }
        };
        sandbox
            .set_network(&plan.network)
            .map_err(StartError::Network)?;
        super::load::pull_components(&plan, &loader, dirs.data_root()).await?;
        let kept_tools = same_engine.map_or(&[][..], |k| &k.guest_tools);
        let guest_tools = load_tools(&plan.tools, kept_tools, &loader, &sandbox).await?;
        let bash = plan.bash.map(|wanted| {
            let same = same_engine
                .and_then(|k| k.bash.as_ref())
                .filter(|(plan, _)| *plan == wanted);
            match same {
                Some((_, bash)) => (wanted, bash.clone()),
                None => {
                    let bash = Arc::new(BashTool::new(sandbox.clone(), &wanted));
                    (wanted, bash)
                }
            }
        });
        let kept_hooks = same_engine.map_or(&[][..], |k| &k.hooks);
        let hooks = load_hooks(&plan.source, plan.hooks, kept_hooks, &loader, &sandbox).await?;

        let mut tools = ToolRegistry::default();
        let every_tool = guest_tools
            .iter()
            .map(|(_, tool)| tool.clone())
            .chain(bash.iter().map(|(_, bash)| bash.clone() as Arc<dyn Tool>))
            .chain(embedded.iter().cloned());
        for tool in every_tool {
            let name = tool.descriptor().name.clone();
            if !tools.insert(tool) {
                return Err(StartError::DuplicateTool { tool: name });
            }
        }
        let layers: Vec<Arc<HookLayer>> = hooks.iter().map(|(_, l)| l.clone()).collect();
        let tenant_chains = tenants
            .iter()
            .filter_map(|(id, tenant)| {
                let picked = tenant
                    .hooks
                    .as_ref()?
                    .iter()
                    .filter_map(|n| layers.iter().find(|l| &l.name == n).cloned())
                    .collect();
                Some((
                    id.clone(),
                    Arc::new(HookChain::new(picked, sandbox.clone())),
                ))
            })
            .collect();

        let (shared, scoped): (Vec<_>, Vec<_>) = plan
            .upstreams
            .iter()
            .cloned()
            .partition(|(_, spec)| spec.scope == UpstreamScope::Shared);
        let pools = scoped
            .iter()
            .map(|(name, spec)| {
                kept.and_then(|k| {
                    k.pools
                        .iter()
                        .find(|p| p.name() == name && p.spec() == spec)
                        .cloned()
                })
                .unwrap_or_else(|| {
                    Arc::new(upstream::Pool::new(
                        name,
                        spec,
                        dirs.data_root().to_path_buf(),
                        signals.notices.clone(),
                    ))
                })
            })
            .collect();
        let upstreams =
            connect_upstreams(&shared, kept.map_or(&[][..], |k| &k.upstreams), signals).await;
        let stores = compile_stores(&plan.mounts, &loader, &sandbox)?;
        let served = Served {
            tenants: Arc::new(tenants),
            jwt,
            stores,
            engine,
            chain: Arc::new(HookChain::new(layers, sandbox.clone())),
            loader,
            sandbox,
            hooks,
            tenant_chains,
            guest_tools,
            bash,
            tools,
            upstreams,
            pools,
            config_file: plan.source,
            admin_token: plan.admin_token,
        };
        if let Some((name, first, second)) = served.clashes().into_iter().next() {
            return Err(StartError::ToolClash {
                name,
                first,
                second,
            });
        }
        // What holds session state and was made now: the rest is registered already.
        let kept_holders = kept.map(Served::holders).unwrap_or_default();
        let fresh = served
            .holders()
            .into_iter()
            .filter(|h| !kept_holders.iter().any(|k| Arc::ptr_eq(k, h)))
            .map(|h| Arc::downgrade(&h))
            .collect();
        Ok((served, fresh))
    }

    /// What holds session state in it: its layers (every chain's are among them) and its
    /// tools.
    pub(super) fn holders(&self) -> Vec<Arc<dyn SessionHolder>> {
        let layers = self
            .hooks
            .iter()
            .map(|(_, layer)| layer.clone() as Arc<dyn SessionHolder>);
        let tools = self.tools.iter().map(|tool| {
            let holder: Arc<dyn SessionHolder> = tool.clone();
            holder
        });
        let pools = self
            .pools
            .iter()
            .map(|pool| pool.clone() as Arc<dyn SessionHolder>);
        layers.chain(tools).chain(pools).collect()
    }

    /// The hook chain of `tenant`'s sessions.
    pub(super) fn chain(&self, tenant: &TenantId) -> &Arc<HookChain> {
        self.tenant_chains.get(tenant).unwrap_or(&self.chain)
    }

    /// Every upstream server's name and settings, shared or scoped.
    pub(super) fn upstream_specs(&self) -> impl Iterator<Item = (&str, &UpstreamConfig)> {
        let shared = self.upstreams.iter().map(|(n, spec, _)| (n.as_str(), spec));
        let scoped = self.pools.iter().map(|p| (p.name(), p.spec()));
        shared.chain(scoped)
    }

    /// The instances of the scoped upstream servers `session` uses, started when they
    /// are not running yet; one that cannot start is logged and left out.
    pub(super) async fn session_upstreams(&self, session: &Session) -> Vec<Arc<upstream::Running>> {
        self.session_instances(session).await.0
    }

    /// As [`Served::session_upstreams`], with why those left out could not start.
    pub(super) async fn session_instances(
        &self,
        session: &Session,
    ) -> (Vec<Arc<upstream::Running>>, Vec<upstream::UpstreamError>) {
        let mut running = Vec::new();
        let mut failed = Vec::new();
        for pool in &self.pools {
            match pool.instance(session).await {
                Ok(instance) => running.push(instance),
                Err(e) => {
                    tracing::error!(error = %e, session = %session.id, "upstream instance unavailable");
                    failed.push(e);
                }
            }
        }
        (running, failed)
    }

    /// The shared upstream servers, up or not (one that is not lists no tools).
    pub(super) fn running_upstreams(&self) -> impl Iterator<Item = &Arc<upstream::Running>> {
        self.upstreams.iter().map(|(_, _, running)| running)
    }

    /// The tools of the upstream servers, as last listed: a name a host tool or an
    /// upstream before in the config serves is left out (see [`Served::clashes`]).
    pub(super) fn upstream_listing(&self) -> Vec<rmcp::model::Tool> {
        let host: Vec<&str> = self.tools.descriptors().map(|d| d.name.as_str()).collect();
        let upstreams = self.running_upstreams().map(|s| (s.name(), s.listing()));
        crate::tools::listed(upstreams, |t| &t.name, |name| !host.contains(&name))
    }

    /// The names two of the tools served would share: `(name, first, second)`, the first
    /// being the one that serves it.
    pub(super) fn clashes(&self) -> Vec<(String, String, String)> {
        let mut owners: HashMap<String, String> = self
            .tools
            .iter()
            .map(|t| {
                (
                    t.descriptor().name.clone(),
                    format!("tools.{}", t.descriptor().name),
                )
            })
            .collect();
        let mut clashes = Vec::new();
        for server in self.running_upstreams() {
            for tool in server.listing() {
                let owner = format!("upstreams.{}", server.name());
                match owners.get(tool.name.as_ref()) {
                    Some(first) => clashes.push((tool.name.to_string(), first.clone(), owner)),
                    None => {
                        owners.insert(tool.name.to_string(), owner);
                    }
                }
            }
        }
        clashes
    }

    /// The tool called `name`: a configured one, or the first upstream server's that
    /// lists it.
    pub(super) fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(tool) = self.tools.get(name) {
            return Some(tool.clone());
        }
        self.running_upstreams()
            .find_map(|server| server.tool(name))
            .map(|tool| Arc::new(tool) as Arc<dyn Tool>)
    }
}

/// `tool` as what holds session state, weakly (see [`Sessions::hold`]).
pub(super) fn holder_of(tool: &Arc<dyn Tool>) -> Weak<dyn SessionHolder> {
    let holder: Arc<dyn SessionHolder> = tool.clone();
    Arc::downgrade(&holder)
}
