//! The authorization-code flow with PKCE (S256) and RFC 8707's
//! `resource`, the code exchange and the refresh, over the oauth2 crate;
//! which client Baton is at each provider (the table's, a Client ID
//! Metadata Document, or one registered dynamically and kept).

use crate::discovery::{self, AuthServer};
use crate::error::ConnectError;
use crate::http::{self, HttpError};
use crate::provider::{Provider, ProviderKind};
use async_trait::async_trait;
use baton_core::clock::Instant;
use baton_core::connection::Tokens;
use oauth2::basic::{BasicClient, BasicErrorResponse, BasicTokenResponse};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};
use rmcp::transport::auth::AuthorizationManager;
use secrecy::{ExposeSecret, SecretString};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use url::Url;

/// Where Baton's callback is, under the public URL.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// Where Baton serves its Client ID Metadata Document, under the public
/// URL (https only: the document's URL is the client id).
pub const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";

/// How long discovered metadata is reused before it is fetched again.
const DISCOVERY_TTL: Duration = Duration::from_secs(3600);

/// A client Baton registered at a provider itself (RFC 7591), kept per
/// provider and redirect URL so every flow and refresh uses the same one.
#[derive(Clone, Debug)]
pub struct RegisteredClient {
    pub client_id: String,
    pub client_secret: Option<SecretString>,
    /// The redirect URL it was registered with: a new public URL needs a
    /// new registration (kept beside the old one, never over it).
    pub redirect_url: String,
}

/// Where registered clients are kept (vault's store, `OAUTHCLIENT#`), per
/// provider and redirect URL.
#[async_trait]
pub trait ClientRegistry: Send + Sync {
    async fn registered(
        &self,
        provider: &str,
        redirect_url: &str,
    ) -> Result<Option<RegisteredClient>, ConnectError>;
    /// Keeps `client` unless another registration for the same redirect
    /// URL got there first; either way, the client kept.
    async fn keep(
        &self,
        provider: &str,
        client: RegisteredClient,
    ) -> Result<RegisteredClient, ConnectError>;
}

/// The first step of a flow: where to send the browser, and the PKCE
/// verifier to keep with the connect request until the callback.
#[derive(Debug)]
pub struct Authorization {
    pub url: Url,
    pub pkce_verifier: SecretString,
}

/// Which client Baton is at a provider, for one request.
struct Client {
    id: String,
    secret: Option<SecretString>,
}

/// The flows of a deployment's per-person providers.
pub struct Connector {
    providers: Arc<BTreeMap<String, Provider>>,
    redirect_url: Url,
    client_metadata_url: Option<Url>,
    http: Arc<http::OAuthHttp>,
    servers: Arc<Mutex<HashMap<String, (AuthServer, std::time::Instant)>>>,
    registry: Arc<dyn ClientRegistry>,
}

/// The callback and client-metadata URLs under `public_url`.
fn urls_under(public_url: &Url) -> Result<(Url, Option<Url>), String> {
    let base = public_url.as_str().trim_end_matches('/');
    let redirect_url = Url::parse(&format!("{base}{CALLBACK_PATH}"))
        .map_err(|e| format!("BATON_PUBLIC_URL: {e}"))?;
    let client_metadata_url = (public_url.scheme() == "https")
        .then(|| Url::parse(&format!("{base}{CLIENT_METADATA_PATH}")).ok())
        .flatten();
    Ok((redirect_url, client_metadata_url))
}

impl Connector {
    /// The connector of `providers`, whose callback is under `public_url`
    /// (`BATON_PUBLIC_URL`; on AWS the stack's URL): the one redirect URL
    /// of every flow, whatever host a request came to.
    pub fn new(
        providers: Vec<Provider>,
        public_url: &Url,
        registry: Arc<dyn ClientRegistry>,
    ) -> Result<Self, String> {
        let (redirect_url, client_metadata_url) = urls_under(public_url)?;
        Ok(Connector {
            providers: Arc::new(providers.into_iter().map(|p| (p.name.clone(), p)).collect()),
            redirect_url,
            client_metadata_url,
            http: Arc::new(http::OAuthHttp(http::client()?)),
            servers: Arc::new(Mutex::new(HashMap::new())),
            registry,
        })
    }

    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.get(name)
    }

    /// `{BATON_PUBLIC_URL}/oauth/callback`.
    pub fn redirect_url(&self) -> &Url {
        &self.redirect_url
    }

    /// `{BATON_PUBLIC_URL}{path}`: another of Baton's own URLs.
    pub fn url_of(&self, path: &str) -> Result<Url, url::ParseError> {
        let base = self
            .redirect_url
            .as_str()
            .strip_suffix(CALLBACK_PATH)
            .unwrap_or_default();
        Url::parse(&format!("{base}{path}"))
    }

    /// Baton's Client ID Metadata Document, served at
    /// [`CLIENT_METADATA_PATH`] when the public URL is https.
    pub fn client_metadata(&self) -> Option<serde_json::Value> {
        let id = self.client_metadata_url.as_ref()?;
        Some(serde_json::json!({
            "client_id": id.as_str(),
            "client_name": "Baton",
            "redirect_uris": [self.redirect_url.as_str()],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }))
    }

    fn named(&self, provider: &str) -> Result<&Provider, ConnectError> {
        self.providers
            .get(provider)
            .ok_or_else(|| ConnectError::UnknownProvider(provider.to_owned()))
    }

    /// The provider's endpoints: given, or discovered (and reused for a
    /// while).
    async fn server(&self, p: &Provider) -> Result<AuthServer, ConnectError> {
        let resource = match &p.kind {
            ProviderKind::Declared {
                authorize_url,
                token_url,
            } => {
                return Ok(AuthServer {
                    authorize_url: authorize_url.clone(),
                    token_url: token_url.clone(),
                    registration_url: None,
                    client_id_metadata_documents: false,
                })
            }
            ProviderKind::Mcp { resource } => resource,
        };
        if let Ok(cache) = self.servers.lock() {
            if let Some((server, at)) = cache.get(&p.name) {
                if at.elapsed() < DISCOVERY_TTL {
                    return Ok(server.clone());
                }
            }
        }
        let server = discovery::discover(&self.http.0, &p.name, resource).await?;
        if let Ok(mut cache) = self.servers.lock() {
            cache.insert(p.name.clone(), (server.clone(), std::time::Instant::now()));
        }
        Ok(server)
    }

    /// Which client Baton is at `p`: the table's; else its Client ID
    /// Metadata Document when the server takes one; else the client it
    /// registered (RFC 7591), registering one when `may_register`.
    async fn client(
        &self,
        p: &Provider,
        server: &AuthServer,
        may_register: bool,
    ) -> Result<Client, ConnectError> {
        if let Some(c) = &p.client {
            return Ok(Client {
                id: c.client_id.clone(),
                secret: c.client_secret.clone(),
            });
        }
        if server.client_id_metadata_documents {
            if let Some(id) = &self.client_metadata_url {
                return Ok(Client {
                    id: id.to_string(),
                    secret: None,
                });
            }
        }
        let fail = |reason: String| ConnectError::Registration {
            provider: p.name.clone(),
            reason,
        };
        let kept = self
            .registry
            .registered(&p.name, self.redirect_url.as_str())
            .await?;
        if let Some(kept) = kept {
            return Ok(Client {
                id: kept.client_id,
                secret: kept.client_secret,
            });
        }
        if !may_register {
            return Err(fail("no client is registered yet".into()));
        }
        let (Some(registration), Some(resource)) = (&server.registration_url, p.resource()) else {
            return Err(fail(
                "the server offers no dynamic registration; set client_id (and client_secret) in the table".into(),
            ));
        };
        let mut manager = AuthorizationManager::new(resource.as_str())
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut metadata = rmcp::transport::auth::AuthorizationMetadata::default();
        metadata.authorization_endpoint = server.authorize_url.to_string();
        metadata.token_endpoint = server.token_url.to_string();
        metadata.registration_endpoint = Some(registration.to_string());
        metadata.code_challenge_methods_supported = Some(vec!["S256".into()]);
        metadata.response_types_supported = Some(vec!["code".into()]);
        manager.set_metadata(metadata);
        let scopes: Vec<&str> = p.scopes.iter().map(String::as_str).collect();
        let registered = manager
            .register_client("Baton", self.redirect_url.as_str(), &scopes)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let kept = self
            .registry
            .keep(
                &p.name,
                RegisteredClient {
                    client_id: registered.client_id,
                    client_secret: registered.client_secret.map(SecretString::from),
                    redirect_url: self.redirect_url.to_string(),
                },
            )
            .await?;
        Ok(Client {
            id: kept.client_id,
            secret: kept.client_secret,
        })
    }

    fn oauth_client(
        &self,
        server: &AuthServer,
        client: Client,
    ) -> oauth2::Client<
        BasicErrorResponse,
        BasicTokenResponse,
        oauth2::basic::BasicTokenIntrospectionResponse,
        oauth2::StandardRevocableToken,
        oauth2::basic::BasicRevocationErrorResponse,
        oauth2::EndpointSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointSet,
    > {
        let c = BasicClient::new(ClientId::new(client.id))
            .set_auth_uri(AuthUrl::from_url(server.authorize_url.clone()))
            .set_token_uri(TokenUrl::from_url(server.token_url.clone()))
            .set_redirect_uri(RedirectUrl::from_url(self.redirect_url.clone()));
        match client.secret {
            Some(s) => c.set_client_secret(ClientSecret::new(s.expose_secret().to_owned())),
            None => c,
        }
    }

    /// Starts a flow for `provider` with `state`: discovers and registers
    /// as needed, and gives the authorization URL (PKCE S256, `resource`
    /// for an MCP server, the scopes, `state`) and the verifier to keep.
    pub async fn start(&self, provider: &str, state: &str) -> Result<Authorization, ConnectError> {
        let p = self.named(provider)?;
        let server = self.server(p).await?;
        let client = self.client(p, &server, true).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let state = state.to_owned();
        let oauth = self.oauth_client(&server, client);
        let mut request = oauth
            .authorize_url(move || CsrfToken::new(state))
            .set_pkce_challenge(challenge)
            .add_scopes(p.scopes.iter().cloned().map(Scope::new));
        if let Some(resource) = p.resource() {
            request = request.add_extra_param("resource", resource.as_str());
        }
        let (url, _) = request.url();
        Ok(Authorization {
            url,
            pkce_verifier: SecretString::from(verifier.secret().to_owned()),
        })
    }

    /// Exchanges the callback's `code` for the person's tokens.
    pub async fn exchange(
        &self,
        provider: &str,
        code: &str,
        pkce_verifier: &SecretString,
    ) -> Result<Tokens, ConnectError> {
        let p = self.named(provider)?;
        let server = self.server(p).await?;
        let client = self.client(p, &server, false).await?;
        let oauth = self.oauth_client(&server, client);
        let mut request = oauth
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(
                pkce_verifier.expose_secret().to_owned(),
            ));
        if let Some(resource) = p.resource() {
            request = request.add_extra_param("resource", resource.as_str());
        }
        let response = request.request_async(self.http.as_ref()).await;
        tokens(p, response, None)
    }

    /// New tokens from `refresh_token`. A provider that sends no new
    /// refresh token keeps the old one working.
    pub async fn refresh(
        &self,
        provider: &str,
        refresh_token: &SecretString,
    ) -> Result<Tokens, ConnectError> {
        let p = self.named(provider)?;
        let server = self.server(p).await?;
        let client = self.client(p, &server, false).await?;
        let oauth = self.oauth_client(&server, client);
        let old = RefreshToken::new(refresh_token.expose_secret().to_owned());
        let mut request = oauth.exchange_refresh_token(&old);
        if let Some(resource) = p.resource() {
            request = request.add_extra_param("resource", resource.as_str());
        }
        let response = request.request_async(self.http.as_ref()).await;
        tokens(p, response, Some(refresh_token))
    }
}

/// The tokens of a token response, or why there are none. Never puts the
/// response's body in an error: it may hold a token.
fn tokens(
    p: &Provider,
    response: Result<BasicTokenResponse, RequestTokenError<HttpError, BasicErrorResponse>>,
    old_refresh: Option<&SecretString>,
) -> Result<Tokens, ConnectError> {
    let provider = p.name.clone();
    let response = response.map_err(|e| match e {
        RequestTokenError::ServerResponse(r) => ConnectError::Refused {
            provider,
            reason: match r.error_description() {
                Some(d) => format!(
                    "{}: {}",
                    r.error().as_ref(),
                    d.chars().take(200).collect::<String>()
                ),
                None => r.error().as_ref().to_owned(),
            },
        },
        RequestTokenError::Request(e) => ConnectError::Unreachable {
            provider,
            reason: e.to_string(),
        },
        RequestTokenError::Parse(..) => ConnectError::Unreachable {
            provider,
            reason: "its token response is not a readable OAuth token response".into(),
        },
        RequestTokenError::Other(m) => ConnectError::Unreachable {
            provider,
            reason: m.chars().take(200).collect(),
        },
    })?;
    let access = response.access_token().secret();
    if access.is_empty() {
        return Err(ConnectError::Unreachable {
            provider: p.name.clone(),
            reason: "its token response holds an empty access token".into(),
        });
    }
    Ok(Tokens {
        access_token: SecretString::from(access.to_owned()),
        refresh_token: response
            .refresh_token()
            .map(|r| SecretString::from(r.secret().to_owned()))
            .or_else(|| old_refresh.cloned()),
        expires_at: response
            .expires_in()
            .map(|d| Instant::now().saturating_add(d)),
        scopes: response
            .scopes()
            .map(|s| s.iter().map(|s| s.to_string()).collect())
            .unwrap_or_else(|| p.scopes.clone()),
    })
}

/// A fresh random secret (32 bytes, base64url): the cookie that binds a
/// flow to the browser that started it.
pub fn browser_secret() -> SecretString {
    SecretString::from(CsrfToken::new_random_len(32).secret().to_owned())
}
