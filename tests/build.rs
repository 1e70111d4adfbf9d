//! Builds the fixture components the tests load, and names each in a constant.

use guest_build::Guest;
use std::fmt::Write;

const FIXTURES: &[(&str, &str, &str)] = &[
    ("PROBE_HOOK", "probe-hook", "tests/fixtures/probe-hook"),
    ("IMPORT_HOOK", "import-hook", "tests/fixtures/import-hook"),
    (
        "OUTCOME_HOOK",
        "outcome-hook",
        "tests/fixtures/outcome-hook",
    ),
    ("HEAVY_HOOK", "heavy-hook", "tests/fixtures/heavy-hook"),
];

fn main() {
    let guests: Vec<Guest<'_>> = FIXTURES
        .iter()
        .map(|(_, package, dir)| Guest { package, dir })
        .collect();
    let files = guest_build::build(&guests);
    let mut out = String::new();
    for ((constant, package, _), file) in FIXTURES.iter().zip(&files) {
        writeln!(out, "/// The `{package}` fixture component.").unwrap();
        writeln!(
            out,
            "pub const {constant}: &str = {:?};",
            file.display().to_string()
        )
        .unwrap();
    }
    let dest = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("fixtures.rs");
    std::fs::write(dest, out).unwrap();
}
