use crate::{ApiToken, Ingest};
use baton_core::connection::{PersonKey, Tokens};
use baton_core::store::connections::{ConnectionStore, PutCondition};
use baton_core::testing::TestSealer;
use baton_core::{Instant, TaskStore};
use baton_embedded::{EmbeddedBackend, QueueConfig};
use baton_settings::{AgentConfig, Agents};
use bytes::Bytes;
use secrecy::SecretString;
use serde_json::Value;
use std::sync::Arc;

const TOKEN: &str = "test-token-0123456789";

struct Rig {
    _dir: tempfile::TempDir,
    ingest: Ingest,
    store: ConnectionStore,
}

fn rig(with_store: bool) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
    let tasks = TaskStore::new(b.table.clone(), b.blobs.clone());
    let store = ConnectionStore::new(b.table.clone(), Arc::new(TestSealer));
    let agents = Agents::new(AgentConfig::new("default", "scripted"), Vec::new());
    let mut ingest = Ingest::new(
        tasks,
        b.queue.clone(),
        agents,
        Some(ApiToken::parse(TOKEN).unwrap()),
        None,
    );
    if with_store {
        ingest = ingest.with_connections(store.clone());
    }
    Rig {
        _dir: dir,
        ingest,
        store,
    }
}

async fn call(ingest: &Ingest, method: &str, path: &str, bearer: bool) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(path);
    if bearer {
        req = req.header("authorization", format!("Bearer {TOKEN}"));
    }
    let resp = ingest.handle(req.body(Bytes::new()).unwrap()).await;
    (
        resp.status().as_u16(),
        serde_json::from_slice(resp.body()).unwrap_or(Value::Null),
    )
}

async fn connect(store: &ConnectionStore, person: &PersonKey, provider: &str) {
    let tokens = Tokens {
        access_token: SecretString::from(format!("at-SECRET-{person}")),
        refresh_token: Some(SecretString::from("rt-SECRET")),
        expires_at: Some(Instant(1_800_000_000_000)),
        scopes: vec!["read".into()],
    };
    store
        .put(
            person,
            provider,
            &tokens,
            PutCondition::Replace,
            Instant(1_700_000_000_000),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn operators_list_connections_without_tokens_and_by_person() {
    let r = rig(true);
    let alice = PersonKey::new("T1", "U1");
    let bob = PersonKey::new("T1", "U2");
    connect(&r.store, &alice, "github").await;
    connect(&r.store, &alice, "linear").await;
    connect(&r.store, &bob, "github").await;

    let (status, v) = call(&r.ingest, "GET", "/connections", true).await;
    assert_eq!(status, 200, "{v}");
    let all = v["connections"].as_array().unwrap();
    assert_eq!(all.len(), 3, "{v}");
    assert!(!v.to_string().contains("SECRET"), "{v}");
    assert_eq!(all[0]["person"], "T1:U2");
    assert_eq!(all[0]["provider"], "github");
    assert_eq!(all[0]["connected_at"], "2023-11-14T22:13:20.000Z");
    assert!(all[0]["expires_at"].is_string());

    let (status, v) = call(&r.ingest, "GET", "/connections?user=T1:U1", true).await;
    assert_eq!(status, 200, "{v}");
    let providers: Vec<&str> = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["provider"].as_str().unwrap())
        .collect();
    assert_eq!(providers, vec!["github", "linear"]);

    // Pages.
    let (_, v) = call(&r.ingest, "GET", "/connections?limit=2", true).await;
    assert_eq!(v["connections"].as_array().unwrap().len(), 2);
    let cursor = v["next_cursor"].as_str().unwrap().to_owned();
    let path = format!("/connections?limit=2&cursor={}", cursor.replace('#', "%23"));
    let (status, v) = call(&r.ingest, "GET", &path, true).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["connections"].as_array().unwrap().len(), 1);
    assert!(v.get("next_cursor").is_none());
}

#[tokio::test]
async fn revoking_deletes_one_connection_and_an_unknown_one_is_404() {
    let r = rig(true);
    let alice = PersonKey::new("T1", "U1");
    let bob = PersonKey::new("T1", "U2");
    connect(&r.store, &alice, "github").await;
    connect(&r.store, &bob, "github").await;

    let (status, v) = call(&r.ingest, "DELETE", "/connections/T1:U1/github", true).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["revoked"], true);
    assert!(r.store.get(&alice, "github").await.unwrap().is_none());
    assert!(r.store.get(&bob, "github").await.unwrap().is_some());

    let (status, v) = call(&r.ingest, "DELETE", "/connections/T1:U1/github", true).await;
    assert_eq!(status, 404, "{v}");
    // The colon may come encoded.
    let (status, _) = call(&r.ingest, "DELETE", "/connections/T1%3AU2/github", true).await;
    assert_eq!(status, 200);
    assert!(r.store.get(&bob, "github").await.unwrap().is_none());
}

#[tokio::test]
async fn hostile_or_unauthenticated_requests_are_refused_and_change_nothing() {
    let r = rig(true);
    let alice = PersonKey::new("T1", "U1");
    connect(&r.store, &alice, "github").await;
    for (method, path) in [
        ("GET", "/connections"),
        ("DELETE", "/connections/T1:U1/github"),
    ] {
        let (status, _) = call(&r.ingest, method, path, false).await;
        assert_eq!(status, 401, "{method} {path}");
    }
    for path in [
        "/connections/nobody/github",
        "/connections/T1:U1/git%2Fhub",
        "/connections/T1:U1:x/github",
        "/connections/:U1/github",
    ] {
        let (status, v) = call(&r.ingest, "DELETE", path, true).await;
        assert_eq!(status, 400, "{path}: {v}");
    }
    for query in [
        "user=nobody",
        "user=T1:U1&user=T1:U2",
        "limit=0",
        "limit=1000",
        "cursor=junk",
        "user=T1:U1&cursor=T1:U1%23github",
        "owner=x",
    ] {
        let (status, v) = call(&r.ingest, "GET", &format!("/connections?{query}"), true).await;
        assert_eq!(status, 400, "{query}: {v}");
    }
    assert!(r.store.get(&alice, "github").await.unwrap().is_some());
}

#[tokio::test]
async fn without_a_store_the_routes_say_connections_are_not_configured() {
    let r = rig(false);
    let (status, v) = call(&r.ingest, "GET", "/connections", true).await;
    assert_eq!(status, 501);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("BATON_CONNECTIONS_KEY"),
        "{v}"
    );
    let (status, _) = call(&r.ingest, "DELETE", "/connections/T1:U1/github", true).await;
    assert_eq!(status, 501);
}
