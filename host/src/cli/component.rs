//! `hookhost component check`: does a component conform, and if not, what to fix (see
//! [`hookhost::check`]).

use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum ComponentCommand {
    /// Check that a component conforms: its world, WIT version and imports, then a run in
    /// the real sandbox through the cases a chain will give it (one line per finding; exit
    /// 0 only if it conforms). Compiled code is cached in the data directory.
    Check(CheckArgs),
}

/// `hookhost component check`'s arguments.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// A `.wasm` component, or `builtin:NAME`.
    component: String,
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
}

/// Checks the component and prints one line per finding; exit 0 only if it conforms.
pub async fn check(args: CheckArgs, data: &Path) -> Result<ExitCode> {
    let CheckArgs {
        component,
        world,
        settings,
        call,
        tool,
        output,
        grant,
        deadline,
        allow_unknown_imports,
    } = args;
    let output = match output {
        Some(text) => Some(match text.strip_prefix('@') {
            Some(file) => std::fs::read_to_string(file)
                .with_context(|| format!("--output: reading {file}"))?,
            None => text,
        }),
        None => None,
    };
    let options = hookhost::check::CheckOptions {
        world,
        settings: parse_settings(&settings)?,
        grants: grant,
        call,
        tool,
        deadline_ms: deadline,
        allow_unknown_imports,
        output,
    };
    let component = hookhost::component::ComponentRef::parse(&component);
    let report = hookhost::check::check(&component, &options, data)
        .await
        .with_context(|| format!("checking {component}"))?;
    println!("{component}");
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
