//! Compiles the built-in hooks and tools to components and embeds them in the binary, so
//! that `cargo build` alone yields a `hookhost` that needs no `.wasm` files at run time,
//! each with its SHA-256 (the compiled-code cache's key), which a start then need not
//! compute.
//! Also compiles the bench's heavy hook (10 MB), which is not embedded: the benchmark
//! loads it from the path written here.

use guest_build::Guest;
use sha2::{Digest, Sha256};
use std::fmt::Write;
use std::path::PathBuf;

/// Built-in name (as in `builtin:NAME`) → guest crate directory.
const BUILTINS: &[(&str, &str, &str)] = &[
    ("offload", "offload", "guests/hooks/offload"),
    ("audit", "audit", "guests/hooks/audit"),
    ("plan-writer", "plan-writer", "guests/hooks/plan-writer"),
    ("read_file", "read-file", "guests/tools/read-file"),
    ("write_file", "write-file", "guests/tools/write-file"),
    ("edit_file", "edit-file", "guests/tools/edit-file"),
    ("todo_write", "todo-write", "guests/tools/todo-write"),
    ("snapshots", "snapshots", "guests/stores/snapshots"),
];

/// The bench's stand-in for a hook built from an interpreted language.
const HEAVY_HOOK: Guest<'static> = Guest {
    package: "heavy-hook",
    dir: "tests/fixtures/heavy-hook",
};

fn main() {
    let guests: Vec<Guest<'_>> = BUILTINS
        .iter()
        .map(|(_, package, dir)| Guest { package, dir })
        .chain([HEAVY_HOOK])
        .collect();
    let mut files = guest_build::build(&guests);
    let heavy = files.pop().unwrap();

    let mut out = String::from(
        "/// Built-in components: `builtin:NAME` → component bytes and their SHA-256.\n\
         pub static BUILTINS: &[(&str, &[u8], [u8; 32])] = &[\n",
    );
    for ((name, _, _), file) in BUILTINS.iter().zip(&files) {
        let digest = Sha256::digest(std::fs::read(file).unwrap());
        writeln!(
            out,
            "    ({name:?}, include_bytes!({:?}), {:?}),",
            file.display().to_string(),
            <[u8; 32]>::from(digest)
        )
        .unwrap();
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    std::fs::write(out_dir.join("builtins.rs"), out).unwrap();
    let heavy = format!(
        "/// The bench's heavy hook, where the build left it.\nconst HEAVY_HOOK: &str = {:?};\n",
        heavy.display().to_string()
    );
    std::fs::write(out_dir.join("bench_fixtures.rs"), heavy).unwrap();
}
