//! Sign in with Slack (OpenID Connect): who is in a browser, as Slack
//! says. The browser is sent to Slack's authorize page (`scope=openid`, a
//! `nonce`, the workspace as a `team` hint); Slack sends it back with a
//! code, which `openid.connect.token` exchanges for an ID token naming the
//! signed-in user and workspace.
//!
//! The ID token comes straight from Slack's token endpoint over TLS, so
//! its signature need not be checked (OpenID Connect Core 3.1.3.7, point
//! 6); its issuer, audience, nonce and expiry are.

use base64::Engine;
use baton_core::token::constant_time_eq;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use std::time::Duration;

/// Slack's OpenID Connect authorize page (`SLACK_OPENID_AUTHORIZE_URL`
/// overrides it, for tests).
pub const DEFAULT_AUTHORIZE_URL: &str = "https://slack.com/openid/connect/authorize";
/// The `iss` of Slack's ID tokens.
pub const ISSUER: &str = "https://slack.com";
/// The Web API method that exchanges the code.
const TOKEN_METHOD: &str = "openid.connect.token";
const TIMEOUT: Duration = Duration::from_secs(20);
/// The largest token response read.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// Why a sign-in could not tell who is in the browser. Never holds a
/// token, the client secret or a response body.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// Slack refused the exchange (`invalid_code`, `bad_redirect_uri`...).
    #[error("Slack refused the sign-in: {0}")]
    Refused(String),
    /// Slack could not be reached or answered something unreadable.
    #[error("Slack could not be reached to finish the sign-in: {0}")]
    Unreachable(String),
    /// The ID token is not one Baton may trust for this sign-in.
    #[error("Slack's ID token is not valid for this sign-in: {0}")]
    InvalidToken(&'static str),
    /// The configuration cannot work (a URL that is not one).
    #[error("Sign in with Slack is misconfigured: {0}")]
    Config(String),
}

/// Who signed in: Slack's `https://slack.com/team_id` and
/// `https://slack.com/user_id` claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedIn {
    pub team_id: String,
    pub user_id: String,
}

/// The Slack app's Sign in with Slack settings (`SLACK_CLIENT_ID`,
/// `SLACK_CLIENT_SECRET`), and where Slack is.
#[derive(Clone)]
pub struct SignInWithSlack {
    client_id: String,
    client_secret: SecretString,
    /// The Web API base (`SLACK_API_URL`), where `openid.connect.token` is.
    api_url: String,
    authorize_url: reqwest::Url,
    http: reqwest::Client,
}

impl std::fmt::Debug for SignInWithSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInWithSlack")
            .field("client_id", &self.client_id)
            .field("api_url", &self.api_url)
            .field("authorize_url", &self.authorize_url.as_str())
            .finish_non_exhaustive()
    }
}

/// Whether `url` may carry a sign-in: https, or http to a loopback host
/// (a test's fake Slack).
fn secure(url: &reqwest::Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => matches!(
            url.host_str(),
            Some("localhost" | "127.0.0.1" | "[::1]" | "::1")
        ),
        _ => false,
    }
}

/// The claims of Slack's ID token Baton reads.
#[derive(Deserialize)]
struct Claims {
    iss: String,
    aud: Audience,
    exp: u64,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(rename = "https://slack.com/user_id")]
    user_id: String,
    #[serde(rename = "https://slack.com/team_id")]
    team_id: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn names(&self, client_id: &str) -> bool {
        match self {
            Audience::One(a) => a == client_id,
            Audience::Many(all) => all.iter().any(|a| a == client_id),
        }
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    id_token: Option<String>,
}

impl SignInWithSlack {
    /// The settings of a Slack app's Sign in with Slack; `api_url` is the
    /// Web API base the rest of Baton's Slack client uses.
    pub fn new(
        client_id: impl Into<String>,
        client_secret: SecretString,
        api_url: &str,
        authorize_url: &str,
    ) -> Result<Self, SignInError> {
        let client_id = client_id.into();
        if client_id.is_empty() || client_secret.expose_secret().is_empty() {
            return Err(SignInError::Config(
                "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET must both be set".into(),
            ));
        }
        let authorize_url = reqwest::Url::parse(authorize_url)
            .map_err(|e| SignInError::Config(format!("SLACK_OPENID_AUTHORIZE_URL: {e}")))?;
        let api = reqwest::Url::parse(api_url)
            .map_err(|e| SignInError::Config(format!("SLACK_API_URL: {e}")))?;
        if !secure(&authorize_url) || !secure(&api) {
            return Err(SignInError::Config(
                "Slack's URLs must be https:// (http:// only to localhost)".into(),
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SignInError::Config(e.to_string()))?;
        Ok(SignInWithSlack {
            client_id,
            client_secret,
            api_url: api_url.trim_end_matches('/').to_owned(),
            authorize_url,
            http,
        })
    }

    /// Where to send the browser: Slack's authorize page for `openid`,
    /// with `state` and `nonce`, coming back to `redirect_uri`, signing in
    /// to workspace `team`.
    pub fn authorize_url(
        &self,
        state: &str,
        nonce: &str,
        redirect_uri: &str,
        team: &str,
    ) -> reqwest::Url {
        let mut url = self.authorize_url.clone();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("scope", "openid")
            .append_pair("client_id", &self.client_id)
            .append_pair("state", state)
            .append_pair("nonce", nonce)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("team", team);
        url
    }

    /// Exchanges `code` (`openid.connect.token`) and reads who signed in
    /// from the ID token, checking its issuer, audience, `nonce` and
    /// expiry (`now_secs`: seconds since the epoch).
    pub async fn exchange(
        &self,
        code: &str,
        redirect_uri: &str,
        nonce: &str,
        now_secs: u64,
    ) -> Result<SignedIn, SignInError> {
        let form = [
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.expose_secret()),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("grant_type", "authorization_code"),
        ];
        let unreachable = |e: reqwest::Error| SignInError::Unreachable(e.without_url().to_string());
        let body = serde_urlencoded::to_string(form)
            .map_err(|e| SignInError::Config(format!("cannot encode the exchange: {e}")))?;
        let response = self
            .http
            .post(format!("{}/{TOKEN_METHOD}", self.api_url))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .map_err(unreachable)?;
        if !response.status().is_success() {
            return Err(SignInError::Unreachable(format!(
                "{TOKEN_METHOD} answered HTTP {}",
                response.status().as_u16()
            )));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BODY_BYTES as u64)
        {
            return Err(SignInError::Unreachable("the answer is too large".into()));
        }
        let body = response.bytes().await.map_err(unreachable)?;
        if body.len() > MAX_BODY_BYTES {
            return Err(SignInError::Unreachable("the answer is too large".into()));
        }
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|_| {
            SignInError::Unreachable(format!("{TOKEN_METHOD} answered unreadable JSON"))
        })?;
        if !answer.ok {
            let code = answer.error.unwrap_or_else(|| "unknown_error".into());
            // Slack's error codes are short words; nothing else is shown.
            let code: String = code
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(64)
                .collect();
            return Err(SignInError::Refused(code));
        }
        let id_token = answer
            .id_token
            .ok_or(SignInError::InvalidToken("the answer holds no id_token"))?;
        self.verify(&id_token, nonce, now_secs)
    }

    /// The signed-in user of `id_token`, if it is for this sign-in.
    fn verify(&self, id_token: &str, nonce: &str, now_secs: u64) -> Result<SignedIn, SignInError> {
        let mut parts = id_token.split('.');
        let (Some(_header), Some(payload), Some(_signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(SignInError::InvalidToken("not a JWT"));
        };
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .map_err(|_| SignInError::InvalidToken("its payload is not base64url"))?;
        let claims: Claims = serde_json::from_slice(&bytes)
            .map_err(|_| SignInError::InvalidToken("its claims are not Slack's"))?;
        if claims.iss != ISSUER {
            return Err(SignInError::InvalidToken("it was not issued by Slack"));
        }
        if !claims.aud.names(&self.client_id) {
            return Err(SignInError::InvalidToken("it is for another app"));
        }
        if claims.exp <= now_secs {
            return Err(SignInError::InvalidToken("it has expired"));
        }
        if !claims
            .nonce
            .as_deref()
            .is_some_and(|n| constant_time_eq(n.as_bytes(), nonce.as_bytes()))
        {
            return Err(SignInError::InvalidToken("its nonce is not this sign-in's"));
        }
        if claims.team_id.is_empty() || claims.user_id.is_empty() {
            return Err(SignInError::InvalidToken("it names no user"));
        }
        Ok(SignedIn {
            team_id: claims.team_id,
            user_id: claims.user_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jwt(claims: serde_json::Value) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.c2ln",
            b64.encode(br#"{"alg":"RS256","typ":"JWT"}"#),
            b64.encode(claims.to_string())
        )
    }

    fn sign_in() -> SignInWithSlack {
        SignInWithSlack::new(
            "123.456",
            SecretString::from("shh"),
            "https://slack.com/api",
            DEFAULT_AUTHORIZE_URL,
        )
        .unwrap()
    }

    fn claims() -> serde_json::Value {
        json!({"iss": "https://slack.com", "aud": "123.456", "exp": 2000, "nonce": "n1",
               "https://slack.com/user_id": "U1", "https://slack.com/team_id": "T1"})
    }

    #[test]
    fn the_id_token_names_who_signed_in_only_for_this_app_and_sign_in() {
        let s = sign_in();
        assert_eq!(
            s.verify(&jwt(claims()), "n1", 1000).unwrap(),
            SignedIn {
                team_id: "T1".into(),
                user_id: "U1".into()
            }
        );
        for (key, value, now) in [
            ("iss", json!("https://evil.example"), 1000),
            ("aud", json!("other-app"), 1000),
            ("aud", json!(["x", "y"]), 1000),
            ("nonce", json!("n2"), 1000),
            ("nonce", json!(null), 1000),
            ("exp", json!(2000), 2000),
        ] {
            let mut c = claims();
            c[key] = value;
            assert!(
                matches!(
                    s.verify(&jwt(c), "n1", now),
                    Err(SignInError::InvalidToken(_))
                ),
                "{key}"
            );
        }
        let mut c = claims();
        c["aud"] = json!(["x", "123.456"]);
        assert!(s.verify(&jwt(c), "n1", 1000).is_ok());
        for bad in ["", "a.b", "a.!!!.c", "a.b.c.d"] {
            assert!(s.verify(bad, "n1", 1000).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_authorize_url_asks_for_openid_with_state_nonce_and_team() {
        let url = sign_in().authorize_url("st", "no", "https://baton.example/cb?x", "T1");
        let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(url.host_str(), Some("slack.com"));
        assert_eq!(url.path(), "/openid/connect/authorize");
        assert_eq!(q["scope"], "openid");
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], "123.456");
        assert_eq!(q["state"], "st");
        assert_eq!(q["nonce"], "no");
        assert_eq!(q["team"], "T1");
        assert_eq!(q["redirect_uri"], "https://baton.example/cb?x");
    }

    /// Follows the fake's authorize page as the browser signed in to it
    /// with `cookie`: the code it sends back.
    async fn code_from(s: &SignInWithSlack, cookie: &str, nonce: &str) -> String {
        let browser = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let url = s.authorize_url("st-1", nonce, "http://127.0.0.1:9/back", "T1");
        let r = browser
            .get(url)
            .header("cookie", cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 302);
        let back = reqwest::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
        let q: std::collections::HashMap<_, _> = back.query_pairs().into_owned().collect();
        assert_eq!(q["state"], "st-1");
        q["code"].clone()
    }

    #[tokio::test]
    async fn the_fake_slack_signs_in_the_browsers_person_and_exchanges_a_code_once() {
        use crate::testing::FakeSlack;
        let fake = FakeSlack::start().await;
        let s = SignInWithSlack::new(
            FakeSlack::OPENID_CLIENT_ID,
            SecretString::from(FakeSlack::OPENID_CLIENT_SECRET),
            &fake.base_url(),
            &fake.openid_authorize_url(),
        )
        .unwrap();
        let r = reqwest::get(fake.openid_sign_in_url("T1", "U2"))
            .await
            .unwrap();
        let cookie = r.headers()["set-cookie"].to_str().unwrap();
        let cookie = cookie.split(';').next().unwrap().to_owned();
        let now = 1_000;
        let code = code_from(&s, &cookie, "n1").await;
        let who = s
            .exchange(&code, "http://127.0.0.1:9/back", "n1", now)
            .await
            .unwrap();
        assert_eq!((who.team_id.as_str(), who.user_id.as_str()), ("T1", "U2"));
        // Once only.
        let again = s
            .exchange(&code, "http://127.0.0.1:9/back", "n1", now)
            .await;
        assert!(matches!(again, Err(SignInError::Refused(ref c)) if c == "invalid_code"));
        // Another sign-in's nonce.
        let code = code_from(&s, &cookie, "n2").await;
        let other = s
            .exchange(&code, "http://127.0.0.1:9/back", "n1", now)
            .await;
        assert!(
            matches!(other, Err(SignInError::InvalidToken(_))),
            "{other:?}"
        );
        let calls = fake.calls("openid.connect.token");
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0]["client_id"], FakeSlack::OPENID_CLIENT_ID);
        assert_eq!(calls[0]["client_secret_given"], true);
        assert!(!format!("{calls:?}").contains(FakeSlack::OPENID_CLIENT_SECRET));
    }

    #[test]
    fn only_secure_urls_and_both_credentials_are_taken() {
        let new = |id: &str, secret: &str, api: &str, auth: &str| {
            SignInWithSlack::new(id, SecretString::from(secret.to_owned()), api, auth)
        };
        assert!(new("", "s", "https://slack.com/api", DEFAULT_AUTHORIZE_URL).is_err());
        assert!(new("i", "", "https://slack.com/api", DEFAULT_AUTHORIZE_URL).is_err());
        assert!(new("i", "s", "http://slack.example/api", DEFAULT_AUTHORIZE_URL).is_err());
        assert!(new("i", "s", "https://slack.com/api", "http://evil.example/a").is_err());
        assert!(new("i", "s", "http://127.0.0.1:9/api", "http://127.0.0.1:9/a").is_ok());
        let debug = format!("{:?}", sign_in());
        assert!(!debug.contains("shh"), "{debug}");
    }
}
