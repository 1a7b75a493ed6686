//! Files come in over `POST /tasks`: a text file and an image reach the
//! model in each provider's wire format, an oversized file is refused with
//! a message (the task runs on the text), and the events name the files
//! without their content.

use crate::common::{Options, TestApp, Wire, TOKEN};
use baton_core::{AttachmentContent, Message};
use serde_json::{json, Value};
use std::time::Duration;

/// A 1×1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[tokio::test(flavor = "multi_thread")]
async fn files_reach_the_model_openai() {
    files_reach_the_model(Wire::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn files_reach_the_model_anthropic() {
    files_reach_the_model(Wire::Anthropic).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn files_reach_the_model_bedrock() {
    files_reach_the_model(Wire::Bedrock).await;
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn files_reach_the_model(wire: Wire) {
    let app = TestApp::spawn(Options {
        wire,
        extra_env: vec![("BATON_MAX_FILE_BYTES".into(), "2000".into())],
        ..Options::default()
    })
    .await;
    let body = json!({
        "input": "What do these files say?",
        "attachments": [
            {"name": "notes.txt", "media_type": "text/plain",
             "data_base64": b64(b"the widget count is 42")},
            {"name": "dot.png", "media_type": "image/png", "data_base64": PNG_BASE64},
            {"name": "big.log", "data_base64": b64(&[b'x'; 3000])},
            {"name": "broken.txt", "data_base64": "not base64!"},
            {"name": "archive.zip", "media_type": "application/zip", "data_base64": b64(b"PK")},
        ],
    });
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let answer: Value = r.json().await.unwrap();
    let refused = answer["attachments_refused"].as_array().cloned().unwrap();
    let reasons: Vec<(String, String)> = refused
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{answer}");
    assert_eq!(reasons[0].0, "big.log");
    assert!(
        reasons[0].1.contains("3 KB, larger than the 2 KB limit"),
        "{reasons:?}"
    );
    assert_eq!(reasons[1].0, "broken.txt");
    assert!(reasons[1].1.contains("not valid base64"), "{reasons:?}");
    assert_eq!(reasons[2].0, "archive.zip");
    assert!(
        reasons[2].1.contains("application/zip are not supported"),
        "{reasons:?}"
    );

    // The task runs on all the same.
    let id = answer["task_id"].as_str().unwrap().to_owned();
    let done = app.wait_done(&id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());

    // What the model was sent, read back from the provider's wire format.
    let first = app.llm.received().into_iter().next().expect("an LLM call");
    let text = format!("{:?}", first.messages);
    assert!(
        text.contains("What do these files say?"),
        "{wire:?}: {text}"
    );
    assert!(
        text.contains("[file notes.txt]\\nthe widget count is 42"),
        "{wire:?}: {text}"
    );
    assert!(text.contains("[file dot.png]"), "{wire:?}: {text}");
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
        "{wire:?}: {text}"
    );
    assert!(
        text.contains("[file big.log (text/plain) is attached, but cannot be read: it is 3 KB, larger than the 2 KB limit for files]"),
        "{wire:?}: {text}"
    );
    assert!(
        text.contains("[file broken.txt (text/plain) is attached, but cannot be read"),
        "{wire:?}: {text}"
    );

    // The events name the files, without their content.
    let events = app.events(&id).await;
    let files: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "attachment")
        .collect();
    assert_eq!(files.len(), 5, "{events:?}");
    assert_eq!(files[0]["name"], "notes.txt");
    assert_eq!(files[0]["bytes"], 22);
    assert!(files
        .iter()
        .all(|f| f.get("data_base64").is_none() && f.get("text").is_none()));
    assert_eq!(files[2]["note"], reasons[0].1.as_str());
}

/// A file larger than the raised body limit of `POST /tasks` can carry is
/// refused whole; other routes keep the small limit.
#[tokio::test(flavor = "multi_thread")]
async fn the_task_route_takes_files_other_routes_stay_small() {
    let app = TestApp::spawn(Options::default()).await;
    // 1 MiB of image: over 256 KiB, well under 15 MiB.
    let body = json!({
        "input": "look",
        "attachments": [{"name": "big.png", "media_type": "image/png",
                         "data_base64": b64(&vec![7u8; 1024 * 1024])}],
    });
    let r = app
        .http
        .post(format!("{}/tasks", app.url))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let answer: Value = r.json().await.unwrap();
    assert_eq!(status, 202, "{answer}");
    assert!(answer.get("attachments_refused").is_none(), "{answer}");
    let id = answer["task_id"].as_str().unwrap().to_owned();
    let done = app.wait_done(&id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", app.log());
    let first = app.llm.received().into_iter().next().unwrap();
    assert!(first.messages.iter().any(|m| matches!(
        m,
        Message::Attachment { content: AttachmentContent::Image { data_base64 }, .. }
            if data_base64.len() > 1_000_000
    )));

    let r = app
        .http
        .post(format!("{}/schedules", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"input": "x".repeat(300 * 1024)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
}
