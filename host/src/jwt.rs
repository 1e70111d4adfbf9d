//! Bearer JWTs naming tenants (`[auth]`), beside tenants' own tokens, for `serve --http`.
//!
//! A token is accepted when it is signed by a key of the provider's JWKS (fetched from
//! its URL or read from its file when first needed, and again — at most every
//! [`JWKS_REFETCH_INTERVAL`] — when a token names a key it lacks, as after a rotation),
//! with an asymmetric algorithm (RSA, RSA-PSS, ECDSA, EdDSA: never an HMAC, whose key would
//! be the public JWKS), carries the configured `iss` and `aud` and an `exp` not past (with
//! [`JWT_LEEWAY_SECS`]), its tenant claim names a tenant this server serves (a declared
//! one, when tenants are declared), and it has a subject (`sub`, or `subject_claim`): the
//! sessions it opens are that subject's alone (see [`Principal`]). The checks are
//! `jsonwebtoken`'s.
//!
//! For MCP clients that support OAuth (MCP's authorization spec), the server publishes
//! its protected-resource metadata (RFC 9728) at
//! `/.well-known/oauth-protected-resource` (and under it, `…/mcp`), and a 401 says where,
//! in `WWW-Authenticate: Bearer resource_metadata="…"`.

use crate::config::JwtPlan;
use crate::ids::TenantId;
use crate::limits::{JWKS_FETCH_TIMEOUT, JWKS_REFETCH_INTERVAL, JWT_LEEWAY_SECS, MAX_JWKS_BYTES};
use crate::sessions::{Principal, Tenants};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use std::sync::Mutex;
use std::time::Instant;

/// Where the protected-resource metadata is served.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Why a token was refused (logged at debug level; the client gets a 401).
#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("not a JWT, or its header is unreadable: {0}")]
    Header(jsonwebtoken::errors::Error),
    #[error("the token names no key (`kid`)")]
    NoKeyId,
    #[error("the JWKS has no key {0:?}")]
    UnknownKey(String),
    #[error("{0:?} is not an asymmetric signature algorithm")]
    Algorithm(Algorithm),
    #[error("the key cannot verify tokens: {0}")]
    Key(jsonwebtoken::errors::Error),
    #[error("{0}")]
    Invalid(jsonwebtoken::errors::Error),
    #[error("no string claim {0:?} names a tenant")]
    NoTenant(String),
    #[error("tenant {0:?} is not served here")]
    UnknownTenant(String),
    #[error("no string claim {0:?} names a subject")]
    NoSubject(String),
    #[error("the JWKS {jwks}: {why}")]
    Jwks { jwks: String, why: String },
}

/// The keys of one `[auth]` table, fetched when needed.
pub struct Jwt {
    plan: JwtPlan,
    keys: Mutex<Keys>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    /// Made at the first fetch: a config with `[auth]` costs a command that serves no
    /// HTTP nothing.
    client: std::sync::OnceLock<reqwest::Client>,
}

struct Keys {
    set: JwkSet,
    fetched: Option<Instant>,
}

impl Default for Keys {
    fn default() -> Keys {
        Keys {
            set: JwkSet { keys: Vec::new() },
            fetched: None,
        }
    }
}

impl Jwt {
    pub fn new(plan: JwtPlan) -> Jwt {
        Jwt {
            plan,
            keys: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
            client: std::sync::OnceLock::new(),
        }
    }

    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(|| {
            crate::crypto::install_crypto_provider();
            reqwest::Client::builder()
                .timeout(JWKS_FETCH_TIMEOUT)
                .build()
                .unwrap_or_default()
        })
    }

    pub fn plan(&self) -> &JwtPlan {
        &self.plan
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tenant and subject `token` names, once it passed every check.
    ///
    /// # Errors
    ///
    /// [`JwtError`]: why it was refused.
    pub async fn principal(&self, token: &str, tenants: &Tenants) -> Result<Principal, JwtError> {
        let header = jsonwebtoken::decode_header(token).map_err(JwtError::Header)?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(JwtError::Algorithm(header.alg));
        }
        let kid = header.kid.ok_or(JwtError::NoKeyId)?;
        let key = match self.key(&kid)? {
            Some(key) => key,
            None => {
                self.refetch().await?;
                self.key(&kid)?
                    .ok_or_else(|| JwtError::UnknownKey(kid.clone()))?
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.plan.issuer]);
        validation.set_audience(&[&self.plan.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = JWT_LEEWAY_SECS;
        let claims = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            token,
            &key,
            &validation,
        )
        .map_err(JwtError::Invalid)?
        .claims;
        let named = claims
            .get(&self.plan.tenant_claim)
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| JwtError::NoTenant(self.plan.tenant_claim.clone()))?;
        let tenant =
            TenantId::new(named).map_err(|_| JwtError::UnknownTenant(named.to_string()))?;
        if tenants.get(&tenant).is_err() {
            return Err(JwtError::UnknownTenant(named.to_string()));
        }
        let subject = claims
            .get(&self.plan.subject_claim)
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| JwtError::NoSubject(self.plan.subject_claim.clone()))?;
        Ok(Principal {
            tenant,
            subject: Some(subject.to_string()),
        })
    }

    /// The verifying key `kid` of the JWKS as last fetched; `None` when it has none.
    fn key(&self, kid: &str) -> Result<Option<DecodingKey>, JwtError> {
        let keys = self.keys();
        let Some(jwk) = keys.set.find(kid) else {
            return Ok(None);
        };
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            return Err(JwtError::Key(
                jsonwebtoken::errors::ErrorKind::InvalidKeyFormat.into(),
            ));
        }
        DecodingKey::from_jwk(jwk).map(Some).map_err(JwtError::Key)
    }

    /// Fetches the JWKS again, unless that was done less than [`JWKS_REFETCH_INTERVAL`]
    /// ago.
    async fn refetch(&self) -> Result<(), JwtError> {
        let _one = self.fetching.lock().await;
        if self
            .keys()
            .fetched
            .is_some_and(|at| at.elapsed() < JWKS_REFETCH_INTERVAL)
        {
            return Ok(());
        }
        // Counted as a fetch even when it fails: a provider that is down is not hammered.
        self.keys().fetched = Some(Instant::now());
        let set = self.fetch().await.inspect_err(|e| {
            tracing::warn!(error = %e, "cannot fetch the JWKS");
        })?;
        tracing::info!(keys = set.keys.len(), jwks = %self.plan.jwks_written, "JWKS fetched");
        self.keys().set = set;
        Ok(())
    }

    async fn fetch(&self) -> Result<JwkSet, JwtError> {
        // Messages name the JWKS as written: resolved, it may hold a secret.
        let source = self.plan.jwks.expose();
        let fail = |why: String| JwtError::Jwks {
            jwks: self.plan.jwks_written.clone(),
            why: why.replace(source, &self.plan.jwks_written),
        };
        let bytes = if source.starts_with("https://") || source.starts_with("http://") {
            let response = self
                .client()
                .get(source)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|e| fail(e.without_url().to_string()))?;
            if response
                .content_length()
                .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
            {
                return Err(fail(format!("larger than {MAX_JWKS_BYTES} bytes")));
            }
            let bytes = response.bytes().await.map_err(|e| fail(e.to_string()))?;
            bytes.to_vec()
        } else {
            tokio::fs::read(source)
                .await
                .map_err(|e| fail(e.to_string()))?
        };
        if bytes.len() > MAX_JWKS_BYTES {
            return Err(fail(format!("larger than {MAX_JWKS_BYTES} bytes")));
        }
        serde_json::from_slice(&bytes).map_err(|e| fail(format!("not a JWKS: {e}")))
    }

    /// The protected-resource metadata (RFC 9728) of the endpoint `resource`.
    pub fn metadata(&self, resource: &str) -> serde_json::Value {
        serde_json::json!({
            "resource": resource,
            "authorization_servers": self.plan.authorization_servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "hookhost",
        })
    }
}
