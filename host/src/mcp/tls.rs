//! TLS for `serve --http` (`[serve] tls_cert`, `tls_key`), with rustls (its `ring`
//! provider, TLS 1.2 and 1.3, HTTP/1.1 by ALPN).
//!
//! Connections are accepted by one task and each handshake runs in a task of its own,
//! bounded by [`TLS_HANDSHAKE_TIMEOUT`], so a client that stalls its handshake holds no
//! other back; finished ones wait (at most [`TLS_ACCEPTED_QUEUE`]) for the server. The
//! certificate is read again at each reload: a handshake that begins after it uses the
//! new one, connections already open keep theirs.

use crate::config::TlsFiles;
use crate::limits::{TLS_ACCEPTED_QUEUE, TLS_HANDSHAKE_TIMEOUT};
use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Why the certificate or key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("serve.tls_cert {path}: {why}")]
    Cert { path: String, why: String },
    #[error("serve.tls_key {path}: {why}")]
    Key { path: String, why: String },
    #[error("serve.tls_cert and serve.tls_key do not make a TLS config: {0}")]
    Config(#[from] rustls::Error),
}

/// The server's TLS config, read from `files`.
///
/// # Errors
///
/// [`TlsError`] naming the file that cannot be read or used.
pub fn load(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_path = files.cert.display().to_string();
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Cert {
            path: cert_path.clone(),
            why: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Cert {
            path: cert_path,
            why: "no certificate in it".into(),
        });
    }
    // The key's error never quotes the file: it is a secret.
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: files.key.display().to_string(),
        why: match e {
            rustls_pki_types::pem::Error::Io(e) => e.to_string(),
            rustls_pki_types::pem::Error::NoItemsFound => "no private key in it".into(),
            _ => "not a PEM private key (PKCS#8, SEC1 or PKCS#1)".into(),
        },
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The TLS config in effect, replaced by a reload.
pub type Current = Arc<ArcSwap<ServerConfig>>;

/// Connections whose TLS handshake is done, for `axum::serve`.
pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts on `tcp` with the config in `current`, until the listener is dropped.
    ///
    /// # Errors
    ///
    /// When the listener's address cannot be read.
    pub fn new(tcp: TcpListener, current: Current) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (done, accepted) = mpsc::channel(TLS_ACCEPTED_QUEUE);
        tokio::spawn(accept(tcp, current, done));
        Ok(TlsListener { accepted, local })
    }
}

/// Accepts TCP connections and hands each to a handshake of its own.
async fn accept(
    tcp: TcpListener,
    current: Current,
    done: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = tcp.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted.
                    tracing::debug!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = done.closed() => return,
        };
        // Without TCP_NODELAY the last small segment of every response waits for the
        // client's delayed ACK (see `serve_http`).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
        }
        let acceptor = TlsAcceptor::from(current.load_full());
        let done = done.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = done.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accepting task ends only once this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
