//! `load_sdk_config` honours the standard `AWS_ENDPOINT_URL` override (and S3
//! then uses path-style addressing). It sets process environment variables;
//! the other tests of this binary build their SDK configuration explicitly
//! (`MotoServer::sdk_config`), which takes precedence, so they are not
//! affected.

use baton_aws::testing::MotoServer;
use baton_core::BlobStore;

#[tokio::test]
async fn aws_endpoint_url_points_every_client_at_moto() {
    let moto = MotoServer::start().expect("moto must be installed");
    // The only test in this binary: no other thread reads the environment.
    for (k, v) in [
        ("AWS_ENDPOINT_URL", moto.endpoint()),
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ] {
        std::env::set_var(k, v);
    }
    std::env::remove_var("AWS_PROFILE");
    let cfg = baton_aws::load_sdk_config().await;
    assert_eq!(cfg.endpoint_url(), Some(moto.endpoint().as_str()));

    // Real calls reach moto: bootstrap every resource, then use S3, which
    // only works here with path-style addressing (no `bucket.127.0.0.1`).
    let names = baton_aws::ResourceNames::for_stack("env-test");
    let env = baton_aws::bootstrap(&cfg, &names, 3, 30).await.unwrap();
    assert!(
        env.queue_url.starts_with(&moto.endpoint()),
        "{}",
        env.queue_url
    );
    let blobs = baton_aws::S3Blobs::new(baton_aws::s3_client(&cfg), &env.trace_bucket, None);
    blobs.put("k", b"v".to_vec()).await.unwrap();
    assert_eq!(blobs.get("k").await.unwrap(), Some(b"v".to_vec()));
}
