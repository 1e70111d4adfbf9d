use super::validate::settings;
use super::*;
use crate::component::ComponentRef;
use crate::ids::TenantId;
use crate::sessions::WorkdirTemplate;

#[test]
fn builtin_config_is_valid() {
    let c = Config::builtin().config;
    assert!(c.bash.enabled);
    let names: Vec<&str> = c.hooks.iter().map(|h| h.name.get_ref().as_str()).collect();
    assert_eq!(names, ["offload", "audit", "plan-writer"]);
    let s = settings(&c.hooks[0].settings);
    assert_eq!(
        s["exclude_tools"],
        r#"["read_file","write_file","edit_file"]"#
    );
    assert_eq!(s["threshold"], "10000");
}

#[test]
fn the_plan_is_the_config_checked_and_typed() {
    let text = format!(
        "{DEFAULT_CONFIG}\n[tenants.acme]\nhooks = [\"audit\"]\ntools = [\"read_*\"]\n\
         workdir = \"/srv/{{tenant}}\"\ndisk_quota_bytes = 10\n"
    );
    let plan = Config::parse(&text, "t.toml").unwrap().plan;
    let names: Vec<&str> = plan
        .hooks
        .iter()
        .map(|h| h.component.name.as_str())
        .collect();
    assert_eq!(names, ["offload", "audit", "plan-writer"]);
    assert_eq!(
        plan.hooks[0].component.component,
        ComponentRef::Builtin("offload".into())
    );
    assert_eq!(plan.hooks[0].component.settings["threshold"], "10000");
    assert!(plan.hooks[2].tools.matches("todo_write") && !plan.hooks[2].tools.matches("bash"));
    let (id, acme) = plan.tenants.iter().next().unwrap();
    assert_eq!(id.as_str(), "acme");
    assert_eq!(acme.hooks.as_deref(), Some(&["audit".to_string()][..]));
    assert_eq!(acme.quota.bytes, Some(10));
    assert_eq!(acme.workdir.as_ref().unwrap().as_str(), "/srv/{tenant}");
    let tools = acme.tools.as_ref().unwrap();
    assert!(tools.matches("read_file") && !tools.matches("bash"));
    assert_eq!(plan.bash.as_ref().unwrap().mount, "/workspace");
    assert_eq!(plan.source, "t.toml");
}

#[test]
fn a_one_shot_call_of_a_tool_loads_it_and_the_hooks_around_it_only() {
    let text = format!("{DEFAULT_CONFIG}\n[upstreams.docs]\ncommand = \"/nonexistent\"\n");
    let plan = || Config::parse(&text, "t.toml").unwrap().plan;
    let names = |plan: &Plan| {
        let tools: Vec<String> = plan.tools.iter().map(|t| t.name.clone()).collect();
        let hooks: Vec<String> = plan
            .hooks
            .iter()
            .map(|h| h.component.name.clone())
            .collect();
        (tools, hooks, plan.bash.is_some(), plan.upstreams.len())
    };
    let read = plan().for_call("read_file");
    assert_eq!(
        names(&read),
        (
            vec!["read_file".into()],
            vec!["offload".into(), "audit".into()],
            false,
            0
        )
    );
    let todo = plan().for_call("todo_write");
    assert_eq!(names(&todo).1, ["offload", "audit", "plan-writer"]);
    // `bash` and an upstream's tools are not `[tools]`: the whole plan stays.
    for other in ["bash", "docs__search"] {
        assert_eq!(names(&plan().for_call(other)), names(&plan()));
    }
    assert_eq!(names(&plan()).0.len(), 4);
}

#[test]
fn signatures_are_required_of_registry_components_by_their_registry_and_their_uses() {
    let parse = |extra: &str| Config::parse(&format!("{DEFAULT_CONFIG}\n{extra}"), "t.toml");
    let hook = |name: &str, component: &str, keys: &str| {
        format!(
            "[[hooks]]\nname = \"{name}\"\ncomponent = \"{component}\"\n\
             require_signature = {{ keys = [{keys}] }}\n"
        )
    };
    let guard = "oci://127.0.0.1:5000/hooks/guard:v1";
    let plan = parse(&format!(
        "{}{}[registries.\"127.0.0.1:5000\"]\nrequire_signature = {{ keys = [\"ops.pub\"] }}\n",
        hook("a", guard, "\"a.pub\", \"b.pub\""),
        hook("b", guard, "\"c.pub\""),
    ))
    .unwrap()
    .plan;
    let sets: Vec<Vec<std::path::PathBuf>> =
        [vec!["a.pub", "b.pub"], vec!["c.pub"], vec!["ops.pub"]]
            .iter()
            .map(|keys| keys.iter().map(Into::into).collect())
            .collect();
    assert_eq!(plan.signers_of(guard), sets);
    // Another registry's component: none of them.
    assert!(
        plan.signers_of("oci://localhost:5000/hooks/guard:v1")
            .is_empty()
    );
    // Only a registry's component is signed, and a key is named.
    let refused = parse(&hook("c", "builtin:audit", "\"a.pub\""))
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("hooks.c.require_signature: only a component from a registry"),
        "{refused}"
    );
    let refused = parse(&hook("c", guard, "")).unwrap_err().to_string();
    assert!(
        refused.contains("name at least one public key"),
        "{refused}"
    );
}

#[test]
fn plain_http_registries_are_loopback_unless_spelled_out() {
    let parse = |extra: &str| Config::parse(&format!("{DEFAULT_CONFIG}\n{extra}"), "t.toml");
    let plan = parse("[registries.\"127.0.0.1:5000\"]\ninsecure = true\n")
        .unwrap()
        .plan;
    assert_eq!(plan.registries.insecure, ["127.0.0.1:5000"]);
    let remote = "[registries.\"registry.internal:5000\"]\ninsecure = true\n";
    let refused = parse(remote).unwrap_err().to_string();
    assert!(refused.contains("insecure_remote"), "{refused}");
    let spelled = format!("{remote}insecure_remote = true\n");
    assert_eq!(
        parse(&spelled).unwrap().plan.registries.insecure,
        ["registry.internal:5000"]
    );
    let twice = "[registries.\"127.0.0.1:5000\"]\n[registries.\"127.0.0.1:05000\"]\n";
    let refused = parse(twice).unwrap_err().to_string();
    assert!(refused.contains("listed twice"), "{refused}");
    let bad = "[[hooks]]\nname = \"x\"\ncomponent = \"oci://127.0.0.1:5000/hooks/x\"\n";
    let refused = parse(bad).unwrap_err().to_string();
    assert!(refused.contains("no tag and no digest"), "{refused}");
}

#[test]
fn workdir_templates_are_absolute_or_cwd_with_whole_tenant_segments() {
    for good in [
        "/srv/projects/{tenant}",
        "{cwd}",
        "{cwd}/sub/{tenant}",
        "/srv/p",
    ] {
        assert!(WorkdirTemplate::new(good).is_ok(), "{good}");
    }
    for bad in [
        "relative/{tenant}",
        "/srv/../etc",
        "/srv/t-{tenant}",
        "/srv/{cwd}",
        "/srv/{session}",
    ] {
        assert!(WorkdirTemplate::new(bad).is_err(), "{bad}");
    }
    let tenant = TenantId::new("Team.A").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let template = format!("{}/{{tenant}}", dir.path().display());
    let resolved = WorkdirTemplate::new(&template)
        .unwrap()
        .resolve(&tenant)
        .unwrap();
    assert_eq!(resolved, dir.path().join("%54eam%2E%41"));
    assert!(resolved.is_dir(), "made when missing");
}

#[test]
fn tenants_may_not_share_a_working_directory_by_accident() {
    let shared = "[serve]\nworkdir = \"/srv/p\"\n[tenants.a]\n[tenants.b]\n";
    let e = Config::parse(shared, "x.toml").unwrap_err().to_string();
    assert!(
        e.contains("tenants would share one working directory"),
        "{e}"
    );
    let own = "[serve]\nworkdir = \"/srv/{tenant}\"\n[tenants.a]\n[tenants.b]\n";
    assert!(Config::parse(own, "x.toml").is_ok());
}

#[test]
fn an_empty_pool_is_refused_with_the_fix() {
    let e = Config::parse("[engine]\npool_instances = 0\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("pooling = false"), "{e}");
    assert!(Config::parse("[engine]\npooling = false\npool_instances = 0\n", "x.toml").is_ok());
}

#[test]
fn unknown_keys_are_refused_with_their_line() {
    let e = Config::parse("[bash]\nenabled = true\ntypo = 1\n", "x.toml").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("x.toml") && msg.contains("typo") && msg.contains("line 3"),
        "{msg}"
    );
}

#[test]
fn a_tenants_token_is_long_its_own_and_kept_as_its_digest() {
    let parse = |tenants: &str| Config::parse(&format!("{DEFAULT_CONFIG}\n{tenants}"), "t.toml");
    let long = "a-token-long-enough-for-a-tenant-0123";
    let refused = |tenants: &str| parse(tenants).unwrap_err().to_string();
    assert!(
        refused("[tenants.a]\ntoken = \"short\"\n")
            .contains("tenants.a.token: a token is at least")
    );
    let twice = format!("[tenants.a]\ntoken = \"{long}\"\n[tenants.b]\ntoken = \"{long}\"\n");
    assert!(refused(&twice).contains("tenants.b.token: another tenant has this token"));
    let hex = crate::ids::hex(&crate::secret::TokenDigest::of(long.as_bytes()).0);
    // The same token in clear and as its digest is still one token for two tenants.
    let same = format!("[tenants.a]\ntoken = \"{long}\"\n[tenants.b]\ntoken_sha256 = \"{hex}\"\n");
    assert!(refused(&same).contains("another tenant has this token"));
    let both = format!("[tenants.a]\ntoken = \"{long}\"\ntoken_sha256 = \"{hex}\"\n");
    assert!(refused(&both).contains("give `token` or `token_sha256`, not both"));
    assert!(refused("[tenants.a]\ntoken_sha256 = \"abc\"\n").contains("64 hexadecimal digits"));

    let plan = parse(&format!("[tenants.a]\ntoken_sha256 = \"{hex}\"\n"))
        .unwrap()
        .plan;
    let (_, a) = plan.tenants.iter().next().unwrap();
    assert!(
        a.token
            .unwrap()
            .matches(&crate::secret::TokenDigest::of(long.as_bytes()))
    );
}

#[test]
fn rate_limits_are_positive_and_a_burst_needs_a_rate() {
    let refused = |rate: &str| {
        Config::parse(&format!("[tenants.a]\nrate = {rate}\n"), "x.toml")
            .unwrap_err()
            .to_string()
    };
    let e = refused("{ calls_per_second = 0 }");
    assert!(e.contains("line 2") && e.contains("nonzero"), "{e}");
    let e = refused("{ burst = 5 }");
    assert!(
        e.contains("x.toml:2") && e.contains("`burst` needs `calls_per_second`"),
        "{e}"
    );
    let e = refused("{ per_second = 5 }");
    assert!(e.contains("unknown field"), "{e}");
    let plan = Config::parse(
        "[tenants.a]\nrate = { calls_per_second = 5, burst = 10, concurrent = 2 }\n",
        "x.toml",
    )
    .unwrap()
    .plan;
    let (_, a) = plan.tenants.iter().next().unwrap();
    assert_eq!(a.rate.burst.map(|n| n.get()), Some(10));
    assert!(a.rate.is_set());
}

#[test]
fn the_shutdown_grace_is_a_duration_up_to_its_bound() {
    let grace = |value: &str| {
        let text = DEFAULT_CONFIG.replace(
            "[serve]\n",
            &format!("[serve]\nshutdown_grace = \"{value}\"\n"),
        );
        Config::parse(&text, "t.toml").map(|c| c.plan.shutdown_grace)
    };
    let default = Config::parse(DEFAULT_CONFIG, "t.toml").unwrap().plan;
    assert_eq!(default.shutdown_grace, crate::limits::SHUTDOWN_GRACE);
    assert_eq!(grace("2s").unwrap(), std::time::Duration::from_secs(2));
    assert_eq!(grace("20s").unwrap(), crate::limits::MAX_SHUTDOWN_GRACE);
    let over = grace("21s").unwrap_err().to_string();
    assert!(
        over.contains("serve.shutdown_grace: over the most"),
        "{over}"
    );
    let bad = grace("soon").unwrap_err().to_string();
    assert!(bad.contains("a duration such as 5s"), "{bad}");
}

#[test]
fn a_bash_network_is_an_allow_list_that_a_tenant_ceiling_and_no_sandbox_refuse_to_open() {
    let with = |bash: &str, tenants: &str| {
        let text = DEFAULT_CONFIG.replace("\n# network = false\n", &format!("\n{bash}\n"));
        Config::parse(&format!("{text}\n{tenants}"), "t.toml").map(|l| l.plan)
    };
    let plan = with(
        r#"network = { allow = ["pypi.org", "10.0.0.5:8181"] }"#,
        "[tenants.acme.bash]\nnetwork = false\n",
    )
    .unwrap();
    let sandbox = plan.bash.unwrap().sandbox.unwrap();
    let crate::limits::ShellNetwork::Allow(allow) = &sandbox.network else {
        panic!("{:?}", sandbox.network)
    };
    assert_eq!(
        allow.written().collect::<Vec<_>>(),
        ["pypi.org", "10.0.0.5:8181"]
    );
    let acme = &plan.tenants[&TenantId::new("acme").unwrap()];
    assert_eq!(
        acme.shell_network,
        Some(crate::limits::ShellNetwork::Closed)
    );
    // A tenant's ceiling would be gone around by an open network, its own or [bash]'s.
    let ceiling = "[tenants.acme]\nnetwork = { allow = [\"api.example.com\"] }\n";
    for (bash, tenant) in [
        ("network = true", ""),
        ("", "[tenants.acme.bash]\nnetwork = true\n"),
    ] {
        let refused = with(bash, &format!("{ceiling}{tenant}")).unwrap_err();
        assert!(
            refused.to_string().contains("`network` ceiling caps"),
            "{refused}"
        );
    }
    assert!(with(r#"network = { allow = ["api.example.com"] }"#, ceiling).is_ok());
    // An unsandboxed bash confines no network: a setting that says otherwise is refused.
    let refused = with("sandbox = false\nnetwork = { allow = [\"pypi.org\"] }", "").unwrap_err();
    assert!(
        refused.to_string().contains("only a sandboxed bash"),
        "{refused}"
    );
    assert!(with("sandbox = false\nnetwork = true", "").is_ok());
}

#[test]
fn a_store_takes_settings_a_network_grant_and_limits_and_a_host_tree_none() {
    let with = |keys: &str| {
        let text =
            format!("[persistent.\"/persistent/notes\"]\nbacking = \"{{data}}/notes\"\n{keys}\n");
        Config::parse(&text, "t.toml").map(|l| l.config)
    };
    let config = with(
        "store = \"builtin:snapshots\"\nsettings = { url = \"https://files.example/notes\" }\n\
         network = { allow = [\"files.example:443\"] }\nlimits = { network_requests = 500 }",
    )
    .unwrap();
    let spec = config.persistent.values().next().unwrap();
    assert_eq!(spec.settings["url"], "https://files.example/notes");
    assert_eq!(spec.network.as_ref().unwrap().allow, ["files.example:443"]);
    assert_eq!(spec.limits.network_requests, Some(500));
    // Without a store nothing would read them: said, not ignored.
    for keys in [
        "settings = { url = \"x\" }",
        "network = { allow = [\"files.example\"] }",
        "limits = { deadline_ms = 5 }",
    ] {
        let refused = with(keys).unwrap_err().to_string();
        assert!(refused.contains("are a store component's"), "{refused}");
    }
    let refused = with("store = \"builtin:snapshots\"\nnetwork = { allow = [\"a b\"] }")
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("persistent.\"/persistent/notes\".network.allow"),
        "{refused}"
    );
    let refused = with("store = \"builtin:snapshots\"\nlimits = { network_requests = 0 }")
        .unwrap_err()
        .to_string();
    assert!(refused.contains(".limits: network_requests"), "{refused}");
}
