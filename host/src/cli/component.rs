//! `hookhost component check`: does a component conform, and if not, what to fix (see
//! [`hookhost::check`]); `component push` and `pull`: components to and from OCI
//! registries (see [`hookhost::registry`]); `component sign`: a cosign-compatible
//! signature of one.

use anyhow::{Context, Result, bail};
use hookhost::registry::{OciRef, Registry};
use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum ComponentCommand {
    /// Check that a component conforms: its world, WIT version and imports, then a run in
    /// the real sandbox through the cases a chain will give it (one line per finding; exit
    /// 0 only if it conforms). Compiled code is cached in the data directory.
    Check(CheckArgs),
    /// Push a component to an OCI registry in the Wasm artifact layout `wkg oci pull`
    /// reads, after checking that it conforms; prints the manifest's digest.
    Push(PushArgs),
    /// Pull a component from an OCI registry (by tag or digest) into a file; prints the
    /// manifest's digest.
    Pull(PullArgs),
    /// Sign a component in an OCI registry with an ECDSA P-256 key, as `cosign sign --key`
    /// does (the `sha256-DIGEST.sig` tag beside it); prints the manifest's digest signed.
    Sign(SignArgs),
}

/// `hookhost component sign`'s arguments.
#[derive(clap::Args)]
pub struct SignArgs {
    /// `oci://REGISTRY/REPOSITORY:TAG` (the manifest it names now is signed) or
    /// `oci://REGISTRY/REPOSITORY@sha256:DIGEST`.
    reference: String,
    /// The private key: PEM ECDSA P-256, PKCS#8 or SEC1, unencrypted (`openssl ecparam
    /// -name prime256v1 -genkey -noout -out key.pem`; its public half, `openssl ec -in
    /// key.pem -pubout -out key.pub`, is what `require_signature` names).
    #[arg(long, value_name = "FILE")]
    key: std::path::PathBuf,
    /// Sign only if the component in the registry is this `.wasm` file, byte for byte:
    /// what to give when signing by tag, which the registry resolves.
    #[arg(long, value_name = "WASM")]
    file: Option<std::path::PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// The signature `pull` and `check` require of a registry component.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Refuse the component unless one of these public keys (PEM, `cosign.pub`) signed
    /// it, as `require_signature = { keys = [...] }` does in a config. Repeatable.
    #[arg(long = "require-signature", value_name = "PUBLIC_KEY")]
    keys: Vec<std::path::PathBuf>,
}

/// How to reach a registry: the flags `push` and `pull` share.
#[derive(clap::Args)]
pub struct RegistryArgs {
    /// Plain HTTP: alone, to a loopback registry only; `--insecure HOST:PORT` names any
    /// registry (on a network you trust). Credentials come from HOOKHOST_REGISTRY_USERNAME
    /// and HOOKHOST_REGISTRY_PASSWORD for the registry HOOKHOST_REGISTRY_HOST names, or the
    /// Docker config file.
    #[arg(long, value_name = "HOST:PORT", num_args = 0..=1, default_missing_value = "")]
    insecure: Option<String>,
}

impl RegistryArgs {
    fn connect(&self, reference: &OciRef) -> Result<Registry> {
        use hookhost::registry::PlainHttp;
        let plain = match self.insecure.as_deref() {
            None => PlainHttp::Never,
            Some("") => PlainHttp::Loopback,
            Some(host) => PlainHttp::To(host),
        };
        // The name as references spell it (lowercase, …), for the comparison.
        let named = match plain {
            PlainHttp::To(host) => OciRef::parse(&format!("oci://{host}/probe:probe"))
                .map(|r| r.registry().to_string())
                .with_context(|| format!("--insecure {host}: not a registry host[:port]"))?,
            _ => String::new(),
        };
        let plain = match plain {
            PlainHttp::To(_) => PlainHttp::To(&named),
            other => other,
        };
        Ok(Registry::connect(reference, plain, None)?)
    }
}

/// `hookhost component push`'s arguments.
#[derive(clap::Args)]
pub struct PushArgs {
    /// The `.wasm` component.
    file: std::path::PathBuf,
    /// Where: `oci://REGISTRY/REPOSITORY:TAG`.
    reference: String,
    /// Push it even if it does not conform.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    registry: RegistryArgs,
    /// What the check before the push gives the component (as `component check` does).
    #[command(flatten)]
    check: CheckFlags,
}

/// `hookhost component pull`'s arguments.
#[derive(clap::Args)]
pub struct PullArgs {
    /// `oci://REGISTRY/REPOSITORY:TAG` or `oci://REGISTRY/REPOSITORY@sha256:DIGEST`.
    reference: String,
    /// The file to write the component to.
    #[arg(short, long, value_name = "FILE")]
    output: std::path::PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    verify: VerifyArgs,
}

/// Signs the manifest the reference names; prints it by digest.
pub async fn sign(args: SignArgs) -> Result<ExitCode> {
    let reference = OciRef::parse(&args.reference)?;
    let key = hookhost::registry::read_signing_key(&args.key)?;
    let expected = match &args.file {
        Some(file) => Some(hookhost::registry::digest_of(
            &std::fs::read(file).with_context(|| format!("reading {}", file.display()))?,
        )),
        None => None,
    };
    let registry = args.registry.connect(&reference)?;
    let (digest, layer) = bounded(
        &reference,
        registry.sign(&reference, &key, expected.as_deref()),
    )
    .await?;
    if reference.digest().is_none() && expected.is_none() {
        // As cosign warns: the registry said which manifest the tag names.
        hookhost::announce::warning(&format!(
            "signed what the tag names now, {digest} (its component: {layer}); sign by \
             digest, or give --file, to be sure it is what you meant"
        ));
    }
    println!("{}", reference.at(&digest));
    Ok(ExitCode::SUCCESS)
}

/// A registry operation of `reference`, bounded by `REGISTRY_FETCH_TIMEOUT` as a start's
/// pulls are: a registry that trickles cannot hold a command.
async fn bounded<T>(
    reference: &OciRef,
    operation: impl std::future::Future<Output = Result<T, hookhost::registry::RegistryError>>,
) -> Result<T> {
    let bound = hookhost::limits::REGISTRY_FETCH_TIMEOUT;
    match tokio::time::timeout(bound, operation).await {
        Ok(done) => Ok(done?),
        Err(_) => bail!("{reference}: the registry took more than {bound:?}"),
    }
}

/// Pushes the component (checked first unless `--force`); prints its manifest's digest.
pub async fn push(args: PushArgs, data: &Path) -> Result<ExitCode> {
    let reference = OciRef::parse(&args.reference)?;
    let file = args.file.display().to_string();
    let wasm = std::fs::read(&args.file).with_context(|| format!("reading {file}"))?;
    if !args.force {
        let options = args.check.options()?;
        let component = hookhost::component::ComponentRef::File(args.file.clone());
        let report = hookhost::check::check(&component, &options, data)
            .await
            .with_context(|| format!("checking {file}"))?;
        if !report.conforms() {
            for finding in &report.findings {
                hookhost::announce::note(&format!("  {finding}"));
            }
            bail!(
                "{file} does not conform (above; `hookhost component check {file}`): not \
                 pushed. --force pushes it anyway"
            );
        }
    }
    let title = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let registry = args.registry.connect(&reference)?;
    let digest = bounded(&reference, registry.push(&reference, wasm, &title)).await?;
    println!("{}", reference.at(&digest));
    Ok(ExitCode::SUCCESS)
}

/// Pulls the component into `--output`; prints the reference by its manifest's digest.
pub async fn pull(args: PullArgs, data: &Path) -> Result<ExitCode> {
    let reference = OciRef::parse(&args.reference)?;
    let pulled = pull_into_cache(&reference, &args.registry, &args.verify, data).await?;
    let output = args.output.display().to_string();
    std::fs::copy(&pulled.path, &args.output).with_context(|| format!("writing {output}"))?;
    println!("{}", reference.at(&pulled.manifest));
    Ok(ExitCode::SUCCESS)
}

/// `hookhost component check`'s arguments.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// A `.wasm` component, `builtin:NAME`, or `oci://…` (pulled into the cache first).
    component: String,
    #[command(flatten)]
    options: CheckFlags,
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    verify: VerifyArgs,
}

/// How `check` (and `push`, before it pushes) drives a component.
#[derive(clap::Args)]
pub struct CheckFlags {
    /// The world it must implement [default: either].
    #[arg(long)]
    world: Option<hookhost::check::World>,
    /// A setting, as the config would give it: `threshold=100`, `deny=["rm *"]`,
    /// `file=/audit/x.jsonl` (a value that is not TOML is a string).
    #[arg(long = "settings", value_name = "KEY=VALUE", num_args = 1..)]
    settings: Vec<String>,
    /// The arguments of the call (a JSON object) [default: `{"command":"echo hello"}`
    /// for a hook, `{}` for a tool].
    #[arg(long, value_name = "JSON")]
    call: Option<String>,
    /// A hook: the tool its calls are for.
    #[arg(long, default_value = "bash")]
    tool: String,
    /// A hook: one more output its after-execute is given, `TEXT` or `@FILE` — one
    /// your hook changes, so that check runs its `replace`.
    #[arg(long, value_name = "TEXT|@FILE")]
    output: Option<String>,
    /// Grant this virtual path too (read-write, scratch), besides
    /// /workspace, /artifacts, /audit, /plans and /session.
    #[arg(long, value_name = "PATH")]
    grant: Vec<String>,
    /// The deadline of each phase in milliseconds [default: the host's, 10 s].
    #[arg(long, value_name = "MS")]
    deadline: Option<u64>,
    /// Imports the host does not provide are allowed (they trap when called), as
    /// `allow_unknown_imports = true` in a config.
    #[arg(long)]
    allow_unknown_imports: bool,
    /// Grant it this host for `wasi:http` requests (`api.example.com`,
    /// `127.0.0.1:8080`, `*.example.com`), as `network = { allow = [...] }` in a config;
    /// none when left out, so each request it makes is refused.
    #[arg(long, value_name = "HOST")]
    allow: Vec<String>,
}

impl CheckFlags {
    fn options(self) -> Result<hookhost::check::CheckOptions> {
        let CheckFlags {
            world,
            settings,
            call,
            tool,
            output,
            grant,
            deadline,
            allow_unknown_imports,
            allow,
        } = self;
        let output = match output {
            Some(text) => Some(match text.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file)
                    .with_context(|| format!("--output: reading {file}"))?,
                None => text,
            }),
            None => None,
        };
        Ok(hookhost::check::CheckOptions {
            world,
            settings: parse_settings(&settings)?,
            grants: grant,
            call,
            tool,
            deadline_ms: deadline,
            allow_unknown_imports,
            output,
            allow,
        })
    }
}

/// Checks the component and prints one line per finding; exit 0 only if it conforms.
pub async fn check(args: CheckArgs, data: &Path) -> Result<ExitCode> {
    use hookhost::component::ComponentRef;
    let options = args.options.options()?;
    let written = ComponentRef::parse(&args.component);
    // A registry's component is checked as the file it was pulled into, and said by the
    // digest its reference resolved to.
    let (component, shown) = match &written {
        ComponentRef::Oci(text) => {
            let reference = OciRef::parse(text)?;
            let pulled = pull_into_cache(&reference, &args.registry, &args.verify, data).await?;
            let shown = reference.at(&pulled.manifest).to_string();
            (ComponentRef::File(pulled.path), shown)
        }
        _ => (written.clone(), written.to_string()),
    };
    let report = hookhost::check::check(&component, &options, data)
        .await
        .with_context(|| format!("checking {shown}"))?;
    println!("{shown}");
    for finding in &report.findings {
        println!("  {finding}");
    }
    Ok(if report.conforms() {
        println!("conforms");
        ExitCode::SUCCESS
    } else {
        println!("does not conform");
        ExitCode::FAILURE
    })
}

/// Pulls `reference` into the registry cache of `data`, and checks its signature when
/// `verify` names keys.
async fn pull_into_cache(
    reference: &OciRef,
    registry: &RegistryArgs,
    verify: &VerifyArgs,
    data: &Path,
) -> Result<hookhost::registry::Pulled> {
    let cache = hookhost::registry::cache_dir(data);
    let registry = registry.connect(reference)?;
    let mut pulled = bounded(reference, registry.pull(reference, &cache)).await?;
    if !verify.keys.is_empty() {
        let keys = hookhost::registry::read_keys(&verify.keys)?;
        let verified = hookhost::registry::verify_signature(
            reference,
            &pulled.manifest,
            &keys,
            &cache,
            Some(&registry),
        );
        let key = bounded(reference, verified).await?;
        hookhost::announce::note(&format!("signed by {}", key.file));
        pulled.signed_by.push(key.file.clone());
    }
    Ok(pulled)
}

/// `KEY=VALUE` settings: the value as TOML when it is TOML (`10`, `["a"]`, `"x"`), else
/// the text itself.
fn parse_settings(pairs: &[String]) -> Result<toml::Table> {
    let mut settings = toml::Table::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--settings {pair:?}: expected KEY=VALUE");
        };
        let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        settings.insert(key.trim().to_string(), value);
    }
    Ok(settings)
}
