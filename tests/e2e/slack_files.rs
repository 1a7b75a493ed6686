//! Files shared in Slack reach the model, end to end (the real `baton
//! dev`, the mock LLM, the fake Slack serving the files): a text file and
//! an image are downloaded once with the bot token and given to the model;
//! an oversized file is not downloaded and is named with why; the task
//! runs on the text.

use crate::common::{Backend, Options, TestApp};
use baton_core::{AttachmentContent, Message};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// A 1×1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn png() -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(PNG_BASE64)
        .unwrap()
}

fn file(id: &str, name: &str, mimetype: &str, size: usize, url: &str) -> Value {
    json!({"id": id, "name": name, "mimetype": mimetype, "size": size,
           "url_private_download": url, "mode": "hosted"})
}

async fn files_reach_the_model(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_MAX_FILE_BYTES".into(), "1000".into())],
        ..Options::default()
    })
    .await;
    let notes = app
        .slack
        .add_file("notes.txt", b"the widget count is 42".to_vec());
    let dot = app.slack.add_file("dot.png", png());
    let big = app.slack.add_file("big.log", vec![b'x'; 3000]);
    let ts = "1700000001.000100";
    let body = serde_json::to_vec(&json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
        "event_id": "EvFiles1", "event_time": 1_700_000_000,
        "event": {
            "type": "message", "subtype": "file_share", "user": "U1",
            "text": "What do these files say?", "ts": ts, "channel": "D1",
            "channel_type": "im", "event_ts": ts,
            "files": [
                file("F1", "notes.txt", "text/plain", 22, &notes),
                file("F2", "dot.png", "image/png", png().len(), &dot),
                file("F3", "big.log", "text/plain", 3000, &big),
            ],
        }
    }))
    .unwrap();
    let r = app
        .slack_post("/slack/events", &body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(v.get("ignored").is_none(), "a file_share is acted on: {v}");

    let posts = app.slack.wait_for_posts(1, LONG).await;
    assert_eq!(posts.len(), 1, "{}", app.log());

    let first = app.llm.received().into_iter().next().expect("an LLM call");
    let text = format!("{:?}", first.messages);
    assert!(text.contains("What do these files say?"), "{text}");
    assert!(
        text.contains("[file notes.txt]\\nthe widget count is 42"),
        "{text}"
    );
    let image = first.messages.iter().find_map(|m| match m {
        Message::Attachment {
            media_type,
            content: AttachmentContent::Image { data_base64 },
            ..
        } => Some((media_type.clone(), data_base64.clone())),
        _ => None,
    });
    assert_eq!(
        image,
        Some(("image/png".to_owned(), PNG_BASE64.to_owned())),
        "{text}"
    );
    assert!(
        text.contains("[file big.log (text/plain) is attached, but cannot be read: it is 3 KB, larger than the 1 KB limit for files]"),
        "{text}"
    );

    // Each file fetched once (the oversized one never), and the task
    // keeps no list of files still to fetch.
    assert_eq!(app.slack.downloads("notes.txt"), 1);
    assert_eq!(app.slack.downloads("dot.png"), 1);
    assert_eq!(app.slack.downloads("big.log"), 0);
    let store = app.store().await;
    let thread = store.thread("slack:T1:D1").await.unwrap().expect("thread");
    let id = thread.active_task.expect("the task");
    let task = store.get(&id).await.unwrap().expect("task");
    assert!(
        task.conversation.pending_files.is_empty(),
        "{:?}",
        task.conversation.pending_files
    );
    let started = std::time::Instant::now();
    loop {
        let task = store.get(&id).await.unwrap().expect("task");
        if task.status().is_terminal() {
            assert_eq!(task.status(), baton_core::TaskStatus::Succeeded);
            break;
        }
        assert!(started.elapsed() < LONG, "task still {:?}", task.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn files_reach_the_model() {
        super::files_reach_the_model(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn files_reach_the_model() {
        super::files_reach_the_model(Backend::Aws).await;
    }
}
