use super::*;
use crate::testing::MotoServer;

async fn setup() -> (MotoServer, Client) {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let client = crate::s3_client(&cfg);
    client
        .create_bucket()
        .bucket("blobs")
        .send()
        .await
        .expect("create bucket");
    (moto, client)
}

#[tokio::test]
async fn put_get_list_and_missing() {
    let (_moto, client) = setup().await;
    let blobs = S3Blobs::new(client.clone(), "blobs", None);
    assert_eq!(blobs.get("nothing/here").await.unwrap(), None);
    blobs
        .put("tasks/b/trace.json", b"{}".to_vec())
        .await
        .unwrap();
    blobs.put("tasks/a/1", vec![0, 255, 1]).await.unwrap();
    blobs.put("other", Vec::new()).await.unwrap();
    assert_eq!(blobs.get("tasks/a/1").await.unwrap(), Some(vec![0, 255, 1]));
    assert_eq!(blobs.get("other").await.unwrap(), Some(Vec::new()));
    blobs.put("tasks/a/1", b"new".to_vec()).await.unwrap();
    assert_eq!(blobs.get("tasks/a/1").await.unwrap(), Some(b"new".to_vec()));
    assert_eq!(
        blobs.list("tasks/").await.unwrap(),
        ["tasks/a/1", "tasks/b/trace.json"]
    );
    assert_eq!(blobs.list("").await.unwrap().len(), 3);
    assert!(blobs.list("zzz").await.unwrap().is_empty());
}

#[tokio::test]
async fn prefix_isolates_and_is_hidden() {
    let (_moto, client) = setup().await;
    let dev = S3Blobs::new(client.clone(), "blobs", Some("/dev/"));
    let prod = S3Blobs::new(client.clone(), "blobs", Some("prod"));
    dev.put("k", b"dev".to_vec()).await.unwrap();
    prod.put("k", b"prod".to_vec()).await.unwrap();
    assert_eq!(dev.get("k").await.unwrap(), Some(b"dev".to_vec()));
    assert_eq!(prod.get("k").await.unwrap(), Some(b"prod".to_vec()));
    assert_eq!(dev.list("").await.unwrap(), ["k"]);
    let root = S3Blobs::new(client, "blobs", None);
    assert_eq!(root.list("").await.unwrap(), ["dev/k", "prod/k"]);
}

#[tokio::test]
async fn list_follows_continuation_tokens() {
    let (_moto, client) = setup().await;
    let blobs = S3Blobs::new(client, "blobs", Some("p")).with_list_page_size(2);
    let mut want: Vec<String> = (0..7).map(|i| format!("e/{i:02}")).collect();
    for k in want.iter().rev() {
        blobs.put(k, k.as_bytes().to_vec()).await.unwrap();
    }
    want.sort();
    assert_eq!(blobs.list("e/").await.unwrap(), want);
}

#[tokio::test]
async fn bad_keys_and_missing_bucket() {
    let (_moto, client) = setup().await;
    let blobs = S3Blobs::new(client.clone(), "blobs", None);
    assert!(matches!(
        blobs.put("", vec![]).await,
        Err(BlobError::InvalidKey(_))
    ));
    assert!(matches!(
        blobs.get(&"k".repeat(1025)).await,
        Err(BlobError::InvalidKey(_))
    ));
    let missing = S3Blobs::new(client, "no-such-bucket", None);
    assert!(matches!(
        missing.put("k", vec![1]).await,
        Err(BlobError::Unavailable(_))
    ));
}
