//! The fake's Sign in with Slack (OpenID Connect): the authorize page
//! (`GET /openid/connect/authorize`), which signs in whoever the browser's
//! `slack_signed_in` cookie names (set by `GET /openid/sign-in?team&user`,
//! the test's choice) and sends the browser back with a code; and
//! `openid.connect.token`, which exchanges the code for an ID token as
//! Slack does (form fields `client_id`, `client_secret`, `code`,
//! `redirect_uri`; `{"ok": true, "access_token", "id_token", ...}`).

use super::{slack_error, FakeSlack, Injected, Shared};
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The cookie naming who is signed in to the fake in a browser.
const COOKIE: &str = "slack_signed_in";

/// A code the authorize page issued, until exchanged.
struct Code {
    team: String,
    user: String,
    nonce: Option<String>,
    redirect_uri: String,
}

#[derive(Default)]
pub(super) struct OpenIdState {
    codes: HashMap<String, Code>,
    issued: u64,
}

impl FakeSlack {
    /// The Sign in with Slack client id the fake accepts
    /// (`SLACK_CLIENT_ID`).
    pub const OPENID_CLIENT_ID: &'static str = "1111.2222";
    /// Its client secret (`SLACK_CLIENT_SECRET`).
    pub const OPENID_CLIENT_SECRET: &'static str = "fake-openid-secret-never-shown";

    /// Its authorize page (`SLACK_OPENID_AUTHORIZE_URL`).
    pub fn openid_authorize_url(&self) -> String {
        format!("{}/openid/connect/authorize", self.base_url())
    }

    /// Where a browser signs in to the fake as `user` of `team` (a GET
    /// that sets the cookie the authorize page reads).
    pub fn openid_sign_in_url(&self, team: &str, user: &str) -> String {
        format!("{}/openid/sign-in?team={team}&user={user}", self.base_url())
    }
}

fn page(status: StatusCode, text: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain")],
        text.to_owned(),
    )
        .into_response()
}

/// `GET /openid/sign-in?team&user`: this browser is now that person.
pub(super) async fn sign_in(Query(q): Query<HashMap<String, String>>) -> Response {
    let (Some(team), Some(user)) = (q.get("team"), q.get("user")) else {
        return page(StatusCode::BAD_REQUEST, "team and user, please");
    };
    let cookie = format!("{COOKIE}={team}:{user}; Path=/; HttpOnly; SameSite=Lax");
    (
        StatusCode::OK,
        [(header::SET_COOKIE, cookie)],
        format!("signed in as {team}:{user}"),
    )
        .into_response()
}

/// `GET /openid/connect/authorize`: signs in the browser's person and
/// sends it back to `redirect_uri` with a code and the `state`.
pub(super) async fn authorize(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let signed_in = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .and_then(|(_, v)| v.split_once(':'))
        .map(|(t, u)| (t.to_owned(), u.to_owned()));
    let Some((team, user)) = signed_in else {
        return page(StatusCode::OK, "Sign in to Slack first");
    };
    let field = |k: &str| q.get(k).cloned().unwrap_or_default();
    if field("client_id") != FakeSlack::OPENID_CLIENT_ID {
        return page(StatusCode::BAD_REQUEST, "invalid_client_id");
    }
    if field("response_type") != "code" || !field("scope").split(' ').any(|s| s == "openid") {
        return page(StatusCode::BAD_REQUEST, "invalid_scope");
    }
    let redirect_uri = field("redirect_uri");
    let Ok(mut back) = reqwest::Url::parse(&redirect_uri) else {
        return page(StatusCode::BAD_REQUEST, "bad_redirect_uri");
    };
    let code = {
        let mut inner = shared.lock();
        inner.openid.issued += 1;
        let code = format!("oidc-code-{}", inner.openid.issued);
        inner.openid.codes.insert(
            code.clone(),
            Code {
                team,
                user,
                nonce: q.get("nonce").cloned(),
                redirect_uri: redirect_uri.clone(),
            },
        );
        code
    };
    back.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &field("state"));
    (StatusCode::FOUND, [(header::LOCATION, back.to_string())]).into_response()
}

/// `POST /openid.connect.token`: the ID token of a code, once.
pub(super) async fn token(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let Ok(fields) = serde_urlencoded::from_bytes::<HashMap<String, String>>(&body) else {
        return slack_error("invalid_form_data");
    };
    let field = |k: &str| fields.get(k).cloned().unwrap_or_default();
    let mut inner = shared.lock();
    let mut recorded: serde_json::Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "client_secret")
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    recorded.insert(
        "client_secret_given".into(),
        json!(fields.contains_key("client_secret")),
    );
    inner
        .calls
        .push(("openid.connect.token".into(), Value::Object(recorded)));
    if let Some(Injected::Error(code)) = inner
        .injected
        .get_mut("openid.connect.token")
        .and_then(|q| q.pop_front())
    {
        return slack_error(&code);
    }
    if field("client_id") != FakeSlack::OPENID_CLIENT_ID
        || field("client_secret") != FakeSlack::OPENID_CLIENT_SECRET
    {
        return slack_error("invalid_client_id");
    }
    let Some(code) = inner.openid.codes.remove(&field("code")) else {
        return slack_error("invalid_code");
    };
    if code.redirect_uri != field("redirect_uri") {
        return slack_error("bad_redirect_uri");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut claims = json!({
        "iss": "https://slack.com", "sub": code.user, "aud": FakeSlack::OPENID_CLIENT_ID,
        "exp": now + 3600, "iat": now, "auth_time": now,
        "https://slack.com/user_id": code.user, "https://slack.com/team_id": code.team,
        "https://slack.com/team_domain": "fake", "name": code.user,
    });
    if let Some(n) = code.nonce {
        claims["nonce"] = json!(n);
    }
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    // Slack signs with RS256; the fake's signature is not one, which is
    // fine: a token from the token endpoint need not be checked.
    let id_token = format!(
        "{}.{}.{}",
        b64.encode(br#"{"alg":"RS256","typ":"JWT","kid":"fake"}"#),
        b64.encode(claims.to_string()),
        b64.encode(b"not-a-signature")
    );
    Json(
        json!({"ok": true, "access_token": format!("xoxp-oidc-{}", inner.openid.issued),
                "token_type": "Bearer", "id_token": id_token}),
    )
    .into_response()
}
