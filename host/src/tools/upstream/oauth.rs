//! hookhost as an OAuth 2.1 client of an upstream that requires MCP authorization, with
//! rmcp's own support: the upstream's protected-resource metadata names its authorization
//! server, whose metadata names the token endpoint; hookhost, a client registered there
//! beforehand, gets its access tokens by one of two grants that need no person:
//!
//! - `client_credentials` (MCP's SEP-1046), the client authenticated by a secret
//!   (`client_secret_basic` or `_post`, as the server offers) or a signed JWT
//!   (`private_key_jwt`, RFC 7523);
//! - `refresh_token`, with a refresh token the operator got beforehand (a rotated one
//!   replaces it in memory).
//!
//! Every token request names the upstream's URL as the `resource` (RFC 8707); the token is
//! sent as a bearer token. A token is renewed before it expires (when less than half its
//! life or 30 s is left, whichever is less) and when the upstream answers 401 to it, once
//! per request. A flow that needs a person (an authorization code in a browser) is never
//! started.
//!
//! Security: secrets and tokens are never logged; errors name the upstream's grant, not
//! them.

use crate::config::{SigningAlgorithm, UpstreamOAuth};
use crate::secret::expand;
use futures_core::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::JwtSigningAlgorithm;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, ClientCredentialsConfig, CredentialStore,
    InMemoryCredentialStore, OAuthClientConfig, StoredCredentials,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// An HTTP client that authenticates to the upstream at `url` as `oauth` says, holding a
/// token already: a grant that does not work fails here, at the connection, not at a call.
///
/// # Errors
///
/// Why no token could be had: a value that does not expand, discovery, the authorization
/// server's metadata (it must offer the grant and the client authentication asked for) or
/// the token request.
pub(super) async fn authorized(
    upstream: &str,
    url: &str,
    oauth: &UpstreamOAuth,
) -> Result<Authorized, String> {
    let value = |name: &str, secret: &crate::secret::Secret| {
        expand(secret.expose()).map_err(|why| format!("{name}: {why}"))
    };
    let client_id = value("client_id", &oauth.client_id)?;
    let client_secret = match &oauth.client_secret {
        Some(secret) => Some(value("client_secret", secret)?),
        None => None,
    };
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| e.to_string())?;
    let metadata = manager
        .resolve_metadata()
        .await
        .map_err(|e| format!("discovery of the authorization server: {e}"))?;
    manager.set_metadata(metadata.metadata);
    let grant = if let Some(refresh_token) = &oauth.refresh_token {
        let refresh_token = value("refresh_token", refresh_token)?;
        // The redirect URI is the type's, never used: no authorization code is asked for.
        let mut client = OAuthClientConfig::new(client_id.clone(), "http://localhost/");
        if let Some(secret) = client_secret {
            client = client.with_client_secret(secret);
        }
        manager
            .configure_client(client)
            .map_err(|e| e.to_string())?;
        manager.set_credential_store(seeded(&client_id, refresh_token, &oauth.scopes).await?);
        Grant::RefreshToken
    } else {
        let credentials = match (client_secret, &oauth.private_key) {
            (Some(client_secret), _) => ClientCredentialsConfig::ClientSecret {
                client_id,
                client_secret,
                scopes: oauth.scopes.clone(),
                resource: Some(url.to_string()),
            },
            (None, Some(key)) => ClientCredentialsConfig::PrivateKeyJwt {
                client_id,
                signing_key: value("private_key", key)?.into_bytes(),
                signing_algorithm: jwt_algorithm(oauth.signing_algorithm),
                token_endpoint_audience: None,
                scopes: oauth.scopes.clone(),
                resource: Some(url.to_string()),
            },
            // Refused by the configuration's validation.
            (None, None) => return Err("no client authentication is configured".into()),
        };
        manager
            .validate_client_credentials_metadata(&credentials)
            .map_err(|e| e.to_string())?;
        manager
            .configure_client_credentials(&credentials)
            .map_err(|e| e.to_string())?;
        Grant::ClientCredentials(credentials)
    };
    let tokens = Arc::new(Tokens {
        upstream: upstream.to_string(),
        manager: Arc::new(Mutex::new(manager)),
        grant,
    });
    tokens.renew().await.map_err(|e| e.to_string())?;
    let http = super::http_client().map_err(|e| e.to_string())?;
    Ok(Authorized { http, tokens })
}

/// A credential store holding only `refresh_token`, as if an access token that has just
/// expired came with it: the first use refreshes.
async fn seeded(
    client_id: &str,
    refresh_token: String,
    scopes: &[String],
) -> Result<InMemoryCredentialStore, String> {
    let stored: StoredCredentials = serde_json::from_value(serde_json::json!({
        "client_id": client_id,
        "token_response": {
            "access_token": "",
            "token_type": "bearer",
            "expires_in": 0,
            "refresh_token": refresh_token,
        },
        "granted_scopes": scopes,
        "token_received_at": 0,
    }))
    .map_err(|e| e.to_string())?;
    let store = InMemoryCredentialStore::new();
    store.save(stored).await.map_err(|e| e.to_string())?;
    Ok(store)
}

fn jwt_algorithm(algorithm: SigningAlgorithm) -> JwtSigningAlgorithm {
    match algorithm {
        SigningAlgorithm::RS256 => JwtSigningAlgorithm::RS256,
        SigningAlgorithm::RS384 => JwtSigningAlgorithm::RS384,
        SigningAlgorithm::RS512 => JwtSigningAlgorithm::RS512,
        SigningAlgorithm::ES256 => JwtSigningAlgorithm::ES256,
        SigningAlgorithm::ES384 => JwtSigningAlgorithm::ES384,
    }
}

/// How new tokens are had.
enum Grant {
    ClientCredentials(ClientCredentialsConfig),
    RefreshToken,
}

/// One upstream's tokens: rmcp's manager keeps the current one (and a refresh token).
struct Tokens {
    upstream: String,
    manager: Arc<Mutex<AuthorizationManager>>,
    grant: Grant,
}

impl Tokens {
    /// The token to send: the current one, or a new one when it is about to expire.
    async fn current(&self) -> Result<String, AuthError> {
        let manager = Arc::clone(&self.manager).lock_owned().await;
        // rmcp refreshes a token near its expiry when it holds a refresh token; without one
        // (or with one it no longer accepts) it asks for an authorization.
        match manager.get_access_token().await {
            Err(AuthError::AuthorizationRequired) => self.grant(manager).await,
            token => token,
        }
    }

    /// A token other than `rejected`, which the upstream refused: one that another request
    /// got meanwhile, or a new one.
    async fn replacing(&self, rejected: &str) -> Result<String, AuthError> {
        let manager = Arc::clone(&self.manager).lock_owned().await;
        match manager.get_access_token().await {
            Ok(token) if token != rejected => Ok(token),
            _ => self.grant(manager).await,
        }
    }

    async fn renew(&self) -> Result<String, AuthError> {
        self.grant(Arc::clone(&self.manager).lock_owned().await)
            .await
    }

    /// A new token by the grant, while `manager` is held.
    async fn grant(
        &self,
        manager: OwnedMutexGuard<AuthorizationManager>,
    ) -> Result<String, AuthError> {
        use oauth2::TokenResponse;
        let response = match &self.grant {
            Grant::ClientCredentials(credentials) => {
                // rmcp's `exchange_client_credentials` is not `Send` (its private_key_jwt
                // path holds a form serializer across an await), so it runs on a blocking
                // thread of its own, once per token.
                let credentials = credentials.clone();
                tokio::task::spawn_blocking(move || {
                    Handle::current().block_on(manager.exchange_client_credentials(&credentials))
                })
                .await
                .map_err(|e| AuthError::InternalError(e.to_string()))?
            }
            Grant::RefreshToken => manager.refresh_token().await.map_err(|e| match e {
                AuthError::TokenRefreshRejected(why) => AuthError::TokenRefreshRejected(format!(
                    "{why}; the refresh token is no longer valid: give a new one in \
                     `oauth.refresh_token`"
                )),
                e => e,
            }),
        }
        .inspect_err(
            |e| tracing::error!(upstream = self.upstream, error = %e, "no access token"),
        )?;
        Ok(response.access_token().secret().clone())
    }
}

/// The HTTP client of an upstream that requires authorization: each request carries the
/// current token, and one the upstream refuses (401) is replaced and the request sent again
/// once.
#[derive(Clone)]
pub(super) struct Authorized {
    http: reqwest::Client,
    tokens: Arc<Tokens>,
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl Authorized {
    async fn with_token<T, F, Fut>(&self, request: F) -> HttpResult<T>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        let token = self.tokens.current().await?;
        match request(Some(token.clone())).await {
            Err(StreamableHttpError::AuthRequired(_)) => {
                let token = self.tokens.replacing(&token).await?;
                request(Some(token)).await
            }
            answer => answer,
        }
    }
}

/// The transport sends with the limits it was given ([`Self::post_message_with_response_limits`],
/// [`Self::get_stream_with_max_sse_event_size`]); the plain forms take the defaults, as
/// rmcp's own client does.
impl StreamableHttpClient for Authorized {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(uri, message, session_id, token, headers, limits)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.with_token(|token| {
            self.http.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.with_token(|token| {
            self.http
                .delete_session(uri.clone(), session_id.clone(), token, headers.clone())
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let limit = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            token,
            headers,
            limit,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.with_token(|token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}
