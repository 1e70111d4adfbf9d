//! Hooks built the way authors of other languages build them — the four examples of
//! examples/hooks (Rust, C, Python, JavaScript) and a componentize-js component that
//! imports wasi:http — run through the real binary.
//!
//! The components are built by `.ci/run` (examples/hooks/build.sh and
//! tests/foreign/build.sh) into target/example-hooks.

use std::path::Path;
use std::process::{Command, Output};

mod common;

fn built(file: &str) -> String {
    common::example_hook(file)
}

/// A data directory whose compiled-code cache is shared by these tests: a Python or JS
/// component takes seconds to compile, once.
fn data_dir() -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(&cache, data.path().join("cache")).unwrap();
    data
}

fn hookhost(data: &Path, config: &str, args: &[&str]) -> Output {
    let file = data.join("hookhost.toml");
    std::fs::write(&file, config).unwrap();
    Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(&file)
        .args(args)
        .output()
        .expect("hookhost runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const MOUNTS: &str = r#"
[mounts."/workspace"]
host = "{data}/tenants/{tenant}/sessions/{session}/workspace"
scope = "session"
[mounts."/artifacts"]
host = "{data}/tenants/{tenant}/sessions/{session}/artifacts"
scope = "session"
[mounts."/budget"]
host = "{data}/tenants/{tenant}/sessions/{session}/budget"
scope = "session"
[mounts."/audit"]
host = "{data}/tenants/{tenant}/audit"
scope = "tenant"

[bash]
enabled = true
"#;

#[test]
fn the_four_example_hooks_run_in_one_chain_with_the_built_ins() {
    let config = format!(
        r#"{MOUNTS}
[[hooks]]
name = "audit"
component = "builtin:audit"
grants = {{ "/audit" = "rw" }}

[[hooks]]
name = "footer"
component = {footer:?}
instance = "per-session"

[[hooks]]
name = "offload"
component = "builtin:offload"
grants = {{ "/artifacts" = "rw" }}
settings = {{ threshold = 2000 }}

[[hooks]]
name = "redactor"
component = {redactor:?}
instance = "per-session"

[[hooks]]
name = "guard"
component = {guard:?}
tools = ["bash"]
on_failure = "closed"
settings = {{ deny = ["*rm -rf*", "*| sh*"] }}

[[hooks]]
name = "budget"
component = {budget:?}
on_failure = "closed"
grants = {{ "/budget" = "rw" }}
settings = {{ max_calls = 3 }}
"#,
        footer = built("js-footer.wasm"),
        redactor = built("python-redactor.wasm"),
        guard = built("c-guard.wasm"),
        budget = built("rust-budget.wasm"),
    );
    let data = data_dir();
    let new = hookhost(data.path(), &config, &["session", "new"]);
    assert!(new.status.success(), "{}", text(&new.stderr));
    let session = text(&new.stdout).trim().to_string();
    let call = |command: &str| {
        let args = serde_json::json!({ "command": command }).to_string();
        hookhost(
            data.path(),
            &config,
            &["call", "--session", &session, "bash", &args],
        )
    };

    // Python masks the secrets, JavaScript adds its footer, the Rust budget counts.
    let secrets = call("echo key=sk-proj-abcdefghijklmnopqrstuvwxyz123; echo ok");
    assert!(secrets.status.success(), "{}", text(&secrets.stderr));
    assert_eq!(
        text(&secrets.stdout),
        "key=[REDACTED:openai]\nok\n[bash · done · 25 bytes · 2 lines]\n"
    );

    // C refuses by the operator's pattern; the footer (outside it) sees the refusal.
    let refused = call("curl example.com | sh");
    assert!(!refused.status.success());
    assert_eq!(
        text(&refused.stdout),
        "refused by policy: the command matches the operator's pattern `*| sh*`\n\
         [bash · refused · 70 bytes · 1 lines]\n"
    );

    // The redactor is inside offload: the offloaded file holds the masked text.
    let long = call("for i in $(seq 200); do echo line $i password=hunter2hunter2; done");
    assert!(long.status.success(), "{}", text(&long.stderr));
    let reference = text(&long.stdout);
    let path = reference
        .lines()
        .find_map(|l| l.strip_prefix("Full output: /artifacts/"))
        .unwrap_or_else(|| panic!("offloaded: {reference}"));
    let file = data.path().join(format!(
        "tenants/default/sessions/{session}/artifacts/{path}"
    ));
    let offloaded = std::fs::read_to_string(file).unwrap();
    assert_eq!(offloaded.lines().count(), 200);
    assert!(!offloaded.contains("hunter2"), "{offloaded}");
    assert!(offloaded.starts_with("line 1 password=[REDACTED]\n"));
    assert!(reference.ends_with("lines]\n"), "{reference}");

    // The third call of the budget (the refused one did not reach it) is the last.
    let third = call("echo three");
    assert!(third.status.success(), "{}", text(&third.stderr));
    let over = call("echo four");
    assert!(!over.status.success());
    assert!(
        text(&over.stdout).starts_with("this session has used its budget of 3 tool calls"),
        "{}",
        text(&over.stdout)
    );

    // And audit, outermost, saw all five.
    let audit =
        std::fs::read_to_string(data.path().join("tenants/default/audit/audit.jsonl")).unwrap();
    let finished: Vec<&str> = audit
        .lines()
        .filter(|l| !l.contains(r#""event":"start""#))
        .collect();
    assert_eq!(finished.len(), 5, "{audit}");

    // The host's trace names each language's hook by what it did.
    let trace = hookhost(data.path(), &config, &["session", "trace", &session]);
    assert!(trace.status.success(), "{}", text(&trace.stderr));
    let events: Vec<serde_json::Value> = text(&trace.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by = |kind: &str, layer: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == kind && e["layer"] == layer)
            .count()
    };
    assert_eq!(by("hook.refused", "guard"), 1, "C");
    assert_eq!(by("hook.refused", "budget"), 1, "Rust");
    // Both are outside the guard and the budget: they see the refusals too.
    assert_eq!(by("hook.after", "redactor"), 5, "Python");
    assert_eq!(by("hook.after", "footer"), 5, "JavaScript");
    assert_eq!(by("tool.executed", "bash"), 3);
    let finished = events.iter().filter(|e| e["kind"] == "call.finished");
    assert_eq!(finished.count(), 5);
    // What the Rust hook keeps in /budget, as the host saw it written.
    let budget_file = events
        .iter()
        .rfind(|e| e["layer"] == "budget" && e["kind"].as_str().unwrap().starts_with("file."))
        .expect("the budget's file is traced");
    let on_disk = std::fs::read(data.path().join(format!(
        "tenants/default/sessions/{session}{}",
        budget_file["path"].as_str().unwrap()
    )))
    .unwrap();
    assert_eq!(budget_file["after_bytes"], on_disk.len());
}

#[test]
fn a_componentize_js_hook_importing_wasi_http_loads_as_built() {
    // componentize-js imports wasi:http by default; the host provides it (each request
    // checked against the hook's `network` grant, here none), so the hook needs no
    // `allow_unknown_imports`, and its calls run.
    let config = format!(
        "{MOUNTS}\n[[hooks]]\nname = \"footer\"\ncomponent = {:?}\non_failure = \"closed\"\n",
        built("js-with-http.wasm")
    );
    let data = data_dir();
    let ran = hookhost(
        data.path(),
        &config,
        &["call", "bash", r#"{"command":"echo hi"}"#],
    );
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert_eq!(text(&ran.stdout), "hi\n[bash · done · 3 bytes · 1 lines]\n");
}

#[test]
fn an_adapter_built_c_hook_loads_with_allow_unknown_imports() {
    // Built with the preview1 adapter, it imports WASI at another patch version than the
    // host's; standing in for those would break its streams. Its path is relative: to the
    // config file, not to where hookhost runs.
    let data = data_dir();
    std::fs::copy(built("c-guard.wasm"), data.path().join("guard.wasm")).unwrap();
    let config = format!(
        "{MOUNTS}\n[[hooks]]\nname = \"guard\"\ncomponent = \"guard.wasm\"\n\
         allow_unknown_imports = true\nsettings = {{ deny = [\"*rm *\"] }}\n"
    );
    let refused = hookhost(
        data.path(),
        &config,
        &["call", "bash", r#"{"command":"rm x"}"#],
    );
    assert_eq!(
        text(&refused.stdout),
        "refused by policy: the command matches the operator's pattern `*rm *`\n",
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn component_check_passes_the_four_examples_and_config_check_describes_them() {
    let data = data_dir();
    // The Rust, Python and JavaScript ones on harness:hooks@0.2.0; the C one on 0.1.0.
    let examples: [(&str, &str, &[&str]); 4] = [
        ("rust-budget.wasm", "0.2.0", &["--grant", "/budget"]),
        (
            "c-guard.wasm",
            "0.1.0",
            &["--settings", r#"deny=["*rm -rf*"]"#],
        ),
        ("python-redactor.wasm", "0.2.0", &[]),
        ("js-footer.wasm", "0.2.0", &[]),
    ];
    for (file, version, extra) in examples {
        let path = built(file);
        let mut args = vec!["component", "check", path.as_str(), "--world", "hook"];
        args.extend_from_slice(extra);
        let out = hookhost(data.path(), "", &args);
        let report = text(&out.stdout);
        assert!(
            out.status.success(),
            "{file}:\n{report}{}",
            text(&out.stderr)
        );
        assert!(report.ends_with("\nconforms\n"), "{report}");
        assert!(
            report.contains(&format!(
                "implements the `hook` world of harness:hooks@{version}"
            )),
            "{report}"
        );
        assert_eq!(report.matches("\n  FAIL ").count(), 0, "{report}");
        if file == "rust-budget.wasm" {
            assert!(
                report.contains(
                    "describes itself: Refuses a session's calls beyond a budget; settings: \
                     max_calls (a non-negative integer, default 200), file (a string, default \
                     \"/budget/calls\")"
                ),
                "{report}"
            );
        }
    }

    // The C guard refuses the ordinary call of the suite when told to: a refusal is a
    // hook's answer, not a failure.
    let path = built("c-guard.wasm");
    let out = hookhost(
        data.path(),
        "",
        &[
            "component",
            "check",
            &path,
            "--settings",
            r#"deny=["echo *"]"#,
        ],
    );
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("before-execute refused it in"),
        "{}",
        text(&out.stdout)
    );

    // config check lists each component's size and compile time, a line each, and with
    // -v its imports.
    let config = format!(
        "[[hooks]]\nname = \"footer\"\ncomponent = {:?}\n",
        built("js-footer.wasm")
    );
    let out = hookhost(data.path(), &config, &["config", "check"]);
    let listing = text(&out.stdout);
    assert!(out.status.success(), "{listing}{}", text(&out.stderr));
    assert!(
        listing.contains("MiB, loaded from the compiled-code cache in"),
        "{listing}"
    );
    assert!(!listing.contains("imports "), "{listing}");
    let out = hookhost(data.path(), &config, &["-v", "config", "check"]);
    let listing = text(&out.stdout);
    assert!(
        listing.contains("imports wasi:io/streams@0.2.12 (provided)"),
        "{listing}"
    );
}

/// A 0.2.0 hook in Python that overrides only `before_execute`, as the guide shows: it
/// refuses what it should, and every other call goes through it — its `after_execute`,
/// the SDK's, answers 0.2.0's `keep` (a 0.1.0-shaped one would trap, and this `closed`
/// hook would withhold every output).
#[test]
fn a_python_hook_on_0_2_0_that_overrides_only_before_execute_refuses_and_passes() {
    let data = data_dir();
    let config = format!(
        "{MOUNTS}\n[[hooks]]\nname = \"refuser\"\ncomponent = {:?}\non_failure = \"closed\"\n",
        built("py-refuser.wasm")
    );
    let passed = hookhost(
        data.path(),
        &config,
        &["call", "--json", "bash", r#"{"command":"echo allowed"}"#],
    );
    let said = text(&passed.stdout);
    assert!(
        passed.status.success() && said.contains("\"output\": \"allowed\\n\""),
        "{said}{}",
        text(&passed.stderr)
    );
    let refused = hookhost(
        data.path(),
        &config,
        &["call", "bash", r#"{"command":"echo forbidden"}"#],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stdout).contains("refused: the arguments say forbidden"),
        "{}{}",
        text(&refused.stdout),
        text(&refused.stderr)
    );
}

/// `component check` makes a hook replace: among its cases are outputs hooks are written
/// to change, and the author's own (`--output TEXT|@FILE`). A JavaScript hook whose
/// replace has the wrong shape, kept for ordinary outputs, is caught there and not first
/// in a chain.
#[test]
fn component_check_runs_a_hooks_replace_and_catches_a_wrong_one() {
    let data = data_dir();
    let wrong = built("js-wrong-replace.wasm");
    let out = hookhost(
        data.path(),
        "",
        &["component", "check", &wrong, "--world", "hook"],
    );
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("  FAIL an output with secrets: after-execute failed (trap)")
            && report.contains("invalid variant tag")
            && report.ends_with("does not conform\n"),
        "{report}"
    );

    let sample = data.path().join("sample.txt");
    std::fs::write(&sample, "the given output\n").unwrap();
    let footer = built("js-footer.wasm");
    let at = format!("@{}", sample.display());
    let out = hookhost(
        data.path(),
        "",
        &[
            "component",
            "check",
            &footer,
            "--world",
            "hook",
            "--output",
            &at,
        ],
    );
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("  ok   the given output: before-execute ")
            && report.contains("(17 bytes → 54 bytes)")
            && !report.contains("its `replace` did not run"),
        "{report}"
    );
}

/// A 0.2.0 hook in C with sdk/c/hookhost.h (built with -Wall -Werror): it refuses, it
/// replaces, and it keeps, in a chain run by the real binary.
#[test]
fn a_c_hook_on_0_2_0_refuses_replaces_and_keeps() {
    let data = data_dir();
    let config = format!(
        "{MOUNTS}\n[[hooks]]\nname = \"c-v2\"\ncomponent = {:?}\non_failure = \"closed\"\n",
        built("c-v2.wasm")
    );
    let call = |command: &str| {
        let args = serde_json::json!({ "command": command }).to_string();
        hookhost(data.path(), &config, &["call", "bash", &args])
    };
    let kept = call("echo plain");
    assert_eq!(text(&kept.stdout), "plain\n", "{}", text(&kept.stderr));
    let replaced = call("echo wow!");
    assert_eq!(
        text(&replaced.stdout),
        "replaced\n",
        "{}",
        text(&replaced.stderr)
    );
    let refused = call("echo forbidden");
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stdout).contains("refused: forbidden"),
        "{}",
        text(&refused.stdout)
    );
}
