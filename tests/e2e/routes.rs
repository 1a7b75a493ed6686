//! Routes pick the agent, end to end: with `[[routes]]` in the agents
//! file, a Slack mention in a routed channel starts a task of that
//! channel's agent (whose instructions the model then gets), a mention
//! elsewhere one of `default`, a direct message one of the `dm` route's
//! agent (the real `baton dev`, the fake Slack, the mock LLM); a route to
//! an agent the file does not define stops the start, naming the entry.

use crate::common::{Backend, Options, TestApp};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
const TEAM: &str = "T0ROUTES";

const AGENTS: &str = r#"
[agents.researcher]
system_prompt = "You are the research agent (marker ROUTED-RESEARCHER)."

[agents.assistant]
system_prompt = "You are the personal assistant (marker ROUTED-ASSISTANT)."

[[routes]]
channel = "C0ROUTED"
agent = "researcher"

[[routes]]
team = "T0ROUTES"
channel = "dm"
agent = "assistant"
"#;

/// A Slack event callback for a user message `event`.
fn callback(event_id: &str, event: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "event_callback",
        "team_id": TEAM,
        "api_app_id": "A1",
        "event_id": event_id,
        "event_time": 1_700_000_000,
        "event": event
    }))
    .unwrap()
}

fn mention(event_id: &str, channel: &str, ts: &str, text: &str) -> Vec<u8> {
    callback(
        event_id,
        json!({"type": "app_mention", "user": "U1", "text": format!("<@UBOT> {text}"),
               "ts": ts, "channel": channel, "event_ts": ts}),
    )
}

fn direct_message(event_id: &str, ts: &str, text: &str) -> Vec<u8> {
    callback(
        event_id,
        json!({"type": "message", "user": "U1", "text": text, "ts": ts,
               "channel": "D0DIRECT", "channel_type": "im", "event_ts": ts}),
    )
}

/// Sends the event, waits for the task it starts to finish; the task's
/// agent as stored, and the system prompt the model was given for `text`.
async fn served_by(app: &TestApp, body: &[u8], thread: &str, text: &str) -> (String, String) {
    let r = app
        .slack_post("/slack/events", body, "application/json", &[])
        .await;
    assert_eq!(r.status(), 200);
    let store = app.store().await;
    let started = std::time::Instant::now();
    let id = loop {
        let t = store.thread(thread).await.unwrap();
        if let Some(id) = t.and_then(|t| t.active_task) {
            break id;
        }
        assert!(
            started.elapsed() < LONG,
            "no task on {thread}; log:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let done = app.wait_done(id.as_str(), LONG).await;
    assert_eq!(done["status"], "succeeded", "{done}\nlog:\n{}", app.log());
    let task = store.get(&id).await.unwrap().expect("the task");
    let prompt = app
        .llm
        .received()
        .into_iter()
        .rev()
        .find(|r| format!("{:?}", r.messages.last()).contains(text))
        .map(|r| r.system)
        .unwrap_or_else(|| panic!("no model request for `{text}`"));
    (task.agent, prompt)
}

async fn a_route_sends_a_channel_to_its_agent(backend: Backend) {
    let app = TestApp::spawn(Options {
        backend,
        extra_env: vec![("BATON_AGENTS_TOML".into(), AGENTS.into())],
        ..Options::default()
    })
    .await;

    let asked = "which-papers-cite-this";
    let (agent, prompt) = served_by(
        &app,
        &mention("Ev1", "C0ROUTED", "100.1", asked),
        &format!("slack:{TEAM}:C0ROUTED:100.1"),
        asked,
    )
    .await;
    assert_eq!(agent, "researcher");
    assert!(prompt.contains("ROUTED-RESEARCHER"), "{prompt}");

    let asked = "what-time-is-it";
    let (agent, prompt) = served_by(
        &app,
        &mention("Ev2", "C0ELSEWHERE", "200.1", asked),
        &format!("slack:{TEAM}:C0ELSEWHERE:200.1"),
        asked,
    )
    .await;
    assert_eq!(agent, "default");
    assert!(!prompt.contains("marker ROUTED-"), "{prompt}");

    let asked = "remind-me-of-my-day";
    let (agent, prompt) = served_by(
        &app,
        &direct_message("Ev3", "300.1", asked),
        &format!("slack:{TEAM}:D0DIRECT"),
        asked,
    )
    .await;
    assert_eq!(agent, "assistant");
    assert!(prompt.contains("ROUTED-ASSISTANT"), "{prompt}");

    // Every answer went back to the conversation it came from.
    let posts = app.slack.wait_for_posts(3, LONG).await;
    let mut channels: Vec<&str> = posts.iter().map(|p| p.channel.as_str()).collect();
    channels.sort_unstable();
    channels.dedup();
    assert_eq!(
        channels,
        ["C0ELSEWHERE", "C0ROUTED", "D0DIRECT"],
        "{posts:?}"
    );
}

#[test]
fn a_route_to_an_unknown_agent_stops_start_up_naming_it() {
    let agents = AGENTS.replace("agent = \"researcher\"", "agent = \"writer\"");
    let stderr = crate::common::refused_start(&agents, &[]);
    assert!(
        stderr.contains(
            "BATON_AGENTS_TOML: routes[0].agent: unknown agent `writer`; \
             agents: assistant, default, researcher"
        ),
        "{stderr}"
    );
}

mod embedded {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_route_sends_a_channel_to_its_agent() {
        super::a_route_sends_a_channel_to_its_agent(Backend::Embedded).await;
    }
}

mod aws {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_route_sends_a_channel_to_its_agent() {
        super::a_route_sends_a_channel_to_its_agent(Backend::Aws).await;
    }
}
