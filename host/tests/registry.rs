//! Components to and from a real OCI registry: Debian's `docker-registry` (the CNCF
//! distribution server), started by each test on 127.0.0.1 with its own storage.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The registry's program; `.ci/run` installs it (`apt-get install docker-registry`).
const REGISTRY: &str = "/usr/bin/docker-registry";

/// A test's user and password for a registry that asks for them, and the password's
/// bcrypt hash as `htpasswd -B` writes it (made once with Python's `crypt`, cost 4).
const USER: &str = "hook-author";
const PASSWORD: &str = "not-a-real-secret-7Qx2";
const PASSWORD_BCRYPT: &str = "$2b$04$x09dWsgB.219DUnhVCdX7OzTsuUCA6RCKtMb0e0EFpjgoRzHQLSLi";

/// A registry on 127.0.0.1 (a port of its own), its storage in a temporary directory;
/// killed by its process id on drop.
struct Registry {
    child: Child,
    address: String,
    dir: tempfile::TempDir,
}

impl Registry {
    fn start(htpasswd: Option<&str>) -> Registry {
        assert!(
            Path::new(REGISTRY).is_file(),
            "{REGISTRY} is missing: apt-get install docker-registry (.ci/run does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let auth = match htpasswd {
            Some(line) => {
                let file = dir.path().join("htpasswd");
                std::fs::write(&file, format!("{line}\n")).unwrap();
                format!(
                    "auth: {{ htpasswd: {{ realm: hookhost-test, path: {} }} }}\n",
                    file.display()
                )
            }
            None => String::new(),
        };
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{ level: info, accesslog: {{ disabled: true }} }}\n\
                 storage:\n  filesystem: {{ rootdirectory: {} }}\n  delete: {{ enabled: true }}\n\
                 http: {{ addr: \"127.0.0.1:0\" }}\n{auth}",
                dir.path().join("storage").display()
            ),
        )
        .unwrap();
        let mut child = Command::new(REGISTRY)
            .arg("serve")
            .arg(&config)
            .env("REGISTRY_HTTP_SECRET", "hookhost-test")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // It says where it listens on its log; the rest of the log drains to nowhere.
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let started = Instant::now();
        let address = loop {
            let line = lines
                .next()
                .expect("the registry says where it listens")
                .unwrap();
            if let Some(at) = line.find("listening on ") {
                let rest = &line[at + "listening on ".len()..];
                break rest
                    .split(|c: char| c == '"' || c.is_whitespace())
                    .next()
                    .unwrap()
                    .to_string();
            }
            assert!(started.elapsed() < Duration::from_secs(30));
        };
        std::thread::spawn(move || lines.for_each(drop));
        Registry {
            child,
            address,
            dir,
        }
    }

    fn reference(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.address)
    }

    /// `GET /v2/…` with the OCI manifest type accepted (without it, the registry answers
    /// 404): status and body.
    fn get(&self, path: &str) -> (u16, String) {
        let accept = ("Accept", "application/vnd.oci.image.manifest.v1+json");
        common::http_exchange(&self.address, "GET", path, &[accept])
    }

    /// Where the registry keeps the blob of `digest` (`sha256:…`).
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hookhost(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
    command
        .arg("--data")
        .arg(data)
        .args(args)
        .env_remove("HOOKHOST_CONFIG")
        .env_remove("HOOKHOST_REGISTRY_HOST")
        .env_remove("HOOKHOST_REGISTRY_USERNAME")
        .env_remove("HOOKHOST_REGISTRY_PASSWORD")
        // No Docker config of the machine's: only what a test gives.
        .env("DOCKER_CONFIG", data.join("no-docker-config"));
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("hookhost runs")
}

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "hookhost failed: {err}");
    String::from_utf8(o.stdout.clone())
        .unwrap()
        .trim()
        .to_string()
}

fn failed(o: &Output) -> String {
    assert!(!o.status.success(), "hookhost succeeded: {o:?}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The manifest digest in a printed `oci://…@sha256:…`.
fn digest_of(printed: &str) -> &str {
    printed.rsplit_once('@').expect("printed by digest").1
}

#[test]
fn hooks_in_four_languages_are_pushed_and_pulled_by_tag_and_by_digest() {
    let registry = Registry::start(None);
    let data = tempfile::tempdir().unwrap();
    let out = data.path().join("pulled.wasm");
    let out_arg = out.to_str().unwrap();
    for (file, settings) in [
        ("rust-budget.wasm", Some("file=/session/calls")),
        ("c-guard.wasm", None),
        ("js-footer.wasm", None),
        ("python-redactor.wasm", None),
    ] {
        let source = common::example_hook(file);
        let name = file.trim_end_matches(".wasm");
        let tagged = registry.reference(&format!("hooks/{name}:v1"));
        let mut args = vec!["component", "push", &source, &tagged, "--insecure"];
        if let Some(setting) = settings {
            args.extend(["--settings", setting]);
        }
        let pushed = ok(&hookhost(data.path(), &args, &[]));
        let digest = digest_of(&pushed).to_string();
        assert_eq!(
            pushed,
            format!("{}@{digest}", registry.reference(&format!("hooks/{name}")))
        );

        // The layout `wkg oci pull` reads: the Wasm config, one application/wasm layer.
        let (status, manifest) = registry.get(&format!("/v2/hooks/{name}/manifests/v1"));
        assert_eq!(status, 200, "{manifest}");
        let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        assert_eq!(
            manifest["mediaType"],
            "application/vnd.oci.image.manifest.v1+json"
        );
        assert_eq!(
            manifest["config"]["mediaType"],
            "application/vnd.wasm.config.v0+json"
        );
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0]["mediaType"], "application/wasm");
        assert_eq!(
            layers[0]["annotations"]["org.opencontainers.image.title"],
            file
        );
        let (_, config) = registry.get(&format!(
            "/v2/hooks/{name}/blobs/{}",
            manifest["config"]["digest"].as_str().unwrap()
        ));
        let config: serde_json::Value = serde_json::from_str(&config).unwrap();
        assert_eq!(config["architecture"], "wasm");
        assert_eq!(config["os"], "wasip2");
        assert_eq!(config["layerDigests"][0], layers[0]["digest"]);

        // By tag and by digest, the very bytes pushed.
        let pinned = format!("{}@{digest}", registry.reference(&format!("hooks/{name}")));
        if name == "c-guard" {
            // Checked where it is, said by its digest.
            let checked = ok(&hookhost(
                data.path(),
                &["component", "check", &tagged, "--insecure"],
                &[],
            ));
            assert!(
                checked.starts_with(&pinned) && checked.ends_with("conforms"),
                "{checked}"
            );
        }
        for reference in [&tagged, &pinned] {
            let printed = ok(&hookhost(
                data.path(),
                &["component", "pull", reference, "-o", out_arg, "--insecure"],
                &[],
            ));
            assert_eq!(printed, pinned);
            assert_eq!(
                std::fs::read(&out).unwrap(),
                std::fs::read(&source).unwrap()
            );
        }
    }

    // A digest the registry does not hold, and a repository it does not hold.
    let unknown = format!(
        "{}@sha256:{}",
        registry.reference("hooks/c-guard"),
        "0".repeat(64)
    );
    let missing = registry.reference("hooks/nothing:v1");
    for reference in [&unknown, &missing] {
        let said = failed(&hookhost(
            data.path(),
            &["component", "pull", reference, "-o", out_arg, "--insecure"],
            &[],
        ));
        assert!(said.contains(reference.as_str()), "{said}");
    }

    // A hook that does not conform (this one needs its `file` setting) is not pushed,
    // unless forced.
    let budget = common::example_hook("rust-budget.wasm");
    let unchecked = registry.reference("hooks/unchecked:v1");
    let push = ["component", "push", &budget, &unchecked, "--insecure"];
    let said = failed(&hookhost(data.path(), &push, &[]));
    assert!(
        said.contains("does not conform") && said.contains("--force"),
        "{said}"
    );
    assert_eq!(registry.get("/v2/hooks/unchecked/manifests/v1").0, 404);
    ok(&hookhost(
        data.path(),
        &[&push[..], &["--force"]].concat(),
        &[],
    ));
    assert_eq!(registry.get("/v2/hooks/unchecked/manifests/v1").0, 200);
}

#[test]
fn a_registry_is_not_trusted_with_bytes_plain_http_or_credentials() {
    let registry = Registry::start(None);
    let data = tempfile::tempdir().unwrap();
    let source = common::example_hook("c-guard.wasm");
    let tagged = registry.reference("hooks/guard:v1");
    let out = data.path().join("pulled.wasm");
    let out_arg = out.to_str().unwrap();
    ok(&hookhost(
        data.path(),
        &["component", "push", &source, &tagged, "--insecure"],
        &[],
    ));

    // Plain HTTP is asked for, never assumed: without --insecure the client speaks TLS to
    // the plain-HTTP registry, and fails.
    let said = failed(&hookhost(
        data.path(),
        &["component", "pull", &tagged, "-o", out_arg],
        &[],
    ));
    assert!(said.contains(&tagged), "{said}");
    // --insecure alone is for loopback registries; another needs naming.
    let remote = "oci://registry.example:5000/hooks/guard:v1";
    let said = failed(&hookhost(
        data.path(),
        &["component", "pull", remote, "-o", out_arg, "--insecure"],
        &[],
    ));
    assert!(said.contains("--insecure registry.example:5000"), "{said}");

    // The registry's copy of the component altered on its disk: refused, nothing kept.
    let (_, manifest) = registry.get("/v2/hooks/guard/manifests/v1");
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    let blob = registry.blob_file(layer);
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let said = failed(&hookhost(
        fresh.path(),
        &["component", "pull", &tagged, "-o", out_arg, "--insecure"],
        &[],
    ));
    assert!(said.contains(&tagged) && said.contains(layer), "{said}");
    assert!(!out.exists());

    // A registry that asks for credentials: refused without them, served with them from
    // the environment or the Docker config file; the password is never printed.
    let guarded = Registry::start(Some(&format!("{USER}:{PASSWORD_BCRYPT}")));
    let tagged = guarded.reference("hooks/guard:v1");
    let push = ["component", "push", &source, &tagged, "--insecure"];
    let said = failed(&hookhost(data.path(), &push, &[]));
    assert!(said.contains(&tagged), "{said}");
    let from_env = [
        ("HOOKHOST_REGISTRY_HOST", guarded.address.as_str()),
        ("HOOKHOST_REGISTRY_USERNAME", USER),
        ("HOOKHOST_REGISTRY_PASSWORD", PASSWORD),
    ];
    let pushed = hookhost(data.path(), &push, &from_env);
    ok(&pushed);
    // The environment's credentials are for the registry it names, no other: the open
    // registry is asked nothing with them (it would not say), and the guarded one, named
    // wrongly, refuses.
    let elsewhere = [
        ("HOOKHOST_REGISTRY_HOST", registry.address.as_str()),
        ("HOOKHOST_REGISTRY_USERNAME", USER),
        ("HOOKHOST_REGISTRY_PASSWORD", PASSWORD),
    ];
    failed(&hookhost(data.path(), &push, &elsewhere));
    // A reference carrying credentials is refused without being repeated.
    let said = failed(&hookhost(
        data.path(),
        &[
            "component",
            "pull",
            &format!("oci://{USER}:{PASSWORD}@{}/hooks/guard:v1", guarded.address),
            "-o",
            out_arg,
        ],
        &[],
    ));
    assert!(
        !said.contains(PASSWORD) && said.contains("credentials"),
        "{said}"
    );
    let docker = data.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#,
            guarded.address
        ),
    )
    .unwrap();
    let docker_arg = docker.to_str().unwrap();
    let pulled = hookhost(
        data.path(),
        &["component", "pull", &tagged, "-o", out_arg, "--insecure"],
        &[("DOCKER_CONFIG", docker_arg)],
    );
    ok(&pulled);
    let wrong = hookhost(
        data.path(),
        &["component", "pull", &tagged, "-o", out_arg, "--insecure"],
        &[
            ("HOOKHOST_REGISTRY_HOST", guarded.address.as_str()),
            ("HOOKHOST_REGISTRY_USERNAME", USER),
            ("HOOKHOST_REGISTRY_PASSWORD", "wrong-password-9Zk"),
        ],
    );
    failed(&wrong);
    // Credentials a config gives the registry, from the environment and a secret file: a
    // chain runs the guarded registry's hook; without them it cannot start.
    let password_file = data.path().join("registry-password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let signed_in = format!(
        "username = \"${{HOOKHOST_TEST_REGISTRY_USER}}\"\npassword = \"${{file:{}}}\"\n",
        password_file.display()
    );
    let config = config_with(
        data.path(),
        "guarded.toml",
        &tagged,
        &guarded.address,
        "",
        &signed_in,
    );
    let call = [
        "--config",
        config.to_str().unwrap(),
        "call",
        "write_file",
        r#"{"path": "/workspace/f.txt", "content": "hello"}"#,
    ];
    let from_config = hookhost(data.path(), &call, &[("HOOKHOST_TEST_REGISTRY_USER", USER)]);
    ok(&from_config);
    let anonymous = config_with(
        data.path(),
        "anonymous.toml",
        &tagged,
        &guarded.address,
        "",
        "",
    );
    let fresh = tempfile::tempdir().unwrap();
    let refused = hookhost(
        fresh.path(),
        &[
            "--config",
            anonymous.to_str().unwrap(),
            "call",
            "write_file",
            "{}",
        ],
        &[],
    );
    failed(&refused);
    for output in [&pushed, &pulled, &wrong, &from_config, &refused] {
        for stream in [&output.stdout, &output.stderr] {
            let text = String::from_utf8_lossy(stream);
            assert!(
                !text.contains(PASSWORD)
                    && !text.contains(&auth)
                    && !text.contains("wrong-password"),
                "{text}"
            );
        }
    }
}

/// The built-in config with one more hook, `guard` (c-guard refusing contents with
/// "secret"), from `component`, and `registry` reached over plain HTTP.
fn config_with_guard(dir: &Path, name: &str, component: &str, registry: &str) -> PathBuf {
    config_with(dir, name, component, registry, "", "")
}

/// [`config_with_guard`], with `hook` more lines in the hook's table and `more` in the
/// registry's.
fn config_with(
    dir: &Path,
    name: &str,
    component: &str,
    registry: &str,
    hook: &str,
    more: &str,
) -> PathBuf {
    let builtin = ok(&hookhost(dir, &["config", "show"], &[]));
    let config = dir.join(name);
    std::fs::write(
        &config,
        format!(
            "{builtin}\n\n[[hooks]]\nname = \"guard\"\ncomponent = \"{component}\"\n\
             settings = {{ deny = [\"*secret*\"], field = \"content\" }}\n{hook}\n\
             [registries.\"{registry}\"]\ninsecure = true\n{more}"
        ),
    )
    .unwrap();
    config
}

/// `call write_file` with `content` through `config`: whether it was written.
fn writes(data: &Path, config: &Path, content: &str) -> Result<String, String> {
    let arguments = serde_json::json!({"path": "/workspace/f.txt", "content": content});
    let o = hookhost(
        data,
        &[
            "--config",
            config.to_str().unwrap(),
            "call",
            "write_file",
            &arguments.to_string(),
        ],
        &[],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if o.status.success() {
        Ok(said)
    } else {
        Err(said)
    }
}

#[test]
fn a_chain_runs_hooks_from_a_registry_and_a_pinned_digest_runs_offline() {
    let registry = Registry::start(None);
    let data = tempfile::tempdir().unwrap();
    let guard = common::example_hook("c-guard.wasm");
    let tagged = registry.reference("hooks/guard:v1");
    let pushed = ok(&hookhost(
        data.path(),
        &["component", "push", &guard, &tagged, "--insecure"],
        &[],
    ));
    let digest = digest_of(&pushed).to_string();
    let by_tag = config_with_guard(data.path(), "tag.toml", &tagged, &registry.address);
    let by_digest = config_with_guard(data.path(), "digest.toml", &pushed, &registry.address);
    let both = format!("{tagged}@{digest}");
    let tag_and_digest = config_with_guard(data.path(), "both.toml", &both, &registry.address);
    for config in [&by_tag, &by_digest, &tag_and_digest] {
        assert!(writes(data.path(), config, "hello").is_ok());
        let refused = writes(data.path(), config, "my secret").unwrap_err();
        assert!(refused.contains("secret"), "{refused}");
    }

    // `config check` says what the tag resolved to.
    let by_tag_arg = by_tag.to_str().unwrap();
    let checked = ok(&hookhost(
        data.path(),
        &["--config", by_tag_arg, "config", "check"],
        &[],
    ));
    assert!(checked.contains(&pushed), "{checked}");

    // The tag moved to another component: a config pinning tag and digest is refused,
    // naming both; one naming the tag alone takes the new component.
    let budget = common::example_hook("rust-budget.wasm");
    let moved = ok(&hookhost(
        data.path(),
        &[
            "component",
            "push",
            &budget,
            &tagged,
            "--insecure",
            "--force",
        ],
        &[],
    ));
    let now = digest_of(&moved);
    let said = writes(data.path(), &tag_and_digest, "hello").unwrap_err();
    assert!(said.contains(&digest) && said.contains(now), "{said}");

    // The registry gone: the pinned digest runs from the cache; a tag cannot resolve.
    drop(registry);
    assert!(writes(data.path(), &by_digest, "my secret").is_err());
    assert!(writes(data.path(), &by_digest, "hello").is_ok());
    let said = writes(data.path(), &by_tag, "hello").unwrap_err();
    assert!(said.contains(&tagged), "{said}");
}

#[test]
fn hosts_pulling_at_once_share_the_cache_and_a_killed_pull_leaves_no_half_component() {
    let registry = Registry::start(None);
    let data = tempfile::tempdir().unwrap();
    // The largest example (componentize-py, ~18 MB): a pull long enough to be cut.
    let source = common::example_hook("python-redactor.wasm");
    let want = std::fs::read(&source).unwrap();
    let tagged = registry.reference("hooks/redactor:v1");
    ok(&hookhost(
        data.path(),
        &[
            "component",
            "push",
            &source,
            &tagged,
            "--insecure",
            "--force",
        ],
        &[],
    ));

    // Eight processes pull into one data directory at once: each gets the whole component.
    let shared = tempfile::tempdir().unwrap();
    let pulls: Vec<(PathBuf, Child)> = (0..8)
        .map(|i| {
            let out = shared.path().join(format!("out-{i}.wasm"));
            let child = spawn_pull(shared.path(), &tagged, &out);
            (out, child)
        })
        .collect();
    for (out, mut child) in pulls {
        assert!(child.wait().unwrap().success());
        assert!(std::fs::read(&out).unwrap() == want);
    }

    // A pull killed (SIGKILL) at any moment leaves no component file that is not whole:
    // every `.wasm` in the cache hashes to the digest it is named by, and the next pull
    // works.
    use sha2::{Digest, Sha256};
    for delay_ms in [0, 10, 30, 60, 120, 250] {
        let fresh = tempfile::tempdir().unwrap();
        let out = fresh.path().join("out.wasm");
        let mut child = spawn_pull(fresh.path(), &tagged, &out);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let cache = fresh.path().join("cache/oci");
        for entry in std::fs::read_dir(&cache).into_iter().flatten() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(hex) = name
                .strip_prefix("sha256-")
                .and_then(|n| n.strip_suffix(".wasm"))
            {
                let bytes = std::fs::read(&path).unwrap();
                assert_eq!(
                    format!("{:x}", Sha256::digest(&bytes)),
                    hex,
                    "{name} is not whole"
                );
            }
        }
        ok(&hookhost(
            fresh.path(),
            &[
                "component",
                "pull",
                &tagged,
                "-o",
                out.to_str().unwrap(),
                "--insecure",
            ],
            &[],
        ));
        assert!(std::fs::read(&out).unwrap() == want);
    }
}

/// `hookhost component pull REFERENCE -o OUT` into `data`, started and left running.
fn spawn_pull(data: &Path, reference: &str, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .args(["component", "pull", reference, "--insecure", "-o"])
        .arg(out)
        .env("DOCKER_CONFIG", data.join("no-docker-config"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// An ECDSA P-256 key pair made by openssl in `dir`: `NAME.pem` (SEC1, or PKCS#8 when
/// `pkcs8`) and `NAME.pub`; the public key's path.
fn key_pair(dir: &Path, name: &str, pkcs8: bool) -> String {
    let private = format!("{name}.pem");
    let public = format!("{name}.pub");
    if pkcs8 {
        let curve = "ec_paramgen_curve:P-256";
        common::openssl(
            dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                curve,
                "-out",
                &private,
            ],
        );
        common::openssl(dir, &["pkey", "-in", &private, "-pubout", "-out", &public]);
    } else {
        let genkey = [
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
        ];
        common::openssl(dir, &[&genkey[..], &[private.as_str()]].concat());
        common::openssl(dir, &["ec", "-in", &private, "-pubout", "-out", &public]);
    }
    dir.join(public).display().to_string()
}

/// Signs `reference` with `dir/NAME.pem`: the manifest digest signed. Signing by tag is
/// warned about.
fn sign(data: &Path, reference: &str, dir: &Path, name: &str) -> String {
    let key = dir.join(format!("{name}.pem"));
    let args = [
        "component",
        "sign",
        reference,
        "--key",
        key.to_str().unwrap(),
        "--insecure",
    ];
    let output = hookhost(data, &args, &[]);
    let printed = ok(&output);
    let warned = String::from_utf8_lossy(&output.stderr).contains("sign by digest");
    assert_eq!(warned, !reference.contains('@'), "{output:?}");
    digest_of(&printed).to_string()
}

#[test]
fn a_registry_hook_loads_only_when_a_required_key_signed_its_manifest() {
    let registry = Registry::start(None);
    let data = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let signer = key_pair(keys.path(), "signer", false);
    let stranger = key_pair(keys.path(), "stranger", true);
    let guard = common::example_hook("c-guard.wasm");
    let tagged = registry.reference("hooks/guard:v1");
    let push = |file: &str, reference: &str| {
        let args = [
            "component",
            "push",
            file,
            reference,
            "--insecure",
            "--force",
        ];
        ok(&hookhost(data.path(), &args, &[]))
    };
    let pinned = push(&guard, &tagged);
    let digest = digest_of(&pinned).to_string();
    let require = |key: &str| format!("require_signature = {{ keys = [\"{key}\"] }}\n");
    let config = config_with(
        data.path(),
        "signed.toml",
        &pinned,
        &registry.address,
        &require(&signer),
        "",
    );

    // Unsigned: refused, naming the component, the digest, the key and why.
    let said = writes(data.path(), &config, "hello").unwrap_err();
    assert!(
        said.contains(&pinned) && said.contains("not signed") && said.contains(&signer),
        "{said}"
    );

    // Signed by another key: refused.
    assert_eq!(sign(data.path(), &tagged, keys.path(), "stranger"), digest);
    let said = writes(data.path(), &config, "hello").unwrap_err();
    assert!(said.contains("another key"), "{said}");

    // Someone without the key fills the signatures' manifest with layers that are not
    // signatures (junk, a 100 KB annotation): signing again drops them, and the one
    // signature that counts is found.
    let sig_path = format!("/v2/hooks/guard/manifests/{}.sig", digest.replace(':', "-"));
    let (_, text) = registry.get(&sig_path);
    let mut hostile: serde_json::Value = serde_json::from_str(&text).unwrap();
    let real = hostile["layers"][0].clone();
    let mut junk = Vec::new();
    for i in 0..20 {
        let mut layer = real.clone();
        layer["annotations"]["dev.cosignproject.cosign/signature"] = format!("junk-{i}").into();
        junk.push(layer);
    }
    let mut huge = real.clone();
    huge["annotations"]["dev.cosignproject.cosign/signature"] = "A".repeat(100_000).into();
    junk.push(huge);
    junk.push(real);
    hostile["layers"] = junk.into();
    let status = put_manifest(&registry.address, &sig_path, &hostile.to_string());
    assert_eq!(status, 201);
    // Signing by tag says what the tag named, and refuses when it is not the file given.
    let signer_key = keys.path().join("signer.pem");
    let by_tag = hookhost(
        data.path(),
        &[
            "component",
            "sign",
            &tagged,
            "--key",
            signer_key.to_str().unwrap(),
            "--insecure",
            "--file",
            &common::example_hook("js-footer.wasm"),
        ],
        &[],
    );
    let said = failed(&by_tag);
    assert!(said.contains("not the file given"), "{said}");

    // By the key required: it loads and runs, and `config check` says who signed it.
    assert_eq!(sign(data.path(), &pinned, keys.path(), "signer"), digest);
    assert!(writes(data.path(), &config, "hello").is_ok());
    let sigs = data
        .path()
        .join(format!("cache/oci/{}.sigs", digest.replace(':', "-")));
    assert!(std::fs::metadata(&sigs).unwrap().len() < 4096);
    assert!(writes(data.path(), &config, "my secret").is_err());
    let checked = ok(&hookhost(
        data.path(),
        &["--config", config.to_str().unwrap(), "config", "check"],
        &[],
    ));
    assert!(
        checked.contains(&format!("signed by {signer}")),
        "{checked}"
    );

    // The admin page says where each component came from, by digest, and who signed it.
    let admin_token = "admin-token-of-the-registry-test-0123456789";
    let served = data.path().join("served.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&served, with_admin_token(&text, admin_token)).unwrap();
    let (server, url, _) = serve_http(data.path(), &served);
    let base = url.trim_end_matches("/mcp");
    let (status, overview) = common::http_get(base, "/admin/api/overview", Some(admin_token));
    drop(server);
    assert_eq!(status, 200, "{overview}");
    let overview: serde_json::Value = serde_json::from_str(&overview).unwrap();
    let components = overview["components"].as_array().unwrap();
    let guard_entry = components
        .iter()
        .find(|c| c["owner"] == "hooks.guard")
        .unwrap_or_else(|| panic!("{overview}"));
    assert_eq!(guard_entry["source"], pinned.as_str());
    assert_eq!(guard_entry["digest"], digest.as_str());
    assert_eq!(guard_entry["signed_by"], serde_json::json!([signer]));
    let audit = components
        .iter()
        .find(|c| c["owner"] == "hooks.audit")
        .unwrap();
    assert!(
        audit["digest"].is_null() && audit["source"] == "builtin:audit",
        "{audit}"
    );

    // What cosign reads: the `sha256-HEX.sig` manifest, one simple-signing layer per
    // signature, each verified here by openssl, which hookhost did not write.
    let sig_tag = format!("{}.sig", digest.replace(':', "-"));
    let (status, manifest) = registry.get(&format!("/v2/hooks/guard/manifests/{sig_tag}"));
    assert_eq!(status, 200, "{manifest}");
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2, "{manifest}");
    use base64::Engine as _;
    for (layer, public) in layers.iter().zip([&stranger, &signer]) {
        assert_eq!(
            layer["mediaType"],
            "application/vnd.dev.cosign.simplesigning.v1+json"
        );
        let (_, payload) = registry.get(&format!(
            "/v2/hooks/guard/blobs/{}",
            layer["digest"].as_str().unwrap()
        ));
        let claim: serde_json::Value = serde_json::from_str(&payload).unwrap();
        assert_eq!(claim["critical"]["image"]["docker-manifest-digest"], digest);
        assert_eq!(
            claim["critical"]["identity"]["docker-reference"],
            format!("{}/hooks/guard", registry.address)
        );
        assert_eq!(
            claim["critical"]["type"],
            "cosign container image signature"
        );
        let signature = layer["annotations"]["dev.cosignproject.cosign/signature"]
            .as_str()
            .unwrap();
        let der = base64::engine::general_purpose::STANDARD
            .decode(signature)
            .unwrap();
        std::fs::write(keys.path().join("payload"), &payload).unwrap();
        std::fs::write(keys.path().join("signature.der"), der).unwrap();
        common::openssl(
            keys.path(),
            &[
                "dgst",
                "-sha256",
                "-verify",
                public,
                "-signature",
                "signature.der",
                "payload",
            ],
        );
    }

    // Signing again with the same key adds nothing.
    sign(data.path(), &tagged, keys.path(), "signer");
    let (_, again) = registry.get(&format!("/v2/hooks/guard/manifests/{sig_tag}"));
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["layers"].as_array().unwrap().len(), 2);

    // The registry's `[registries]` keys are required as well as the hook's own.
    let third = key_pair(keys.path(), "third", false);
    for (key, loads) in [(&stranger, true), (&third, false)] {
        let both = config_with(
            data.path(),
            "both.toml",
            &pinned,
            &registry.address,
            &require(&signer),
            &require(key),
        );
        let result = writes(data.path(), &both, "hello");
        assert_eq!(result.is_ok(), loads, "{result:?}");
    }

    // A signature carried over from another manifest: the registry serves the signatures
    // of another component (signed by the key required) under this one's tag. Refused.
    let other = push(
        &common::example_hook("js-footer.wasm"),
        &registry.reference("hooks/guard:other"),
    );
    let other_digest = sign(data.path(), &other, keys.path(), "signer");
    // The guard again under another file name: another manifest (its layer's title).
    let renamed = data.path().join("guard-again.wasm");
    std::fs::copy(&guard, &renamed).unwrap();
    let target = push(
        renamed.to_str().unwrap(),
        &registry.reference("hooks/guard:target"),
    );
    let target_digest = digest_of(&target).to_string();
    assert_ne!(target_digest, digest);
    let tags = registry
        .dir
        .path()
        .join("storage/docker/registry/v2/repositories/hooks/guard/_manifests/tags");
    let from = tags.join(format!("{}.sig", other_digest.replace(':', "-")));
    let to = tags.join(format!("{}.sig", target_digest.replace(':', "-")));
    copy_dir(&from, &to);
    let carried = config_with(
        data.path(),
        "carried.toml",
        &target,
        &registry.address,
        &require(&signer),
        "",
    );
    let said = writes(data.path(), &carried, "hello").unwrap_err();
    assert!(
        said.contains("another manifest") && said.contains(&other_digest),
        "{said}"
    );

    // The tag moved to a component nobody signed: a config by tag refuses it.
    let by_tag = config_with(
        data.path(),
        "tag.toml",
        &tagged,
        &registry.address,
        &require(&signer),
        "",
    );
    assert!(writes(data.path(), &by_tag, "hello").is_ok());
    let moved = push(&common::example_hook("rust-budget.wasm"), &tagged);
    let said = writes(data.path(), &by_tag, "hello").unwrap_err();
    assert!(
        said.contains(digest_of(&moved)) && said.contains("not signed"),
        "{said}"
    );

    // The registry gone: the pinned, signed component loads from the cache, its
    // signatures verified again there; a key no cached signature is by is refused.
    drop(registry);
    assert!(writes(data.path(), &config, "hello").is_ok());
    let strangers = config_with(
        data.path(),
        "third.toml",
        &pinned,
        "127.0.0.1:9",
        &require(&third),
        "",
    );
    let said = writes(data.path(), &strangers, "hello").unwrap_err();
    assert!(said.contains(&third), "{said}");

    // A key that is not one, and a signature required of a file on this host: said so.
    let broken = keys.path().join("broken.pub");
    std::fs::write(&broken, "not a key").unwrap();
    let said = writes(
        data.path(),
        &config_with(
            data.path(),
            "broken.toml",
            &pinned,
            "127.0.0.1:9",
            &require(broken.to_str().unwrap()),
            "",
        ),
        "hello",
    )
    .unwrap_err();
    assert!(
        said.contains("broken.pub") && said.contains("public key"),
        "{said}"
    );
    let said = writes(
        data.path(),
        &config_with(
            data.path(),
            "file.toml",
            &guard,
            "127.0.0.1:9",
            &require(&signer),
            "",
        ),
        "hello",
    )
    .unwrap_err();
    assert!(said.contains("require_signature"), "{said}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The Bytecode Alliance's `wkg` (crates.io `wkg`), which `.ci/run` installs.
fn wkg(home: &Path, args: &[&str]) -> String {
    let wkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-wkg/bin/wkg");
    assert!(
        wkg.is_file(),
        "{} is missing: `.ci/run` installs it (cargo install wkg)",
        wkg.display()
    );
    // Its config, cache and credentials in `home`, none of the machine's.
    let o = Command::new(wkg)
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("DOCKER_CONFIG", home.join("docker"))
        .env_remove("WKG_OCI_USERNAME")
        .env_remove("WKG_OCI_PASSWORD")
        .output()
        .expect("wkg runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "wkg {args:?}: {said}");
    said
}

#[test]
fn wkg_pulls_what_hookhost_pushes_and_a_hook_wkg_pushed_runs_signed_by_digest() {
    let registry = Registry::start(None);
    let data = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let address = registry.address.as_str();
    let guard = common::example_hook("c-guard.wasm");
    let want = std::fs::read(&guard).unwrap();

    // hookhost pushes, wkg pulls the very bytes.
    let tagged = registry.reference("hooks/guard:v1");
    ok(&hookhost(
        data.path(),
        &["component", "push", &guard, &tagged, "--insecure"],
        &[],
    ));
    let out = home.path().join("from-hookhost.wasm");
    let plain = format!("{address}/hooks/guard:v1");
    let out_arg = out.to_str().unwrap();
    wkg(
        home.path(),
        &["oci", "pull", "--insecure", address, &plain, "-o", out_arg],
    );
    assert!(std::fs::read(&out).unwrap() == want);

    // A third party pushes with wkg; the operator signs it and runs it by digest, its
    // signature required.
    let theirs = format!("{address}/third-party/guard:1.0.0");
    let said = wkg(
        home.path(),
        &["oci", "push", "--insecure", address, &theirs, &guard],
    );
    let digest = said
        .split_whitespace()
        .find(|word| word.starts_with("sha256:"))
        .unwrap_or_else(|| panic!("wkg says the digest: {said}"));
    let pinned = format!("{}@{digest}", registry.reference("third-party/guard"));
    let out = data.path().join("from-wkg.wasm");
    let pulled = ok(&hookhost(
        data.path(),
        &[
            "component",
            "pull",
            &pinned,
            "-o",
            out.to_str().unwrap(),
            "--insecure",
        ],
        &[],
    ));
    assert_eq!(pulled, pinned);
    assert!(std::fs::read(&out).unwrap() == want);
    let keys = tempfile::tempdir().unwrap();
    let public = key_pair(keys.path(), "operator", false);
    assert_eq!(sign(data.path(), &pinned, keys.path(), "operator"), digest);
    let config = config_with(
        data.path(),
        "third-party.toml",
        &pinned,
        address,
        &format!("require_signature = {{ keys = [\"{public}\"] }}\n"),
        "",
    );
    assert!(writes(data.path(), &config, "hello").is_ok());
    let refused = writes(data.path(), &config, "my secret").unwrap_err();
    assert!(refused.contains("secret"), "{refused}");
}

/// `PUT path` with an OCI manifest `body` to the registry at `address`: the status.
fn put_manifest(address: &str, path: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "PUT {path} HTTP/1.1\r\nHost: {address}\r\n\
         Content-Type: application/vnd.oci.image.manifest.v1+json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_served_chain_of_registry_hooks_runs_and_a_reload_resolves_a_moved_tag() {
    let registry = Registry::start(None);
    let data = tempfile::tempdir().unwrap();
    let builtin = ok(&hookhost(data.path(), &["config", "show"], &[]));
    let (unhooked, _) = builtin.split_once("[[hooks]]").unwrap();
    let admin_token = "admin-token-of-the-reload-test-0123456789";
    let mut config = with_admin_token(unhooked, admin_token);
    let mut pushed = BTreeMap::new();
    for (name, settings) in [
        (
            "rust-budget",
            "settings = { file = \"/session/calls\" }\ngrants = { \"/session\" = \"rw\" }",
        ),
        (
            "c-guard",
            "settings = { deny = [\"*secret*\"], field = \"content\" }",
        ),
        ("js-footer", ""),
        ("python-redactor", ""),
    ] {
        let tagged = registry.reference(&format!("hooks/{name}:v1"));
        let file = common::example_hook(&format!("{name}.wasm"));
        let args = ["component", "push", &file, &tagged, "--insecure", "--force"];
        pushed.insert(
            name,
            digest_of(&ok(&hookhost(data.path(), &args, &[]))).to_string(),
        );
        config.push_str(&format!(
            "\n[[hooks]]\nname = \"{name}\"\ncomponent = \"{tagged}\"\n{settings}\n"
        ));
    }
    config.push_str(&format!(
        "\n[registries.\"{}\"]\ninsecure = true\n",
        registry.address
    ));
    let config_file = data.path().join("chain.toml");
    std::fs::write(&config_file, config).unwrap();
    let (server, url, log) = serve_http(data.path(), &config_file);
    let base = url.trim_end_matches("/mcp").to_string();
    let digests = || {
        let (status, overview) = common::http_get(&base, "/admin/api/overview", Some(admin_token));
        assert_eq!(status, 200, "{overview}");
        let overview: serde_json::Value = serde_json::from_str(&overview).unwrap();
        overview["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let owner = c["owner"].as_str().unwrap().trim_start_matches("hooks.");
                (
                    owner.to_string(),
                    c["digest"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect::<BTreeMap<String, String>>()
    };

    // The Python SDK's client calls through the four; the admin page names each digest.
    common::mcp_client(&["registry-chain", &url]);
    let served = digests();
    for (name, digest) in &pushed {
        assert_eq!(&served[*name], digest, "{served:?}");
    }

    // The guard's tag moves (the same code under another file name: another manifest); a
    // reload resolves it again, logs the new digest, and the chain still guards.
    let renamed = data.path().join("c-guard-1.1.wasm");
    std::fs::copy(common::example_hook("c-guard.wasm"), &renamed).unwrap();
    let tagged = registry.reference("hooks/c-guard:v1");
    let args = [
        "component",
        "push",
        renamed.to_str().unwrap(),
        &tagged,
        "--insecure",
    ];
    let moved = digest_of(&ok(&hookhost(data.path(), &args, &[]))).to_string();
    assert_ne!(moved, pushed["c-guard"]);
    let (status, answer) =
        common::http_request(&base, "POST", "/admin/api/reload", Some(admin_token));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(digests()["c-guard"], moved);
    assert_eq!(digests()["js-footer"], pushed["js-footer"]);
    let logged = log.lock().unwrap().join("\n");
    assert!(
        logged.contains("pulled from its registry") && logged.contains(&moved),
        "{logged}"
    );
    // Each of the four ran: none failed (a failing hook is skipped, and logged).
    assert!(!logged.contains("hook failed"), "{logged}");
    common::mcp_client(&["registry-chain", &url]);
    drop(server);
}

/// `config` (a config's text) with `[serve] admin_token = TOKEN`.
fn with_admin_token(config: &str, token: &str) -> String {
    let line = format!("[serve]\nadmin_token = \"{token}\"\n");
    config.replacen("[serve]\n", &line, 1)
}

/// A `hookhost serve` child, killed by its process id when dropped: also when a test's
/// assertion fails while it runs.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `hookhost -v serve --http 127.0.0.1:0` with `config`: the server, its MCP URL, and its
/// log as it comes.
fn serve_http(
    data: &Path,
    config: &Path,
) -> (
    Server,
    String,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .args([
            "-v",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--unauthenticated-bash",
        ])
        .env("DOCKER_CONFIG", data.join("no-docker-config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (url, log) = common::announced_url_and_log(&mut server);
    (Server(server), url, log)
}
