//! `GET /connect/{state}` and `GET /oauth/callback`: a person connecting
//! their account (issue #24, docs/connections.md). No bearer: the `state`
//! of a Connect link is the capability, found by its hash; the flow it
//! starts is bound to the browser by a cookie and claimed once at the
//! callback. Every refusal is a 400 page that changes nothing; the pages
//! escape whatever they echo.

use crate::response::{Answer, ApiError};
use crate::Ingest;
use baton_connect::{browser_secret, ConnectError, Connector};
use baton_core::callback::hash_token;
use baton_core::connection::ConnectRequest;
use baton_core::store::connections::{
    ConnectFlow, ConnectRefused, ConnectionError, ConnectionStore, PutCondition,
};
use baton_core::{Instant, StoreError, TaskStatus, Wake};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use secrecy::ExposeSecret;
use std::sync::Arc;
use std::time::Duration;

/// How long a flow started at `/connect` may take to come back.
pub const FLOW_EXPIRES_AFTER: Duration = Duration::from_secs(10 * 60);

/// The deployment's flows, and whether their public URL is
/// `BATON_PUBLIC_URL` (else each request's host is).
#[derive(Clone)]
pub struct Flows {
    pub(crate) connector: Arc<Connector>,
    pub(crate) public_url_set: bool,
}

/// What the connect routes need: the store of connections and the flows
/// of the deployment's providers under this request's public URL.
struct ConnectRoutes<'a> {
    store: &'a ConnectionStore,
    connector: Arc<Connector>,
}

/// `https://{Host}`: the public URL a request came to, when
/// `BATON_PUBLIC_URL` is not set (the ingest on AWS, behind API Gateway,
/// which is reached over https only).
fn public_url_of(headers: &HeaderMap) -> Option<url::Url> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if !valid {
        return None;
    }
    let url = url::Url::parse(&format!("https://{host}")).ok()?;
    (url.path() == "/" && url.query().is_none()).then_some(url)
}

/// A state as minted (32 random bytes, base64url) or near it; anything
/// else is no state.
fn well_formed(state: &str) -> bool {
    (16..=128).contains(&state.len())
        && state
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The cookie of the flow of `state_hash`: one per flow, so two flows in
/// one browser do not overwrite each other's.
fn cookie_name(state_hash: &str) -> String {
    format!("baton_connect_{}", &state_hash[..16.min(state_hash.len())])
}

/// The value of cookie `name` in `headers`.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// `text` safe inside HTML.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A small page; `title` and `message` are escaped here.
fn page(status: StatusCode, title: &str, message: &str) -> Response<Bytes> {
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <meta name=\"viewport\" content=\"width=device-width\"></head>\
         <body style=\"font-family:sans-serif;max-width:32em;margin:3em auto\">\
         <h1>{t}</h1><p>{m}</p></body></html>\n",
        t = escape(title),
        m = escape(message)
    );
    let mut r = Response::new(Bytes::from(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// Why a connected task could not be woken (it finds its tokens anyway
/// when it next runs).
#[derive(Debug, thiserror::Error)]
enum WakeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] baton_core::QueueError),
}

fn refused(message: &str) -> Answer {
    Ok(page(
        StatusCode::BAD_REQUEST,
        "This connection link does not work",
        message,
    ))
}

fn refusal(r: ConnectRefused) -> Answer {
    let why = match r {
        ConnectRefused::Unknown => "This connection link is not known.",
        ConnectRefused::Used => "This connection link was used already.",
        ConnectRefused::Expired => "This connection link has expired.",
        ConnectRefused::Foreign => {
            "This connection was started in another browser; open the Connect link again here."
        }
    };
    refused(&format!("{why} Ask Baton again for a new Connect button."))
}

fn unavailable(e: impl std::fmt::Display) -> Answer {
    tracing::error!(error = %e, "connection store failure");
    Ok(page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again in a moment",
        "Baton could not reach its store; reload this page shortly.",
    ))
}

impl Ingest {
    fn connect_routes(&self, headers: &HeaderMap) -> Result<ConnectRoutes<'_>, ApiError> {
        let (Some(store), Some(flows)) = (&self.connections, &self.connector) else {
            return Err(ApiError::not_found(
                baton_core::store::connections::NOT_CONFIGURED,
            ));
        };
        let connector = if flows.public_url_set {
            flows.connector.clone()
        } else {
            let url = public_url_of(headers)
                .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "no valid Host header"))?;
            Arc::new(flows.connector.at(&url).map_err(ApiError::unavailable)?)
        };
        Ok(ConnectRoutes { store, connector })
    }

    /// `GET /connect/{state}`: starts the flow of a pending Connect link.
    pub(crate) async fn connect_start(&self, state: &str, headers: &HeaderMap) -> Answer {
        let routes = self.connect_routes(headers)?;
        if !well_formed(state) {
            return refusal(ConnectRefused::Unknown);
        }
        let hash = hash_token(state);
        let now = Instant::now();
        let pending = match routes.store.connect_request(&hash).await {
            Ok(Some(p)) => p,
            Ok(None) => return refusal(ConnectRefused::Unknown),
            Err(e) => return unavailable(e),
        };
        if pending.used_at.is_some() {
            return refusal(ConnectRefused::Used);
        }
        if pending.request.expires_at <= now {
            return refusal(ConnectRefused::Expired);
        }
        let provider = pending.request.provider.clone();
        let authorization = match routes.connector.start(&provider, state).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(provider, error = %e, "cannot start a connection flow");
                return Ok(page(
                    StatusCode::BAD_GATEWAY,
                    &format!("Cannot connect {provider} right now"),
                    &e.to_string(),
                ));
            }
        };
        let secret = browser_secret();
        let flow = ConnectFlow {
            pkce_verifier: authorization.pkce_verifier,
            browser: hash_token(secret.expose_secret()),
            flow_expires_at: now
                .saturating_add(FLOW_EXPIRES_AFTER)
                .capped(Some(pending.request.expires_at)),
        };
        match routes.store.start_connect_flow(&hash, flow, now).await {
            Ok(_) => {}
            Err(ConnectionError::Refused(r)) => return refusal(r),
            Err(e) => return unavailable(e),
        }
        let secure = routes.connector.redirect_url().scheme() == "https";
        let cookie = format!(
            "{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}",
            cookie_name(&hash),
            secret.expose_secret(),
            FLOW_EXPIRES_AFTER.as_secs(),
            if secure { "; Secure" } else { "" }
        );
        let mut r = Response::new(Bytes::new());
        *r.status_mut() = StatusCode::FOUND;
        let h = r.headers_mut();
        for (name, value) in [
            (header::LOCATION, authorization.url.as_str()),
            (header::SET_COOKIE, cookie.as_str()),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ] {
            let v = HeaderValue::from_str(value).map_err(ApiError::unavailable)?;
            h.insert(name, v);
        }
        tracing::info!(task_id = %pending.request.task_id, provider, "connection flow started");
        Ok(r)
    }

    /// `GET /oauth/callback?code&state`: finishes the flow, once.
    pub(crate) async fn connect_callback(
        &self,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Answer {
        let routes = self.connect_routes(headers)?;
        let params: Vec<(String, String)> =
            serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
        let param = |k: &str| {
            params
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.as_str())
        };
        let Some(state) = param("state").filter(|s| well_formed(s)) else {
            return refusal(ConnectRefused::Unknown);
        };
        if let Some(error) = param("error") {
            let description = param("error_description").unwrap_or_default();
            return refused(&format!(
                "The provider did not connect your account: {error}{}{}. Open the Connect link again to retry.",
                if description.is_empty() { "" } else { ": " },
                description.chars().take(300).collect::<String>()
            ));
        }
        let Some(code) = param("code").filter(|c| !c.is_empty()) else {
            return refused("The provider sent no authorization code.");
        };
        let hash = hash_token(state);
        let browser = cookie(headers, &cookie_name(&hash))
            .map(hash_token)
            .unwrap_or_default();
        let now = Instant::now();
        let claimed = match routes.store.claim_connect(&hash, &browser, now).await {
            Ok(c) => c,
            Err(ConnectionError::Refused(r)) => return refusal(r),
            Err(e) => return unavailable(e),
        };
        let request = claimed.request;
        let provider = request.provider.clone();
        let tokens = match routes
            .connector
            .exchange(&provider, code, &claimed.pkce_verifier)
            .await
        {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(provider, error = %e, "code exchange failed");
                let status = match e {
                    ConnectError::Refused { .. } => StatusCode::BAD_REQUEST,
                    _ => StatusCode::BAD_GATEWAY,
                };
                return Ok(page(
                    status,
                    &format!("{provider} was not connected"),
                    &format!("{e}. Ask Baton again for a new Connect button."),
                ));
            }
        };
        if let Err(e) = routes
            .store
            .put(
                &request.person,
                &provider,
                &tokens,
                PutCondition::Replace,
                now,
            )
            .await
        {
            return unavailable(e);
        }
        tracing::info!(task_id = %request.task_id, provider, "connection made");
        if let Err(e) = self.wake_connected(&request).await {
            // The tokens are kept: the task finds them when it next runs.
            tracing::error!(task_id = %request.task_id, error = %e, "cannot wake the connected task");
        }
        Ok(page(
            StatusCode::OK,
            &format!("Connected {provider}"),
            &format!("Connected {provider} \u{2014} you can close this tab."),
        ))
    }

    /// Lifts the task's wait for this connection and wakes it, as a
    /// delivered callback does.
    async fn wake_connected(&self, request: &ConnectRequest) -> Result<(), WakeError> {
        let (task, _) = self
            .store
            .update(&request.task_id, None, |t| {
                Ok(baton_core::wait::connection::lift(t, &request.provider))
            })
            .await?;
        if task.status == TaskStatus::Queued {
            self.queue
                .send(
                    &Wake::new(task.id.clone(), "connection").to_body(),
                    Duration::ZERO,
                )
                .await?;
        }
        Ok(())
    }

    /// `GET /oauth/client-metadata.json`: Baton's Client ID Metadata
    /// Document (its URL is Baton's client id at servers that take one).
    pub(crate) fn client_metadata(&self, headers: &HeaderMap) -> Answer {
        let routes = self.connect_routes(headers)?;
        let doc = routes
            .connector
            .client_metadata()
            .ok_or_else(|| ApiError::not_found("no client metadata without an https public URL"))?;
        Ok(crate::response::json(StatusCode::OK, &doc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_connect::{Provider, ProviderKind, StaticClient, StoredClients};
    use baton_core::connection::PersonKey;
    use baton_core::testing::TestSealer;
    use baton_core::{now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStore, WaitingFor};
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use url::Url;
    use wiremock::matchers::{body_string_contains, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    struct Rig {
        _dir: tempfile::TempDir,
        store: TaskStore,
        connections: ConnectionStore,
        ingest: Ingest,
        provider: MockServer,
        task: TaskId,
    }

    const STATE: &str = "c3RhdGUtb2YtYS1jb25uZWN0LWxpbmstMDEyMzQ1Njc4OQ";

    fn alice() -> PersonKey {
        PersonKey::new("T1", "U1")
    }

    /// A task waiting for `api`, whose Connect link is [`STATE`] and
    /// expires in `expires_in`.
    async fn rig(expires_in: Duration) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let connections = ConnectionStore::new(backend.table.clone(), Arc::new(TestSealer));
        let provider = MockServer::start().await;
        let connector = Connector::new(
            vec![Provider {
                name: "api".into(),
                kind: ProviderKind::Declared {
                    authorize_url: Url::parse(&format!("{}/authorize", provider.uri())).unwrap(),
                    token_url: Url::parse(&format!("{}/token", provider.uri())).unwrap(),
                },
                scopes: vec!["me".into()],
                client: Some(StaticClient {
                    client_id: "baton".into(),
                    client_secret: None,
                }),
            }],
            &Url::parse("https://baton.example").unwrap(),
            Arc::new(StoredClients(connections.clone())),
        )
        .unwrap();
        let ingest = Ingest::new(
            store.clone(),
            backend.queue.clone(),
            Agents::new(AgentConfig::new("default", "scripted"), Vec::new()),
            None,
            None,
        )
        .with_connections(connections.clone())
        .with_connector(Arc::new(connector), true);
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Http,
            None,
            Limits::default(),
            now_ms(),
        );
        let expires_at = Instant::now().saturating_add(expires_in);
        t.status = TaskStatus::Waiting;
        t.waiting_for = Some(WaitingFor::Connection {
            provider: "api".into(),
            url: format!("https://baton.example/connect/{STATE}"),
            expires_at,
        });
        store
            .create(
                &t,
                vec![EntryKind::UserMessage {
                    text: "x".into(),
                    from: None,
                }],
                None,
            )
            .await
            .unwrap();
        let request = ConnectRequest {
            person: alice(),
            provider: "api".into(),
            task_id: t.id.clone(),
            call_id: "c1".into(),
            created_at: Instant::now(),
            expires_at,
        };
        connections
            .record_connect_request(&hash_token(STATE), &request)
            .await
            .unwrap();
        Rig {
            _dir: dir,
            store,
            connections,
            ingest,
            provider,
            task: t.id,
        }
    }

    async fn get(r: &Rig, uri: &str, cookie: Option<&str>) -> Response<Bytes> {
        let mut req = http::Request::builder().method("GET").uri(uri);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        r.ingest.handle(req.body(Bytes::new()).unwrap()).await
    }

    fn text(resp: &Response<Bytes>) -> String {
        String::from_utf8_lossy(resp.body()).into_owned()
    }

    /// Follows the Connect link: the cookie set, and the authorization URL.
    async fn open_link(r: &Rig) -> (String, Url) {
        let resp = get(r, &format!("/connect/{STATE}"), None).await;
        assert_eq!(resp.status(), StatusCode::FOUND, "{}", text(&resp));
        let set = resp.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Secure"));
        let cookie = set.split(';').next().unwrap().to_owned();
        let location = Url::parse(resp.headers()[header::LOCATION].to_str().unwrap()).unwrap();
        (cookie, location)
    }

    async fn token_endpoint(r: &Rig) {
        Mock::given(method("POST"))
            .and(path("/token"))
            .and(body_string_contains("code=the-code"))
            .and(body_string_contains("code_verifier="))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "access_token": "at-SECRET", "token_type": "Bearer",
                "expires_in": 3600, "refresh_token": "rt-SECRET",
            })))
            .expect(1)
            .mount(&r.provider)
            .await;
    }

    fn callback(state: &str) -> String {
        format!("/oauth/callback?code=the-code&state={state}")
    }

    #[tokio::test]
    async fn connecting_stores_the_tokens_once_and_wakes_the_task() {
        let r = rig(Duration::from_secs(3600)).await;
        token_endpoint(&r).await;
        let (cookie, location) = open_link(&r).await;
        let q: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
        assert_eq!(q["state"], STATE);
        assert_eq!(q["client_id"], "baton");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["redirect_uri"], "https://baton.example/oauth/callback");

        let resp = get(&r, &callback(STATE), Some(&cookie)).await;
        assert_eq!(resp.status(), StatusCode::OK, "{}", text(&resp));
        assert!(text(&resp).contains("Connected api"));
        assert!(!text(&resp).contains("SECRET"));
        let stored = r.connections.get(&alice(), "api").await.unwrap().unwrap();
        assert_eq!(stored.tokens.access_token.expose_secret(), "at-SECRET");
        let task = r.store.get(&r.task).await.unwrap().unwrap();
        assert_eq!(task.status, TaskStatus::Queued);
        assert_eq!(task.waiting_for, None);

        // Replayed: refused, and nothing changes.
        let resp = get(&r, &callback(STATE), Some(&cookie)).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        assert!(text(&resp).contains("used already"), "{}", text(&resp));
        let again = r.connections.get(&alice(), "api").await.unwrap().unwrap();
        assert_eq!(again.version, stored.version);
        let resp = get(&r, &format!("/connect/{STATE}"), None).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn a_foreign_browser_or_an_unknown_state_is_refused_and_changes_nothing() {
        let r = rig(Duration::from_secs(3600)).await;
        token_endpoint(&r).await;
        let (cookie, _) = open_link(&r).await;
        let before = r.store.get(&r.task).await.unwrap().unwrap().version;
        for (uri, cookie, expected) in [
            (callback(STATE), None, "another browser"),
            (
                callback(STATE),
                Some("baton_connect_0000000000000000=x"),
                "another browser",
            ),
            (
                callback(&"A".repeat(43)),
                Some(cookie.as_str()),
                "not known",
            ),
            ("/oauth/callback?code=x".into(), None, "not known"),
            (format!("/connect/{}", "B".repeat(43)), None, "not known"),
            ("/connect/%3Cscript%3E".into(), None, "not known"),
        ] {
            let resp = get(&r, &uri, cookie).await;
            assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{uri}");
            assert!(text(&resp).contains(expected), "{uri}: {}", text(&resp));
        }
        assert!(r.connections.get(&alice(), "api").await.unwrap().is_none());
        assert_eq!(r.store.get(&r.task).await.unwrap().unwrap().version, before);
        // The right browser still connects.
        let resp = get(&r, &callback(STATE), Some(&cookie)).await;
        assert_eq!(resp.status(), StatusCode::OK, "{}", text(&resp));
    }

    #[tokio::test]
    async fn an_expired_link_and_a_provider_error_are_pages_that_escape_what_they_echo() {
        let r = rig(Duration::ZERO).await;
        let resp = get(&r, &format!("/connect/{STATE}"), None).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        assert!(text(&resp).contains("expired"), "{}", text(&resp));

        let r = rig(Duration::from_secs(3600)).await;
        let (cookie, _) = open_link(&r).await;
        let resp = get(
            &r,
            &format!("/oauth/callback?state={STATE}&error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
            Some(&cookie),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let body = text(&resp);
        assert!(body.contains("access_denied"), "{body}");
        assert!(
            body.contains("&lt;script&gt;") && !body.contains("<script>"),
            "{body}"
        );
        assert!(r.connections.get(&alice(), "api").await.unwrap().is_none());
    }

    #[test]
    fn without_baton_public_url_the_requests_host_is_the_public_url() {
        let mut h = HeaderMap::new();
        assert_eq!(public_url_of(&h), None);
        h.insert(
            header::HOST,
            HeaderValue::from_static("abc.execute-api.eu-west-1.amazonaws.com"),
        );
        assert_eq!(
            public_url_of(&h).map(|u| u.to_string()),
            Some("https://abc.execute-api.eu-west-1.amazonaws.com/".into())
        );
        for bad in [
            "evil.example/path",
            "a b",
            "x@evil.example",
            "evil.example?x",
        ] {
            h.insert(header::HOST, HeaderValue::from_str(bad).unwrap());
            assert_eq!(public_url_of(&h), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn without_connections_configured_the_routes_are_404() {
        let dir = tempfile::tempdir().unwrap();
        let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let ingest = Ingest::new(
            store,
            backend.queue.clone(),
            Agents::new(AgentConfig::new("default", "scripted"), Vec::new()),
            None,
            None,
        );
        let req = http::Request::builder()
            .uri(format!("/connect/{STATE}"))
            .body(Bytes::new())
            .unwrap();
        assert_eq!(ingest.handle(req).await.status(), StatusCode::NOT_FOUND);
    }
}
