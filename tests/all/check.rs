//! `hookhost component check`: conforming components pass, and each way of not conforming
//! fails with a line naming it.

use hookhost::check::{CheckOptions, Report, Verdict, World, check};
use hookhost::component::ComponentRef;
use hookhost_tests::fixtures;

async fn checked(component: &str, options: CheckOptions) -> Report {
    let data = tempfile::tempdir().unwrap();
    let options = CheckOptions {
        tool: "bash".into(),
        ..options
    };
    check(&ComponentRef::parse(component), &options, data.path())
        .await
        .expect("the check runs")
}

fn failures(report: &Report) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.verdict == Verdict::Fail)
        .map(|f| f.text.clone())
        .collect()
}

fn probe(mode: &str) -> CheckOptions {
    let mut options = CheckOptions::default();
    options.settings.insert("mode".into(), mode.into());
    options
}

#[tokio::test]
async fn every_built_in_conforms() {
    for name in ComponentRef::builtin_names() {
        let report = checked(&format!("builtin:{name}"), CheckOptions::default()).await;
        assert!(report.conforms(), "builtin:{name}: {:#?}", report.findings);
        let text: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
        assert!(
            text.iter().any(|t| t.contains("world of harness:hooks@0.")
                || t.contains("world of harness:store@0.")),
            "{text:#?}"
        );
    }
    // A hook is run through every case of the suite.
    let offload = checked("builtin:offload", CheckOptions::default()).await;
    for case in [
        "an ordinary call",
        "an empty output",
        "a Unicode output",
        "a 1 MiB output",
        "a tool's error",
        "an inner hook's refusal",
    ] {
        assert!(
            offload.findings.iter().any(|f| f.text.starts_with(case)),
            "{case}: {:#?}",
            offload.findings
        );
    }
}

#[tokio::test]
async fn a_component_of_the_wrong_world_fails() {
    let report = checked(
        "builtin:read_file",
        CheckOptions {
            world: Some(World::Hook),
            ..Default::default()
        },
    )
    .await;
    assert!(!report.conforms());
    assert_eq!(
        failures(&report),
        ["implements the `tool` world, not `hook`: build it for `--world hook`"]
    );
}

#[tokio::test]
async fn an_import_the_host_refuses_fails_unless_allowed() {
    let report = checked(fixtures::IMPORT_HOOK, CheckOptions::default()).await;
    let failed = failures(&report);
    assert!(
        failed[0].starts_with(
            "imports hookhost-test:backdoor/exfiltrate, which the host does not provide"
        ),
        "{failed:#?}"
    );
    // It still runs with a stand-in, which traps when the hook calls it.
    assert!(
        failed[1].contains("`hookhost-test:backdoor/exfiltrate#send` is not provided"),
        "{failed:#?}"
    );

    let allowed = checked(
        fixtures::IMPORT_HOOK,
        CheckOptions {
            allow_unknown_imports: true,
            ..Default::default()
        },
    )
    .await;
    assert!(allowed.findings.iter().any(
        |f| f.verdict == Verdict::Note && f.text.contains("hookhost-test:backdoor/exfiltrate")
    ));
    assert_eq!(failures(&allowed).len(), 1, "{:#?}", allowed.findings);
}

#[tokio::test]
async fn a_hook_that_loops_fails_at_its_deadline_and_the_suite_stops() {
    let report = checked(
        fixtures::PROBE_HOOK,
        CheckOptions {
            deadline_ms: Some(200),
            ..probe("loop-before")
        },
    )
    .await;
    assert_eq!(
        failures(&report),
        [
            "an ordinary call: before-execute failed (timeout): it did not return within the \
          deadline of 200.00 ms: does it loop, or wait on something?"
        ]
    );
    assert!(
        report
            .findings
            .last()
            .is_some_and(|f| f.text.contains("remaining cases were not run"))
    );
}

#[tokio::test]
async fn a_hook_that_traps_fails_with_the_trap_and_its_stderr() {
    let report = checked(fixtures::PROBE_HOOK, probe("trap-after")).await;
    let failed = failures(&report);
    assert_eq!(
        failed.len(),
        1,
        "every case fails alike, on one line: {failed:#?}"
    );
    assert!(
        failed[0]
            .starts_with("an ordinary call, an empty output, a Unicode output, a 1 MiB output")
            && failed[0].contains("after-execute failed (trap): it trapped: wasm trap")
            && failed[0].contains("stderr: ")
            && failed[0].contains("probe probe traps in after-execute"),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn settings_a_built_in_does_not_take_are_refused() {
    let mut options = CheckOptions::default();
    options.settings.insert("treshold".into(), 10.into());
    let report = checked("builtin:offload", options).await;
    let failed = failures(&report);
    assert!(
        failed.len() == 1 && failed[0].contains("treshold"),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn a_file_that_is_not_a_component_fails_to_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("junk.wasm");
    std::fs::write(&file, b"\0asm junk").unwrap();
    let report = checked(&file.display().to_string(), CheckOptions::default()).await;
    let failed = failures(&report);
    assert!(
        failed.len() == 1
            && failed[0].starts_with("does not load: ")
            && failed[0].contains("junk.wasm"),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn a_0_2_0_hook_that_describes_itself_is_checked_against_its_description() {
    let report = checked(fixtures::OUTCOME_HOOK, CheckOptions::default()).await;
    assert!(report.conforms(), "{:#?}", report.findings);
    assert!(report.findings.iter().any(|f| f.text
        == "describes itself: Reports the call-outcome it is told.; settings: mode (a string, \
            default report), tag (a string, default outcome)"));

    let mut options = CheckOptions::default();
    options.settings.insert("colour".into(), "red".into());
    let failed = failures(&checked(fixtures::OUTCOME_HOOK, options).await);
    assert!(
        failed.len() == 1 && failed[0].contains(r#"has no setting "colour" (it takes mode, tag)"#),
        "{failed:#?}"
    );

    // A hook that fails on purpose says why.
    let failed = failures(&checked(fixtures::OUTCOME_HOOK, probe("fail")).await);
    assert!(
        failed.len() == 1
            && failed[0].ends_with(
                "after-execute failed (declared): it said so: outcome-hook fails on purpose"
            ),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn a_hook_that_grows_its_memory_past_the_cap_fails() {
    let failed = failures(&checked(fixtures::PROBE_HOOK, probe("grow-memory")).await);
    assert!(
        failed.len() == 1
            && failed[0].contains(
                "before-execute failed (memory): it tried to grow its memory past 128.0 MiB"
            ),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn the_built_in_hooks_describe_their_settings_with_defaults_a_config_can_write() {
    use hookhost::abi::v0_2::describe_hook;
    let host = hookhost_tests::TestHost::new("").await;
    let runtime = &host.runtime;
    for (name, settings) in [
        (
            "offload",
            &["threshold", "preview_lines", "exclude_tools", "dir"][..],
        ),
        ("audit", &["file"]),
        ("plan-writer", &["tool", "dir"]),
    ] {
        let component = ComponentRef::Builtin(name.into());
        let pre = runtime.loader().hook(&component, false).unwrap();
        let describe = pre.describer().expect("a built-in hook describes itself");
        let description = describe_hook(
            describe,
            &runtime.sandbox(),
            &Default::default(),
            &Default::default(),
        )
        .await
        .unwrap();
        assert!(!description.summary.is_empty(), "{name}");
        let names: Vec<&str> = description
            .settings
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, settings, "{name}");
        for setting in &description.settings {
            // The default, as a config would write it, is a value of the setting's type.
            let default = setting
                .default
                .as_deref()
                .expect("every built-in setting has one");
            let written: toml::Table = toml::from_str(&format!("v = {default}"))
                .unwrap_or_else(|e| panic!("{name}.{}: {default}: {e}", setting.name));
            assert!(
                setting.setting_type().accepts(&written["v"]),
                "{name}.{}: {default}",
                setting.name
            );
        }
    }
}
