//! Against the e2e helper's authorization server and MCP server on the
//! official Python MCP SDK (tests/fixtures/oauth/server.py): start it
//! (`.venv/bin/python tests/fixtures/oauth/server.py --port N`) and run
//! `BATON_OAUTH_FIXTURE=http://127.0.0.1:N cargo test -p baton-connect
//! --test fixture -- --ignored`. The e2e tests run the same server through
//! the real binary.

use baton_connect::{Connector, Provider, ProviderKind, StoredClients};
use baton_core::store::connections::ConnectionStore;
use baton_core::testing::{MemoryTable, TestSealer};
use secrecy::ExposeSecret;
use std::sync::Arc;
use url::Url;

#[tokio::test]
#[ignore = "needs tests/fixtures/oauth/server.py running; see the module docs"]
async fn discovers_registers_connects_and_refreshes_at_the_python_sdk_server() {
    let base = std::env::var("BATON_OAUTH_FIXTURE").expect("BATON_OAUTH_FIXTURE");
    let store = ConnectionStore::new(Arc::new(MemoryTable::default()), Arc::new(TestSealer));
    let connector = Connector::new(
        vec![Provider {
            name: "docs".into(),
            kind: ProviderKind::Mcp {
                resource: Url::parse(&format!("{base}/mcp")).unwrap(),
            },
            scopes: vec!["read".into()],
            client: None,
        }],
        &Url::parse("http://127.0.0.1:9/").unwrap(),
        Arc::new(StoredClients(store.clone())),
    )
    .unwrap();
    let auth = connector
        .start("docs", "STATE-fixture-0123456789")
        .await
        .unwrap();
    // The browser: the server consents at once for the hinted user.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // Follows the server's redirects (consent) until it sends the browser
    // back to Baton.
    let mut next = Url::parse(&format!("{}&login_hint=alice", auth.url)).unwrap();
    let back = loop {
        let resp = http.get(next.clone()).send().await.unwrap();
        assert!(resp.status().is_redirection(), "{next}: {}", resp.status());
        let location = next
            .join(resp.headers()["location"].to_str().unwrap())
            .unwrap();
        if location.as_str().starts_with("http://127.0.0.1:9/") {
            break location;
        }
        next = location;
    };
    assert!(back
        .as_str()
        .starts_with("http://127.0.0.1:9/oauth/callback"));
    let q: std::collections::HashMap<_, _> = back.query_pairs().into_owned().collect();
    assert_eq!(q["state"], "STATE-fixture-0123456789");
    let tokens = connector
        .exchange("docs", &q["code"], &auth.pkce_verifier)
        .await
        .unwrap();
    // The token works at the MCP server's protected JSON endpoint.
    let me: serde_json::Value = http
        .get(format!("{base}/api/me"))
        .bearer_auth(tokens.access_token.expose_secret())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["user"], "alice");
    let refreshed = connector
        .refresh("docs", tokens.refresh_token.as_ref().unwrap())
        .await
        .unwrap();
    assert_ne!(
        refreshed.access_token.expose_secret(),
        tokens.access_token.expose_secret()
    );
}
