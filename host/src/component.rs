//! Compiling and preparing components: the engine, the built-ins, `InstancePre`s.

use crate::bindings::{hook::HookPre, tool::ToolPre};
use crate::limits::EPOCH_TICK;
use crate::sandbox::{self, StoreState};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

mod builtins {
    include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
}

/// Where a component comes from: `builtin:NAME` or a path to a `.wasm` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentRef {
    Builtin(String),
    File(PathBuf),
}

impl ComponentRef {
    /// Parses `builtin:NAME` or a path.
    pub fn parse(s: &str) -> ComponentRef {
        match s.strip_prefix("builtin:") {
            Some(name) => ComponentRef::Builtin(name.to_string()),
            None => ComponentRef::File(PathBuf::from(s)),
        }
    }

    /// The names of the components compiled into this binary.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        builtins::BUILTINS.iter().map(|(name, _)| *name)
    }

    /// The built-ins as a config names them: `builtin:offload, builtin:audit, …`.
    pub fn builtin_list() -> String {
        Self::builtin_names()
            .map(|n| format!("builtin:{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for ComponentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentRef::Builtin(name) => write!(f, "builtin:{name}"),
            ComponentRef::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{component}: there is no built-in component of that name (built-ins: {known})")]
    UnknownBuiltin { component: String, known: String },
    #[error("{component}: cannot read the file: {source}")]
    Read {
        component: String,
        source: std::io::Error,
    },
    #[error("{component}: not a valid WebAssembly component: {reason}")]
    Compile { component: String, reason: String },
    #[error("{component}: does not fit the `{world}` world: {reason}")]
    Link {
        component: String,
        world: &'static str,
        reason: String,
    },
}

/// The engine and linker shared by every component of a runtime, and the epoch ticker that
/// enforces deadlines.
pub struct ComponentLoader {
    engine: Engine,
    linker: Linker<StoreState>,
    _ticker: EpochTicker,
}

impl ComponentLoader {
    /// An engine with epoch interruption on (and fuel metering when `fuel`), and the
    /// WASI + config linker.
    ///
    /// # Errors
    ///
    /// When wasmtime cannot make an engine on this machine.
    pub fn new(fuel: bool) -> wasmtime::Result<ComponentLoader> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.consume_fuel(fuel);
        // The component-model async ABI is not used; leaving it on doubles a call's cost.
        config.concurrency_support(false);
        let engine = Engine::new(&config)?;
        let linker = sandbox::linker(&engine)?;
        Ok(ComponentLoader {
            _ticker: EpochTicker::start(engine.clone()),
            engine,
            linker,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles a hook component and links it against the host's imports; with
    /// `unknown_imports_trap`, imports the host does not provide trap when called.
    ///
    /// # Errors
    ///
    /// A [`LoadError`] naming the component: unknown built-in, unreadable file, invalid
    /// component, or an import the host does not provide / a missing export.
    pub fn hook(
        &self,
        component: &ComponentRef,
        unknown_imports_trap: bool,
    ) -> Result<HookPre<StoreState>, LoadError> {
        let pre = self.instance_pre(component, "hook", unknown_imports_trap)?;
        HookPre::new(pre).map_err(|e| link_error(component, "hook", e))
    }

    /// Compiles a tool component and links it against the host's imports.
    ///
    /// # Errors
    ///
    /// As for [`ComponentLoader::hook`].
    pub fn tool(
        &self,
        component: &ComponentRef,
        unknown_imports_trap: bool,
    ) -> Result<ToolPre<StoreState>, LoadError> {
        let pre = self.instance_pre(component, "tool", unknown_imports_trap)?;
        ToolPre::new(pre).map_err(|e| link_error(component, "tool", e))
    }

    fn instance_pre(
        &self,
        component: &ComponentRef,
        world: &'static str,
        unknown_imports_trap: bool,
    ) -> Result<wasmtime::component::InstancePre<StoreState>, LoadError> {
        let name = component.to_string();
        let compiled = match component {
            ComponentRef::Builtin(builtin) => {
                let bytes = builtins::BUILTINS
                    .iter()
                    .find(|(n, _)| n == builtin)
                    .map(|(_, bytes)| *bytes)
                    .ok_or_else(|| LoadError::UnknownBuiltin {
                        component: name.clone(),
                        known: ComponentRef::builtin_list(),
                    })?;
                Component::new(&self.engine, bytes)
            }
            ComponentRef::File(path) => {
                let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
                    component: name.clone(),
                    source,
                })?;
                Component::new(&self.engine, bytes)
            }
        }
        .map_err(|e| LoadError::Compile {
            component: name.clone(),
            reason: format!("{e:#}"),
        })?;
        let link = |linker: &Linker<StoreState>| linker.instantiate_pre(&compiled);
        if unknown_imports_trap {
            // A linker of its own: the stubs must not reach other components.
            let mut linker = self.linker.clone();
            linker
                .define_unknown_imports_as_traps(&compiled)
                .and_then(|()| link(&linker))
        } else {
            link(&self.linker)
        }
        .map_err(|e| link_error(component, world, e))
    }
}

fn link_error(component: &ComponentRef, world: &'static str, e: wasmtime::Error) -> LoadError {
    LoadError::Link {
        component: component.to_string(),
        world,
        reason: format!("{e:#}"),
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: Engine) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        thread::Builder::new()
            .name("hookhost-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch thread");
        EpochTicker { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
