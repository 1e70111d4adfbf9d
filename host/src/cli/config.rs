//! `hookhost config …`: the built-in config, and a config checked as it will run.

use anyhow::{Context, Result};
use hookhost::config::{Config, Loaded, Plan};
use hookhost::limits::ShellNetwork;
use hookhost::{Runtime, TenantId};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the built-in config, as a file to start from.
    Show,
    /// Validate a config file (by default --config, else the built-in one), load its
    /// components, and print the resolved chain.
    Check { file: Option<PathBuf> },
    /// Print every limit and default as the code defines them (Markdown; the book's
    /// docs/limits.md), or with --keys every config key, its type and default
    /// (docs/config-keys.md).
    Reference {
        #[arg(long)]
        keys: bool,
    },
}

/// Runs `command`; `loaded` is the config hookhost was started with, `started_with` its
/// file.
pub async fn run(
    command: ConfigCommand,
    loaded: Loaded,
    started_with: Option<&Path>,
    data: &Path,
    verbose: u8,
) -> Result<ExitCode> {
    match command {
        ConfigCommand::Show => {
            print!("{}", hookhost::config::DEFAULT_CONFIG);
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Reference { keys } => {
            print!(
                "{}",
                match keys {
                    true => hookhost::config::keys::markdown(),
                    false => hookhost::config::reference::markdown(),
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Check { file } => {
            // The file hookhost was started with is loaded already.
            let loaded = match file.filter(|f| Some(f.as_path()) != started_with) {
                Some(other) => Config::load(&other)?,
                None => loaded,
            };
            check_config(loaded, data, verbose > 0).await
        }
    }
}

/// Validates a config, loads its components in a scratch data directory (compiled code
/// cached in `data`), and prints the mounts, the tools and the chain as they will run,
/// with each component's size and compile time, and with `imports` (`-v`) what it
/// imports, a line each.
async fn check_config(loaded: Loaded, data: &Path, imports: bool) -> Result<ExitCode> {
    let Loaded { config, plan } = loaded;
    let name = plan.source.clone();
    let scratch = hookhost::check::Scratch::new(data).context("checking the config")?;
    let components = inspect_components(&plan, data, scratch.path(), imports).await?;
    let runtime = Runtime::new(plan.clone(), scratch.path())
        .await
        .with_context(|| format!("{name}: loading the components"))?;
    let component_lines = |component: &str| {
        components
            .iter()
            .find(|(c, _)| c == component)
            .map(|(_, lines)| lines.join(""))
            .unwrap_or_default()
    };
    println!("{name}: valid\n");
    println!("mounts:");
    for (path, spec) in config.mounts() {
        let inside = spec
            .in_workdir
            .map_or(String::new(), |w| format!(" (with a workdir: {w})"));
        let git = spec
            .in_git_workdir
            .map_or(String::new(), |g| format!(" (in a git workdir: {g})"));
        let scope = format!("{:?}", spec.scope).to_lowercase();
        println!("  {path}\t{}{inside}{git}\t[{scope}]", spec.host);
        if let Some(persistent) = &spec.persistent
            && let Some(store) = runtime.store(&path)
        {
            let network = allow_text(store.network());
            println!("    kept by {}\tnetwork: {network}", store.component());
            for (key, value) in &persistent.settings {
                println!("       {key} = {value}");
            }
        }
    }
    println!("\ntools:");
    for tool in runtime.tools() {
        let upstream = runtime.upstream_of(&tool.name);
        let upstream = upstream.as_ref().map(|(u, r)| (u.as_str(), r.as_str()));
        let configured = plan.tools.iter().find(|t| t.name == tool.name);
        let detail = match (configured, upstream, &plan.bash) {
            (Some(spec), _, _) => format!(
                "{}{}{}",
                spec.component,
                grants_text(&spec.grants, spec.network.as_deref()),
                component_lines(&spec.component.to_string())
            ),
            (None, Some((name, remote)), _) => format!("upstream {name}, its tool {remote}"),
            (None, None, Some(bash)) if tool.name == "bash" => {
                bash_text(bash, &plan.tenants, runtime.bash_readiness().await)
            }
            (None, None, _) => "host-native".to_string(),
        };
        println!("  {}\t{detail}", tool.name);
    }
    for (upstream, spec) in &plan.upstreams {
        if spec.scope != hookhost::config::UpstreamScope::Shared {
            let scope = format!("{:?}", spec.scope).to_lowercase();
            println!(
                "  (upstream {upstream}: one instance per {scope}, started by a session's first \
                 use; its tools are listed to that session)"
            );
        }
    }
    for (name, protocol) in runtime.upstream_protocols() {
        println!("  (upstream {name} speaks MCP {protocol})");
    }
    let down: Vec<String> = runtime
        .upstreams_down()
        .into_iter()
        .map(|(name, state, _)| format!("{name} ({state})"))
        .collect();
    if !down.is_empty() {
        println!("\nupstreams that did not start: {}", down.join(", "));
    }
    println!("\nchain (before-execute top to bottom, after-execute bottom to top):");
    for (i, hook) in plan.hooks.iter().enumerate() {
        let spec = &hook.component;
        println!(
            "  {}. {}\t{}\ton_failure={}\ttools={}{}",
            i + 1,
            spec.name,
            spec.component,
            hook.on_failure,
            hook.tools,
            grants_text(&spec.grants, spec.network.as_deref())
        );
        for (key, value) in &spec.settings {
            println!("       {key} = {value}");
        }
        print!("{}", component_lines(&spec.component.to_string()));
    }
    println!("\nsessions: {}", store_text(&plan, data));
    if !plan.tenants.is_empty() {
        println!("\ntenants:");
    }
    for (id, tenant) in &plan.tenants {
        println!("  {id}\t{}", tenant_text(tenant));
    }
    println!("\nserve --http:");
    for line in serve_lines(&plan) {
        println!("  {line}");
    }
    for path in stores_shared_remotely(&config) {
        hookhost::announce::warning(&format!(
            "{name}: persistent.{path:?} keeps a tree per tenant (`{{tenant}}` in its backing), \
             but its store reaches the network and no setting names `{{tenant}}`: a remote \
             tree its settings name is every tenant's"
        ));
    }
    for upstream in shared_stateful_upstreams(&plan) {
        hookhost::announce::warning(&format!(
            "{name}: upstreams.{upstream} looks stateful (a memory, files, a \
             database) and its one instance serves every tenant: one tenant's data reaches \
             another; give it `scope = \"tenant\"` or `\"session\"`"
        ));
    }
    if let Some(Err(unavailable)) = runtime.bash_readiness().await {
        hookhost::announce::error(&format!("{name}: {unavailable}"));
        return Ok(ExitCode::FAILURE);
    }
    if !down.is_empty() {
        hookhost::announce::error(&format!(
            "{name}: upstreams did not start: {} (see the log above)",
            down.join(", ")
        ));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The persistent directories whose backing is per tenant while their store, granted
/// hosts, is given no `{tenant}` to keep tenants' remote trees apart with.
fn stores_shared_remotely(config: &hookhost::config::Config) -> Vec<&str> {
    config
        .persistent
        .iter()
        .filter(|(_, spec)| spec.network.as_ref().is_some_and(|g| !g.allow.is_empty()))
        .filter(|(_, spec)| spec.backing.contains("{tenant}"))
        .filter(|(_, spec)| !spec.settings.values().any(|v| v.contains("{tenant}")))
        .map(|(path, _)| path.get_ref().as_str())
        .collect()
}

/// The upstreams, shared by declared tenants, whose command, arguments or URL name what
/// usually keeps state between calls.
fn shared_stateful_upstreams(plan: &hookhost::config::Plan) -> Vec<&str> {
    const STATEFUL: &[&str] = &[
        "memory",
        "filesystem",
        "file",
        "sqlite",
        "postgres",
        "mysql",
        "redis",
        "git",
        "notes",
        "storage",
        "database",
    ];
    if plan.tenants.is_empty() {
        return Vec::new();
    }
    plan.upstreams
        .iter()
        .filter(|(_, spec)| spec.scope == hookhost::config::UpstreamScope::Shared)
        .filter(|(_, spec)| {
            let named = spec
                .command
                .iter()
                .chain(&spec.args)
                .map(|s| s.to_lowercase())
                .chain(spec.url.iter().map(|u| u.expose().to_lowercase()))
                .collect::<Vec<_>>()
                .join(" ");
            STATEFUL.iter().any(|word| named.contains(word))
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Where sessions are kept: never a password.
fn store_text(plan: &hookhost::config::Plan, data: &Path) -> String {
    match &plan.session_store {
        Some(url) => format!(
            "PostgreSQL {}",
            hookhost::sessions::postgres::store_address(url.expose())
        ),
        None => format!("SQLite {}", data.join("sessions.db").display()),
    }
}

/// What `config check` says of a tenant: how its clients are told apart, and what it may
/// do and use.
fn tenant_text(tenant: &hookhost::sessions::Tenant) -> String {
    let all = || "all".to_string();
    let quota = match (tenant.quota.bytes, tenant.quota.entries) {
        (None, None) => "none".to_string(),
        (bytes, files) => format!(
            "{} bytes, {} files",
            bytes.map_or("any".into(), |b| b.to_string()),
            files.map_or("any".into(), |f| f.to_string())
        ),
    };
    let rate = tenant.rate;
    let rate = match (rate.calls_per_second, rate.concurrent) {
        (None, None) => "none".to_string(),
        (per_second, concurrent) => format!(
            "{} calls/s (burst {}), {} at once",
            per_second.map_or("any".into(), |n| n.to_string()),
            rate.burst
                .or(per_second)
                .map_or("-".into(), |n| n.to_string()),
            concurrent.map_or("any".into(), |n| n.to_string())
        ),
    };
    format!(
        "token: {}\ttools: {}\tchain: {}\tdisk quota: {quota}\trate: {rate}\tsessions: {}\t\
         network: {}",
        if tenant.token.is_some() {
            "set"
        } else {
            "none"
        },
        tenant.tools.as_ref().map_or_else(all, |t| t.to_string()),
        tenant.hooks.as_ref().map_or_else(all, |h| h.join(", ")),
        tenant.max_sessions.map_or("any".into(), |m| m.to_string()),
        match &tenant.network {
            None => "its components' grants".to_string(),
            Some(ceiling) => format!("at most {}", allow_text(Some(ceiling))),
        },
    )
}

/// What `config check` says of `bash`: where it runs, and how it is confined.
/// What `serve --http` does beside MCP: TLS, JWTs, the admin page (never a secret).
fn serve_lines(plan: &Plan) -> Vec<String> {
    let tls = match &plan.tls {
        Some(files) => format!(
            "TLS: {} (key {})",
            files.cert.display(),
            files.key.display()
        ),
        None => "TLS: off (plain HTTP)".into(),
    };
    let jwt = match &plan.jwt {
        Some(jwt) => format!(
            "JWTs: from {} (keys {}), audience {}, tenant in claim {:?}, sessions bound to claim {:?}",
            jwt.issuer, jwt.jwks_written, jwt.audience, jwt.tenant_claim, jwt.subject_claim
        ),
        None => "JWTs: off (tenants' tokens only)".into(),
    };
    let admin = match plan.admin_token {
        Some(_) => "admin page: /admin (token set)",
        None => "admin page: off (no [serve] admin_token)",
    };
    vec![tls, jwt, admin.into()]
}

fn bash_text(
    bash: &hookhost::config::BashPlan,
    tenants: &BTreeMap<TenantId, hookhost::sessions::Tenant>,
    readiness: Option<
        Result<Option<hookhost::tools::bash::Readiness>, hookhost::tools::bash::Unavailable>,
    >,
) -> String {
    let Some(shell) = &bash.sandbox else {
        return format!(
            "host-native, runs in {} UNSANDBOXED: as hookhost's user, with every file it can reach",
            bash.mount
        );
    };
    let ready = match readiness {
        Some(Ok(Some(ready))) => ready,
        Some(Err(unavailable)) => return format!("host-native, CANNOT RUN: {unavailable}"),
        _ => return "host-native".into(),
    };
    let said = |network: &ShellNetwork| match network {
        ShellNetwork::Closed => "off".to_string(),
        ShellNetwork::Open => "ON".to_string(),
        ShellNetwork::Allow(allow) => format!(
            "only through hookhost's proxy to {}",
            allow_text(Some(allow))
        ),
    };
    let others: Vec<String> = tenants
        .iter()
        .filter_map(|(id, t)| {
            let own = t.shell_network.as_ref().filter(|n| **n != shell.network)?;
            Some(format!("{} for {id}", said(own)))
        })
        .collect();
    let mut network = said(&shell.network);
    if !others.is_empty() {
        network = format!("{network} ({})", others.join("; "));
    }
    let any_open = shell.network.is_open()
        || tenants
            .values()
            .any(|t| t.shell_network.as_ref().is_some_and(ShellNetwork::is_open));
    if any_open {
        network = format!("{network}; open networks: {}", ready.network);
    }
    let limits = shell.limits;
    format!(
        "host-native, runs in {} sandboxed by {}{}\n       network: {network}; processes: {} ({}); \
         memory: {} bytes ({}); cpu: {} s a process; files up to {} bytes; /tmp: {} bytes",
        bash.mount,
        ready.bwrap,
        paths_text(&bash.grants),
        limits.processes,
        ready.processes,
        limits.memory_bytes,
        ready.memory,
        limits.cpu_secs,
        limits.file_bytes,
        limits.tmp_bytes
    )
}

/// Compiles every component of `config` once (into the cache of `data`, so that the
/// runtime then loads them from it) and describes each: `(component, lines to print)`. A
/// registry's component is pulled into the cache of `pulled` (the data directory) first,
/// and said with the digest its reference resolved to.
async fn inspect_components(
    plan: &hookhost::config::Plan,
    pulled: &Path,
    data: &Path,
    imports: bool,
) -> Result<Vec<(String, Vec<String>)>> {
    use hookhost::component::ComponentRef;
    let loader = hookhost::check::inspector(data)?;
    let mut described: Vec<(String, Vec<String>)> = Vec::new();
    let refs = plan
        .hooks
        .iter()
        .map(|h| &h.component.component)
        .chain(plan.tools.iter().map(|t| &t.component));
    for component in refs {
        let name = component.to_string();
        if described.iter().any(|(c, _)| *c == name) {
            continue;
        }
        let mut lines = Vec::new();
        let file = match component {
            ComponentRef::Oci(written) => {
                let reference = hookhost::registry::OciRef::parse(written)?;
                let signers = hookhost::registry::read_signers(&plan.signers_of(written))?;
                let fetched =
                    hookhost::registry::fetch(&reference, pulled, &plan.registries, &signers)
                        .await?;
                lines.push(format!("       {}\n", reference.at(&fetched.manifest)));
                if !fetched.signed_by.is_empty() {
                    lines.push(format!(
                        "       signed by {}\n",
                        fetched.signed_by.join(", ")
                    ));
                }
                &ComponentRef::File(fetched.path)
            }
            _ => component,
        };
        // A component that does not load is reported by the runtime, with its place.
        let Ok(inspection) = hookhost::check::inspect(&loader, file) else {
            continue;
        };
        lines.push(format!("       {}\n", inspection.summary()));
        if imports {
            lines.extend(
                inspection
                    .import_lines()
                    .map(|line| format!("       imports {line}\n")),
            );
        }
        described.push((name, lines));
    }
    Ok(described)
}

/// A component's grants: its paths, and the hosts its `wasi:http` requests may reach.
fn grants_text(
    grants: &hookhost::sandbox::Grants,
    network: Option<&hookhost::network::Allow>,
) -> String {
    format!("{}\tnetwork: {}", paths_text(grants), allow_text(network))
}

/// The paths of `grants`, each with its access.
fn paths_text(grants: &hookhost::sandbox::Grants) -> String {
    grants
        .iter()
        .map(|(path, access)| format!("\t{path} {}", access.word()))
        .collect()
}

/// What a `network = { allow = [...] }` lets through, as written (`none` without one).
fn allow_text(network: Option<&hookhost::network::Allow>) -> String {
    match network {
        Some(allow) if !allow.is_empty() => allow.written().collect::<Vec<_>>().join(", "),
        _ => "none".into(),
    }
}
