//! harness:hooks 0.1.0 and 0.2.0 hooks in one chain; what 0.2.0 adds: the typed
//! `call-outcome`, `keep`, `fail`, and settings checked against the hook's own description.

use hookhost_tests::{TestHost, fixtures};
use serde_json::json;

/// A chain of `(name, kind, mode, on_failure)`: kind `v1` is the 0.1.0 probe hook, `v2`
/// the 0.2.0 outcome hook.
fn chain(layers: &[(&str, &str, &str, &str)]) -> String {
    let mut config = String::new();
    for (name, kind, mode, on_failure) in layers {
        let component = if *kind == "v1" {
            fixtures::PROBE_HOOK
        } else {
            fixtures::OUTCOME_HOOK
        };
        config.push_str(&format!(
            "[[hooks]]\nname = {name:?}\ncomponent = {component:?}\non_failure = {on_failure:?}\n\
             settings = {{ tag = {name:?}, mode = {mode:?} }}\n\n",
        ));
    }
    config
}

#[tokio::test]
async fn a_0_1_0_hook_and_a_0_2_0_hook_run_in_one_onion() {
    let host = TestHost::new(&chain(&[
        ("outer", "v2", "report", "open"),
        ("a", "v1", "pass", "open"),
        ("inner", "v2", "report", "open"),
    ]))
    .await;
    let r = host
        .call(&host.session().await, "echo", json!({"x": 1}))
        .await;
    assert_eq!(
        r.output,
        r#"tool(args={"x":1}, trace=before:a;)[inner: done by=- failures=]|after:a[outer: done by=- failures=]"#
    );
}

#[tokio::test]
async fn a_0_2_0_hook_is_told_the_outcome_typed() {
    // Refused by a 0.1.0 hook inside it.
    let host = TestHost::new(&chain(&[
        ("o", "v2", "report", "open"),
        ("b", "v1", "refuse", "open"),
    ]))
    .await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(r.output, "refused by b[o: refused by=b failures=]");
    assert!(r.is_error);

    // A tool that returned an error.
    let host = TestHost::new(&chain(&[("o", "v2", "report", "open")])).await;
    let r = host
        .call(
            &host.session().await,
            "echo",
            json!({"output": "boom", "fail": true}),
        )
        .await;
    assert_eq!(r.output, "boom[o: tool-error by=- failures=]");
    assert!(r.is_error);

    // An inner hook that failed under `open`: listed, and the call is still done.
    let host = TestHost::new(&chain(&[
        ("o", "v2", "report", "open"),
        ("t", "v1", "trap-after", "open"),
    ]))
    .await;
    let r = host
        .call(&host.session().await, "echo", json!({"output": "x"}))
        .await;
    assert_eq!(r.output, "x[o: done by=- failures=t/after-execute/trap]");
}

#[tokio::test]
async fn keep_hands_the_result_on_and_fail_is_a_failure_under_the_policy() {
    let host = TestHost::new(&chain(&[("k", "v2", "keep", "open")])).await;
    let r = host
        .call(&host.session().await, "echo", json!({"output": "same"}))
        .await;
    assert_eq!(r.output, "same");

    let host = TestHost::new(&chain(&[("f", "v2", "fail", "open")])).await;
    let r = host
        .call(&host.session().await, "echo", json!({"output": "same"}))
        .await;
    assert_eq!(r.output, "same", "open: the result passes on");

    let host = TestHost::new(&chain(&[
        ("o", "v2", "report", "open"),
        ("f", "v2", "fail", "closed"),
    ]))
    .await;
    let r = host
        .call(&host.session().await, "echo", json!({"output": "same"}))
        .await;
    assert_eq!(
        r.output,
        "output withheld: hook 'f' failed in after-execute (declared)\
         [o: failed by=- failures=f/after-execute/declared]"
    );
}

#[tokio::test]
async fn settings_a_described_hook_does_not_declare_are_refused_at_load() {
    let config = |settings: &str| {
        format!(
            "[[hooks]]\nname = \"o\"\ncomponent = {:?}\nsettings = {{ {settings} }}\n",
            fixtures::OUTCOME_HOOK
        )
    };
    let load = async |settings: &str| {
        let config = hookhost::Config::parse(&config(settings), "t.toml").unwrap();
        let data = tempfile::tempdir().unwrap();
        hookhost::Runtime::new(config.plan, data.path())
            .await
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(load(r#"mode = "keep", tag = "x""#).await, None);
    let unknown = load(r#"colour = "red""#).await.expect("refused");
    assert!(
        unknown.contains(r#"hooks.o.settings"#)
            && unknown.contains(r#"has no setting "colour" (it takes mode, tag)"#),
        "{unknown}"
    );
    let mistyped = load("mode = 3").await.expect("refused");
    assert!(
        mistyped.contains("hooks.o.settings.mode: must be a string, not 3"),
        "{mistyped}"
    );
}
