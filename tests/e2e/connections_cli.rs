//! `baton connections list|revoke` against the real `baton dev`, on both
//! backends: an operator sees whose connections exist (never a token) and
//! revokes one, which deletes its stored tokens and leaves the others.
//! The connections are stored beside the running app with the sealer it
//! uses (its key file; moto's KMS key from `baton bootstrap`), as the OAuth
//! callback would store them.

use crate::common::{Backend, Options, TestApp};
use baton_core::connection::{PersonKey, Tokens};
use baton_core::store::connections::{ConnectionStore, PutCondition};
use baton_core::Instant;
use secrecy::SecretString;

async fn connect(store: &ConnectionStore, person: &PersonKey, provider: &str) {
    let tokens = Tokens {
        access_token: SecretString::from(format!("at-SECRET-{}", person.user)),
        refresh_token: Some(SecretString::from("rt-SECRET")),
        expires_at: Some(Instant(4_102_444_800_000)),
        scopes: vec!["read".into()],
    };
    store
        .put(
            person,
            provider,
            &tokens,
            PutCondition::Replace,
            Instant::now(),
        )
        .await
        .expect("store a connection");
}

async fn an_operator_lists_and_revokes_connections(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        ..Options::default()
    })
    .await;
    let store = app.connection_store().await;
    let alice = PersonKey::new("T1", "UALICE");
    let bob = PersonKey::new("T1", "UBOB");
    connect(&store, &alice, "github").await;
    connect(&store, &alice, "linear").await;
    connect(&store, &bob, "github").await;

    let (ok, out, err) = app.cli(&["connections", "list"]).await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "a header and three rows: {out}");
    assert!(lines[0].starts_with("PERSON"), "{out}");
    for row in [
        "T1:UALICE  github",
        "T1:UALICE  linear",
        "T1:UBOB    github",
    ] {
        assert!(out.contains(row), "{row} in {out}");
    }
    assert!(!out.contains("SECRET") && !err.contains("SECRET"), "{out}");

    let (ok, out, err) = app
        .cli(&["connections", "list", "--user", "T1:UALICE", "--json"])
        .await;
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let providers: Vec<&str> = v["connections"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| c["provider"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(providers, ["github", "linear"]);
    assert!(!out.contains("SECRET"), "{out}");

    let (ok, out, err) = app
        .cli(&["connections", "revoke", "T1:UALICE", "github"])
        .await;
    assert!(ok, "{err}");
    assert!(out.contains("revoked"), "{out}");
    assert!(store.get(&alice, "github").await.unwrap().is_none());
    assert!(store.get(&alice, "linear").await.unwrap().is_some());
    assert!(store.get(&bob, "github").await.unwrap().is_some());

    // Again: nothing to revoke, said so, nonzero exit.
    let (ok, _, err) = app
        .cli(&["connections", "revoke", "T1:UALICE", "github"])
        .await;
    assert!(!ok);
    assert!(
        err.contains("404") && err.contains("no connection"),
        "{err}"
    );

    let (ok, out, _) = app.cli(&["connections", "list"]).await;
    assert!(ok);
    assert_eq!(out.lines().count(), 3, "{out}");
}

on_both_backends!(an_operator_lists_and_revokes_connections);
