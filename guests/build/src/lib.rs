//! Compiles guest crates of this workspace to WebAssembly components, from a build script.
//!
//! The guests (`guests/hooks/*`, `guests/tools/*`, `tests/fixtures/*`) are ordinary members of
//! the workspace. A build script that needs them calls [`build`], which runs a nested
//! `cargo build --target wasm32-wasip2 --profile guest` into its own target directory, so the
//! outer build never waits on itself. The `wasm32-wasip2` target already produces a
//! component: rustc links with `wasm-component-ld`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target guests are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// The cargo profile guests are built with (see the workspace `Cargo.toml`).
pub const PROFILE: &str = "guest";

/// A guest crate to build: its package name and its directory relative to the workspace root.
pub struct Guest<'a> {
    pub package: &'a str,
    pub dir: &'a str,
}

/// Builds `guests` and returns the path of each component, in the same order.
///
/// Emits `cargo:rerun-if-changed` for every guest directory, the directory above it (where
/// shared guest crates such as `tool-support` live), `sdk/` (the Rust SDK the guests build
/// on) and `wit/`, so the build script runs again when a guest, its shared code, the SDK or
/// the ABI changes.
///
/// # Panics
///
/// This runs in a build script, where a panic is how a failure is reported: it panics with
/// a message naming the fix when the `wasm32-wasip2` target is not installed, and with
/// cargo's own output when a guest fails to compile.
pub fn build(guests: &[Guest<'_>]) -> Vec<PathBuf> {
    let root = workspace_root();
    ensure_target_installed();

    for shared in ["wit", "sdk"] {
        println!("cargo:rerun-if-changed={}", root.join(shared).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    for guest in guests {
        let dir = root.join(guest.dir);
        println!("cargo:rerun-if-changed={}", dir.display());
        if let Some(parent) = dir.parent() {
            println!("cargo:rerun-if-changed={}", parent.display());
        }
    }

    let target_dir = guest_target_dir(&root);
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--target", TARGET, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(&target_dir);
    if env::var_os("CARGO_NET_OFFLINE").is_some() {
        cmd.arg("--offline");
    }
    for guest in guests {
        cmd.args(["--package", guest.package]);
    }
    // The outer build's flags are for the host target; a wrapper (clippy's driver) would
    // lint the guests on every build of the host.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
    ] {
        cmd.env_remove(var);
    }

    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run cargo to build the guests: {e}"));
    assert!(
        status.success(),
        "building the guest components failed (see cargo's output above)"
    );

    guests
        .iter()
        .map(|guest| {
            let file = target_dir
                .join(TARGET)
                .join(PROFILE)
                .join(format!("{}.wasm", guest.package.replace('-', "_")));
            assert!(
                file.is_file(),
                "guest component {} is missing",
                file.display()
            );
            file
        })
        .collect()
}

/// The workspace root: the nearest ancestor of the calling crate that holds `wit/`.
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|dir| dir.join("wit").is_dir() && dir.join("Cargo.lock").is_file())
        .or_else(|| manifest.ancestors().find(|dir| dir.join("wit").is_dir()))
        .map(Path::to_path_buf)
        .expect("no workspace root with a wit/ directory above this crate")
}

/// Guests get their own target directory beside the host's, shared by every build script
/// (and every host profile), so each guest is compiled once.
fn guest_target_dir(root: &Path) -> PathBuf {
    let outer = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    outer.join("wasm-guests")
}

fn ensure_target_installed() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .unwrap_or_else(|e| panic!("could not run rustc: {e}"));
    let libdir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if !output.status.success() || !libdir.is_dir() {
        panic!(
            "\n\nhookhost embeds WebAssembly components built for the `{TARGET}` target, \
             which is not installed.\nFix: rustup target add {TARGET}\n\n"
        );
    }
}
