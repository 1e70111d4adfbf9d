//! Compiles the built-in hooks and tools to components and embeds them in the binary, so
//! that `cargo build` alone yields a `hookhost` that needs no `.wasm` files at run time.

use guest_build::Guest;
use std::fmt::Write;
use std::path::PathBuf;

/// Built-in name (as in `builtin:NAME`) → guest crate directory.
const BUILTINS: &[(&str, &str, &str)] = &[
    ("offload", "offload", "guest-hooks/offload"),
    ("audit", "audit", "guest-hooks/audit"),
    ("plan-writer", "plan-writer", "guest-hooks/plan-writer"),
    ("read_file", "read-file", "guest-tools/read-file"),
    ("write_file", "write-file", "guest-tools/write-file"),
    ("edit_file", "edit-file", "guest-tools/edit-file"),
    ("todo_write", "todo-write", "guest-tools/todo-write"),
];

fn main() {
    let guests: Vec<Guest<'_>> = BUILTINS
        .iter()
        .map(|(_, package, dir)| Guest { package, dir })
        .collect();
    let files = guest_build::build(&guests);

    let mut out = String::from(
        "/// Built-in components: `builtin:NAME` → component bytes.\n\
         pub static BUILTINS: &[(&str, &[u8])] = &[\n",
    );
    for ((name, _, _), file) in BUILTINS.iter().zip(&files) {
        writeln!(
            out,
            "    ({name:?}, include_bytes!({:?})),",
            file.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("builtins.rs");
    std::fs::write(dest, out).unwrap();
}
