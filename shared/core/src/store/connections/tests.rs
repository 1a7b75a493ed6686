use super::*;
use crate::ids::TaskId;
use crate::task::connection::ConnectRequest;
use crate::testing::{MemoryTable, TestSealer};

fn store() -> (ConnectionStore, Arc<MemoryTable>) {
    let table = Arc::new(MemoryTable::default());
    (
        ConnectionStore::new(table.clone(), Arc::new(TestSealer)),
        table,
    )
}

fn tokens(access: &str) -> Tokens {
    Tokens {
        access_token: SecretString::from(access.to_owned()),
        refresh_token: Some(SecretString::from(format!("{access}-refresh"))),
        expires_at: Some(Instant(9_000)),
        scopes: vec!["read".into()],
    }
}

fn alice() -> PersonKey {
    PersonKey::new("T1", "U1")
}

fn bob() -> PersonKey {
    PersonKey::new("T1", "U2")
}

#[tokio::test]
async fn tokens_read_back_per_person_and_provider_and_are_sealed_at_rest() {
    let (store, table) = store();
    assert!(store.get(&alice(), "github").await.unwrap().is_none());
    let v = store
        .put(
            &alice(),
            "github",
            &tokens("at-ALICE"),
            PutCondition::Replace,
            Instant(1_000),
        )
        .await
        .unwrap();
    assert_eq!(v, 1);
    let got = store.get(&alice(), "github").await.unwrap().unwrap();
    assert_eq!(got.tokens.access_token.expose_secret(), "at-ALICE");
    assert_eq!(
        got.tokens.refresh_token.unwrap().expose_secret(),
        "at-ALICE-refresh"
    );
    assert_eq!(got.summary.connected_at, Instant(1_000));
    assert_eq!(got.summary.expires_at, Some(Instant(9_000)));
    assert_eq!(got.version, 1);
    assert!(store.get(&bob(), "github").await.unwrap().is_none());
    assert!(store.get(&alice(), "linear").await.unwrap().is_none());

    let key = connection_key(&alice(), "github");
    let raw = table.get(&key).await.unwrap().unwrap();
    assert_eq!(key.pk, "CONN#T1#U1");
    assert!(!raw.data.contains("at-ALICE"), "{}", raw.data);
}

#[tokio::test]
async fn an_item_copied_under_another_person_does_not_open() {
    let (store, table) = store();
    store
        .put(
            &alice(),
            "github",
            &tokens("at-A"),
            PutCondition::Replace,
            Instant(1),
        )
        .await
        .unwrap();
    let mut item = table
        .get(&connection_key(&alice(), "github"))
        .await
        .unwrap()
        .unwrap();
    item.key = connection_key(&bob(), "github");
    item.data = item.data.replace("\"U1\"", "\"U2\"");
    table
        .transact(vec![Write::Put {
            item,
            condition: Condition::None,
        }])
        .await
        .unwrap();
    assert!(matches!(
        store.get(&bob(), "github").await,
        Err(ConnectionError::Seal(_))
    ));
}

#[tokio::test]
async fn puts_are_conditional() {
    let (store, _) = store();
    let p = alice();
    store
        .put(&p, "gh", &tokens("a1"), PutCondition::Absent, Instant(1))
        .await
        .unwrap();
    assert!(matches!(
        store
            .put(&p, "gh", &tokens("a2"), PutCondition::Absent, Instant(2))
            .await,
        Err(ConnectionError::Changed)
    ));
    assert!(matches!(
        store
            .put(
                &p,
                "gh",
                &tokens("a2"),
                PutCondition::Version(7),
                Instant(2)
            )
            .await,
        Err(ConnectionError::Changed)
    ));
    let v = store
        .put(
            &p,
            "gh",
            &tokens("a2"),
            PutCondition::Version(1),
            Instant(5),
        )
        .await
        .unwrap();
    assert_eq!(v, 2);
    let got = store.get(&p, "gh").await.unwrap().unwrap();
    assert_eq!(got.tokens.access_token.expose_secret(), "a2");
    assert_eq!(got.summary.connected_at, Instant(1), "a refresh keeps it");
    assert_eq!(got.summary.refreshed_at, Some(Instant(5)));
    let v = store
        .put(&p, "gh", &tokens("a3"), PutCondition::Replace, Instant(8))
        .await
        .unwrap();
    assert_eq!(v, 3);
    let got = store.get(&p, "gh").await.unwrap().unwrap();
    assert_eq!(got.summary.connected_at, Instant(8), "a new connection");
    assert_eq!(got.summary.refreshed_at, None);
}

#[tokio::test]
async fn names_that_could_share_a_key_are_refused() {
    let (store, table) = store();
    for (person, provider) in [
        (PersonKey::new("T1#x", "U1"), "gh"),
        (PersonKey::new("T1", "U#1"), "gh"),
        (PersonKey::new("T1", "U1"), "g#h"),
        (PersonKey::new("T1", "U1"), ""),
    ] {
        assert!(matches!(
            store
                .put(
                    &person,
                    provider,
                    &tokens("t"),
                    PutCondition::Replace,
                    Instant(1)
                )
                .await,
            Err(ConnectionError::InvalidName(_))
        ));
    }
    assert!(table.keys().is_empty());
}

#[tokio::test]
async fn one_refresher_holds_the_lease_until_it_stores_or_the_lease_expires() {
    let (store, _) = store();
    let p = alice();
    store
        .put(&p, "gh", &tokens("old"), PutCondition::Replace, Instant(0))
        .await
        .unwrap();
    let lease = Duration::from_secs(30);
    let won = store
        .begin_refresh(&p, "gh", 1, Instant(1_000), lease)
        .await
        .unwrap();
    assert_eq!(won, Some(2));
    assert_eq!(
        store
            .begin_refresh(&p, "gh", 1, Instant(1_000), lease)
            .await
            .unwrap(),
        None,
        "the same version loses"
    );
    assert_eq!(
        store
            .begin_refresh(&p, "gh", 2, Instant(2_000), lease)
            .await
            .unwrap(),
        None,
        "the lease is held"
    );
    let stored = store.get(&p, "gh").await.unwrap().unwrap();
    assert_eq!(stored.refreshing_until, Some(Instant(31_000)));
    // The holder died: after the lease another may take it.
    assert_eq!(
        store
            .begin_refresh(&p, "gh", 2, Instant(31_000), lease)
            .await
            .unwrap(),
        Some(3)
    );
    let v = store
        .put(
            &p,
            "gh",
            &tokens("new"),
            PutCondition::Version(3),
            Instant(31_500),
        )
        .await
        .unwrap();
    let stored = store.get(&p, "gh").await.unwrap().unwrap();
    assert_eq!(stored.version, v);
    assert_eq!(stored.refreshing_until, None, "storing releases the lease");
    assert_eq!(stored.tokens.access_token.expose_secret(), "new");
    assert_eq!(
        store
            .begin_refresh(&p, "nope", 1, Instant(0), lease)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn delete_forgets_one_connection_only() {
    let (store, _) = store();
    for (p, prov) in [(alice(), "gh"), (alice(), "linear"), (bob(), "gh")] {
        store
            .put(&p, prov, &tokens("t"), PutCondition::Replace, Instant(1))
            .await
            .unwrap();
    }
    assert!(store.delete(&alice(), "gh").await.unwrap());
    assert!(!store.delete(&alice(), "gh").await.unwrap());
    assert!(store.get(&alice(), "gh").await.unwrap().is_none());
    assert!(store.get(&alice(), "linear").await.unwrap().is_some());
    assert!(store.get(&bob(), "gh").await.unwrap().is_some());
    let mine: Vec<String> = store
        .list_for(&alice())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.provider)
        .collect();
    assert_eq!(mine, vec!["linear"]);
}

#[tokio::test]
async fn everyones_connections_list_in_pages_across_shards() {
    let (store, _) = store();
    let mut expected = Vec::new();
    for u in 0..23 {
        let p = PersonKey::new("T1", format!("U{u:02}"));
        for prov in ["gh", "linear"] {
            store
                .put(&p, prov, &tokens("t"), PutCondition::Replace, Instant(1))
                .await
                .unwrap();
            expected.push(format!("{p}#{prov}"));
        }
    }
    expected.sort();
    expected.reverse();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list_all(after.as_deref(), 10).await.unwrap();
        assert!(page.connections.len() <= 10);
        seen.extend(
            page.connections
                .iter()
                .map(|s| format!("{}#{}", s.person, s.provider)),
        );
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(
        store
            .list_for(&PersonKey::new("T1", "U03"))
            .await
            .unwrap()
            .len(),
        2
    );
}

fn request(expires_at: Instant) -> ConnectRequest {
    ConnectRequest {
        person: alice(),
        provider: "gh".into(),
        task_id: TaskId::generate(),
        call_id: "c1".into(),
        created_at: Instant(0),
        expires_at,
    }
}

fn flow(browser: &str, flow_expires_at: Instant) -> ConnectFlow {
    ConnectFlow {
        pkce_verifier: SecretString::from("VERIFIER-SECRET"),
        browser: browser.into(),
        flow_expires_at,
    }
}

#[tokio::test]
async fn a_connect_request_is_claimed_once_from_its_browser() {
    let (store, table) = store();
    let req = request(Instant(100_000));
    store.record_connect_request("h1", &req).await.unwrap();
    assert!(matches!(
        store.record_connect_request("h1", &req).await,
        Err(ConnectionError::Changed)
    ));
    let pending = store.connect_request("h1").await.unwrap().unwrap();
    assert_eq!(pending.request, req);
    assert_eq!(pending.browser, None);

    // Not started at /connect: the callback is foreign.
    assert!(matches!(
        store.claim_connect("h1", "b1", Instant(10)).await,
        Err(ConnectionError::Refused(ConnectRefused::Foreign))
    ));
    let started = store
        .start_connect_flow("h1", flow("b1", Instant(60_000)), Instant(10))
        .await
        .unwrap();
    assert_eq!(started, req);
    let raw = table
        .get(&Key::new("CONNECT#h1", "CONNECT"))
        .await
        .unwrap()
        .unwrap();
    assert!(!raw.data.contains("VERIFIER-SECRET"));
    assert!(matches!(
        store.claim_connect("h1", "b2", Instant(20)).await,
        Err(ConnectionError::Refused(ConnectRefused::Foreign))
    ));
    assert!(matches!(
        store.claim_connect("nope", "b1", Instant(20)).await,
        Err(ConnectionError::Refused(ConnectRefused::Unknown))
    ));
    let claimed = store.claim_connect("h1", "b1", Instant(20)).await.unwrap();
    assert_eq!(claimed.request, req);
    assert_eq!(claimed.pkce_verifier.expose_secret(), "VERIFIER-SECRET");
    assert!(matches!(
        store.claim_connect("h1", "b1", Instant(30)).await,
        Err(ConnectionError::Refused(ConnectRefused::Used))
    ));
    assert!(matches!(
        store
            .start_connect_flow("h1", flow("b1", Instant(60_000)), Instant(30))
            .await,
        Err(ConnectionError::Refused(ConnectRefused::Used))
    ));
    let pending = store.connect_request("h1").await.unwrap().unwrap();
    assert_eq!(pending.used_at, Some(Instant(20)));
}

#[tokio::test]
async fn an_expired_flow_or_link_is_refused_and_changes_nothing() {
    let (store, _) = store();
    store
        .record_connect_request("h1", &request(Instant(100_000)))
        .await
        .unwrap();
    assert!(matches!(
        store
            .start_connect_flow("h1", flow("b1", Instant(60_000)), Instant(100_000))
            .await,
        Err(ConnectionError::Refused(ConnectRefused::Expired))
    ));
    store
        .start_connect_flow("h1", flow("b1", Instant(60_000)), Instant(10))
        .await
        .unwrap();
    assert!(matches!(
        store.claim_connect("h1", "b1", Instant(60_000)).await,
        Err(ConnectionError::Refused(ConnectRefused::Expired))
    ));
    assert_eq!(
        store.connect_request("h1").await.unwrap().unwrap().used_at,
        None
    );
    assert!(matches!(
        store
            .start_connect_flow("nope", flow("b1", Instant(60_000)), Instant(10))
            .await,
        Err(ConnectionError::Refused(ConnectRefused::Unknown))
    ));
}

#[tokio::test]
async fn registered_clients_keep_their_secret_sealed_one_per_redirect_url() {
    let (store, table) = store();
    const URL: &str = "https://b.example/oauth/callback";
    assert!(store.oauth_client("gh", URL).await.unwrap().is_none());
    let client = OAuthClient {
        client_id: "cid".into(),
        client_secret: Some(SecretString::from("CLIENT-SECRET")),
        redirect_uri: URL.into(),
        authorization_server: "https://as.example".into(),
        registered_at: Instant(5),
    };
    assert!(store.put_oauth_client("gh", &client).await.unwrap());
    let raw = table
        .get(&Key::new("OAUTHCLIENT#gh", format!("CLIENT#{URL}")))
        .await
        .unwrap()
        .unwrap();
    assert!(!raw.data.contains("CLIENT-SECRET"));
    assert!(!format!("{client:?}").contains("CLIENT-SECRET"));
    let got = store.oauth_client("gh", URL).await.unwrap().unwrap();
    assert_eq!(got.client_id, "cid");
    assert_eq!(got.client_secret.unwrap().expose_secret(), "CLIENT-SECRET");
    assert_eq!(got.redirect_uri, client.redirect_uri);

    // A registration for another URL is kept beside it, never over it;
    // a second one for the same URL does not replace the first.
    let other = OAuthClient {
        client_id: "evil".into(),
        redirect_uri: "https://evil.example/oauth/callback".into(),
        ..client.clone()
    };
    assert!(store.put_oauth_client("gh", &other).await.unwrap());
    let again = OAuthClient {
        client_id: "late".into(),
        ..client.clone()
    };
    assert!(!store.put_oauth_client("gh", &again).await.unwrap());
    let got = store.oauth_client("gh", URL).await.unwrap().unwrap();
    assert_eq!(got.client_id, "cid");

    store.delete_oauth_client("gh", URL).await.unwrap();
    assert!(store.oauth_client("gh", URL).await.unwrap().is_none());
    let kept = store.oauth_client("gh", &other.redirect_uri).await.unwrap();
    assert_eq!(kept.unwrap().client_id, "evil");
}

#[tokio::test]
async fn a_browser_check_comes_before_the_flow_and_a_released_claim_is_usable_again() {
    let (store, _) = store();
    let req = request(Instant(100_000));
    store.record_connect_request("h1", &req).await.unwrap();
    let check = BrowserCheck {
        browser: "b1".into(),
        challenge: "nonce-1".into(),
        expires_at: Instant(60_000),
    };
    assert_eq!(
        store
            .begin_browser_check("h1", check.clone(), Instant(10))
            .await
            .unwrap(),
        req
    );
    let pending = store.connect_request("h1").await.unwrap().unwrap();
    assert_eq!(pending.check, Some(check.clone()));
    assert_eq!(pending.browser, None, "no flow before the check is passed");
    assert!(matches!(
        store
            .begin_browser_check("h1", check.clone(), Instant(100_000))
            .await,
        Err(ConnectionError::Refused(ConnectRefused::Expired))
    ));
    assert!(matches!(
        store
            .begin_browser_check("nope", check.clone(), Instant(10))
            .await,
        Err(ConnectionError::Refused(ConnectRefused::Unknown))
    ));
    // Passing it starts the flow and consumes it.
    store
        .start_connect_flow("h1", flow("b1", Instant(60_000)), Instant(20))
        .await
        .unwrap();
    let pending = store.connect_request("h1").await.unwrap().unwrap();
    assert_eq!(
        (pending.check, pending.browser.as_deref()),
        (None, Some("b1"))
    );

    // Claimed, then released (the exchange failed): usable again, from
    // the start (no flow to claim), until it expires.
    store.claim_connect("h1", "b1", Instant(30)).await.unwrap();
    store.release_connect("h1").await.unwrap();
    let pending = store.connect_request("h1").await.unwrap().unwrap();
    assert_eq!((pending.used_at, pending.browser), (None, None));
    assert!(matches!(
        store.claim_connect("h1", "b1", Instant(40)).await,
        Err(ConnectionError::Refused(ConnectRefused::Foreign))
    ));
    store
        .start_connect_flow("h1", flow("b2", Instant(60_000)), Instant(50))
        .await
        .unwrap();
    store.claim_connect("h1", "b2", Instant(60)).await.unwrap();
    // Releasing what is not claimed, or unknown, changes nothing.
    store.release_connect("nope").await.unwrap();
    assert!(matches!(
        store.begin_browser_check("h1", check, Instant(70)).await,
        Err(ConnectionError::Refused(ConnectRefused::Used))
    ));
}
