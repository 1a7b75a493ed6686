//! The flows against real HTTP servers (wiremock): discovery, registration,
//! the authorization URL, the exchange, the refresh, and hostile metadata.

use baton_connect::{
    ConnectError, ConnectionVault, Connector, Provider, ProviderKind, StaticClient, StoredClients,
};
use baton_core::clock::Instant;
use baton_core::connection::{CredentialError, Credentials, PersonKey, Tokens};
use baton_core::store::connections::{ConnectionStore, PutCondition};
use baton_core::testing::{MemoryTable, TestSealer};
use secrecy::{ExposeSecret, SecretString};
use std::sync::Arc;
use std::time::Duration;
use url::Url;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn store() -> ConnectionStore {
    ConnectionStore::new(Arc::new(MemoryTable::default()), Arc::new(TestSealer))
}

fn mcp(server: &MockServer) -> Provider {
    Provider {
        name: "docs".into(),
        kind: ProviderKind::Mcp {
            resource: Url::parse(&format!("{}/mcp", server.uri())).unwrap(),
        },
        scopes: vec!["read".into()],
        client: None,
    }
}

fn connector(providers: Vec<Provider>, store: &ConnectionStore) -> Arc<Connector> {
    Arc::new(
        Connector::new(
            providers,
            &Url::parse("https://baton.example/").unwrap(),
            Arc::new(StoredClients(store.clone())),
        )
        .unwrap(),
    )
}

/// An MCP server with its authorization server: the 401 challenge, RFC
/// 9728 and RFC 8414 metadata (`as_meta` overrides fields), registration.
async fn mount_mcp(server: &MockServer, as_meta: serde_json::Value) {
    let base = server.uri();
    Mock::given(method("POST"))
        .and(path("/mcp"))
        .respond_with(ResponseTemplate::new(401).insert_header(
            "WWW-Authenticate",
            format!(
                "Bearer error=\"invalid_token\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
            )
            .as_str(),
        ))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/.well-known/oauth-protected-resource/mcp"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "resource": format!("{base}/mcp"),
            "authorization_servers": [base],
        })))
        .mount(server)
        .await;
    let mut meta = serde_json::json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    });
    if let (Some(m), Some(over)) = (meta.as_object_mut(), as_meta.as_object()) {
        for (k, v) in over {
            m.insert(k.clone(), v.clone());
        }
    }
    Mock::given(method("GET"))
        .and(path("/.well-known/oauth-authorization-server"))
        .respond_with(ResponseTemplate::new(200).set_body_json(meta))
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/register"))
        .respond_with(ResponseTemplate::new(201).set_body_json(serde_json::json!({
            "client_id": "dyn-client",
            "redirect_uris": ["https://baton.example/oauth/callback"],
        })))
        .expect(1)
        .mount(server)
        .await;
}

fn token_body(access: &str, refresh: &str) -> serde_json::Value {
    serde_json::json!({
        "access_token": access, "token_type": "Bearer", "expires_in": 3600,
        "refresh_token": refresh, "scope": "read",
    })
}

#[tokio::test]
async fn an_mcp_server_is_discovered_registered_and_authorised_with_pkce_and_resource() {
    let server = MockServer::start().await;
    mount_mcp(&server, serde_json::json!({})).await;
    let store = store();
    let c = connector(vec![mcp(&server)], &store);
    let auth = c.start("docs", "STATE-123").await.unwrap();
    let base = server.uri();
    assert_eq!(
        auth.url.as_str().split('?').next(),
        Some(format!("{base}/authorize").as_str())
    );
    let q: std::collections::HashMap<_, _> = auth.url.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "dyn-client");
    assert_eq!(q["state"], "STATE-123");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["resource"], format!("{base}/mcp"));
    assert_eq!(q["scope"], "read");
    assert_eq!(q["redirect_uri"], "https://baton.example/oauth/callback");
    assert!(!auth.pkce_verifier.expose_secret().is_empty());
    // The registration is kept: a second flow registers nothing (the
    // mock expects one registration).
    assert_eq!(
        store
            .oauth_client("docs", "https://baton.example/oauth/callback")
            .await
            .unwrap()
            .unwrap()
            .client_id,
        "dyn-client"
    );
    c.start("docs", "STATE-456").await.unwrap();

    // The code is exchanged with the verifier and the resource.
    Mock::given(method("POST"))
        .and(path("/token"))
        .and(body_string_contains("grant_type=authorization_code"))
        .and(body_string_contains("code=the-code"))
        .and(body_string_contains("code_verifier="))
        .and(body_string_contains("resource="))
        .respond_with(ResponseTemplate::new(200).set_body_json(token_body("at-1", "rt-1")))
        .expect(1)
        .mount(&server)
        .await;
    let tokens = c
        .exchange("docs", "the-code", &auth.pkce_verifier)
        .await
        .unwrap();
    assert_eq!(tokens.access_token.expose_secret(), "at-1");
    assert_eq!(
        tokens
            .refresh_token
            .as_ref()
            .map(|t| t.expose_secret().to_owned()),
        Some("rt-1".into())
    );
    assert!(tokens.expires_at.is_some());
    assert_eq!(tokens.scopes, vec!["read"]);
}

#[tokio::test]
async fn a_server_taking_client_metadata_documents_gets_batons_url_as_client_id() {
    let server = MockServer::start().await;
    let base = server.uri();
    Mock::given(method("POST"))
        .and(path("/mcp"))
        .respond_with(
            ResponseTemplate::new(401).insert_header(
                "WWW-Authenticate",
                format!(
                    "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
                )
                .as_str(),
            ),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/.well-known/oauth-protected-resource/mcp"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "resource": format!("{base}/mcp"), "authorization_servers": [base],
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/.well-known/oauth-authorization-server"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": true,
        })))
        .mount(&server)
        .await;
    let store = store();
    let c = connector(vec![mcp(&server)], &store);
    let auth = c.start("docs", "S").await.unwrap();
    let q: std::collections::HashMap<_, _> = auth.url.query_pairs().into_owned().collect();
    assert_eq!(
        q["client_id"],
        "https://baton.example/oauth/client-metadata.json"
    );
    let doc = c.client_metadata().unwrap();
    assert_eq!(
        doc["client_id"],
        "https://baton.example/oauth/client-metadata.json"
    );
    assert_eq!(
        doc["redirect_uris"][0],
        "https://baton.example/oauth/callback"
    );
}

#[tokio::test]
async fn hostile_metadata_is_refused_readably() {
    let cases = [
        (
            serde_json::json!({"authorization_endpoint": "http://evil.example/authorize"}),
            "not an https:// URL",
        ),
        (
            serde_json::json!({"code_challenge_methods_supported": ["plain"]}),
            "PKCE",
        ),
        (
            serde_json::json!({"issuer": "https://other.example"}),
            "issuer",
        ),
    ];
    for (meta, expected) in cases {
        let server = MockServer::start().await;
        mount_mcp(&server, meta.clone()).await;
        let store = store();
        let c = connector(vec![mcp(&server)], &store);
        let e = c.start("docs", "S").await.unwrap_err();
        assert!(matches!(e, ConnectError::Discovery { .. }), "{meta}: {e}");
        assert!(
            e.to_string()
                .to_lowercase()
                .contains(&expected.to_lowercase()),
            "{meta}: expected `{expected}` in {e}"
        );
        server.reset().await;
    }
    // Garbage and oversized metadata.
    for body in ["{not json".to_owned(), "x".repeat(2 * 1024 * 1024)] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string(body.clone()))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(401))
            .mount(&server)
            .await;
        let store = store();
        let c = connector(vec![mcp(&server)], &store);
        let e = c.start("docs", "S").await.unwrap_err();
        assert!(matches!(e, ConnectError::Discovery { .. }), "{e}");
    }
}

fn declared(server: &MockServer) -> Provider {
    Provider {
        name: "api".into(),
        kind: ProviderKind::Declared {
            authorize_url: Url::parse(&format!("{}/authorize", server.uri())).unwrap(),
            token_url: Url::parse(&format!("{}/token", server.uri())).unwrap(),
        },
        scopes: vec!["me".into()],
        client: Some(StaticClient {
            client_id: "static-id".into(),
            client_secret: Some(SecretString::from("static-SECRET")),
        }),
    }
}

#[tokio::test]
async fn token_errors_never_show_a_token_or_a_body() {
    let server = MockServer::start().await;
    // A 200 that is not a token response, holding a token-like string.
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(
            ResponseTemplate::new(200).set_body_string("{\"access_token\": \"at-LEAK\", \"nope\""),
        )
        .mount(&server)
        .await;
    let store = store();
    let c = connector(vec![declared(&server)], &store);
    let e = c
        .exchange("api", "code", &SecretString::from("v"))
        .await
        .unwrap_err();
    assert!(matches!(e, ConnectError::Unreachable { .. }), "{e}");
    assert!(!e.to_string().contains("LEAK"), "{e}");
    assert!(!e.to_string().contains("SECRET"), "{e}");
    server.reset().await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            serde_json::json!({"error": "invalid_grant", "error_description": "code used"}),
        ))
        .mount(&server)
        .await;
    let e = c
        .exchange("api", "code", &SecretString::from("v"))
        .await
        .unwrap_err();
    assert!(matches!(e, ConnectError::Refused { .. }), "{e}");
    assert!(e.to_string().contains("invalid_grant"), "{e}");
}

fn alice() -> PersonKey {
    PersonKey::new("T1", "U1")
}

async fn connect(store: &ConnectionStore, access: &str, expires_in: Duration) {
    let tokens = Tokens {
        access_token: SecretString::from(access.to_owned()),
        refresh_token: Some(SecretString::from("rt-old")),
        expires_at: Some(Instant::now().saturating_add(expires_in)),
        scopes: vec![],
    };
    store
        .put(
            &alice(),
            "api",
            &tokens,
            PutCondition::Replace,
            Instant::now(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_fresh_token_is_handed_out_as_stored() {
    let server = MockServer::start().await;
    let store = store();
    connect(&store, "at-fresh", Duration::from_secs(3600)).await;
    let vault = ConnectionVault::new(store.clone(), connector(vec![declared(&server)], &store));
    let t = vault.bearer(&alice(), "api").await.unwrap();
    assert_eq!(t.expose_secret(), "at-fresh");
    let bob = PersonKey::new("T1", "U2");
    assert!(matches!(
        vault.bearer(&bob, "api").await,
        Err(CredentialError::NotConnected { .. })
    ));
}

#[tokio::test]
async fn an_expiring_token_is_refreshed_once_for_concurrent_callers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .and(body_string_contains("grant_type=refresh_token"))
        .and(body_string_contains("refresh_token=rt-old"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(token_body("at-new", "rt-new"))
                .set_delay(Duration::from_millis(300)),
        )
        .expect(1)
        .mount(&server)
        .await;
    let store = store();
    connect(&store, "at-old", Duration::from_secs(10)).await;
    let vault = Arc::new(ConnectionVault::new(
        store.clone(),
        connector(vec![declared(&server)], &store),
    ));
    let calls = (0..4).map(|_| {
        let v = vault.clone();
        tokio::spawn(async move { v.bearer(&alice(), "api").await })
    });
    for call in futures::future::join_all(calls).await {
        assert_eq!(call.unwrap().unwrap().expose_secret(), "at-new");
    }
    let stored = store.get(&alice(), "api").await.unwrap().unwrap();
    assert_eq!(stored.tokens.access_token.expose_secret(), "at-new");
    assert_eq!(
        stored.tokens.refresh_token.unwrap().expose_secret(),
        "rt-new"
    );
}

#[tokio::test]
async fn a_rejected_token_is_refreshed_and_a_refused_refresh_forgets_the_connection() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(token_body("at-2", "rt-2")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let store = store();
    connect(&store, "at-1", Duration::from_secs(3600)).await;
    let vault = ConnectionVault::new(store.clone(), connector(vec![declared(&server)], &store));
    let t = vault
        .rejected(&alice(), "api", &SecretString::from("at-1"))
        .await
        .unwrap();
    assert_eq!(t.expose_secret(), "at-2");
    // A stale rejection (of a token already replaced) gets the current one.
    let t = vault
        .rejected(&alice(), "api", &SecretString::from("at-1"))
        .await
        .unwrap();
    assert_eq!(t.expose_secret(), "at-2");
    // The provider refuses the refresh token: the connection is gone.
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(
            ResponseTemplate::new(400).set_body_json(serde_json::json!({"error": "invalid_grant"})),
        )
        .mount(&server)
        .await;
    let e = vault
        .rejected(&alice(), "api", &SecretString::from("at-2"))
        .await
        .unwrap_err();
    assert!(matches!(e, CredentialError::NotConnected { .. }), "{e}");
    assert!(store.get(&alice(), "api").await.unwrap().is_none());
}

#[tokio::test]
async fn without_a_refresh_token_a_token_is_used_to_its_end_then_forgotten() {
    let server = MockServer::start().await;
    let store = store();
    let put = |access: &str, expires_in: Option<Duration>, at: Instant| Tokens {
        access_token: SecretString::from(access.to_owned()),
        refresh_token: None,
        expires_at: expires_in.map(|d| at.saturating_add(d)),
        scopes: vec![],
    };
    let tokens = put("at-short", Some(Duration::from_secs(30)), Instant::now());
    store
        .put(
            &alice(),
            "api",
            &tokens,
            PutCondition::Replace,
            Instant::now(),
        )
        .await
        .unwrap();
    let vault = ConnectionVault::new(store.clone(), connector(vec![declared(&server)], &store));
    // Expiring within the refresh margin, but not expired: still used.
    assert_eq!(
        vault.bearer(&alice(), "api").await.unwrap().expose_secret(),
        "at-short"
    );
    // Rejected, with nothing to refresh it with: asked again.
    let e = vault
        .rejected(&alice(), "api", &SecretString::from("at-short"))
        .await
        .unwrap_err();
    assert!(matches!(e, CredentialError::NotConnected { .. }), "{e}");
    assert!(store.get(&alice(), "api").await.unwrap().is_none());
}
