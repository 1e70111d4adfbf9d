//! The onion: order, refusal, rewrite, failure policies, tool matching.

use hookhost_tests::{TestHost, fixtures, probe_chain};
use serde_json::json;

#[tokio::test]
async fn before_runs_forward_and_after_in_reverse() {
    let host = TestHost::new(&probe_chain(&[
        ("a", "pass", "open"),
        ("b", "pass", "open"),
        ("c", "pass", "open"),
    ]))
    .await;
    let r = host
        .call(&host.session().await, "echo", json!({"x": 1}))
        .await;
    assert_eq!(
        r.output,
        r#"tool(args={"x":1}, trace=before:a;before:b;before:c;)|after:c|after:b|after:a"#
    );
    assert!(!r.is_error);
}

#[tokio::test]
async fn zero_hooks_is_the_bare_tool() {
    let host = TestHost::new("").await;
    let s = host.session().await;
    let r = host.call(&s, "echo", json!({"x": 1})).await;
    assert_eq!(r.output, r#"tool(args={"x":1}, trace=)"#);
    let r = host
        .call(&s, "echo", json!({"output": "boom", "fail": true}))
        .await;
    assert_eq!((r.output.as_str(), r.is_error), ("boom", true));
}

#[tokio::test]
async fn a_refusal_short_circuits_and_outer_layers_see_it() {
    let host = TestHost::new(&probe_chain(&[
        ("a", "pass", "open"),
        ("b", "refuse", "open"),
        ("c", "pass", "open"),
    ]))
    .await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(r.output, "refused by b|after:a (error)");
    assert!(r.is_error);
    assert_eq!(host.echo.calls(), 0, "the tool must not run");
}

#[tokio::test]
async fn a_hook_rewrites_the_arguments_for_inner_layers_and_the_tool() {
    let mut config = probe_chain(&[("b", "pass", "open")]);
    config.insert_str(
        0,
        &format!(
            "[[hooks]]\nname = \"a\"\ncomponent = {:?}\nsettings = {{ tag = \"a\", mode = \"rewrite\", arguments = '{{\"x\":2}}' }}\n\n",
            fixtures::PROBE_HOOK
        ),
    );
    let host = TestHost::new(&config).await;
    let r = host
        .call(&host.session().await, "echo", json!({"x": 1}))
        .await;
    assert_eq!(
        r.output,
        r#"tool(args={"x":2}, trace=before:a;before:b;)|after:b|after:a"#
    );
}

#[tokio::test]
async fn a_rewrite_that_is_not_a_json_object_is_a_failure() {
    for (policy, expected) in [
        ("open", r#"tool(args={"x":1}, trace=)"#),
        (
            "closed",
            "call refused: hook 'a' failed in before-execute (invalid-output)",
        ),
    ] {
        let config = format!(
            "[[hooks]]\nname = \"a\"\ncomponent = {:?}\non_failure = {policy:?}\nsettings = {{ tag = \"a\", mode = \"rewrite\", arguments = \"[1, 2]\" }}\n",
            fixtures::PROBE_HOOK
        );
        let host = TestHost::new(&config).await;
        let r = host
            .call(&host.session().await, "echo", json!({"x": 1}))
            .await;
        assert_eq!(r.output, expected, "policy {policy}");
    }
}

#[tokio::test]
async fn a_trap_in_before_execute_follows_the_policy() {
    let host = TestHost::new(&probe_chain(&[
        ("a", "pass", "open"),
        ("b", "trap-before", "open"),
        ("c", "pass", "open"),
    ]))
    .await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(
        r.output, "tool(args={}, trace=before:a;before:c;)|after:c|after:a",
        "open: the failed layer is skipped in both phases"
    );

    let host = TestHost::new(&probe_chain(&[
        ("a", "pass", "open"),
        ("b", "trap-before", "closed"),
        ("c", "pass", "open"),
    ]))
    .await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(
        r.output,
        "call refused: hook 'b' failed in before-execute (trap)|after:a (error)"
    );
    assert!(r.is_error);
    assert_eq!(host.echo.calls(), 0);
}

#[tokio::test]
async fn a_trap_in_after_execute_follows_the_policy() {
    let host = TestHost::new(&probe_chain(&[
        ("a", "pass", "open"),
        ("b", "trap-after", "open"),
    ]))
    .await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(r.output, "tool(args={}, trace=before:a;before:b;)|after:a");
    assert!(!r.is_error);

    let host = TestHost::new(&probe_chain(&[
        ("a", "pass", "open"),
        ("b", "trap-after", "closed"),
    ]))
    .await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(
        r.output,
        "output withheld: hook 'b' failed in after-execute (trap)|after:a (error)"
    );
    assert!(r.is_error);
}

#[tokio::test]
async fn layers_apply_only_to_matching_tools() {
    let config = format!(
        "[[hooks]]\nname = \"files\"\ncomponent = {:?}\ntools = [\"read_*\", \"write_file\"]\nsettings = {{ tag = \"files\" }}\n\n{}",
        fixtures::PROBE_HOOK,
        probe_chain(&[("all", "pass", "open")])
    );
    let host = TestHost::new(&config).await;
    let r = host.call(&host.session().await, "echo", json!({})).await;
    assert_eq!(r.output, "tool(args={}, trace=before:all;)|after:all");
}
