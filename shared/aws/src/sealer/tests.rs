use super::*;
use crate::testing::MotoServer;
use baton_core::connection::{PersonKey, Tokens};
use baton_core::store::connections::{ConnectionStore, PutCondition};
use baton_core::{Instant, Key, Table};
use secrecy::{ExposeSecret, SecretString};
use std::sync::Arc;

/// A moto with a KMS key under `alias/baton-test`, and a sealer using it.
async fn setup() -> (MotoServer, aws_config::SdkConfig, KmsSealer) {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let kms = crate::kms_client(&cfg);
    let key = kms.create_key().send().await.unwrap();
    let key_id = key.key_metadata().unwrap().key_id().to_owned();
    kms.create_alias()
        .alias_name("alias/baton-test")
        .target_key_id(&key_id)
        .send()
        .await
        .unwrap();
    (moto, cfg.clone(), KmsSealer::new(kms, "alias/baton-test"))
}

#[tokio::test]
async fn seals_under_kms_and_opens_only_with_its_context() {
    let (_moto, _cfg, sealer) = setup().await;
    let sealed = sealer.seal(b"at-SECRET-token", "ctx/a").await.unwrap();
    assert!(!sealed.windows(6).any(|w| w == b"SECRET"));
    assert_eq!(
        sealer.open(&sealed, "ctx/a").await.unwrap(),
        b"at-SECRET-token"
    );
    assert!(sealer.open(&sealed, "ctx/b").await.is_err());
    let mut tampered = sealed.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    assert!(sealer.open(&tampered, "ctx/a").await.is_err());
    assert!(sealer.open(&sealed[..5], "ctx/a").await.is_err());
    assert!(sealer.open(&[], "ctx/a").await.is_err());
    assert_ne!(
        sealer.seal(b"x", "c").await.unwrap(),
        sealer.seal(b"x", "c").await.unwrap(),
        "a data key per seal"
    );
}

#[tokio::test]
async fn a_missing_key_fails_with_a_readable_error() {
    let (_moto, cfg, _) = setup().await;
    let sealer = KmsSealer::new(crate::kms_client(&cfg), "alias/nope");
    let err = sealer.seal(b"x", "c").await.unwrap_err();
    assert!(err.to_string().contains("GenerateDataKey"), "{err}");
}

#[tokio::test]
async fn connections_on_dynamodb_hold_no_token_in_clear() {
    let (_moto, cfg, sealer) = setup().await;
    let client = crate::dynamodb_client(&cfg);
    crate::bootstrap::ensure_table(&client, "baton-test")
        .await
        .expect("create table");
    let table = Arc::new(crate::DynamoTable::new(client, "baton-test"));
    let store = ConnectionStore::new(table.clone(), Arc::new(sealer));
    let alice = PersonKey::new("T1", "U1");
    let tokens = Tokens {
        access_token: SecretString::from("at-PLAINTEXT-alice"),
        refresh_token: Some(SecretString::from("rt-PLAINTEXT-alice")),
        expires_at: Some(Instant(9_000)),
        scopes: vec!["read".into()],
    };
    store
        .put(&alice, "gh", &tokens, PutCondition::Replace, Instant(1))
        .await
        .unwrap();
    let raw = table
        .get(&Key::new("CONN#T1#U1", "gh"))
        .await
        .unwrap()
        .unwrap();
    assert!(!raw.data.contains("PLAINTEXT"), "{}", raw.data);
    let got = store.get(&alice, "gh").await.unwrap().unwrap();
    assert_eq!(
        got.tokens.access_token.expose_secret(),
        "at-PLAINTEXT-alice"
    );
    let page = store.list_all(None, 10).await.unwrap();
    assert_eq!(page.connections.len(), 1);
    assert_eq!(page.connections[0].person, alice);
}
