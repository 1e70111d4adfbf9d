//! hookhost as an OAuth 2.1 client of an upstream that requires MCP authorization, with
//! rmcp's own support: the upstream's protected-resource metadata names its authorization
//! server, whose metadata names the token endpoint; hookhost, a client registered there
//! beforehand, gets an access token with the `client_credentials` grant, asking for the
//! upstream's URL as the `resource` (RFC 8707), and sends it as a bearer token. A flow that
//! needs a person (an authorization code in a browser) is never started.
//!
//! Security: the secret and the tokens are never logged; errors name the upstream, not them.

use crate::config::UpstreamOAuth;
use crate::secret::expand;
use rmcp::transport::auth::{AuthClient, ClientCredentialsConfig, OAuthState};

/// An HTTP client that authenticates to the upstream at `url` as `oauth` says.
///
/// # Errors
///
/// Why no token could be had: discovery, the authorization server's metadata (it must
/// offer the `client_credentials` grant) or the token request failed.
pub(super) async fn authorized(
    url: &str,
    oauth: &UpstreamOAuth,
) -> Result<AuthClient<reqwest::Client>, String> {
    let client_id = expand(oauth.client_id.expose()).map_err(|why| format!("client_id: {why}"))?;
    let client_secret =
        expand(oauth.client_secret.expose()).map_err(|why| format!("client_secret: {why}"))?;
    let mut state = OAuthState::new(url, None)
        .await
        .map_err(|e| e.to_string())?;
    let credentials = ClientCredentialsConfig::ClientSecret {
        client_id,
        client_secret,
        scopes: oauth.scopes.clone(),
        resource: Some(url.to_string()),
    };
    state
        .authenticate_client_credentials(credentials)
        .await
        .map_err(|e| e.to_string())?;
    let manager = state
        .into_authorization_manager()
        .ok_or("the authorization server gave no token")?;
    // As rmcp's own client: no idle pooling (a reused connection whose last body was not
    // read whole stalls on delayed ACKs).
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(AuthClient::new(http, manager))
}
