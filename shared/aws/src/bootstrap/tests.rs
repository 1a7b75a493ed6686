use super::*;
use crate::testing::MotoServer;

#[test]
fn default_names_derive_from_the_stack() {
    let n = ResourceNames::for_stack("baton-dev");
    assert_eq!(n.table, "baton-dev");
    assert_eq!(n.queue, "baton-dev-work");
    assert_eq!(n.dlq, "baton-dev-dlq");
    assert_eq!(n.bucket, "baton-dev-traces");
    assert_eq!(n.schedule_group, "baton-dev");
    n.validate().unwrap();
}

#[test]
fn bad_names_are_refused() {
    let bad = |f: fn(&mut ResourceNames)| {
        let mut n = ResourceNames::for_stack("ok-stack");
        f(&mut n);
        n.validate().unwrap_err()
    };
    assert!(matches!(
        bad(|n| n.bucket = "Upper".into()),
        BootstrapError::InvalidName {
            resource: "bucket",
            ..
        }
    ));
    assert!(matches!(
        bad(|n| n.bucket = "-lead".into()),
        BootstrapError::InvalidName {
            resource: "bucket",
            ..
        }
    ));
    assert!(matches!(
        bad(|n| n.queue = "a b".into()),
        BootstrapError::InvalidName {
            resource: "queue",
            ..
        }
    ));
    assert!(matches!(
        bad(|n| n.dlq = "x".repeat(81)),
        BootstrapError::InvalidName {
            resource: "dlq",
            ..
        }
    ));
    assert!(matches!(
        bad(|n| n.table = "ab".into()),
        BootstrapError::InvalidName {
            resource: "table",
            ..
        }
    ));
    let e = ResourceNames::for_stack("Baton Dev")
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("' '"), "{e}");
}

fn sample_env() -> Environment {
    Environment {
        table: "t".into(),
        queue_url: "http://127.0.0.1:5000/123456789012/q-work".into(),
        queue_arn: "arn:aws:sqs:us-east-1:123456789012:q-work".into(),
        dlq_url: "http://x/dlq".into(),
        trace_bucket: "b".into(),
        schedule_group: "it's".into(),
        connections_key: "alias/k".into(),
    }
}

#[test]
fn environment_renders_exports_and_reads_back() {
    let env = sample_env();
    let text = env.exports();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[0], "export BATON_TABLE=t");
    assert_eq!(
        lines[1],
        "export BATON_QUEUE_URL=http://127.0.0.1:5000/123456789012/q-work"
    );
    assert_eq!(
        lines[2],
        "export BATON_QUEUE_ARN=arn:aws:sqs:us-east-1:123456789012:q-work"
    );
    assert_eq!(lines[5], r"export BATON_SCHEDULE_GROUP='it'\''s'");
    assert_eq!(env.to_string(), text);

    let map: HashMap<&str, &str> = env.vars().into_iter().collect();
    let back = Environment::from_lookup(|k| map.get(k).map(|v| v.to_string())).unwrap();
    assert_eq!(back, env);
    let missing = Environment::from_lookup(|k| (k != "BATON_DLQ_URL").then(|| "v".into()));
    assert_eq!(missing, Err(MissingVar("BATON_DLQ_URL")));
}

#[test]
fn redrive_policies_compare_by_content() {
    let rp = QueueAttributeName::RedrivePolicy;
    let want = r#"{"deadLetterTargetArn":"arn:x","maxReceiveCount":3}"#;
    let same = r#"{"maxReceiveCount":"3", "deadLetterTargetArn":"arn:x"}"#.to_owned();
    let other = r#"{"maxReceiveCount":"4","deadLetterTargetArn":"arn:x"}"#.to_owned();
    assert!(same_attribute(&rp, Some(&same), want));
    assert!(!same_attribute(&rp, Some(&other), want));
    assert!(!same_attribute(&rp, None, want));
    let vt = QueueAttributeName::VisibilityTimeout;
    assert!(same_attribute(&vt, Some(&"30".to_owned()), "30"));
    assert!(!same_attribute(&vt, Some(&"31".to_owned()), "30"));
}

/// Everything bootstrap created, as it describes itself, minus nothing: a
/// second run must leave it identical.
async fn snapshot(cfg: &SdkConfig, names: &ResourceNames, env: &Environment) -> String {
    let ddb = crate::dynamodb_client(cfg);
    let table = ddb
        .describe_table()
        .table_name(&names.table)
        .send()
        .await
        .unwrap();
    let ttl = ddb
        .describe_time_to_live()
        .table_name(&names.table)
        .send()
        .await
        .unwrap();
    let sqs = crate::sqs_client(cfg);
    let mut queues = Vec::new();
    for url in [&env.queue_url, &env.dlq_url] {
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap_or_default();
        let mut attrs: Vec<_> = attrs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        attrs.sort();
        queues.push(attrs);
    }
    let sched = crate::scheduler_client(cfg)
        .get_schedule_group()
        .name(&names.schedule_group)
        .send()
        .await
        .unwrap();
    // Not the whole output: it carries a request id.
    let sched = (
        sched.arn,
        sched.name,
        sched.state,
        sched.creation_date,
        sched.last_modification_date,
    );
    let buckets = crate::s3_client(cfg).list_buckets().send().await.unwrap();
    format!(
        "{:?}\n{:?}\n{queues:?}\n{:?}\n{:?}",
        table.table, ttl.time_to_live_description, sched, buckets.buckets
    )
}

#[tokio::test]
async fn bootstrap_creates_everything_and_is_idempotent() {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let names = ResourceNames::for_stack("baton-dev");
    let env = bootstrap(&cfg, &names, 4, 45).await.unwrap();
    assert_eq!(env.table, "baton-dev");
    assert_eq!(env.trace_bucket, "baton-dev-traces");
    assert_eq!(env.schedule_group, "baton-dev");
    assert_eq!(env.connections_key, "alias/baton-dev-connections");
    crate::kms_client(&cfg)
        .describe_key()
        .key_id("alias/baton-dev-connections")
        .send()
        .await
        .expect("the connections key exists");
    assert!(
        env.queue_url.ends_with("/baton-dev-work"),
        "{}",
        env.queue_url
    );
    assert!(env.dlq_url.ends_with("/baton-dev-dlq"), "{}", env.dlq_url);
    assert!(
        env.queue_arn.starts_with("arn:aws:sqs:us-east-1:")
            && env.queue_arn.ends_with(":baton-dev-work")
    );

    // The table as specified.
    let ddb = crate::dynamodb_client(&cfg);
    let desc = ddb
        .describe_table()
        .table_name("baton-dev")
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    assert_eq!(
        desc.billing_mode_summary().and_then(|b| b.billing_mode()),
        Some(&BillingMode::PayPerRequest)
    );
    let gsi = desc
        .global_secondary_indexes()
        .iter()
        .find(|g| g.index_name() == Some(GSI_KEYS))
        .unwrap();
    let gsi_keys: Vec<_> = gsi
        .key_schema()
        .iter()
        .map(|k| (k.attribute_name(), k.key_type().clone()))
        .collect();
    assert_eq!(
        gsi_keys,
        [(ATTR_GSI1PK, KeyType::Hash), (ATTR_PK, KeyType::Range)]
    );
    assert_eq!(
        gsi.projection().and_then(|p| p.projection_type()),
        Some(&ProjectionType::KeysOnly)
    );
    let listing = desc
        .global_secondary_indexes()
        .iter()
        .find(|g| g.index_name() == Some(crate::table::GSI_LISTING))
        .expect("the listing index");
    let listing_keys: Vec<_> = listing
        .key_schema()
        .iter()
        .map(|k| (k.attribute_name(), k.key_type().clone()))
        .collect();
    assert_eq!(
        listing_keys,
        [
            (crate::table::ATTR_GSI3PK, KeyType::Hash),
            (crate::table::ATTR_GSI3SK, KeyType::Range)
        ]
    );
    assert_eq!(
        listing.projection().and_then(|p| p.projection_type()),
        Some(&ProjectionType::KeysOnly)
    );
    let ttl = ddb
        .describe_time_to_live()
        .table_name("baton-dev")
        .send()
        .await
        .unwrap();
    let ttl = ttl.time_to_live_description().unwrap();
    assert_eq!(ttl.attribute_name(), Some(ATTR_TTL));
    assert_eq!(ttl.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));

    // The work queue: visibility timeout and redrive to the DLQ.
    let sqs = crate::sqs_client(&cfg);
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&env.queue_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(attrs[&QueueAttributeName::VisibilityTimeout], "45");
    let policy: serde_json::Value =
        serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).unwrap();
    assert_eq!(policy["maxReceiveCount"].to_string().trim_matches('"'), "4");
    assert!(policy["deadLetterTargetArn"]
        .as_str()
        .unwrap()
        .ends_with(":baton-dev-dlq"));

    // Second run: same environment, nothing changed.
    let before = snapshot(&cfg, &names, &env).await;
    let again = bootstrap(&cfg, &names, 4, 45).await.unwrap();
    assert_eq!(again, env);
    assert_eq!(snapshot(&cfg, &names, &env).await, before);

    // Different queue settings converge the existing queue.
    bootstrap(&cfg, &names, 6, 60).await.unwrap();
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&env.queue_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(attrs[&QueueAttributeName::VisibilityTimeout], "60");
    assert!(attrs[&QueueAttributeName::RedrivePolicy].contains('6'));
}

#[tokio::test]
async fn an_existing_table_with_the_wrong_shape_is_reported() {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let ddb = crate::dynamodb_client(&cfg);
    ddb.create_table()
        .table_name("wrong")
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string_attr("id").unwrap())
        .key_schema(key_element("id", KeyType::Hash).unwrap())
        .send()
        .await
        .unwrap();
    let mut names = ResourceNames::for_stack("wrong");
    names.bucket = "wrong-bucket".into();
    let err = bootstrap(&cfg, &names, 3, 30).await.unwrap_err();
    assert!(
        matches!(&err, BootstrapError::Mismatch { resource, .. } if resource == "table wrong"),
        "{err}"
    );
}

#[tokio::test]
async fn a_table_of_an_earlier_release_gets_the_keys_only_and_listing_indexes() {
    let moto = MotoServer::start().expect("moto must be installed");
    let cfg = moto.sdk_config().await;
    let ddb = crate::dynamodb_client(&cfg);
    // The table as releases before the keys-only index made it.
    let legacy = GlobalSecondaryIndex::builder()
        .index_name(crate::table::GSI1_LEGACY)
        .key_schema(key_element(ATTR_GSI1PK, KeyType::Hash).unwrap())
        .key_schema(key_element(ATTR_PK, KeyType::Range).unwrap())
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .unwrap();
    ddb.create_table()
        .table_name("old")
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string_attr(ATTR_PK).unwrap())
        .attribute_definitions(string_attr(ATTR_SK).unwrap())
        .attribute_definitions(string_attr(ATTR_GSI1PK).unwrap())
        .key_schema(key_element(ATTR_PK, KeyType::Hash).unwrap())
        .key_schema(key_element(ATTR_SK, KeyType::Range).unwrap())
        .global_secondary_indexes(legacy)
        .send()
        .await
        .unwrap();
    // A task an earlier release left running, in the unsharded index.
    let table = crate::DynamoTable::new(ddb.clone(), "old");
    use baton_core::{Condition, Item, Key, Table, Write};
    let item = Item {
        key: Key::new("TASK#old", "TASK"),
        version: 3,
        data: "{}".into(),
        index: Some("active".into()),
        expires_at: None,
        listing: None,
    };
    table
        .transact(vec![Write::Put {
            item: item.clone(),
            condition: Condition::NotExists,
        }])
        .await
        .unwrap();

    ensure_table(&ddb, "old").await.unwrap();
    let desc = ddb
        .describe_table()
        .table_name("old")
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    let mut names: Vec<_> = desc
        .global_secondary_indexes()
        .iter()
        .filter_map(|g| g.index_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            crate::table::GSI1_LEGACY,
            GSI_KEYS,
            crate::table::GSI_LISTING
        ]
    );
    // The running task is found through the new index.
    assert_eq!(table.query_index("active", 10).await.unwrap(), vec![item]);
    // And a second run changes nothing.
    ensure_table(&ddb, "old").await.unwrap();
}
