use super::*;
use baton_connect::{Provider, ProviderKind, StaticClient, StoredClients};
use baton_core::connection::PersonKey;
use baton_core::testing::TestSealer;
use baton_core::wait;
use baton_core::{now_ms, EntryKind, Limits, Origin, Task, TaskId, TaskStore, WaitingFor};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_settings::{AgentConfig, Agents};
use baton_slack::testing::FakeSlack;
use bytes::Bytes;
use http::{header, Response};
use secrecy::{ExposeSecret, SecretString};
use url::Url;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

struct Rig {
    _dir: tempfile::TempDir,
    store: TaskStore,
    connections: ConnectionStore,
    ingest: Ingest,
    provider: MockServer,
    slack: Option<FakeSlack>,
    task: TaskId,
}

const STATE: &str = "c3RhdGUtb2YtYS1jb25uZWN0LWxpbmstMDEyMzQ1Njc4OQ";

fn alice() -> PersonKey {
    PersonKey::new("T1", "U1")
}

/// A task of `person` waiting for `api`, whose Connect link is [`STATE`]
/// and expires in `expires_in`; with Sign in with Slack on a fake Slack
/// when `sign_in`.
async fn rig_for(person: PersonKey, expires_in: Duration, sign_in: bool) -> Rig {
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
    let mut ingest = Ingest::new(
        store.clone(),
        backend.queue.clone(),
        Agents::new(AgentConfig::new("default", "scripted"), Vec::new()),
        None,
        None,
    )
    .with_connections(connections.clone())
    .with_connector(Arc::new(connector));
    let slack = if sign_in {
        let fake = FakeSlack::start().await;
        let s = SignInWithSlack::new(
            FakeSlack::OPENID_CLIENT_ID,
            SecretString::from(FakeSlack::OPENID_CLIENT_SECRET),
            &fake.base_url(),
            &fake.openid_authorize_url(),
        )
        .unwrap();
        ingest = ingest.with_sign_in_with_slack(Arc::new(s));
        Some(fake)
    } else {
        None
    };
    let mut t = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        now_ms(),
    );
    let expires_at = Instant::now().saturating_add(expires_in);
    t.wait(WaitingFor::Connection(wait::Connection {
        provider: "api".into(),
        url: format!("https://baton.example/connect/{STATE}"),
        expires_at,
    }));
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
        person,
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
        slack,
        task: t.id,
    }
}

async fn rig(expires_in: Duration) -> Rig {
    rig_for(alice(), expires_in, false).await
}

async fn send(r: &Rig, verb: &str, uri: &str, cookie: Option<&str>, body: &str) -> Response<Bytes> {
    let mut req = http::Request::builder().method(verb).uri(uri);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    if verb == "POST" {
        req = req.header("content-type", "application/x-www-form-urlencoded");
    }
    r.ingest
        .handle(req.body(Bytes::from(body.to_owned())).unwrap())
        .await
}

async fn get(r: &Rig, uri: &str, cookie: Option<&str>) -> Response<Bytes> {
    send(r, "GET", uri, cookie, "").await
}

fn text(resp: &Response<Bytes>) -> String {
    String::from_utf8_lossy(resp.body()).into_owned()
}

/// The flow's cookie a response set (`name=value`).
fn set_cookie(resp: &Response<Bytes>) -> String {
    let set = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Secure"));
    set.split(';').next().unwrap().to_owned()
}

fn location(resp: &Response<Bytes>) -> Url {
    Url::parse(resp.headers()[header::LOCATION].to_str().unwrap()).unwrap()
}

/// The confirmation page's form token.
fn confirm_token(page: &str) -> String {
    let at = page
        .find("name=\"confirm\" value=\"")
        .expect("a confirm form")
        + 22;
    page[at..].split('"').next().unwrap().to_owned()
}

/// Opens the Connect link and confirms on the page: the cookie, and the
/// provider's authorization URL.
async fn open_link(r: &Rig) -> (String, Url) {
    let resp = get(r, &format!("/connect/{STATE}"), None).await;
    assert_eq!(resp.status(), StatusCode::OK, "{}", text(&resp));
    let cookie = set_cookie(&resp);
    let token = confirm_token(&text(&resp));
    let resp = send(
        r,
        "POST",
        &format!("/connect/{STATE}"),
        Some(&cookie),
        &format!("confirm={token}"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{}", text(&resp));
    (cookie, location(&resp))
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
    assert_eq!(task.status(), TaskStatus::Queued);
    assert_eq!(task.waiting_for(), None);

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
async fn the_confirmation_page_names_the_person_and_takes_only_its_own_post() {
    let r = rig_for(
        PersonKey::new("api", "<b>carol</b>"),
        Duration::from_secs(3600),
        false,
    )
    .await;
    let resp = get(&r, &format!("/connect/{STATE}"), None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let page = text(&resp);
    assert!(page.contains("&lt;b&gt;carol&lt;/b&gt;"), "{page}");
    assert!(!page.contains("<b>carol"), "{page}");
    assert!(page.contains("<form method=\"post\""), "{page}");
    let csp = resp.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let cookie = set_cookie(&resp);
    let token = confirm_token(&page);
    let uri = format!("/connect/{STATE}");
    // Without the cookie, with another browser's, without or with
    // another token: refused, and no flow starts.
    for (cookie, body) in [
        (None, format!("confirm={token}")),
        (
            Some(format!("{}=not-it", cookie.split('=').next().unwrap())),
            format!("confirm={token}"),
        ),
        (Some(cookie.clone()), String::new()),
        (Some(cookie.clone()), "confirm=guess".to_owned()),
    ] {
        let resp = send(&r, "POST", &uri, cookie.as_deref(), &body).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{cookie:?} {body}");
        let pending = r
            .connections
            .connect_request(&hash_token(STATE))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pending.browser, None, "no flow started");
    }
    let resp = send(&r, "POST", &uri, Some(&cookie), &format!("confirm={token}")).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{}", text(&resp));
    assert!(location(&resp).as_str().starts_with(&r.provider.uri()));
    // The check is spent: the same post again is refused.
    let resp = send(&r, "POST", &uri, Some(&cookie), &format!("confirm={token}")).await;
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
async fn the_callback_shows_what_it_was_given_only_for_this_browsers_flow_and_escaped() {
    let r = rig(Duration::ZERO).await;
    let resp = get(&r, &format!("/connect/{STATE}"), None).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert!(text(&resp).contains("expired"), "{}", text(&resp));

    let r = rig(Duration::from_secs(3600)).await;
    let hostile =
        "error=PWNED_ERR&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E+call+0800-EVIL";
    // A bogus state, a known state from a browser without its flow, and a
    // state with no flow yet: nothing of the query is shown.
    let (cookie_before, _) = {
        let resp = get(&r, &format!("/connect/{STATE}"), None).await;
        (set_cookie(&resp), ())
    };
    for (state, cookie) in [
        ("A".repeat(43), None),
        ("%3Cb%3Ex%3C%2Fb%3E".to_owned(), None),
        (STATE.to_owned(), None),
        (STATE.to_owned(), Some(cookie_before.as_str())),
    ] {
        let resp = get(
            &r,
            &format!("/oauth/callback?state={state}&{hostile}"),
            cookie,
        )
        .await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let body = text(&resp);
        for echoed in ["PWNED", "script", "alert", "EVIL", "<b>"] {
            assert!(!body.contains(echoed), "{state}: {body}");
        }
    }
    // This browser's flow: the provider's error is shown, escaped, and
    // the link still works.
    let (cookie, _) = open_link(&r).await;
    let resp = get(
        &r,
        &format!("/oauth/callback?state={STATE}&{hostile}"),
        Some(&cookie),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body = text(&resp);
    assert!(body.contains("PWNED_ERR"), "{body}");
    assert!(
        body.contains("&lt;script&gt;") && !body.contains("<script>"),
        "{body}"
    );
    assert!(r.connections.get(&alice(), "api").await.unwrap().is_none());
    let resp = get(&r, &format!("/connect/{STATE}"), None).await;
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_failed_exchange_leaves_the_link_usable_and_a_retry_connects() {
    let r = rig(Duration::from_secs(3600)).await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(ResponseTemplate::new(400).set_body_json(serde_json::json!({
            "error": "invalid_grant", "error_description": "the code was already used"
        })))
        .up_to_n_times(1)
        .mount(&r.provider)
        .await;
    token_endpoint(&r).await;
    let (cookie, _) = open_link(&r).await;
    let resp = get(&r, &callback(STATE), Some(&cookie)).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{}", text(&resp));
    assert!(text(&resp).contains("invalid_grant"), "{}", text(&resp));
    assert!(text(&resp).contains("Open the Connect link again"));
    assert!(r.connections.get(&alice(), "api").await.unwrap().is_none());
    assert_eq!(
        r.store.get(&r.task).await.unwrap().unwrap().status(),
        TaskStatus::Waiting
    );
    // The old callback is spent (its flow is gone); the link is not.
    let resp = get(&r, &callback(STATE), Some(&cookie)).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let (cookie, _) = open_link(&r).await;
    let resp = get(&r, &callback(STATE), Some(&cookie)).await;
    assert_eq!(resp.status(), StatusCode::OK, "{}", text(&resp));
    assert!(r.connections.get(&alice(), "api").await.unwrap().is_some());
}

/// Follows the link with Sign in with Slack as `team:user` (signed in at
/// the fake Slack): the cookie, and Baton's answer to Slack's return.
async fn signed_in_as(r: &Rig, team: &str, user: &str) -> (String, Response<Bytes>) {
    let slack = r.slack.as_ref().unwrap();
    let resp = get(r, &format!("/connect/{STATE}"), None).await;
    assert_eq!(resp.status(), StatusCode::FOUND, "{}", text(&resp));
    let cookie = set_cookie(&resp);
    let to_slack = location(&resp);
    assert!(to_slack.as_str().starts_with(&slack.openid_authorize_url()));
    let q: std::collections::HashMap<_, _> = to_slack.query_pairs().into_owned().collect();
    assert_eq!(q["scope"], "openid");
    assert_eq!(q["team"], "T1");
    assert_eq!(
        q["redirect_uri"],
        "https://baton.example/connect/slack/signed-in"
    );
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let at_slack = browser
        .get(to_slack.as_str())
        .header("cookie", format!("slack_signed_in={team}:{user}"))
        .send()
        .await
        .unwrap();
    assert_eq!(at_slack.status(), 302);
    let back = Url::parse(at_slack.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(back.path(), SIGNED_IN_PATH);
    let uri = format!("{}?{}", back.path(), back.query().unwrap_or_default());
    let resp = get(r, &uri, Some(&cookie)).await;
    (cookie, resp)
}

#[tokio::test]
async fn with_sign_in_with_slack_another_person_is_refused_and_nothing_is_stored() {
    let r = rig_for(alice(), Duration::from_secs(3600), true).await;
    token_endpoint(&r).await;
    let (_, resp) = signed_in_as(&r, "T1", "U2").await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{}", text(&resp));
    assert!(text(&resp).contains("belongs to someone else"));
    let pending = r
        .connections
        .connect_request(&hash_token(STATE))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((pending.browser, pending.used_at), (None, None));
    // Another workspace's user of the same id is someone else too.
    let (_, resp) = signed_in_as(&r, "T9", "U1").await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    // No confirmation page to go round it.
    let resp = send(&r, "POST", &format!("/connect/{STATE}"), None, "confirm=x").await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert!(r.connections.get(&alice(), "api").await.unwrap().is_none());

    // The link's person goes on to the provider and connects.
    let (cookie, resp) = signed_in_as(&r, "T1", "U1").await;
    assert_eq!(resp.status(), StatusCode::FOUND, "{}", text(&resp));
    assert!(location(&resp).as_str().starts_with(&r.provider.uri()));
    let resp = get(&r, &callback(STATE), Some(&cookie)).await;
    assert_eq!(resp.status(), StatusCode::OK, "{}", text(&resp));
    assert!(r.connections.get(&alice(), "api").await.unwrap().is_some());
    let exchanges = r.slack.as_ref().unwrap().calls("openid.connect.token");
    assert_eq!(exchanges.len(), 3);
    assert_eq!(
        exchanges[0]["redirect_uri"],
        "https://baton.example/connect/slack/signed-in"
    );
}

#[tokio::test]
async fn a_sign_in_return_without_its_browser_or_with_a_refused_code_changes_nothing() {
    let r = rig_for(alice(), Duration::from_secs(3600), true).await;
    let slack = r.slack.as_ref().unwrap();
    // Brought back by a browser that did not start it.
    let resp = get(&r, &format!("/connect/{STATE}"), None).await;
    let _ = set_cookie(&resp);
    let uri = format!("{SIGNED_IN_PATH}?code=oidc-code-1&state={STATE}");
    let resp = get(&r, &uri, None).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert!(text(&resp).contains("another browser"), "{}", text(&resp));
    assert!(slack.calls("openid.connect.token").is_empty());
    // Slack refuses the code.
    slack.fail_next("openid.connect.token", "invalid_code");
    let (_, resp) = signed_in_as(&r, "T1", "U1").await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{}", text(&resp));
    assert!(text(&resp).contains("invalid_code"), "{}", text(&resp));
    let pending = r
        .connections
        .connect_request(&hash_token(STATE))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pending.browser, None, "no flow started");
    // An API person's link gets the confirmation page even so.
    let r = rig_for(
        PersonKey::new("api", "carol"),
        Duration::from_secs(3600),
        true,
    )
    .await;
    let resp = get(&r, &format!("/connect/{STATE}"), None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(text(&resp).contains("carol"));
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
    for uri in [format!("/connect/{STATE}"), SIGNED_IN_PATH.to_owned()] {
        let req = http::Request::builder()
            .uri(uri)
            .body(Bytes::new())
            .unwrap();
        assert_eq!(ingest.handle(req).await.status(), StatusCode::NOT_FOUND);
    }
}
