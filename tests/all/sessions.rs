//! Session lifecycle: delete removes exactly one session's files; gc removes idle sessions
//! and orphaned directories; tenants cannot reach each other's sessions.

use hookhost::sessions::Principal;
use hookhost::{SessionError, SessionId, TenantId};
use hookhost_tests::{TestHost, fixtures};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, SystemTime};

fn exists(p: &Path) -> bool {
    p.symlink_metadata().is_ok()
}

#[tokio::test]
async fn delete_removes_exactly_that_sessions_files_without_following_links() {
    // The built-in chain plus a probe that plants symlinks out of /workspace.
    let mut config = hookhost::config::DEFAULT_CONFIG.to_string();
    config.push_str(&format!(
        "\n[[hooks]]\nname = \"planter\"\ncomponent = {:?}\ntools = [\"echo\"]\ngrants = {{ \"/workspace\" = \"rw\" }}\nsettings = {{ tag = \"planter\", mode = \"escape\" }}\n",
        fixtures::PROBE_HOOK
    ));
    let host = TestHost::new(&config).await;
    let doomed = host.session().await;
    let kept = host.session().await;
    for s in [&doomed, &kept] {
        host.call(
            s,
            "bash",
            json!({"command": "seq 1 4000; echo data > notes.txt"}),
        )
        .await;
        host.call(
            s,
            "todo_write",
            json!({"todos": [{"id": "1", "content": "x", "status": "pending"}]}),
        )
        .await;
    }
    // The guest plants relative symlinks pointing outside; the host plants one too.
    host.call(&doomed, "echo", json!({})).await;
    let outside = host.data.path().join("outside.txt");
    std::fs::write(&outside, "keep me").unwrap();
    let doomed_ws = doomed.host_dir("/workspace").unwrap().to_path_buf();
    assert!(
        exists(&doomed_ws.join("guest-link")),
        "the guest planted a link"
    );
    std::os::unix::fs::symlink(&outside, doomed_ws.join("host-link")).unwrap();
    std::os::unix::fs::symlink(host.data.path(), doomed_ws.join("dir-link")).unwrap();

    let audit = host.data.path().join("tenants/default/audit/audit.jsonl");
    let plans = host.data.path().join("tenants/default/plans");
    let audit_before = std::fs::read_to_string(&audit).unwrap();

    host.runtime
        .sessions()
        .delete(&doomed.tenant, &doomed.id)
        .await
        .unwrap();

    for m in doomed
        .mounts()
        .iter()
        .filter(|m| m.scope == hookhost::mounts::Scope::Session)
    {
        assert!(!exists(&m.host), "{} survived", m.host.display());
    }
    assert!(
        !exists(doomed_ws.parent().unwrap()),
        "the session's own directory is gone"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    assert!(
        host.data.path().join("sessions.db").exists(),
        "dir-link was not followed"
    );
    assert!(
        std::fs::read_to_string(&audit)
            .unwrap()
            .starts_with(&audit_before)
    );
    let plan_files = std::fs::read_dir(&plans)
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".plan")
        })
        .count();
    assert_eq!(plan_files, 2, "plans are persistent");
    assert!(
        kept.host_dir("/workspace")
            .unwrap()
            .join("notes.txt")
            .exists()
    );
    assert!(
        kept.host_dir("/session")
            .unwrap()
            .join("todos.json")
            .exists()
    );
    assert!(matches!(
        host.runtime
            .sessions()
            .open(&doomed.tenant, &doomed.id)
            .await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(
        host.runtime
            .sessions()
            .open(&kept.tenant, &kept.id)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn gc_removes_idle_sessions_and_orphans_only() {
    let host = TestHost::builtin().await;
    let idle = host.session().await;
    host.call(&idle, "bash", json!({"command": "echo x > f"}))
        .await;
    std::thread::sleep(Duration::from_millis(20));
    let cutoff = SystemTime::now();
    std::thread::sleep(Duration::from_millis(20));
    let active = host.session().await;
    host.call(&active, "bash", json!({"command": "echo x > f"}))
        .await;

    // An orphan: a session directory whose row is gone (a crash mid-delete), old enough;
    // an empty session directory a crash while pruning left; and a young one, which may
    // be another process's session being made right now.
    let sessions = host.data.path().join("tenants/default/sessions");
    let orphan = sessions.join("ghost/workspace");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join("left-behind"), "x").unwrap();
    std::fs::create_dir_all(sessions.join("empty-ghost")).unwrap();
    std::fs::create_dir_all(sessions.join("young/workspace")).unwrap();
    for dir in [orphan.clone(), sessions.join("empty-ghost")] {
        age(&dir, Duration::from_secs(120));
    }
    // A temporary file a stopped hook left in a live session, and one being written now.
    let artifacts = active.host_dir("/artifacts").unwrap().to_path_buf();
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join(".old.txt.partial"), "torn").unwrap();
    age(
        &artifacts.join(".old.txt.partial"),
        Duration::from_secs(3600),
    );
    std::fs::write(artifacts.join(".new.txt.partial"), "in progress").unwrap();

    let report = host
        .runtime
        .sessions()
        .gc(Some(cutoff), SystemTime::UNIX_EPOCH)
        .await
        .unwrap();
    assert_eq!(
        (report.sessions, report.orphans, report.partials),
        (1, 2, 1)
    );
    assert!(!exists(idle.host_dir("/workspace").unwrap()));
    assert!(!exists(orphan.parent().unwrap()));
    assert!(!exists(&sessions.join("empty-ghost")));
    assert!(
        exists(&sessions.join("young/workspace")),
        "too young to judge"
    );
    assert!(!exists(&artifacts.join(".old.txt.partial")));
    assert!(exists(&artifacts.join(".new.txt.partial")));
    assert!(active.host_dir("/workspace").unwrap().join("f").exists());
    let left: Vec<String> = host
        .runtime
        .sessions()
        .list(None)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id.to_string())
        .collect();
    assert_eq!(left, [active.id.to_string()]);

    let report = host
        .runtime
        .sessions()
        .gc(None, SystemTime::UNIX_EPOCH)
        .await
        .unwrap();
    assert_eq!(
        (report.sessions, report.orphans),
        (0, 0),
        "nothing else to do"
    );
}

/// Sets the modification time of `path` `ago` in the past.
fn age(path: &std::path::Path, ago: Duration) {
    let file = std::fs::File::open(path).unwrap();
    file.set_modified(SystemTime::now() - ago).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_beside_busy_sessions_loses_none_of_their_files() {
    let host = std::sync::Arc::new(TestHost::builtin().await);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sweeper = {
        let (host, stop) = (host.clone(), stop.clone());
        tokio::spawn(async move {
            let mut sweeps = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && sweeps < 10_000 {
                host.runtime
                    .sessions()
                    .gc(Some(SystemTime::UNIX_EPOCH), SystemTime::UNIX_EPOCH)
                    .await
                    .unwrap();
                sweeps += 1;
                tokio::task::yield_now().await;
            }
            sweeps
        })
    };
    let mut tasks = Vec::new();
    for n in 0..16 {
        let host = host.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..8 {
                // New sessions keep appearing while gc runs.
                let session = host.session().await;
                let content = format!("session {n} round {round}");
                let w = host
                    .call(
                        &session,
                        "write_file",
                        json!({"path": "f.txt", "content": content}),
                    )
                    .await;
                assert!(!w.is_error, "{}", w.output);
                let r = host
                    .call(&session, "read_file", json!({"path": "f.txt"}))
                    .await;
                assert_eq!(r.output, content);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(sweeper.await.unwrap() > 0);
}

#[tokio::test]
async fn a_tenant_cannot_reach_another_tenants_session() {
    let host = TestHost::builtin().await;
    let a = TenantId::new("tenant-a").unwrap();
    let b = TenantId::new("tenant-b").unwrap();
    let id = SessionId::new("shared-name").unwrap();
    let sa = host
        .runtime
        .sessions()
        .create(a.clone(), Some(id.clone()), None)
        .await
        .unwrap();
    host.call(
        &sa,
        "write_file",
        json!({"path": "secret.txt", "content": "a's"}),
    )
    .await;

    assert!(matches!(
        host.runtime.sessions().open(&b, &id).await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        host.runtime.sessions().delete(&b, &id).await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(
        host.runtime
            .sessions()
            .list(Some(&b))
            .await
            .unwrap()
            .is_empty()
    );

    // Same id, other tenant: its own session and its own files.
    let sb = host
        .runtime
        .sessions()
        .create(b.clone(), Some(id.clone()), None)
        .await
        .unwrap();
    let r = host
        .call(&sb, "read_file", json!({"path": "secret.txt"}))
        .await;
    assert!(r.is_error, "{}", r.output);
    host.runtime.sessions().delete(&b, &id).await.unwrap();
    let r = host
        .call(&sa, "read_file", json!({"path": "secret.txt"}))
        .await;
    assert_eq!(r.output, "a's");
    assert!(matches!(
        host.runtime.sessions().create(a, Some(id), None).await,
        Err(SessionError::Exists { .. })
    ));
}

#[tokio::test]
async fn a_deleted_session_is_announced_once_to_what_holds_its_state() {
    /// Holds nothing, and notes each session it is told ended.
    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<hookhost::sessions::SessionKey>>);
    impl hookhost::sessions::SessionHolder for Seen {
        fn forget(&self, key: &hookhost::sessions::SessionKey) {
            self.0.lock().unwrap().push(key.clone());
        }
    }
    let host = TestHost::builtin().await;
    let seen = std::sync::Arc::new(Seen::default());
    let holder: std::sync::Arc<dyn hookhost::sessions::SessionHolder> = seen.clone();
    host.runtime
        .sessions()
        .hold(std::sync::Arc::downgrade(&holder));
    let s = host.session().await;
    let other = host.session().await;
    host.runtime
        .sessions()
        .delete(&s.tenant, &s.id)
        .await
        .unwrap();
    assert!(matches!(
        host.runtime.sessions().delete(&s.tenant, &s.id).await,
        Err(SessionError::NotFound { .. })
    ));
    assert_eq!(*seen.0.lock().unwrap(), [s.key()]);
    assert!(
        host.runtime
            .sessions()
            .record(&other.tenant, &other.id)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn open_or_create_makes_a_session_once_and_then_opens_it() {
    let host = TestHost::builtin().await;
    let tenant = TenantId::default_tenant();
    let principal = Principal::tenant(tenant.clone());
    let id = SessionId::new("named").unwrap();
    let sessions = host.runtime.sessions();
    let (a, b) = tokio::join!(
        sessions.open_or_create(&principal, &id, None),
        sessions.open_or_create(&principal, &id, None)
    );
    assert_eq!(a.unwrap().key(), b.unwrap().key());
    assert_eq!(sessions.list(Some(&tenant)).await.unwrap().len(), 1);
    let w = host
        .call(
            &sessions
                .open_or_create(&principal, &id, None)
                .await
                .unwrap(),
            "write_file",
            json!({"path": "f.txt", "content": "kept"}),
        )
        .await;
    assert!(!w.is_error, "{}", w.output);
    let r = host
        .call(
            &sessions.open(&tenant, &id).await.unwrap(),
            "read_file",
            json!({"path": "f.txt"}),
        )
        .await;
    assert_eq!(r.output, "kept");
}

/// A session made for a JWT's subject is that subject's: another subject of the same
/// tenant, or the tenant itself (its own token), finds none; the CLI (no principal) opens
/// it as any session.
#[tokio::test]
async fn a_session_made_for_a_subject_opens_for_that_subject_alone() {
    let host = TestHost::builtin().await;
    let sessions = host.runtime.sessions();
    let tenant = TenantId::default_tenant();
    let of = |subject: Option<&str>| Principal {
        tenant: tenant.clone(),
        subject: subject.map(str::to_string),
    };
    let made = sessions
        .create_for(&of(Some("alice")), None, None)
        .await
        .unwrap();
    assert!(
        sessions
            .open_for(&of(Some("alice")), &made.id)
            .await
            .is_ok()
    );
    for other in [of(Some("bob")), of(None)] {
        assert!(matches!(
            sessions.open_for(&other, &made.id).await,
            Err(SessionError::NotFound { .. })
        ));
        // Nor is another made under its id.
        assert!(matches!(
            sessions.open_or_create(&other, &made.id, None).await,
            Err(SessionError::NotFound { .. })
        ));
    }
    assert!(sessions.open(&tenant, &made.id).await.is_ok());
}
