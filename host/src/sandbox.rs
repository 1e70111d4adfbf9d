//! What a component may touch, and how a call into it is bounded.
//!
//! Every call into a component gets a new [`Store`] whose WASI context holds:
//! - only the mounts the operator granted to that component, for that session, each
//!   preopened under its virtual path, read-only or read-write;
//! - no environment variables, no arguments, no stdin, no sockets (TCP, UDP and name
//!   lookups are all denied); stdout is discarded and stderr is kept (bounded) for the log;
//! - `wasi:http` requests to the hosts its network grant lets through, and nothing else
//!   (see [`crate::network`]);
//! - the operator's settings for the component, readable through `wasi:config/store`.
//!
//! and runs under [`Limits`]: a memory cap enforced by a [`ResourceLimiter`], a wall-clock
//! deadline enforced through epoch interruption (the guest yields to the executor at every
//! tick, so a busy guest does not hold a worker thread), optional fuel, a cap on resource
//! handles, and a cap on returned output.

use crate::failure::{Failure, FailureKind};
use crate::guest_log::GuestLog;
use crate::limits::{LimitOverrides, Limits, MAX_TABLE_ELEMENTS, WASI_FILE_STREAM_BYTES};
use crate::mounts::{MountError, ResolvedMount};
use crate::network::{Egress, NetworkSettings, Policy};
use crate::sessions::dirs::MountDirs;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_config::{WasiConfig, WasiConfigVariables};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// How a component may use a granted mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum Access {
    /// Read files and list directories.
    #[serde(rename = "ro", alias = "read-only")]
    ReadOnly,
    /// Also create, write, rename and delete.
    #[serde(rename = "rw", alias = "read-write")]
    ReadWrite,
}

impl Access {
    /// `ro` or `rw`, as the config writes it.
    pub fn word(self) -> &'static str {
        match self {
            Access::ReadOnly => "ro",
            Access::ReadWrite => "rw",
        }
    }
}

/// The mounts granted to one component: virtual path → access.
pub type Grants = BTreeMap<String, Access>;

/// The mounts among `grants` a component may write in.
pub fn writable(grants: &Grants) -> impl Iterator<Item = &str> {
    grants
        .iter()
        .filter(|(_, access)| **access == Access::ReadWrite)
        .map(|(path, _)| path.as_str())
}

/// The operator's settings for one component, handed over through `wasi:config/store`.
pub type Settings = BTreeMap<String, String>;

/// The data of one component call's store.
pub struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    config: WasiConfigVariables,
    http: WasiHttpCtx,
    egress: Egress,
    limiter: MemoryLimiter,
    stderr: GuestLog,
    deadline: Instant,
    fuel: bool,
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for StoreState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

/// The imports every component may use: WASI preview 2, `wasi:http` (outgoing, each
/// request checked against the component's grant) and `wasi:config/store`. Anything else
/// a component imports makes it fail to load, naming the import.
///
/// # Errors
///
/// Only if wasmtime refuses the definitions (a bug, not an input error).
pub fn linker(engine: &Engine) -> wasmtime::Result<Linker<StoreState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    refuse_special_files(&mut linker)?;
    file_streams_inline(&mut linker)?;
    wasmtime_wasi_config::add_to_linker(&mut linker, |s: &mut StoreState| {
        WasiConfig::from(&s.config)
    })?;
    Ok(linker)
}

/// Security: a guest may open regular files and directories only. A FIFO, a socket or a
/// device is not a file a tool should read, and opening a FIFO blocks until someone opens
/// its other end — on an executor thread, since file operations run on the calling thread
/// — so `open-at` is wrapped: the path is `stat`ed first (which never blocks) and a special
/// file is refused with `access`. Guests cannot make such files (WASI has no `mknod`);
/// `bash` or the user's project can, and a file swapped between the `stat` and the `open`
/// by a concurrent command is the one gap left. The same wrapper turns a full resource
/// table (`max_resources`) into the WASI error `insufficient-memory` instead of a trap.
fn refuse_special_files(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    use wasmtime::component::{Resource, ResourceTableError};
    use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::filesystem::types::{
        DescriptorFlags, DescriptorType, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
    };
    type Args = (
        Resource<Descriptor>,
        PathFlags,
        String,
        OpenFlags,
        DescriptorFlags,
    );
    linker.allow_shadowing(true);
    linker.instance(FILESYSTEM_TYPES)?.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store, (fd, path_flags, path, oflags, flags): Args| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                let dir = Resource::<Descriptor>::new_borrow(fd.rep());
                let stat = HostDescriptor::stat_at(&mut view, dir, path_flags, path.clone());
                // wasmtime-wasi reports FIFOs and sockets as `unknown`.
                if let Ok(stat) = stat.await
                    && !matches!(
                        stat.type_,
                        DescriptorType::RegularFile
                            | DescriptorType::Directory
                            | DescriptorType::SymbolicLink
                    )
                {
                    return Ok((Err(ErrorCode::Access),));
                }
                let opened =
                    HostDescriptor::open_at(&mut view, fd, path_flags, path, oflags, flags).await;
                Ok((match opened.map_err(|e| e.downcast()) {
                    Ok(fd) => Ok(fd),
                    Err(Ok(code)) => Err(code),
                    // `max_resources` reached: a WASI error the guest can handle (like
                    // EMFILE), where wasmtime-wasi would trap.
                    Err(Err(trap))
                        if matches!(
                            trap.downcast_ref::<ResourceTableError>(),
                            Some(ResourceTableError::Full)
                        ) =>
                    {
                        Err(ErrorCode::InsufficientMemory)
                    }
                    Err(Err(trap)) => return Err(trap),
                },))
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// A guest's file streams (`read-via-stream`, `write-via-stream`, `append-via-stream`:
/// how wasi-libc, and so Rust's, C's and Python's standard libraries, read and write
/// files) are streams whose reads and writes run on the calling thread, as every other
/// file operation here does (`allow_blocking_current_thread`). wasmtime-wasi's own file
/// streams send each non-blocking `read` and `write` to tokio's blocking pool whatever that
/// setting says, and a guest's read of a file starts with one: each costs a thread hop
/// and a wake-up there and back, measured at about a quarter of a `read_file` call's
/// context switches in `serve`. A read or write moves at most [`WASI_FILE_STREAM_BYTES`];
/// what a guest may open at all is decided at `open-at`; a stream for writing is refused
/// on a read-only grant, as wasmtime-wasi refuses it, and the descriptor's open mode is
/// enforced by the kernel.
fn file_streams_inline(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
    use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap(
        "[method]descriptor.read-via-stream",
        |mut store, (fd, offset): (Resource<Descriptor>, u64)| {
            let view = store.data_mut().filesystem();
            let file = match view.table.get(&fd)? {
                Descriptor::File(f) => Arc::clone(&f.file),
                Descriptor::Dir(_) => return Ok((Err(ErrorCode::IsDirectory),)),
            };
            let stream: DynInputStream = Box::new(InlineFileInput {
                file,
                position: offset,
                closed: false,
            });
            // A full table traps, as wasmtime-wasi's own `read-via-stream` does.
            Ok((Ok(view.table.push(stream)?),))
        },
    )?;
    fn writer(
        mut store: wasmtime::StoreContextMut<'_, StoreState>,
        fd: Resource<Descriptor>,
        at: WriteAt,
    ) -> wasmtime::Result<(Result<Resource<DynOutputStream>, ErrorCode>,)> {
        let view = store.data_mut().filesystem();
        let file = match view.table.get(&fd)? {
            Descriptor::File(f) if f.perms.write_not_permitted() => {
                return Ok((Err(ErrorCode::NotPermitted),));
            }
            Descriptor::File(f) => Arc::clone(&f.file),
            Descriptor::Dir(_) => return Ok((Err(ErrorCode::BadDescriptor),)),
        };
        let stream: DynOutputStream = Box::new(InlineFileOutput {
            file,
            at,
            state: Written::Ready,
        });
        Ok((Ok(view.table.push(stream)?),))
    }
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        |store, (fd, offset): (Resource<Descriptor>, u64)| {
            writer(store, fd, WriteAt::Position(offset))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        |store, (fd,): (Resource<Descriptor>,)| writer(store, fd, WriteAt::End),
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// A file's input stream whose reads run on the calling thread (see [`file_streams_inline`]).
struct InlineFileInput {
    file: Arc<std::fs::File>,
    position: u64,
    /// Set at the end of the file or after an error: every later read says `closed`.
    closed: bool,
}

impl wasmtime_wasi::p2::InputStream for InlineFileInput {
    fn read(&mut self, size: usize) -> wasmtime_wasi::p2::StreamResult<bytes::Bytes> {
        use std::os::unix::fs::FileExt;
        use wasmtime_wasi::p2::StreamError;
        if self.closed {
            return Err(StreamError::Closed);
        }
        if size == 0 {
            return Ok(bytes::Bytes::new());
        }
        let mut buf = bytes::BytesMut::zeroed(size.min(WASI_FILE_STREAM_BYTES));
        loop {
            match self.file.read_at(&mut buf, self.position) {
                Ok(0) => {
                    self.closed = true;
                    return Err(StreamError::Closed);
                }
                Ok(n) => {
                    buf.truncate(n);
                    self.position += n as u64;
                    return Ok(buf.freeze());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.closed = true;
                    return Err(StreamError::LastOperationFailed(e.into()));
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl wasmtime_wasi::p2::Pollable for InlineFileInput {
    /// Always ready: a read never waits for anything but the read itself.
    async fn ready(&mut self) {}
}

/// Where a file's output stream writes.
#[derive(Clone, Copy)]
enum WriteAt {
    /// At this offset, which moves on with each write.
    Position(u64),
    /// At the end of the file, whatever else writes to it (`RWF_APPEND`).
    End,
}

/// What an output stream's last write left.
enum Written {
    Ready,
    /// It failed: the next `check-write` or `flush` says so, once, then `closed`.
    Failed(std::io::Error),
    Closed,
}

/// A file's output stream whose writes run on the calling thread (see
/// [`file_streams_inline`]). A write's error is reported by the next `check-write` or
/// `flush`, as wasmtime-wasi's own stream reports it.
struct InlineFileOutput {
    file: Arc<std::fs::File>,
    at: WriteAt,
    state: Written,
}

impl InlineFileOutput {
    /// Writes all of `bytes`, on the calling thread.
    fn write_all(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        while !bytes.is_empty() {
            let written = match &mut self.at {
                WriteAt::Position(position) => {
                    let n = self.file.write_at(bytes, *position)?;
                    *position += n as u64;
                    n
                }
                WriteAt::End => append(&self.file, bytes)?,
            };
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[written..];
        }
        Ok(())
    }

    /// The stream's state as `check-write` and `flush` report it.
    fn check(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        use wasmtime_wasi::p2::StreamError;
        match std::mem::replace(&mut self.state, Written::Closed) {
            Written::Ready => {
                self.state = Written::Ready;
                Ok(())
            }
            Written::Failed(e) => Err(StreamError::LastOperationFailed(e.into())),
            Written::Closed => Err(StreamError::Closed),
        }
    }
}

impl wasmtime_wasi::p2::OutputStream for InlineFileOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> wasmtime_wasi::p2::StreamResult<()> {
        use wasmtime_wasi::p2::StreamError;
        match self.state {
            Written::Ready if bytes.len() <= WASI_FILE_STREAM_BYTES => {}
            Written::Ready => {
                return Err(StreamError::Trap(wasmtime::format_err!(
                    "write exceeded budget"
                )));
            }
            Written::Failed(_) => {
                return Err(StreamError::Trap(wasmtime::format_err!(
                    "write not permitted: check_write not called first"
                )));
            }
            Written::Closed => return Err(StreamError::Closed),
        }
        if let Err(e) = self.write_all(&bytes) {
            self.state = Written::Failed(e);
        }
        Ok(())
    }

    fn flush(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        self.check()
    }

    fn check_write(&mut self) -> wasmtime_wasi::p2::StreamResult<usize> {
        self.check().map(|()| WASI_FILE_STREAM_BYTES)
    }
}

#[async_trait::async_trait]
impl wasmtime_wasi::p2::Pollable for InlineFileOutput {
    /// Always ready: a write is done before `write` returns.
    async fn ready(&mut self) {}
}

/// Writes `data` at the end of `file` in one call, whatever else writes to it: with
/// `RWF_APPEND` (Linux 4.16), else by setting `O_APPEND` around the write, as wasmtime-wasi
/// does.
fn append(file: &std::fs::File, data: &[u8]) -> std::io::Result<usize> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    use rustix::io::{Errno, ReadWriteFlags, pwritev2};
    match pwritev2(
        file,
        &[std::io::IoSlice::new(data)],
        0,
        ReadWriteFlags::APPEND,
    ) {
        Err(Errno::NOSYS | Errno::NOTSUP) => {}
        written => return Ok(written?),
    }
    let flags = fcntl_getfl(file)?;
    fcntl_setfl(file, flags | OFlags::APPEND)?;
    let written = std::io::Write::write(&mut &*file, data);
    fcntl_setfl(file, flags)?;
    written
}

/// The `wasi:filesystem/types` version wasmtime-wasi provides (its newest 0.2 release;
/// components importing an older 0.2 version link to it by semver).
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Makes the stores of component calls: the engine, the mount directories (made and
/// checked before a grant), whether the engine meters fuel, and how components' requests
/// are resolved and verified.
pub struct Sandbox {
    engine: Engine,
    dirs: Arc<MountDirs>,
    fuel: bool,
    /// Replaced when a reload changes `[network]`.
    network: arc_swap::ArcSwap<Policy>,
}

impl Sandbox {
    /// `fuel` must say whether `engine` was configured with `consume_fuel`.
    pub fn new(engine: Engine, dirs: Arc<MountDirs>, fuel: bool) -> Sandbox {
        Sandbox {
            engine,
            dirs,
            fuel,
            network: arc_swap::ArcSwap::from_pointee(Policy::system()),
        }
    }

    /// Resolves and verifies components' requests as `settings` say from now on (a request
    /// under way keeps the policy it began with).
    ///
    /// # Errors
    ///
    /// When the resolver of its name servers cannot be made.
    pub fn set_network(&self, settings: &NetworkSettings) -> Result<(), String> {
        if self.network.load().settings() != settings {
            self.network.store(Arc::new(Policy::new(settings)?));
        }
        Ok(())
    }

    /// How the host resolves and connects for components now (and for `bash`'s proxy).
    pub fn network_policy(&self) -> Arc<Policy> {
        self.network.load_full()
    }

    /// Makes and checks `mount`'s directory (see [`MountDirs::ensure`]).
    ///
    /// # Errors
    ///
    /// As [`MountDirs::ensure`].
    pub fn ensure_dir(&self, mount: &ResolvedMount) -> Result<(), MountError> {
        self.dirs.ensure(mount)
    }

    pub fn data_root(&self) -> &Path {
        self.dirs.data_root()
    }

    /// The store in which the host asks a component about itself at load (a tool's or a
    /// hook's `describe`): no mounts, no grants, no network, the default limits under the component's
    /// own, which it returns too — but never a shorter deadline than the default: a
    /// `deadline_ms` bounds the component's calls, and a start on a busy host must not fail
    /// because instantiating it took longer than one call may.
    ///
    /// # Errors
    ///
    /// A [`FailureKind::Setup`] failure when the store cannot be made.
    pub fn describe_store(
        &self,
        settings: &Settings,
        limits: &LimitOverrides,
    ) -> Result<(Store<StoreState>, Limits), Failure> {
        let mut limits = Limits::default().with(limits);
        limits.deadline_ms = limits.deadline_ms.max(Limits::default().deadline_ms);
        let store = self
            .store(
                &[],
                &Grants::new(),
                settings,
                &limits,
                self.no_network("describe"),
            )
            .map_err(|e| Failure::new(FailureKind::Setup, e.to_string()))?;
        Ok((store, limits))
    }

    /// The egress of a component that reaches nothing (its requests are refused, and
    /// recorded nowhere but the log).
    pub fn no_network(&self, component: &str) -> Egress {
        Egress::new(
            self.network.load_full(),
            Default::default(),
            component,
            None,
        )
    }

    /// The egress of `component`, granted `grant`, in a call of `caller`: its requests
    /// checked under the caller's tenant's ceiling, recorded in the call's log.
    pub fn egress(
        &self,
        component: &str,
        grant: Option<&Arc<crate::network::Allow>>,
        caller: &crate::sessions::Caller<'_>,
    ) -> Egress {
        Egress::new(
            self.network.load_full(),
            caller.reach(grant),
            component,
            Some(caller.requests.clone()),
        )
    }

    /// The store for one call into a component: its grants preopened from `mounts`
    /// (creating the directories, 0700, as needed), its settings, its limits, armed, and
    /// its `egress`.
    ///
    /// # Errors
    ///
    /// [`MountError`] when a granted mount is not among `mounts`, or its directory cannot
    /// be made or goes through a symlink.
    pub fn store(
        &self,
        mounts: &[ResolvedMount],
        grants: &Grants,
        settings: &Settings,
        limits: &Limits,
        egress: Egress,
    ) -> Result<Store<StoreState>, MountError> {
        let stderr = GuestLog::default();
        let mut wasi = WasiCtxBuilder::new();
        // File operations run on the calling thread instead of a blocking-pool hop each:
        // they are local and short, and the hop cost more than the operation. File streams
        // do too, always (`file_streams_inline`): this must stay true for every store.
        wasi.stderr(stderr.clone())
            .allow_blocking_current_thread(true)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for (virtual_path, access) in grants {
            let mount = mounts
                .iter()
                .find(|m| &m.virtual_path == virtual_path)
                .ok_or_else(|| MountError::Undeclared(virtual_path.clone()))?;
            self.ensure_dir(mount)?;
            let perms = match access {
                _ if mount.read_only() => FsPerms::ReadOnly,
                Access::ReadOnly => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            wasi.preopened_dir(&mount.host, virtual_path, perms)
                .map_err(|e| MountError::Create {
                    path: virtual_path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
        }
        let mut table = ResourceTable::new();
        table.set_max_capacity(limits.max_resources);
        let state = StoreState {
            wasi: wasi.build(),
            table,
            config: settings.iter().collect(),
            http: WasiHttpCtx::new(),
            egress,
            limiter: MemoryLimiter {
                max_bytes: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
                exceeded: false,
            },
            stderr,
            deadline: Instant::now(),
            fuel: self.fuel,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        arm(&mut store, limits);
        Ok(store)
    }
}

/// Starts the budget of one call: the deadline is `limits.deadline()` from now, the fuel
/// (when metered) is refilled to `limits.fuel`, the network's to its limits.
pub fn arm(store: &mut Store<StoreState>, limits: &Limits) {
    store.data_mut().deadline = Instant::now() + limits.deadline();
    store.data().egress.arm(limits);
    if store.data().fuel {
        // Cannot fail: fuel is enabled in this engine.
        let _ = store.set_fuel(limits.fuel.unwrap_or(u64::MAX));
    }
}

impl StoreState {
    /// Where its component's requests go from now on (a kept instance's next call).
    pub fn set_egress(&mut self, egress: Egress) {
        self.egress = egress;
    }

    /// What the guest wrote to stderr since it was last logged, for a failure's log line.
    pub fn stderr(&self) -> String {
        self.stderr.peek()
    }

    /// Logs at `debug` what the guest wrote to stderr since the last time (a working
    /// hook's debug output: `print`, `console.error`, `eprintln!`), naming the component,
    /// the phase and the call, and frees its room (see [`GuestLog`]). Returns it.
    pub fn log_stderr(&mut self, component: &str, phase: &str, call_id: &str) -> String {
        let new = self.stderr.take();
        if !new.is_empty() {
            tracing::debug!(component, phase, call_id, stderr = %new.trim_end(), "guest stderr");
        }
        new
    }
}

/// Caps a store's linear memory, and remembers that the cap was hit so the failure can be
/// named `memory` rather than a bare trap.
struct MemoryLimiter {
    max_bytes: usize,
    exceeded: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.exceeded = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

impl Failure {
    /// Names the failure of a call that returned `error` in `store`.
    pub fn from_call(store: &Store<StoreState>, error: wasmtime::Error) -> Failure {
        let state = store.data();
        let kind = if state.limiter.exceeded {
            FailureKind::Memory
        } else if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            FailureKind::Timeout
        } else if error.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
            FailureKind::Fuel
        } else {
            FailureKind::Trap
        };
        Failure::new(kind, format!("{error:#}")).with_stderr(&state.stderr())
    }

    /// Runs `call` (an instantiation or an export call into `store`'s instance) within
    /// `limits`' deadline as the host measures it. Epoch interruption stops running wasm at
    /// its deadline; this also stops a guest that waits in the host (a `wasi:clocks` sleep,
    /// a blocking stream), by dropping the call. An instance whose call was dropped must
    /// not be used again.
    ///
    /// # Errors
    ///
    /// [`FailureKind::Timeout`] at the deadline; else the call's failure, named.
    pub async fn bounded<T>(
        store: &mut Store<StoreState>,
        limits: &Limits,
        call: impl AsyncFnOnce(&mut Store<StoreState>) -> wasmtime::Result<T>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(limits.deadline(), call(store)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(Failure::from_call(store, e)),
            Err(_) => {
                let detail = format!(
                    "still running after its deadline of {} ms, stopped by the host",
                    limits.deadline_ms
                );
                Err(Failure::new(FailureKind::Timeout, detail).with_stderr(&store.data().stderr()))
            }
        }
    }
}
