//! How to authorise with a per-person MCP server, as the MCP
//! authorization spec says: the server's 401 `WWW-Authenticate` names its
//! protected-resource metadata (RFC 9728), which names the authorization
//! server, whose metadata (RFC 8414 or OpenID discovery) gives the
//! endpoints. rmcp's `auth` does the fetching (the spec's well-known
//! fallbacks, issuer checks, address filtering, bounded bodies); this
//! module probes for the challenge and refuses metadata Baton must not
//! use.

use crate::error::ConnectError;
use crate::http::{bounded_body, HTTP_TIMEOUT};
use baton_settings::connection::secure_or_loopback;
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, AuthorizationMetadataSource,
};
use url::Url;

/// What Baton uses of an authorization server's metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthServer {
    pub authorize_url: Url,
    pub token_url: Url,
    /// RFC 7591 dynamic registration, when offered.
    pub registration_url: Option<Url>,
    /// `client_id_metadata_document_supported`: a client may be the URL
    /// of its own metadata document.
    pub client_id_metadata_documents: bool,
}

/// The challenge of an unauthenticated request to the MCP server, if it
/// answers 401 with one.
async fn challenge(http: &reqwest::Client, resource: &Url) -> Option<String> {
    // An `initialize` request, as a client would send first: a server
    // that requires OAuth refuses it with its challenge.
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "baton", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = http
        .post(resource.clone())
        .timeout(HTTP_TIMEOUT)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    let header = response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Drain (bounded) so the connection can be reused.
    let _ = bounded_body(response).await;
    header
}

/// Discovers the authorization server of the MCP server at `resource`.
pub async fn discover(
    http: &reqwest::Client,
    provider: &str,
    resource: &Url,
) -> Result<AuthServer, ConnectError> {
    let fail = |reason: String| ConnectError::Discovery {
        provider: provider.to_owned(),
        reason,
    };
    let challenge = challenge(http, resource).await;
    let manager = AuthorizationManager::new(resource.as_str())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| fail(e.to_string()))?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(fail(
            "the server publishes no OAuth metadata (RFC 9728 / RFC 8414)".into(),
        ));
    }
    check(&resolution.metadata, resource).map_err(fail)
}

/// Refuses metadata Baton must not follow: endpoints that are not https
/// (http only when the MCP server itself is on a loopback host), and
/// servers without PKCE S256 (the spec says to refuse them).
pub(crate) fn check(meta: &AuthorizationMetadata, resource: &Url) -> Result<AuthServer, String> {
    let loopback_resource = resource.scheme() == "http" && secure_or_loopback(resource);
    let endpoint = |what: &str, raw: &str| -> Result<Url, String> {
        let url = Url::parse(raw).map_err(|e| format!("its {what} `{raw}` is not a URL: {e}"))?;
        let ok = url.scheme() == "https" || (loopback_resource && secure_or_loopback(&url));
        if ok {
            Ok(url)
        } else {
            Err(format!("its {what} `{url}` is not an https:// URL"))
        }
    };
    let authorize_url = endpoint("authorization_endpoint", &meta.authorization_endpoint)?;
    let token_url = endpoint("token_endpoint", &meta.token_endpoint)?;
    let registration_url = meta
        .registration_endpoint
        .as_deref()
        .map(|r| endpoint("registration_endpoint", r))
        .transpose()?;
    let s256 = meta
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"));
    if !s256 {
        return Err(
            "its metadata does not offer PKCE with S256 (code_challenge_methods_supported)".into(),
        );
    }
    let client_id_metadata_documents = meta
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    Ok(AuthServer {
        authorize_url,
        token_url,
        registration_url,
        client_id_metadata_documents,
    })
}
