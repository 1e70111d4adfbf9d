//! Compiling and preparing components: the engine, the built-ins, `InstancePre`s.

pub use crate::abi::SettingType;
use crate::abi::store::StorePre;
use crate::abi::{HookPre, ToolPre};
use crate::limits::EPOCH_TICK;
use crate::sandbox::{self, StoreState};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, LinkerInstance, ResourceType};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Core instances, memories and tables a component instance may use, on average, when the
/// pool is sized: a Rust component is one core module plus small shims.
const CORE_INSTANCES_PER_COMPONENT: u32 = 4;

/// Whether a compile (a compiled-code cache miss) is announced on stderr; see
/// [`announce_compiles`].
static ANNOUNCE_COMPILES: AtomicBool = AtomicBool::new(false);

/// Says "compiling components…" on stderr before the first compile of a loader: for a
/// command run on a terminal, where seconds of silence look like a hang.
pub fn announce_compiles(on: bool) {
    ANNOUNCE_COMPILES.store(on, Ordering::Relaxed);
}

mod builtins {
    include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
}

/// Where a component comes from: `builtin:NAME`, a path to a `.wasm` file, or a registry
/// (`oci://…`, see [`crate::registry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentRef {
    Builtin(String),
    File(PathBuf),
    /// As written; pulled before it is loaded ([`ComponentLoader::pulled`]).
    Oci(String),
}

impl ComponentRef {
    /// Parses `builtin:NAME`, `oci://…` or a path.
    pub fn parse(s: &str) -> ComponentRef {
        if s.starts_with(crate::registry::SCHEME) {
            return ComponentRef::Oci(s.to_string());
        }
        match s.strip_prefix("builtin:") {
            Some(name) => ComponentRef::Builtin(name.to_string()),
            None => ComponentRef::File(PathBuf::from(s)),
        }
    }

    /// The names of the components compiled into this binary.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        builtins::BUILTINS.iter().map(|(name, _, _)| *name)
    }

    /// The built-ins as a config names them: `builtin:offload, builtin:audit, …`.
    pub fn builtin_list() -> String {
        Self::builtin_names()
            .map(|n| format!("builtin:{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The settings each built-in tool reads, with their types: a config giving one any other
/// key, or a value of another type, is refused (a typo must not silently become a
/// default).
///
/// Hooks describe their own settings (`hook-info`, the built-in ones included), and the
/// host checks a config against that when it loads them; the `tool` world of
/// `harness:hooks@0.2.0` has no such export, so the built-in tools' settings are listed
/// here, beside the tools' docs in `guests/tools/`.
pub const BUILTIN_TOOL_SETTINGS: &[(&str, &[(&str, SettingType)])] = &[
    ("todo_write", &[("file", SettingType::Text)]),
    ("read_file", &[]),
    ("write_file", &[]),
    ("edit_file", &[]),
];

impl ComponentRef {
    /// The settings a built-in tool takes; `None` for a hook or a component file (a hook
    /// says what it takes when it loads; a tool file declares nothing the host can check).
    pub fn builtin_tool_settings(&self) -> Option<&'static [(&'static str, SettingType)]> {
        let ComponentRef::Builtin(name) = self else {
            return None;
        };
        BUILTIN_TOOL_SETTINGS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, settings)| *settings)
    }
}

impl fmt::Display for ComponentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentRef::Builtin(name) => write!(f, "builtin:{name}"),
            ComponentRef::File(path) => write!(f, "{}", path.display()),
            ComponentRef::Oci(reference) => write!(f, "{reference}"),
        }
    }
}

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{component}: there is no built-in component of that name (built-ins: {known})")]
    UnknownBuiltin { component: String, known: String },
    #[error(
        "{component}: not pulled from its registry, or its copy in the cache is not what the registry named"
    )]
    NotPulled { component: String },
    #[error("{component}: cannot read the file: {source}")]
    Read {
        component: String,
        source: std::io::Error,
    },
    #[error(
        "{component}: not a WebAssembly component (it does not begin with the `\\0asm` header; it begins {begins:?}): point `component` at the `.wasm` file your toolchain built"
    )]
    NotWasm { component: String, begins: String },
    #[error("{component}: not a valid WebAssembly component")]
    Compile {
        component: String,
        source: wasmtime::Error,
    },
    #[error("{component}: does not fit the `{world}` world")]
    Link {
        component: String,
        world: &'static str,
        source: wasmtime::Error,
    },
}

/// How the engine is built: from the config's `[engine]` table and its limits.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineOptions {
    /// Meter fuel (some limits set it).
    pub fuel: bool,
    /// Pooling allocator slots; `None` allocates on demand.
    pub pool_instances: Option<u32>,
    /// The largest memory any component may have (sizes the pool's slots).
    pub max_memory_bytes: u64,
    /// Bytes of each pooled memory kept resident between instances.
    pub keep_resident_bytes: u64,
    /// Where compiled components are cached; `None` compiles at every start.
    pub cache_dir: Option<PathBuf>,
}

/// The engine and linker shared by every component of a runtime, and the epoch ticker that
/// enforces deadlines.
pub struct ComponentLoader {
    engine: Engine,
    linker: Linker<StoreState>,
    cache_dir: Option<PathBuf>,
    /// Whether a compile was announced already (see [`announce_compiles`]).
    announced: AtomicBool,
    /// What [`ComponentLoader::provides`] found, by import name.
    provided: Mutex<HashMap<String, bool>>,
    /// The SHA-256 of each component compiled, by its name in the config.
    digests: Mutex<HashMap<String, [u8; 32]>>,
    /// Registry components as pulled (their files in the cache, their digests), by
    /// reference as written.
    pulled: Mutex<HashMap<String, crate::registry::Pulled>>,
    _ticker: EpochTicker,
}

impl ComponentLoader {
    /// An engine with epoch interruption on, fuel metering when asked, and the pooling
    /// allocator when asked and the machine can reserve its address space (otherwise
    /// on-demand allocation, logged); and the WASI + config linker.
    ///
    /// # Errors
    ///
    /// When wasmtime cannot make an engine on this machine.
    pub fn new(options: &EngineOptions) -> wasmtime::Result<ComponentLoader> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.consume_fuel(options.fuel);
        // The component-model async ABI is not used; leaving it on doubles a call's cost.
        config.concurrency_support(false);
        let engine = match options.pool_instances {
            Some(instances) => {
                let mut pooled = config.clone();
                let keep = usize::try_from(options.keep_resident_bytes).unwrap_or(0);
                let mut pool = PoolingAllocationConfig::default();
                pool.total_component_instances(instances)
                    .total_core_instances(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
                    .total_memories(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
                    .total_tables(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
                    // Every store that lives (a call in flight, a per-session instance)
                    // holds an async stack.
                    .total_stacks(instances)
                    .max_memory_size(
                        usize::try_from(options.max_memory_bytes).unwrap_or(usize::MAX),
                    )
                    .linear_memory_keep_resident(keep)
                    // Resetting a slot, the kernel says which kept pages were touched
                    // (Linux 6.7+ PAGEMAP_SCAN), so only those are cleared, instead of a
                    // memset of the whole kept prefix; without it, the memset.
                    .pagemap_scan(wasmtime::Enabled::Auto)
                    // Stacks and tables too: returning their pages to the OS after every
                    // call costs a TLB shootdown across cores each time.
                    .async_stack_keep_resident(keep)
                    .table_keep_resident(keep);
                pooled.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
                match Engine::new(&pooled) {
                    Ok(engine) => engine,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), instances, "the pooling allocator is unavailable here; allocating on demand");
                        Engine::new(&config)?
                    }
                }
            }
            None => Engine::new(&config)?,
        };
        let linker = sandbox::linker(&engine)?;
        if let Some(dir) = &options.cache_dir
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            tracing::warn!(dir = %dir.display(), error = %e, "no compiled-code cache");
        }
        Ok(ComponentLoader {
            _ticker: EpochTicker::start(engine.clone()),
            engine,
            linker,
            cache_dir: options.cache_dir.clone(),
            announced: AtomicBool::new(false),
            provided: Mutex::new(HashMap::new()),
            digests: Mutex::new(HashMap::new()),
            pulled: Mutex::new(HashMap::new()),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles a hook component of either WIT version and links it against the host's
    /// imports; with `unknown_imports_trap`, imports the host does not provide trap when
    /// called.
    ///
    /// # Errors
    ///
    /// A [`LoadError`] naming the component: unknown built-in, unreadable file, invalid
    /// component, or an import the host does not provide / a missing export.
    pub fn hook(
        &self,
        component: &ComponentRef,
        unknown_imports_trap: bool,
    ) -> Result<HookPre, LoadError> {
        let pre = self.instance_pre(component, "hook", unknown_imports_trap)?;
        HookPre::new(pre, &self.engine).map_err(|e| link_error(component, "hook", e))
    }

    /// Compiles a tool component of either WIT version and links it against the host's
    /// imports.
    ///
    /// # Errors
    ///
    /// As for [`ComponentLoader::hook`].
    pub fn tool(
        &self,
        component: &ComponentRef,
        unknown_imports_trap: bool,
    ) -> Result<ToolPre, LoadError> {
        let pre = self.instance_pre(component, "tool", unknown_imports_trap)?;
        ToolPre::new(pre, &self.engine).map_err(|e| link_error(component, "tool", e))
    }

    /// Compiles a store component (`harness:store`) and links it against the host's
    /// imports.
    ///
    /// # Errors
    ///
    /// As for [`ComponentLoader::hook`].
    pub fn store(&self, component: &ComponentRef) -> Result<StorePre, LoadError> {
        let pre = self.instance_pre(component, "store", false)?;
        StorePre::new(pre, &self.engine).map_err(|e| link_error(component, "store", e))
    }

    /// Reads and compiles a component (from the compiled-code cache when it holds it).
    ///
    /// # Errors
    ///
    /// A [`LoadError`]: unknown built-in, unreadable file, or not a valid component.
    pub fn compile_ref(&self, component: &ComponentRef) -> Result<Compiled, LoadError> {
        let name = component.to_string();
        let (bytes, digest) = match component {
            ComponentRef::Builtin(builtin) => builtins::BUILTINS
                .iter()
                .find(|(n, _, _)| n == builtin)
                .map(|(_, bytes, digest)| (std::borrow::Cow::Borrowed(*bytes), *digest))
                .ok_or_else(|| LoadError::UnknownBuiltin {
                    component: name.clone(),
                    known: ComponentRef::builtin_list(),
                })?,
            ComponentRef::File(_) | ComponentRef::Oci(_) => {
                let path = &self.path_of(component)?;
                let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
                    component: name.clone(),
                    source,
                })?;
                // wasmtime would take text for WAT and answer with a parser's complaint
                // about what it quoted of, say, a README.
                if !bytes.starts_with(b"\0asm") {
                    let begins = String::from_utf8_lossy(&bytes[..bytes.len().min(16)]);
                    return Err(LoadError::NotWasm {
                        component: name,
                        begins: begins.into_owned(),
                    });
                }
                let digest: [u8; 32] = Sha256::digest(&bytes).into();
                // What the cache holds must be what the registry's manifest named.
                if let ComponentRef::Oci(reference) = component {
                    let pulled = self.pulled.lock().unwrap_or_else(|e| e.into_inner());
                    let layer = pulled.get(reference).map(|p| p.layer.as_str());
                    if layer != Some(&format!("sha256:{}", crate::ids::hex(&digest))) {
                        return Err(LoadError::NotPulled { component: name });
                    }
                }
                (std::borrow::Cow::Owned(bytes), digest)
            }
        };
        self.digests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone(), digest);
        let started = Instant::now();
        let (component, cached) = self
            .compile(&bytes, digest)
            .map_err(|e| LoadError::Compile {
                component: name,
                source: e,
            })?;
        Ok(Compiled {
            component,
            size: bytes.len(),
            took: started.elapsed(),
            cached,
        })
    }

    fn instance_pre(
        &self,
        component: &ComponentRef,
        world: &'static str,
        unknown_imports_trap: bool,
    ) -> Result<wasmtime::component::InstancePre<StoreState>, LoadError> {
        let compiled = self.compile_ref(component)?.component;
        if unknown_imports_trap {
            // A linker of its own: the stand-ins must not reach other components.
            let mut linker = self.linker.clone();
            self.stand_in_for_unprovided(&mut linker, &compiled)
                .and_then(|()| linker.instantiate_pre(&compiled))
        } else {
            self.linker.instantiate_pre(&compiled).map_err(|e| {
                // Say which imports are missing, in words, rather than wasmtime's first.
                let missing: Vec<String> = self
                    .imports(&compiled)
                    .into_iter()
                    .filter(|i| !i.provided && !i.types_only)
                    .map(|i| i.name)
                    .collect();
                if missing.is_empty() {
                    e
                } else {
                    wasmtime::format_err!(
                        "it imports {}, which this host does not provide: build it without \
                         them, or set allow_unknown_imports = true for it (calls to them then \
                         trap)",
                        missing.join(", ")
                    )
                }
            })
        }
        .map_err(|e| link_error(component, world, e))
    }
}

impl ComponentLoader {
    /// The component's imports, each with whether the host provides it.
    pub fn imports(&self, compiled: &Component) -> Vec<Import> {
        compiled
            .component_type()
            .imports(&self.engine)
            .map(|(name, import)| Import {
                name: name.to_string(),
                provided: self.provides(name),
                types_only: types_only(&self.engine, &import.ty),
            })
            .collect()
    }

    /// Whether the host provides the import `name` as instantiation resolves it: the name
    /// itself, or for a `0.x` version any patch of the same `0.x` (a component built
    /// against `wasi:io/poll@0.2.12` links to the host's 0.2.6). Cached per name.
    ///
    /// wasmtime has no query for this, so each candidate is tried on a copy of the linker:
    /// defining a name the linker already has fails.
    pub fn provides(&self, name: &str) -> bool {
        let mut known = self.provided.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&provided) = known.get(name) {
            return provided;
        }
        let defines = |candidate: &str| {
            let mut probe = self.linker.clone();
            probe.allow_shadowing(false);
            probe
                .root()
                .func_new(candidate, |_, _, _, _| Ok(()))
                .is_err()
        };
        let provided = defines(name)
            || semver_siblings(name).is_some_and(|mut siblings| siblings.any(|s| defines(&s)));
        known.insert(name.to_string(), provided);
        provided
    }

    /// Security: `allow_unknown_imports` defines, in `linker`, a stand-in that traps when
    /// called for every import of `compiled` the host does not provide at all, and for
    /// nothing else. (wasmtime's `define_unknown_imports_as_traps` also stands in for an
    /// interface the host provides at another patch version, `wasi:io/poll@0.2.12` for the
    /// host's 0.2.6, and its stand-in resources then mismatch the real ones.) A resource
    /// an unprovided interface takes from another interface (`use wasi:io/streams.{…}`) is
    /// left to that interface.
    fn stand_in_for_unprovided(
        &self,
        linker: &mut Linker<StoreState>,
        compiled: &Component,
    ) -> wasmtime::Result<()> {
        let mut seen = Vec::new();
        for (name, import) in compiled.component_type().imports(&self.engine) {
            if self.provides(name) {
                if let ComponentItem::ComponentInstance(instance) = &import.ty {
                    seen.extend(
                        instance
                            .exports(&self.engine)
                            .filter_map(|(_, e)| match e.ty {
                                ComponentItem::Resource(r) => Some(r),
                                _ => None,
                            }),
                    );
                }
                continue;
            }
            if !types_only(&self.engine, &import.ty) {
                tracing::debug!(import = name, "not provided by the host: calls to it trap");
            }
            stand_in(
                &self.engine,
                &mut linker.root(),
                name,
                &import.ty,
                name,
                &mut seen,
            )?;
        }
        Ok(())
    }

    /// What `component` (compiled by this loader) said of itself at an earlier start —
    /// `what`: the settings a hook takes (`"settings"`), a tool's descriptor — remembered
    /// by [`ComponentLoader::remember`], so that this start need not make an instance to
    /// ask; `None` when nothing is remembered.
    pub fn remembered<T: serde::de::DeserializeOwned>(
        &self,
        component: &ComponentRef,
        what: &str,
    ) -> Option<T> {
        let text = std::fs::read(self.remembered_file(component, what)?).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Remembers what `component` said of itself (`what`, see
    /// [`ComponentLoader::remembered`]) beside its compiled code: keyed by the component's
    /// SHA-256 (what a component says depends on its bytes, not on the engine) and `what`,
    /// written whole or not at all. Best effort: a cache that cannot be written only means
    /// the next start asks again.
    pub fn remember<T: serde::Serialize>(&self, component: &ComponentRef, what: &str, value: &T) {
        let Some(file) = self.remembered_file(component, what) else {
            return;
        };
        let partial = file.with_extension(format!("{}.partial", std::process::id()));
        let text = serde_json::to_vec(value).expect("what a component says serializes");
        if let Err(e) =
            std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, &file))
        {
            let _ = std::fs::remove_file(&partial);
            tracing::debug!(file = %file.display(), error = %e, "cannot remember what a component said");
        }
    }

    /// Whether `component` is what this loader loaded under its name: a built-in always
    /// is; a file, or a registry's component, is when its bytes hash as they did (a
    /// rebuilt hook is not, nor a tag that moved).
    pub fn unchanged(&self, component: &ComponentRef) -> bool {
        if let ComponentRef::Builtin(_) = component {
            return true;
        }
        let Ok(path) = self.path_of(component) else {
            return false;
        };
        let loaded = self
            .digests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&component.to_string())
            .copied();
        let now = std::fs::read(path).map(|bytes| <[u8; 32]>::from(Sha256::digest(&bytes)));
        matches!((loaded, now), (Some(loaded), Ok(now)) if loaded == now)
    }

    /// Takes `pulled` as the component `reference` (`oci://…`) names (a reload that
    /// resolves a tag anew gives it again).
    pub fn pulled(&self, reference: &str, pulled: crate::registry::Pulled) {
        self.pulled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(reference.to_string(), pulled);
    }

    /// What the component `reference` (`oci://…`) was last pulled as.
    pub fn pulled_of(&self, reference: &str) -> Option<crate::registry::Pulled> {
        self.pulled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(reference)
            .cloned()
    }

    /// The file a file or registry component is read from.
    fn path_of(&self, component: &ComponentRef) -> Result<PathBuf, LoadError> {
        match component {
            ComponentRef::File(path) => Ok(path.clone()),
            ComponentRef::Oci(reference) => self
                .pulled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(reference)
                .map(|p| p.path.clone())
                .ok_or_else(|| LoadError::NotPulled {
                    component: reference.clone(),
                }),
            ComponentRef::Builtin(_) => unreachable!("a built-in has no file"),
        }
    }

    fn remembered_file(&self, component: &ComponentRef, what: &str) -> Option<PathBuf> {
        let dir = self.cache_dir.as_ref()?;
        let digests = self.digests.lock().unwrap_or_else(|e| e.into_inner());
        let digest = digests.get(&component.to_string())?;
        Some(dir.join(format!("{}.{what}.json", crate::ids::hex(digest))))
    }

    /// The compiled form of `bytes`, whose SHA-256 is `digest`: from the cache when it holds
    /// it for this engine, else compiled (and cached).
    ///
    /// The cache key is the SHA-256 of the component's digest and of the engine's
    /// compatibility hash (wasmtime version, target, settings), so a changed component or
    /// engine misses. An entry is written to a temporary file and renamed into place: two
    /// processes filling the cache at once each write a whole file and the last rename
    /// wins. The cache lives in the data directory, private to the host's user; what is in
    /// it is loaded as native code, so nobody else may write there.
    fn compile(&self, bytes: &[u8], digest: [u8; 32]) -> wasmtime::Result<(Component, bool)> {
        let Some(dir) = &self.cache_dir else {
            return Ok((Component::new(&self.engine, bytes)?, false));
        };
        let mut hasher = Sha256::new();
        hasher.update(digest);
        let mut compat = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut compat);
        hasher.update(compat.finish().to_le_bytes());
        let key = crate::ids::hex(&hasher.finalize());
        let file = dir.join(format!("{key}.cwasm"));
        if file.is_file() {
            // SAFETY: the file was written by `precompile_component` of an engine with the
            // same compatibility hash, into the host's private directory; wasmtime still
            // checks its header, and a file it refuses is compiled afresh below.
            match unsafe { Component::deserialize_file(&self.engine, &file) } {
                Ok(component) => return Ok((component, true)),
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "stale compiled-code cache entry")
                }
            }
        }
        if ANNOUNCE_COMPILES.load(Ordering::Relaxed)
            && !self.announced.swap(true, Ordering::Relaxed)
        {
            // The one wait a user notices: seconds, once per component and engine.
            crate::announce::note(
                "compiling components (first start; later starts use the cache)…",
            );
        }
        let compiled = self.engine.precompile_component(bytes)?;
        let partial = dir.join(format!("{key}.{}.partial", std::process::id()));
        let stored =
            std::fs::write(&partial, &compiled).and_then(|()| std::fs::rename(&partial, &file));
        match stored {
            // SAFETY: as above; this process just wrote it.
            Ok(()) => {
                unsafe { Component::deserialize_file(&self.engine, &file) }.map(|c| (c, false))
            }
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                tracing::warn!(dir = %dir.display(), error = %e, "cannot write the compiled-code cache");
                // SAFETY: `compiled` was produced by this engine a moment ago.
                unsafe { Component::deserialize(&self.engine, &compiled) }.map(|c| (c, false))
            }
        }
    }
}

/// The names a `0.x.y` versioned import also resolves to, as wasmtime matches versions:
/// `a:b/c@0.2.0` … `a:b/c@0.2.99` for `a:b/c@0.2.12`; `None` for other versions
/// (`1.x`, pre-releases), which match exactly only.
fn semver_siblings(name: &str) -> Option<impl Iterator<Item = String> + '_> {
    /// Patch releases tried; WASI 0.2 had 12 by the end of 2026.
    const PATCHES: u32 = 100;
    let (base, version) = name.rsplit_once('@')?;
    let (minor, patch) = version.strip_prefix("0.")?.split_once('.')?;
    minor.parse::<u32>().ok()?;
    patch.parse::<u32>().ok()?;
    Some((0..PATCHES).map(move |patch| format!("{base}@0.{minor}.{patch}")))
}

#[cfg(test)]
mod tests {
    use super::semver_siblings;

    #[test]
    fn only_0_x_releases_have_semver_siblings() {
        let siblings: Vec<String> = semver_siblings("wasi:io/poll@0.2.12").unwrap().collect();
        assert_eq!(siblings.len(), 100);
        assert_eq!(siblings[6], "wasi:io/poll@0.2.6");
        for exact in [
            "wasi:config/store@0.2.0-rc.1",
            "a:b/c@1.2.3",
            "a:b/c",
            "a:b/c@0.2",
        ] {
            assert!(semver_siblings(exact).is_none(), "{exact}");
        }
    }
}

/// A compiled component and what it took.
pub struct Compiled {
    pub component: Component,
    /// The component's size in bytes.
    pub size: usize,
    /// How long compiling (or loading from the cache) took.
    pub took: Duration,
    /// Whether it came from the compiled-code cache.
    pub cached: bool,
}

/// One import of a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// As the component names it: `wasi:io/streams@0.2.12`.
    pub name: String,
    /// Whether the host provides it; with `allow_unknown_imports`, the imports it does not
    /// provide trap when called, otherwise the component does not load.
    pub provided: bool,
    /// An interface of types only (such as `harness:hooks/types`): nothing to provide.
    pub types_only: bool,
}

fn types_only(engine: &Engine, item: &ComponentItem) -> bool {
    match item {
        ComponentItem::ComponentInstance(instance) => instance
            .exports(engine)
            .all(|(_, e)| matches!(e.ty, ComponentItem::Type(_))),
        ComponentItem::Type(_) => true,
        _ => false,
    }
}

/// Defines `item` as a stand-in that traps when called: functions trap, resources are new
/// host resources (unless `seen` already has them), instances are stood in for item by
/// item.
fn stand_in(
    engine: &Engine,
    linker: &mut LinkerInstance<'_, StoreState>,
    name: &str,
    item: &ComponentItem,
    path: &str,
    seen: &mut Vec<ResourceType>,
) -> wasmtime::Result<()> {
    match item {
        ComponentItem::ComponentFunc(_) => {
            let path = path.to_string();
            linker.func_new(name, move |_, _, _, _| {
                wasmtime::bail!("`{path}` is not provided by this host (allow_unknown_imports)")
            })
        }
        ComponentItem::ComponentInstance(instance) => {
            let mut inner = linker.instance(name)?;
            for (export, item) in instance.exports(engine) {
                stand_in(
                    engine,
                    &mut inner,
                    export,
                    &item.ty,
                    &format!("{path}#{export}"),
                    seen,
                )?;
            }
            Ok(())
        }
        ComponentItem::Resource(resource) if seen.contains(resource) => Ok(()),
        ComponentItem::Resource(resource) => {
            seen.push(*resource);
            linker.resource(name, ResourceType::host::<()>(), |_, _| Ok(()))
        }
        ComponentItem::Type(_) => Ok(()),
        ComponentItem::CoreFunc(_) | ComponentItem::Module(_) | ComponentItem::Component(_) => {
            wasmtime::bail!("`{path}`: cannot stand in for an imported module or component")
        }
    }
}

fn link_error(component: &ComponentRef, world: &'static str, e: wasmtime::Error) -> LoadError {
    LoadError::Link {
        component: component.to_string(),
        world,
        source: e,
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
