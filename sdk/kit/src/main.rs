//! `guest-kit`: what a hook author outside Rust needs besides a compiler, in one small
//! binary built from crates.io (the same crates `wit-bindgen` and `wasm-tools` are made of,
//! without building those two whole tools).
//!
//! ```text
//! guest-kit c-bindings WIT_DIR --world hook --out DIR   # hook.c, hook.h, hook_component_type.o
//! guest-kit componentize CORE.wasm -o HOOK.wasm         # a WASI preview1 reactor → component
//! ```

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the C bindings of a world: `WORLD.c`, `WORLD.h` and `WORLD_component_type.o`
    /// (link the object into the module: it carries the world's type).
    CBindings {
        /// The WIT package's directory (`wit/hooks@0.2.0`).
        wit: PathBuf,
        /// The world: `hook` or `tool`.
        #[arg(long, default_value = "hook")]
        world: String,
        /// Where to write the files.
        #[arg(long)]
        out: PathBuf,
    },
    /// Turns a core module built for WASI preview1 as a reactor (`-mexec-model=reactor`),
    /// with the world's type linked in, into a component, adapting its preview1 imports to
    /// WASI preview2.
    Componentize {
        /// The core module.
        module: PathBuf,
        /// The component to write.
        #[arg(short, long)]
        out: PathBuf,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::CBindings { wit, world, out } => c_bindings(&wit, &world, &out),
        Command::Componentize { module, out } => componentize(&module, &out),
    }
}

fn c_bindings(wit: &std::path::Path, world: &str, out: &std::path::Path) -> Result<()> {
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_path(wit)
        .with_context(|| format!("reading the WIT in {}", wit.display()))?;
    let world = resolve.select_world(&[package], Some(world))?;
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (name, contents) in files.iter() {
        let path = out.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn componentize(module: &std::path::Path, out: &std::path::Path) -> Result<()> {
    let bytes = std::fs::read(module).with_context(|| format!("reading {}", module.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&bytes)
        .context("the module carries no component type: link WORLD_component_type.o into it")?
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .validate(true)
        .encode()
        .context("making the component")?;
    std::fs::write(out, component).with_context(|| format!("writing {}", out.display()))
}
