//! Instance modes and the compiled-code cache.

use hookhost::{Config, Runtime, TenantId};
use hookhost_tests::{TestHost, fixtures};
use serde_json::json;

fn counter(mode: &str) -> String {
    format!(
        "[[hooks]]\nname = \"counter\"\ncomponent = {:?}\ninstance = {mode:?}\nsettings = {{ tag = \"c\", mode = \"count\" }}\n",
        fixtures::PROBE_HOOK
    )
}

async fn counts(host: &TestHost, session: &hookhost::Session, calls: usize) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..calls {
        let r = host.call(session, "echo", json!({"output": ""})).await;
        let after = r.output.rsplit_once("count:").unwrap().1;
        seen.push(after.split('|').next().unwrap().to_string());
    }
    seen
}

#[tokio::test]
async fn fresh_instances_forget_and_per_session_instances_remember_within_a_session() {
    let host = TestHost::new(&counter("per-call")).await;
    assert_eq!(
        counts(&host, &host.session().await, 3).await,
        ["1", "1", "1"]
    );

    let host = TestHost::new(&counter("per-session")).await;
    let a = host.session().await;
    let b = host.session().await;
    assert_eq!(counts(&host, &a, 3).await, ["1", "2", "3"]);
    assert_eq!(
        counts(&host, &b, 2).await,
        ["1", "2"],
        "never shared across sessions"
    );
    assert_eq!(counts(&host, &a, 1).await, ["4"]);

    // A tenant's session of the same id has its own instance too.
    let other = host
        .runtime
        .sessions()
        .create(TenantId::new("other").unwrap(), Some(a.id.clone()), None)
        .await
        .unwrap();
    assert_eq!(counts(&host, &other, 1).await, ["1"]);

    // Ending the session drops its instance.
    host.runtime
        .sessions()
        .delete(&a.tenant, &a.id)
        .await
        .unwrap();
    let again = host
        .runtime
        .sessions()
        .create(a.tenant.clone(), Some(a.id.clone()), None)
        .await
        .unwrap();
    assert_eq!(counts(&host, &again, 1).await, ["1"]);
}

#[tokio::test]
async fn compiled_components_are_cached_and_a_bad_entry_is_recompiled() {
    let data = tempfile::tempdir().unwrap();
    let plan = Config::builtin().plan;
    drop(Runtime::new(plan.clone(), data.path()).await.unwrap());
    let cache = data.path().join("cache");
    let (entries, remembered): (Vec<_>, Vec<_>) = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .partition(|p| p.extension().is_some_and(|e| e == "cwasm"));
    assert_eq!(entries.len(), 7, "one per built-in: {entries:?}");
    // And what the two hooks given settings (offload, audit) said they take, and what the
    // four tools said of themselves.
    let named = |end: &str| {
        remembered
            .iter()
            .filter(|p| p.to_string_lossy().contains(end))
            .count()
    };
    assert_eq!(
        (named(".settings.json"), named(".tool-"), remembered.len()),
        (2, 4, 6),
        "{remembered:?}"
    );

    // A damaged entry is not trusted: it is compiled again and replaced.
    std::fs::write(&entries[0], b"not a compiled component").unwrap();
    let runtime = Runtime::new(plan, data.path()).await.unwrap();
    assert!(std::fs::read(&entries[0]).unwrap().len() > 1000);
    let s = runtime
        .sessions()
        .create(TenantId::default_tenant(), None, None)
        .await
        .unwrap();
    let r = runtime
        .call(&s, "bash", r#"{"command":"echo cached"}"#)
        .await
        .unwrap();
    assert_eq!(r.output, "cached\n");
}

#[tokio::test]
async fn a_per_session_hook_may_write_to_stderr_for_as_long_as_it_lives() {
    // 10,000 bytes per call: past the stderr bound of one call's worth many times over.
    let config = format!(
        "[[hooks]]\nname = \"chatty\"\ncomponent = {:?}\ninstance = \"per-session\"\n\
         on_failure = \"closed\"\nsettings = {{ mode = \"chatty\" }}\n",
        fixtures::OUTCOME_HOOK
    );
    let host = TestHost::new(&config).await;
    let session = host.session().await;
    for call in 0..20 {
        let r = host.call(&session, "echo", json!({"output": "same"})).await;
        assert_eq!(r.output, "same", "call {call}");
    }
}

/// The bench's heavy hook (a 10 MB component whose calls walk and write a 10 MiB heap) runs
/// in the real sandbox, fresh and kept per session, and lets calls through unchanged.
#[tokio::test]
async fn a_ten_megabyte_hook_runs_fresh_and_per_session() {
    let size = std::fs::metadata(fixtures::HEAVY_HOOK).unwrap().len();
    assert!(size > 10_000_000, "{size} bytes");
    for instance in ["per-call", "per-session"] {
        let host = TestHost::new(&format!(
            "[[hooks]]\nname = \"heavy\"\ncomponent = {:?}\ninstance = {instance:?}\n",
            fixtures::HEAVY_HOOK
        ))
        .await;
        let s = host.session().await;
        for n in 0..3 {
            let r = host
                .call(&s, "echo", json!({"output": format!("call {n}")}))
                .await;
            assert_eq!(
                (r.output, r.is_error),
                (format!("call {n}"), false),
                "{instance}"
            );
        }
    }
}

#[tokio::test]
async fn ending_a_session_drops_its_instances_in_a_tenants_own_chain() {
    let config = format!(
        "{}\n[tenants.t]\nhooks = [\"counter\"]\n",
        counter("per-session")
    );
    let host = TestHost::new(&config).await;
    let t = TenantId::new("t").unwrap();
    let s = host
        .runtime
        .sessions()
        .create(t.clone(), None, None)
        .await
        .unwrap();
    assert_eq!(counts(&host, &s, 2).await, ["1", "2"]);
    host.runtime.sessions().delete(&t, &s.id).await.unwrap();
    let again = host
        .runtime
        .sessions()
        .create(t, Some(s.id.clone()), None)
        .await
        .unwrap();
    assert_eq!(counts(&host, &again, 1).await, ["1"], "a new instance");
}
