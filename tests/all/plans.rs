//! The plan-writer hook around the todo_write tool.

use hookhost::TenantId;
use hookhost_tests::TestHost;
use serde_json::json;
use std::path::Path;

/// The plans in `dir` (not the hidden pointer naming each session's plan).
fn plan_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    files.sort();
    files
}

/// Checks the plan's text, with its `updated:` time replaced by `<time>`.
fn assert_plan(text: &str, session: &str, items: &str) {
    let (head, rest) = text.split_once("updated: ").expect("an updated line");
    let (time, tail) = rest.split_once('\n').unwrap();
    assert!(
        humantime::parse_rfc3339(time).is_ok(),
        "not RFC 3339: {time}"
    );
    assert_eq!(head, format!("# Execution Plan\n\nsession: {session}\n"));
    assert_eq!(tail, format!("\n## Task List\n\n{items}"));
}

#[tokio::test]
async fn each_todo_write_rewrites_one_plan_file() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let r = host
        .call(
            &s,
            "todo_write",
            json!({"todos": [
                {"id": "1", "content": "Read the issue", "status": "in_progress"},
                {"id": "2", "content": "Write the fix", "status": "pending"},
                {"id": "3", "content": "Run the tests", "status": "pending"},
            ]}),
        )
        .await;
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(r.media_type.as_deref(), Some("application/json"));

    let plans = host.data.path().join("tenants/default/plans");
    let first = plan_files(&plans);
    assert_eq!(first.len(), 1);
    let name = first[0].file_name().unwrap().to_str().unwrap().to_string();
    let (stamp, short) = name.strip_suffix(".md").unwrap().split_once('-').unwrap();
    assert_eq!(short, &s.id.as_str()[..8]);
    assert!(
        stamp.len() == 16 && stamp.ends_with('Z') && stamp.as_bytes()[8] == b'T',
        "{name}"
    );
    assert_plan(
        &std::fs::read_to_string(&first[0]).unwrap(),
        s.id.as_str(),
        "- [>] Read the issue\n- [ ] Write the fix\n- [ ] Run the tests\n",
    );

    let r = host
        .call(
            &s,
            "todo_write",
            json!({"merge": true, "todos": [
                {"id": "1", "content": "Read the issue", "status": "completed"},
                {"id": "2", "content": "Write the fix", "status": "in_progress"},
                {"id": "4", "content": "Ask for review", "status": "cancelled"},
            ]}),
        )
        .await;
    let list: serde_json::Value = serde_json::from_str(&r.output).unwrap();
    assert_eq!(
        list["todos"].as_array().unwrap().len(),
        4,
        "merge keeps item 3"
    );
    assert_eq!(
        plan_files(&plans),
        first,
        "the same file for the whole session"
    );
    assert_plan(
        &std::fs::read_to_string(&first[0]).unwrap(),
        s.id.as_str(),
        "- [x] Read the issue\n- [>] Write the fix\n- [ ] Run the tests\n- [-] Ask for review\n",
    );

    // A refused todo_write (bad status) leaves the plan as it was.
    let before = std::fs::read_to_string(&first[0]).unwrap();
    let r = host
        .call(
            &s,
            "todo_write",
            json!({"todos": [{"id": "1", "content": "x", "status": "done"}]}),
        )
        .await;
    assert!(
        r.is_error && r.output.contains("\"done\" is not one of"),
        "{}",
        r.output
    );
    assert_eq!(std::fs::read_to_string(&first[0]).unwrap(), before);

    // Another session writes its own file.
    let other = host.session().await;
    host.call(
        &other,
        "todo_write",
        json!({"todos": [{"id": "1", "content": "x", "status": "pending"}]}),
    )
    .await;
    assert_eq!(plan_files(&plans).len(), 2);
}

#[tokio::test]
async fn plans_go_into_a_git_workdir_and_outlive_the_session() {
    let host = TestHost::builtin().await;
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let s = host
        .runtime
        .sessions()
        .create(TenantId::default_tenant(), None, Some(repo.path()))
        .await
        .unwrap();
    host.call(
        &s,
        "todo_write",
        json!({"todos": [{"id": "1", "content": "Plan", "status": "pending"}]}),
    )
    .await;
    let dir = repo.path().join(".hookhost/plans");
    assert_eq!(plan_files(&dir).len(), 1);
    assert!(!host.data.path().join("tenants/default/plans").exists());

    host.runtime
        .sessions()
        .delete(&s.tenant, &s.id)
        .await
        .unwrap();
    assert_eq!(plan_files(&dir).len(), 1, "plans of a git workdir stay");

    // Not a git repository: the plan goes to the data directory.
    let plain = tempfile::tempdir().unwrap();
    let s = host
        .runtime
        .sessions()
        .create(TenantId::default_tenant(), None, Some(plain.path()))
        .await
        .unwrap();
    host.call(
        &s,
        "todo_write",
        json!({"todos": [{"id": "1", "content": "Plan", "status": "pending"}]}),
    )
    .await;
    assert!(!plain.path().join(".hookhost").exists());
    assert_eq!(
        plan_files(&host.data.path().join("tenants/default/plans")).len(),
        1
    );
}

#[tokio::test]
async fn concurrent_todo_writes_keep_exactly_one_current_plan_per_session() {
    let host = std::sync::Arc::new(TestHost::builtin().await);
    let mut sessions = Vec::new();
    for _ in 0..16 {
        sessions.push(host.session().await);
    }
    let mut tasks = Vec::new();
    for session in sessions.clone() {
        for round in 0..4 {
            let host = host.clone();
            let session = session.clone();
            tasks.push(tokio::spawn(async move {
                let todos = json!({"todos": [
                    {"id": "1", "content": format!("round {round}"), "status": "pending"},
                ]});
                let r = host.call(&session, "todo_write", todos).await;
                assert!(!r.is_error, "{}", r.output);
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let plans = plan_files(&host.data.path().join("tenants/default/plans"));
    assert_eq!(plans.len(), sessions.len(), "{plans:?}");
    for session in &sessions {
        let mine: Vec<_> = plans
            .iter()
            .filter(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .contains(&format!("session: {}\n", session.id))
            })
            .collect();
        assert_eq!(mine.len(), 1, "session {}: {mine:?}", session.id);
    }
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(host.data.path().join("tenants/default/plans"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
