//! Progress in Slack (`assistant.threads.setStatus`) against the fake Slack
//! Web API: updates reach Slack, the per-thread rate limit holds (time is
//! driven by an injected clock), and failures never reach the task.

use baton_agent::progress::{running_tools, THINKING, WAITING_FOR_APPROVAL};
use baton_core::{now_ms, Limits, Origin, Task, TaskId};
use baton_core::{NoReplies, ReplySink};
use baton_slack::replies::Clock;
use baton_slack::testing::FakeSlack;
use baton_slack::web::{BotToken, SlackClient};
use baton_slack::SlackReplies;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SET_STATUS: &str = "assistant.threads.setStatus";

/// A clock that moves only when told to.
struct Manual {
    base: Instant,
    ms: Arc<AtomicU64>,
}

impl Manual {
    fn new() -> Self {
        Manual {
            base: Instant::now(),
            ms: Arc::new(AtomicU64::new(0)),
        }
    }

    fn clock(&self) -> Clock {
        let (base, ms) = (self.base, self.ms.clone());
        Arc::new(move || base + Duration::from_millis(ms.load(Ordering::SeqCst)))
    }

    /// Sets the time to `secs` after the start.
    fn at(&self, secs: u64) {
        self.ms.store(secs * 1000, Ordering::SeqCst);
    }
}

/// A task of an assistant thread (in the app's DMs, `D…`): only those take
/// a status; a channel's thread gets a progress message instead.
fn slack_task(channel: &str, thread_ts: &str) -> Task {
    Task::new(
        TaskId::generate(),
        "default",
        Origin::Slack {
            team_id: "T1".into(),
            channel: channel.into(),
            thread_ts: thread_ts.into(),
            user: "U1".into(),
            channel_type: None,
        },
        None,
        Limits::default(),
        now_ms(),
    )
}

fn replies(fake: &FakeSlack, clock: &Manual) -> SlackReplies {
    SlackReplies::new(fake.client())
        .with_progress_interval(Duration::from_secs(3))
        .with_clock(clock.clock())
}

/// (channel, thread, status) of every accepted setStatus call.
fn statuses(fake: &FakeSlack) -> Vec<(String, String, String)> {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_owned();
    fake.calls(SET_STATUS)
        .iter()
        .map(|v| (s(v, "channel_id"), s(v, "thread_ts"), s(v, "status")))
        .collect()
}

fn st(c: &str, t: &str, s: &str) -> (String, String, String) {
    (c.into(), t.into(), s.into())
}

#[tokio::test]
async fn status_updates_reach_slack_at_most_once_per_interval_per_thread() {
    let fake = FakeSlack::start().await;
    let clock = Manual::new();
    let r = replies(&fake, &clock);
    let a = slack_task("D1", "1700000000.000100");
    let b = slack_task("D2", "1700000000.000200");
    let tools = running_tools(["http_request"]);
    assert_eq!(tools, "is running `http_request`…");

    r.progress(&a, THINKING).await;
    clock.at(1);
    r.progress(&a, &tools).await; // within 3 s of the last: dropped
    r.progress(&b, THINKING).await; // another thread: sent
    clock.at(3);
    r.progress(&a, &tools).await;
    clock.at(10);
    r.progress(&a, &tools).await; // the same text again: skipped
    r.progress(&a, WAITING_FOR_APPROVAL).await;

    assert_eq!(
        statuses(&fake),
        [
            st("D1", "1700000000.000100", "is thinking…"),
            st("D2", "1700000000.000200", "is thinking…"),
            st("D1", "1700000000.000100", "is running `http_request`…"),
            st("D1", "1700000000.000100", "is waiting for approval…"),
        ]
    );
    assert_eq!(
        fake.calls(SET_STATUS)[0],
        json!({
            "channel_id": "D1", "thread_ts": "1700000000.000100", "status": "is thinking…"
        })
    );
}

#[tokio::test]
async fn a_reply_clears_the_status_so_the_same_text_shows_again() {
    let fake = FakeSlack::start().await;
    let clock = Manual::new();
    let r = replies(&fake, &clock);
    let a = slack_task("D1", "1.0");
    r.progress(&a, THINKING).await;
    r.answer(&a, "done", &key()).await.unwrap();
    clock.at(5);
    r.progress(&a, THINKING).await;
    assert_eq!(statuses(&fake).len(), 2);
    assert_eq!(fake.posted().len(), 1);
}

#[tokio::test]
async fn a_thread_that_refuses_status_is_not_tried_again() {
    let fake = FakeSlack::start().await;
    let clock = Manual::new();
    let r = replies(&fake, &clock);
    let (a, b) = (slack_task("D1", "1.0"), slack_task("D1", "2.0"));
    fake.fail_next(SET_STATUS, "not_allowed");
    r.progress(&a, THINKING).await; // refused, swallowed
    clock.at(60);
    r.progress(&a, "is running `x`…").await; // not attempted
    r.progress(&b, THINKING).await; // other threads still get status
    assert_eq!(statuses(&fake), [st("D1", "2.0", "is thinking…")]);
    // The task's own messages are unaffected.
    r.answer(&a, "answer", &key()).await.unwrap();
    assert_eq!(fake.posted().len(), 1);
}

#[tokio::test]
async fn a_missing_scope_turns_progress_off_for_every_thread() {
    let fake = FakeSlack::start().await;
    let clock = Manual::new();
    let r = replies(&fake, &clock);
    fake.fail_next(SET_STATUS, "missing_scope");
    r.progress(&slack_task("D1", "1.0"), THINKING).await;
    clock.at(60);
    r.progress(&slack_task("D2", "2.0"), THINKING).await;
    r.progress(&slack_task("D1", "1.0"), "other").await;
    assert!(statuses(&fake).is_empty());
}

#[tokio::test]
async fn rate_limited_updates_are_dropped_and_retried_after_retry_after() {
    let fake = FakeSlack::start().await;
    let clock = Manual::new();
    let r = replies(&fake, &clock);
    let a = slack_task("D1", "1.0");
    fake.rate_limit_next(SET_STATUS, 20);
    // Not waited for: the client used for status does not retry.
    r.progress(&a, THINKING).await;
    clock.at(5);
    r.progress(&a, THINKING).await; // Slack said 20 s
    clock.at(21);
    r.progress(&a, THINKING).await; // the same text: the first never showed
    assert_eq!(statuses(&fake), [st("D1", "1.0", "is thinking…")]);
}

#[tokio::test]
async fn unreachable_slack_does_not_fail_the_task() {
    // Nothing listens on this port: every call fails to connect.
    let client = SlackClient::new("http://127.0.0.1:9", BotToken::new("xoxb-x")).unwrap();
    let clock = Manual::new();
    let r = SlackReplies::new(client).with_clock(clock.clock());
    let a = slack_task("D1", "1.0");
    r.progress(&a, THINKING).await;
    clock.at(10);
    r.progress(&a, THINKING).await;
    // Answers still report their own failure: they matter.
    assert!(r.answer(&a, "x", &key()).await.is_err());
}

#[tokio::test]
async fn only_slack_threads_get_status() {
    let fake = FakeSlack::start().await;
    let clock = Manual::new();
    let r = replies(&fake, &clock);
    let mut http = slack_task("D1", "1.0");
    http.source.origin = Origin::Http;
    r.progress(&http, THINKING).await;
    // A scheduled post to a channel has no thread.
    r.progress(&slack_task("D1", ""), THINKING).await;
    // Progress can be turned off.
    let off = replies(&fake, &clock).without_progress();
    off.progress(&slack_task("D1", "1.0"), THINKING).await;
    // Sinks without progress accept it and do nothing.
    NoReplies.progress(&slack_task("D1", "1.0"), THINKING).await;
    assert!(statuses(&fake).is_empty());
}

/// A first post (nothing to look for).
fn key() -> baton_core::PostKey {
    baton_core::PostKey {
        key: "t:answer:1".into(),
        maybe_posted: false,
    }
}
