//! The session table's contract, checked on both stores: the embedded SQLite file and a
//! real PostgreSQL server; and a runtime whose sessions live in PostgreSQL.

use hookhost::sessions::{Owner, PgTable, Server, SessionError, SessionTable, SqliteTable};
use hookhost::{SessionId, TenantId};
use hookhost_tests::TestHost;
use hookhost_tests::postgres::PgServer;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn tenant(name: &str) -> TenantId {
    TenantId::new(name).unwrap()
}

fn id(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

/// Times are kept to the millisecond.
fn ms(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis()
}

async fn the_contract(table: Arc<dyn SessionTable>) {
    let (t, u, s) = (tenant("t"), tenant("u"), id("s1"));
    let owner = Owner::Http(Server {
        pid: 7,
        host: "elsewhere".into(),
    });
    let made = table
        .create(&t, &s, Some(Path::new("/w")), owner.clone(), Some("alice"))
        .await
        .unwrap();
    assert!(matches!(
        table.create(&t, &s, None, Owner::Cli, None).await,
        Err(SessionError::Exists { .. })
    ));
    // The same id is another session for another tenant.
    table.create(&u, &s, None, Owner::Cli, None).await.unwrap();

    let got = table.get(&t, &s).await.unwrap().unwrap();
    assert_eq!((&got.tenant, &got.id, &got.owner), (&t, &s, &owner));
    assert_eq!(got.subject.as_deref(), Some("alice"));
    assert_eq!(table.get(&u, &s).await.unwrap().unwrap().subject, None);
    assert_eq!(got.workdir.as_deref(), Some(Path::new("/w")));
    assert_eq!(ms(got.created), ms(made.created));
    assert!(table.get(&t, &id("nope")).await.unwrap().is_none());
    assert_eq!(table.list(Some(&t)).await.unwrap().len(), 1);
    assert_eq!(table.list(None).await.unwrap().len(), 2);

    let later = made.last_active + Duration::from_secs(60);
    table.touch(&t, &s, later).await.unwrap();
    assert_eq!(
        ms(table.get(&t, &s).await.unwrap().unwrap().last_active),
        ms(later)
    );
    let idle: Vec<_> = table
        .idle_since(later)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.tenant)
        .collect();
    assert_eq!(
        idle,
        std::slice::from_ref(&u),
        "only the untouched one is idle"
    );
    assert!(
        !table.delete_if_idle(&t, &s, later).await.unwrap(),
        "touched since the cutoff: kept"
    );
    assert!(
        table
            .delete_if_idle(&t, &s, later + Duration::from_millis(1))
            .await
            .unwrap()
    );
    assert!(table.get(&t, &s).await.unwrap().is_none());
    assert!(table.delete(&u, &s).await.unwrap());
    assert!(!table.delete(&u, &s).await.unwrap(), "gone already");

    assert_eq!(table.mcp_state("m").await.unwrap(), None);
    table.set_mcp_state("m", "{\"a\":1}").await.unwrap();
    table.set_mcp_state("m", "{\"a\":2}").await.unwrap();
    assert_eq!(
        table.mcp_state("m").await.unwrap().as_deref(),
        Some("{\"a\":2}")
    );
    table.forget_mcp_state("m").await.unwrap();
    assert_eq!(table.mcp_state("m").await.unwrap(), None);

    // Racing creates and deletes of one session: exactly one of each wins.
    let racers = 16;
    let creates: Vec<_> = (0..racers)
        .map(|_| {
            let table = table.clone();
            tokio::spawn(async move {
                table
                    .create(&tenant("t"), &id("race"), None, Owner::Cli, None)
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut made = 0;
    for c in creates {
        made += usize::from(c.await.unwrap());
    }
    assert_eq!(made, 1);
    let deletes: Vec<_> = (0..racers)
        .map(|_| {
            let table = table.clone();
            tokio::spawn(async move { table.delete(&tenant("t"), &id("race")).await.unwrap() })
        })
        .collect();
    let mut deleted = 0;
    for d in deletes {
        deleted += usize::from(d.await.unwrap());
    }
    assert_eq!(deleted, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_table_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    the_contract(Arc::new(SqliteTable::open(dir.path()).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_table_keeps_the_contract() {
    let server = PgServer::start();
    let url = server.database("contract");
    let table = Arc::new(PgTable::connect(&url).await.unwrap());
    assert!(table.is_shared());
    the_contract(table).await;
    // A second connection (another host starting) finds the schema made.
    PgTable::connect(&url).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_keeps_its_sessions_in_postgres() {
    let server = PgServer::start();
    let url = server.database("runtime");
    let config = format!(
        "{}\n[sessions]\nstore = {url:?}\n",
        hookhost::config::DEFAULT_CONFIG
    );
    let host = TestHost::new(&config).await;
    let s = host.session().await;
    let w = host
        .call(&s, "write_file", json!({"path": "f.txt", "content": "pg"}))
        .await;
    assert!(!w.is_error, "{}", w.output);
    let listed = server.query(
        "runtime",
        "SELECT tenant || '/' || id FROM hookhost_sessions",
    );
    assert_eq!(listed, format!("default/{}", s.id));
    let workspace = s.host_dir("/workspace").unwrap().to_path_buf();
    assert!(workspace.join("f.txt").is_file());

    host.runtime
        .sessions()
        .delete(&s.tenant, &s.id)
        .await
        .unwrap();
    assert!(!workspace.exists(), "its files went with it");
    assert_eq!(
        server.query("runtime", "SELECT count(*) FROM hookhost_sessions"),
        "0"
    );

    // gc collects an idle one, and only once when two sweep at once.
    let idle = host.session().await;
    let cutoff = SystemTime::now() + Duration::from_secs(1);
    let report = tokio::join!(
        host.runtime
            .sessions()
            .gc(Some(cutoff), SystemTime::UNIX_EPOCH),
        host.runtime
            .sessions()
            .gc(Some(cutoff), SystemTime::UNIX_EPOCH)
    );
    assert_eq!(report.0.unwrap().sessions + report.1.unwrap().sessions, 1);
    assert!(
        host.runtime
            .sessions()
            .record(&idle.tenant, &idle.id)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_drops_its_instances_of_a_session_another_host_deleted() {
    let server = PgServer::start();
    let url = server.database("instances");
    let config = format!(
        "[[hooks]]\nname = \"counter\"\ncomponent = {:?}\ninstance = \"per-session\"\n\
         settings = {{ tag = \"c\", mode = \"count\" }}\n[sessions]\nstore = {url:?}\n",
        hookhost_tests::fixtures::PROBE_HOOK
    );
    // Two hosts: two runtimes on one database and one data directory.
    let a = TestHost::new(&config).await;
    let mut b = hookhost::Runtime::new(
        hookhost::Config::parse(&config, "b.toml").unwrap().plan,
        a.data.path(),
    )
    .await
    .unwrap();
    b.register_tool(Arc::new(hookhost_tests::EchoTool::default()))
        .unwrap();
    let count = |result: hookhost::ToolResult| {
        let after = result.output.rsplit_once("count:").unwrap().1.to_string();
        after.split('|').next().unwrap().to_string()
    };
    let s = a.session().await;
    let on_b = b.sessions().open(&s.tenant, &s.id).await.unwrap();
    for expected in ["1", "2"] {
        assert_eq!(count(b.call(&on_b, "echo", "{}").await.unwrap()), expected);
    }
    // A deletes it, and the same id is made again: B must not serve the old instance.
    a.runtime.sessions().delete(&s.tenant, &s.id).await.unwrap();
    b.sessions().forget_ended_elsewhere().await.unwrap();
    a.runtime
        .sessions()
        .create(s.tenant.clone(), Some(s.id.clone()), None)
        .await
        .unwrap();
    let again = b.sessions().open(&s.tenant, &s.id).await.unwrap();
    assert_eq!(count(b.call(&again, "echo", "{}").await.unwrap()), "1");
}
