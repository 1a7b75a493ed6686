//! `auth = { oauth = "NAME" }`: the call carries its person's token, a
//! 401 is retried once with a refreshed one, an unconnected person is
//! asked to connect, and no token ever shows in the output.

use super::*;
use baton_core::connection::{CredentialError, Credentials, PersonKey};
use baton_core::TaskId;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wiremock::matchers::{header, method};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Tokens by person; `rejected` hands out `refreshed` once, if set.
#[derive(Default)]
struct Fake {
    tokens: Mutex<HashMap<PersonKey, String>>,
    refreshed: Mutex<Option<String>>,
    rejected: Mutex<Vec<String>>,
}

#[async_trait]
impl Credentials for Fake {
    async fn bearer(
        &self,
        person: &PersonKey,
        provider: &str,
    ) -> Result<SecretString, CredentialError> {
        let found = self.tokens.lock().ok().and_then(|t| t.get(person).cloned());
        found
            .map(SecretString::from)
            .ok_or_else(|| CredentialError::NotConnected {
                person: person.clone(),
                provider: provider.to_owned(),
            })
    }

    async fn rejected(
        &self,
        person: &PersonKey,
        provider: &str,
        rejected: &SecretString,
    ) -> Result<SecretString, CredentialError> {
        if let Ok(mut r) = self.rejected.lock() {
            r.push(rejected.expose_secret().to_owned());
        }
        let fresh = self.refreshed.lock().ok().and_then(|mut r| r.take());
        fresh
            .map(SecretString::from)
            .ok_or_else(|| CredentialError::NotConnected {
                person: person.clone(),
                provider: provider.to_owned(),
            })
    }
}

/// Echoes the Authorization header it got (a server that leaks it).
struct Echo;

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        ResponseTemplate::new(200).set_body_string(format!("hello, you sent {auth}"))
    }
}

fn tool(server: &MockServer) -> DeclaredHttpTool {
    DeclaredHttpTool::new(HttpToolDef {
        name: "me".into(),
        description: "who am I".into(),
        method: HttpMethod::Get,
        url: format!("{}/api/me", server.uri()).into(),
        url_template: "http://provider/api/me".into(),
        headers: Vec::new(),
        parameters: json!({"type": "object"}),
        timeout: Duration::from_secs(5),
        secrets: Vec::new(),
        oauth: Some("tracker".into()),
    })
    .expect("tool")
}

fn ctx(person: Option<PersonKey>, credentials: &Arc<Fake>) -> ToolContext {
    ToolContext::new(TaskId::generate(), 1, "c")
        .acting_for(person, Some(credentials.clone() as Arc<dyn Credentials>))
}

fn alice() -> PersonKey {
    PersonKey::new("T1", "alice")
}

#[tokio::test]
async fn a_call_carries_its_persons_token_which_never_shows() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(header("authorization", "Bearer tok-alice-0123456789"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    let fake = Arc::new(Fake::default());
    if let Ok(mut t) = fake.tokens.lock() {
        t.insert(alice(), "tok-alice-0123456789".into());
        t.insert(PersonKey::new("T1", "bob"), "tok-bob-0123456789".into());
    }
    let out = tool(&server)
        .call(json!({}), &ctx(Some(alice()), &fake))
        .await;
    assert!(!out.is_error, "{out:?}");
    assert!(
        out.content.contains("hello, you sent Bearer [redacted]"),
        "{out:?}"
    );
    assert!(!out.content.contains("tok-alice"), "{out:?}");
    // Bob's call carries Bob's token, which this server refuses (no mock
    // matches): never Alice's.
    let bob = PersonKey::new("T1", "bob");
    let out = tool(&server).call(json!({}), &ctx(Some(bob), &fake)).await;
    assert!(out.is_error && !out.content.contains("tok-"), "{out:?}");
}

#[tokio::test]
async fn an_unconnected_person_is_asked_to_connect_and_nobody_cannot_call() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    let fake = Arc::new(Fake::default());
    let out = tool(&server)
        .call(json!({}), &ctx(Some(alice()), &fake))
        .await;
    assert_eq!(out.needs_connection.as_deref(), Some("tracker"));
    let out = tool(&server).call(json!({}), &ctx(None, &fake)).await;
    assert!(out.is_error && out.needs_connection.is_none(), "{out:?}");
    assert!(out.content.contains("acts for no person"), "{out:?}");
    assert!(server
        .received_requests()
        .await
        .unwrap_or_default()
        .is_empty());
}

#[tokio::test]
async fn a_401_retries_once_with_a_refreshed_token_else_asks_again() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(header("authorization", "Bearer tok-fresh-0123456789"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let fake = Arc::new(Fake::default());
    if let Ok(mut t) = fake.tokens.lock() {
        t.insert(alice(), "tok-stale-0123456789".into());
    }
    *fake.refreshed.lock().unwrap() = Some("tok-fresh-0123456789".into());
    let out = tool(&server)
        .call(json!({}), &ctx(Some(alice()), &fake))
        .await;
    assert!(!out.is_error, "{out:?}");
    assert!(!out.content.contains("tok-"), "{out:?}");
    assert_eq!(*fake.rejected.lock().unwrap(), ["tok-stale-0123456789"]);
    // No refresh possible: the person is asked to connect again.
    let out = tool(&server)
        .call(json!({}), &ctx(Some(alice()), &fake))
        .await;
    assert_eq!(out.needs_connection.as_deref(), Some("tracker"), "{out:?}");
}
