//! The session table in PostgreSQL, for a fleet: several hosts sharing one database (and
//! one data directory) serve and collect the same sessions.
//!
//! Each operation is one statement, so hosts never see half a row; `delete` says whether
//! this call removed the row, so when two hosts delete the same session only one of them
//! removes its files, and an idle sweep deletes a row only if it is still idle at that
//! instant (see [`SessionTable::delete_if_idle`]). The schema is made at connection,
//! under an advisory lock, so hosts starting together do not race.
//!
//! Persistent directories' backing trees are locked in the database too
//! ([`PgStoreLocks`]), so hosts of a fleet commit to a shared tree one at a time without
//! relying on file locks across machines.
//!
//! Connections are pooled ([`deadpool_postgres`], at most [`PG_POOL_SIZE`]). TLS is the
//! URL's `sslmode`, as libpq reads it, with rustls: `disable`; `prefer` (the default: TLS
//! when the server offers it); `require`, `verify-ca` and `verify-full` (TLS or no
//! connection). Whenever TLS is used the server's certificate is verified, chain and name,
//! against `sslrootcert` (a PEM file of CAs, in the URL) or else the system's roots:
//! hookhost never talks TLS to a server it has not verified, even where libpq's `require`
//! would.

use super::table::{Owner, Row, SessionError, SessionRecord, SessionTable, created, millis};
use crate::ids::{SessionId, TenantId};
use crate::limits::{PG_POOL_SIZE, STORE_LOCK_WAIT};
use crate::persistent::{PersistentError, StoreLocks};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;
use tokio_postgres::NoTls;

/// The key of the advisory lock under which the schema is made.
const SCHEMA_LOCK: i64 = 0x686f_6f6b_686f_7374; // "hookhost"

/// The first key of the advisory locks of backing trees (the second is the hash of the
/// tree's path): apart from every other lock of the database's users.
const STORE_LOCKS: i32 = 0x686f_6f6b; // "hook"

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS hookhost_sessions (
        tenant      TEXT   NOT NULL,
        id          TEXT   NOT NULL,
        created     BIGINT NOT NULL,
        last_active BIGINT NOT NULL,
        workdir     TEXT,
        owner       TEXT,
        subject     TEXT,
        PRIMARY KEY (tenant, id)
    );
    CREATE INDEX IF NOT EXISTS hookhost_sessions_last_active
        ON hookhost_sessions (last_active);
    CREATE TABLE IF NOT EXISTS hookhost_mcp_sessions (
        id    TEXT NOT NULL PRIMARY KEY,
        state TEXT NOT NULL
    );
";

const COLUMNS: &str = "tenant, id, created, last_active, workdir, owner, subject";

/// The URL's TLS settings that `tokio_postgres` does not read, taken out of it.
#[derive(Debug, Default, PartialEq, Eq)]
struct TlsParams {
    /// `sslrootcert`: the CAs to verify the server with.
    root_cert: Option<std::path::PathBuf>,
    /// `sslmode=verify-ca` or `verify-full` (read as `require`: certificates are always
    /// verified).
    verify: bool,
}

/// `url` as `tokio_postgres` reads it, and the TLS settings it does not.
fn parse(url: &str) -> Result<(tokio_postgres::Config, TlsParams), tokio_postgres::Error> {
    let mut params = TlsParams::default();
    let rewritten = match url.split_once('?') {
        None => url.to_string(),
        Some((base, query)) => {
            let kept: Vec<String> = query
                .split('&')
                .filter_map(|pair| match pair.split_once('=') {
                    Some(("sslrootcert", path)) => {
                        params.root_cert = Some(path.into());
                        None
                    }
                    Some(("sslmode", "verify-ca" | "verify-full")) => {
                        params.verify = true;
                        Some("sslmode=require".to_string())
                    }
                    _ => Some(pair.to_string()),
                })
                .collect();
            match kept.is_empty() {
                true => base.to_string(),
                false => format!("{base}?{}", kept.join("&")),
            }
        }
    };
    Ok((rewritten.parse()?, params))
}

/// A pool of at most [`PG_POOL_SIZE`] connections to the database at `url`, made on the
/// runtime of the task that first asks for each.
fn pool(url: &str) -> Result<Pool, SessionError> {
    let (config, tls) = parse(url)?;
    let recycling = || ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match config.get_ssl_mode() {
        tokio_postgres::config::SslMode::Disable => {
            Manager::from_config(config, NoTls, recycling())
        }
        _ => Manager::from_config(config, tls_connector(&tls)?, recycling()),
    };
    Pool::builder(manager)
        .max_size(PG_POOL_SIZE)
        .build()
        .map_err(|e| SessionError::Pool(e.to_string()))
}

/// The locks of persistent directories' backing trees for a fleet: a session-level
/// advisory lock per tree (`pg_advisory_lock(STORE_LOCKS, hashtext(PATH))`), held on a
/// connection of its own for as long as its guard lives. Loads and commits take it from
/// blocking threads, so its connections live on a runtime of their own (one thread),
/// never waiting on the runtime that serves calls. A host that dies holding one loses its
/// connection, and the database releases the lock.
///
/// Hosts share a tree by its path: the shared storage is mounted at the same path on
/// each. Two paths whose hashes collide share a lock, which costs only waiting.
pub struct PgStoreLocks {
    requests: tokio::sync::mpsc::UnboundedSender<LockRequest>,
    /// Where the database is, for errors.
    at: String,
}

/// A lock asked for: granted (or why not) on `granted`; released when `release`'s sender
/// (the guard) is dropped.
struct LockRequest {
    key: String,
    granted: std::sync::mpsc::Sender<Result<(), String>>,
    release: tokio::sync::oneshot::Receiver<()>,
}

impl PgStoreLocks {
    fn start(pool: Pool, at: String) -> std::io::Result<PgStoreLocks> {
        let (requests, mut incoming) = tokio::sync::mpsc::unbounded_channel::<LockRequest>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("hookhost-store-locks".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(request) = incoming.recv().await {
                        tokio::spawn(hold(pool.clone(), request));
                    }
                });
            })?;
        Ok(PgStoreLocks { requests, at })
    }
}

/// Takes the lock `request` asks for, says so, and holds it until its guard is dropped.
async fn hold(pool: Pool, request: LockRequest) {
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&STORE_LOCKS, &request.key];
    let client = match pool.get().await {
        Ok(client) => client,
        Err(e) => {
            let _ = request.granted.send(Err(crate::failure::error_line(&e)));
            return;
        }
    };
    if let Err(e) = client
        .execute("SELECT pg_advisory_lock($1, hashtext($2))", &params)
        .await
    {
        let _ = request.granted.send(Err(crate::failure::error_line(&e)));
        // Whether the lock was taken is unknown: the connection goes, and the lock with it.
        drop(deadpool_postgres::Object::take(client));
        return;
    }
    // A waiter that gave up has dropped its guard too: the lock is released at once.
    let _ = request.granted.send(Ok(()));
    let _ = request.release.await;
    // Released before the connection goes back to the pool; one that cannot say so is
    // closed, which releases it.
    if client
        .execute("SELECT pg_advisory_unlock($1, hashtext($2))", &params)
        .await
        .is_err()
    {
        drop(deadpool_postgres::Object::take(client));
    }
}

impl StoreLocks for PgStoreLocks {
    fn lock(&self, root: &Path) -> Result<Box<dyn Send>, PersistentError> {
        let (granted, answer) = std::sync::mpsc::channel();
        let (release, on_release) = tokio::sync::oneshot::channel::<()>();
        let request = LockRequest {
            key: root.to_string_lossy().into_owned(),
            granted,
            release: on_release,
        };
        self.requests
            .send(request)
            .map_err(|_| PersistentError::Lock("the lock thread stopped".into()))?;
        match answer.recv_timeout(STORE_LOCK_WAIT) {
            Ok(Ok(())) => Ok(Box::new(release)),
            Ok(Err(e)) => Err(PersistentError::Lock(format!("{}: {e}", self.at))),
            Err(_) => Err(PersistentError::Lock(format!(
                "not granted by {} within {} s",
                self.at,
                STORE_LOCK_WAIT.as_secs()
            ))),
        }
    }
}

/// The rustls connector for `params`: verifying against `sslrootcert`, else the system's
/// roots.
fn tls_connector(
    params: &TlsParams,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, SessionError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    crate::crypto::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    match &params.root_cert {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| SessionError::Pool(format!("sslrootcert {}: {e}", path.display())))?;
            roots.add_parsable_certificates(certs);
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// Where the database of `url` is, for people: `user@host:port/database` and the TLS mode,
/// never the password.
pub fn store_address(url: &str) -> String {
    let Ok((config, tls)) = parse(url) else {
        return "an unreadable URL".into();
    };
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
        .map(|(host, port)| match host {
            tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
            tokio_postgres::config::Host::Unix(path) => format!("{}:{port}", path.display()),
        })
        .collect();
    let sslmode = match (config.get_ssl_mode(), tls.verify) {
        (_, true) => "verify-full".to_string(),
        (mode, false) => format!("{mode:?}").to_lowercase(),
    };
    format!(
        "{}@{}/{} (sslmode {sslmode})",
        config.get_user().unwrap_or("?"),
        hosts.join(","),
        config.get_dbname().unwrap_or("?"),
    )
}

/// The session table in a PostgreSQL database.
pub struct PgTable {
    pool: Pool,
    /// Where the database is, for errors (see [`store_address`]).
    at: String,
    locks: Arc<PgStoreLocks>,
}

impl PgTable {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`) and makes the
    /// table if it is missing.
    ///
    /// # Errors
    ///
    /// [`SessionError::Postgres`] when the URL is not one, or the database cannot be
    /// reached or refuses the schema.
    pub async fn connect(url: &str) -> Result<PgTable, SessionError> {
        let at = store_address(url);
        PgTable::open(url, at.clone())
            .await
            .map_err(|source| match source {
                SessionError::Connect { .. } => source,
                source => SessionError::Connect {
                    at,
                    source: Box::new(source),
                },
            })
    }

    async fn open(url: &str, at: String) -> Result<PgTable, SessionError> {
        let locks = PgStoreLocks::start(pool(url)?, at.clone());
        let table = PgTable {
            pool: pool(url)?,
            at,
            locks: Arc::new(locks.map_err(|e| SessionError::Pool(e.to_string()))?),
        };
        let mut client = table.client().await?;
        let schema = client.transaction().await?;
        schema
            .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await?;
        schema.batch_execute(SCHEMA).await?;
        // Tables made before sessions recorded their subject. Looked up first: an ALTER
        // TABLE, even one that changes nothing, locks the table and needs its owner.
        let has_subject = schema
            .query_opt(
                "SELECT 1 FROM information_schema.columns
                 WHERE table_schema = current_schema()
                   AND table_name = 'hookhost_sessions' AND column_name = 'subject'",
                &[],
            )
            .await?
            .is_some();
        if !has_subject {
            schema
                .batch_execute("ALTER TABLE hookhost_sessions ADD COLUMN subject TEXT")
                .await?;
        }
        schema.commit().await?;
        Ok(table)
    }

    /// A connection from the pool; failing, the error says where the database is and
    /// why it could not be reached (`Connection refused`…).
    async fn client(&self) -> Result<deadpool_postgres::Object, SessionError> {
        self.pool.get().await.map_err(|e| SessionError::Connect {
            at: self.at.clone(),
            source: Box::new(SessionError::Pool(crate::failure::error_line(&e))),
        })
    }

    async fn rows(
        &self,
        query: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<SessionRecord>, SessionError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(query).await?;
        client
            .query(&statement, params)
            .await?
            .iter()
            .map(|row| {
                Row {
                    tenant: row.try_get(0)?,
                    id: row.try_get(1)?,
                    created: row.try_get(2)?,
                    last_active: row.try_get(3)?,
                    workdir: row.try_get(4)?,
                    owner: row.try_get(5)?,
                    subject: row.try_get(6)?,
                }
                .into_record()
            })
            .collect()
    }

    async fn execute(
        &self,
        query: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, SessionError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(query).await?;
        Ok(client.execute(&statement, params).await?)
    }
}

#[async_trait::async_trait]
impl SessionTable for PgTable {
    async fn create(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        workdir: Option<&Path>,
        owner: Owner,
        subject: Option<&str>,
    ) -> Result<SessionRecord, SessionError> {
        let now = SystemTime::now();
        let workdir_text = workdir.map(|w| w.to_string_lossy().into_owned());
        let inserted = self
            .execute(
                "INSERT INTO hookhost_sessions
                     (tenant, id, created, last_active, workdir, owner, subject)
                 VALUES ($1, $2, $3, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                &[
                    &tenant.as_str(),
                    &id.as_str(),
                    &millis(now),
                    &workdir_text,
                    &owner.to_text(),
                    &subject,
                ],
            )
            .await?;
        created(inserted > 0, tenant, id, now, workdir, owner, subject)
    }

    async fn get(
        &self,
        tenant: &TenantId,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, SessionError> {
        let query =
            format!("SELECT {COLUMNS} FROM hookhost_sessions WHERE tenant = $1 AND id = $2");
        Ok(self
            .rows(&query, &[&tenant.as_str(), &id.as_str()])
            .await?
            .pop())
    }

    async fn touch(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        now: SystemTime,
    ) -> Result<(), SessionError> {
        self.execute(
            "UPDATE hookhost_sessions SET last_active = GREATEST(last_active, $3)
             WHERE tenant = $1 AND id = $2",
            &[&tenant.as_str(), &id.as_str(), &millis(now)],
        )
        .await?;
        Ok(())
    }

    async fn set_owner(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        owner: &Owner,
    ) -> Result<(), SessionError> {
        self.execute(
            "UPDATE hookhost_sessions SET owner = $3 WHERE tenant = $1 AND id = $2",
            &[&tenant.as_str(), &id.as_str(), &owner.to_text()],
        )
        .await?;
        Ok(())
    }

    async fn list(&self, tenant: Option<&TenantId>) -> Result<Vec<SessionRecord>, SessionError> {
        let query = format!(
            "SELECT {COLUMNS} FROM hookhost_sessions
             WHERE $1::TEXT IS NULL OR tenant = $1 ORDER BY created, id"
        );
        self.rows(&query, &[&tenant.map(TenantId::as_str)]).await
    }

    async fn ping(&self) -> Result<(), SessionError> {
        self.client().await?.simple_query("SELECT 1").await?;
        Ok(())
    }

    fn store_locks(&self) -> Arc<dyn StoreLocks> {
        self.locks.clone()
    }

    async fn delete(&self, tenant: &TenantId, id: &SessionId) -> Result<bool, SessionError> {
        let n = self
            .execute(
                "DELETE FROM hookhost_sessions WHERE tenant = $1 AND id = $2",
                &[&tenant.as_str(), &id.as_str()],
            )
            .await?;
        Ok(n > 0)
    }

    async fn delete_if_idle(
        &self,
        tenant: &TenantId,
        id: &SessionId,
        cutoff: SystemTime,
    ) -> Result<bool, SessionError> {
        let n = self
            .execute(
                "DELETE FROM hookhost_sessions WHERE tenant = $1 AND id = $2 AND last_active < $3",
                &[&tenant.as_str(), &id.as_str(), &millis(cutoff)],
            )
            .await?;
        Ok(n > 0)
    }

    fn is_shared(&self) -> bool {
        true
    }

    async fn mcp_state(&self, id: &str) -> Result<Option<String>, SessionError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached("SELECT state FROM hookhost_mcp_sessions WHERE id = $1")
            .await?;
        Ok(client
            .query_opt(&statement, &[&id])
            .await?
            .map(|row| row.try_get(0))
            .transpose()?)
    }

    async fn set_mcp_state(&self, id: &str, state: &str) -> Result<(), SessionError> {
        self.execute(
            "INSERT INTO hookhost_mcp_sessions (id, state) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state",
            &[&id, &state],
        )
        .await?;
        Ok(())
    }

    async fn forget_mcp_state(&self, id: &str) -> Result<(), SessionError> {
        self.execute("DELETE FROM hookhost_mcp_sessions WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    async fn idle_since(&self, cutoff: SystemTime) -> Result<Vec<SessionRecord>, SessionError> {
        let query = format!(
            "SELECT {COLUMNS} FROM hookhost_sessions WHERE last_active < $1 ORDER BY last_active"
        );
        self.rows(&query, &[&millis(cutoff)]).await
    }
}
