//! The process's TLS crypto provider, shared by its HTTPS clients and its TLS server.

/// Makes rustls's `ring` provider the process's default, once: what its HTTPS clients
/// (upstream servers, a JWKS, OTLP) and its TLS server use.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err: one is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
