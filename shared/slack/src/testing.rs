//! Test support (feature `testing`): a fake Slack Web API server and helpers
//! to build signed Slack requests.
//!
//! ```no_run
//! # async fn demo() {
//! use baton_slack::testing::FakeSlack;
//! let fake = FakeSlack::start().await;
//! // Point the code under test at fake.base_url() with FakeSlack::TOKEN
//! // (or use fake.client()), run it, then look at what it posted:
//! let posts = fake.wait_for_posts(1, std::time::Duration::from_secs(5)).await;
//! assert_eq!(posts[0].channel, "C1");
//! # }
//! ```

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::oneshot;

mod agent;
mod commands;
mod openid;
mod reactions;
mod thread;
mod uploads;
pub use agent::{StreamPlan, StreamTask};
pub use commands::CommandResponse;
pub use uploads::{SharedFile, UPLOAD_BYTES};

use crate::signature::{sign, SigningSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::web::{BotToken, SlackClient};

/// A message the fake received through `chat.postMessage`.
#[derive(Debug, Clone, PartialEq)]
pub struct PostedMessage {
    /// Channel it was posted to.
    pub channel: String,
    /// Thread parent, when posted as a reply.
    pub thread_ts: Option<String>,
    /// `text` as sent (after later `chat.update`s in [`FakeSlack::message`]).
    pub text: String,
    /// `blocks` as sent.
    pub blocks: Option<Value>,
    /// The ts the fake assigned.
    pub ts: String,
    /// `metadata` as sent (Baton's post keys).
    pub metadata: Option<Value>,
    /// Started with `chat.startStream` and not stopped yet: `text` is what
    /// was streamed so far (here and in [`FakeSlack::posted`]).
    pub streaming: bool,
}

/// An answer queued for the next call of a method.
#[derive(Debug, Clone)]
enum Injected {
    Error(String),
    RateLimited(u64),
    /// Handle the call, then answer only after this long (a slow Slack, or
    /// a caller that dies waiting).
    Hold(Duration),
}

#[derive(Default)]
struct Inner {
    /// Every accepted call, in order: (method, JSON body).
    calls: Vec<(String, Value)>,
    /// Posts as sent.
    posted: Vec<PostedMessage>,
    /// Current state of each message (posts with updates applied).
    messages: Vec<PostedMessage>,
    injected: HashMap<String, VecDeque<Injected>>,
    /// Methods that answer this error to every call (after the injected
    /// answers are used up), until told otherwise.
    refused: HashMap<String, String>,
    /// Display names `users.info` answers, by user id.
    people: HashMap<String, String>,
    /// Members `usergroups.users.list` answers, by user group id.
    usergroups: HashMap<String, Vec<String>>,
    /// Files served at `/files/{name}` ([`FakeSlack::add_file`]).
    files: HashMap<String, Vec<u8>>,
    /// Downloads of each file, by name.
    downloads: HashMap<String, usize>,
    /// The streaming side ([`agent`]): streams, sessions, expiry.
    agent: agent::AgentState,
    /// Answers to slash commands ([`commands`]).
    responses: Vec<CommandResponse>,
    /// External uploads ([`uploads`]).
    uploads: uploads::UploadState,
    /// People's messages in threads, deleted messages ([`thread`]).
    thread: thread::ThreadState,
    /// Reactions on messages ([`reactions`]).
    reactions: reactions::Reactions,
    /// Sign in with Slack's codes ([`openid`]).
    openid: openid::OpenIdState,
}

struct Shared {
    token: String,
    /// The fake's own address, for the upload URLs it hands out.
    base_url: std::sync::OnceLock<String>,
    next_ts: AtomicU64,
    inner: Mutex<Inner>,
}

impl Shared {
    /// A fresh message ts: the current second, as Slack's are (callers
    /// compare them with times), and a counter that keeps them unique.
    pub(crate) fn new_ts(&self) -> String {
        let n = self.next_ts.fetch_add(1, Ordering::SeqCst);
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{secs}.{:06}", n % 1_000_000)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not hide the recorded calls.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A real HTTP server on `127.0.0.1` playing the Slack Web API methods
/// Baton uses (streaming, agent sessions and assistant threads included:
/// [`FakeSlack::set_stream_expiry`], [`FakeSlack::session`]). It checks the bearer token, answers like Slack (including
/// `{"ok": false, "error": "not_authed"}`) and records what it was sent.
/// Stops when dropped.
pub struct FakeSlack {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl FakeSlack {
    /// The bot token [`FakeSlack::start`] accepts.
    pub const TOKEN: &'static str = "xoxb-fake-baton-test-token";

    /// Starts a fake accepting [`FakeSlack::TOKEN`].
    pub async fn start() -> Self {
        Self::start_with_token(Self::TOKEN).await
    }

    /// Starts a fake accepting `token`.
    ///
    /// # Panics
    /// If no loopback port can be bound (test setup only).
    pub async fn start_with_token(token: &str) -> Self {
        let shared = Arc::new(Shared {
            token: token.to_string(),
            base_url: std::sync::OnceLock::new(),
            next_ts: AtomicU64::new(1),
            inner: Mutex::new(Inner::default()),
        });
        let app = Router::new()
            .route("/openid.connect.token", post(openid::token))
            .route("/openid/connect/authorize", get(openid::authorize))
            .route("/openid/sign-in", get(openid::sign_in))
            .route("/{method}", post(handle))
            .route("/files/{name}", get(serve_file))
            .route("/commands/response/{id}", post(commands::receive))
            .route("/upload/{file_id}", post(uploads::receive))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake Slack on 127.0.0.1");
        let addr = listener.local_addr().expect("fake Slack address");
        let _ = shared.base_url.set(format!("http://{addr}"));
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Self {
            addr,
            shared,
            shutdown: Some(tx),
        }
    }

    /// Base URL to use as `SLACK_API_URL` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The token this fake accepts.
    pub fn bot_token(&self) -> BotToken {
        BotToken::new(self.shared.token.clone())
    }

    /// A client for this fake, with rate-limit waits capped at 100 ms.
    ///
    /// # Panics
    /// Never in practice: the base URL and token are valid.
    pub fn client(&self) -> SlackClient {
        SlackClient::new(&self.base_url(), self.bot_token())
            .expect("client for fake Slack")
            .with_retry_policy(3, Duration::from_millis(100))
    }

    /// Messages posted with `chat.postMessage`, as sent, in order.
    pub fn posted(&self) -> Vec<PostedMessage> {
        self.shared.lock().posted.clone()
    }

    /// The current state of message `ts` in `channel` (updates applied).
    pub fn message(&self, channel: &str, ts: &str) -> Option<PostedMessage> {
        self.shared
            .lock()
            .messages
            .iter()
            .find(|m| m.channel == channel && m.ts == ts)
            .cloned()
    }

    /// JSON bodies of the accepted calls of `method` (e.g. `chat.update`).
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// Waits until at least `n` messages were posted or `timeout` passes,
    /// and returns the posts so far (the caller asserts on the count).
    pub async fn wait_for_posts(&self, n: usize, timeout: Duration) -> Vec<PostedMessage> {
        let deadline = Instant::now() + timeout;
        loop {
            let posted = self.posted();
            if posted.len() >= n || Instant::now() >= deadline {
                return posted;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Makes the next call of `method` answer `{"ok": false, "error": error}`.
    /// Serves `bytes` as file `name` to requests with the bot token, like
    /// Slack's file host, and returns its `url_private_download`.
    pub fn add_file(&self, name: &str, bytes: Vec<u8>) -> String {
        self.shared.lock().files.insert(name.to_owned(), bytes);
        format!("{}/files/{name}", self.base_url())
    }

    /// How many times file `name` was downloaded.
    pub fn downloads(&self, name: &str) -> usize {
        self.shared.lock().downloads.get(name).copied().unwrap_or(0)
    }

    /// Makes `users.info` know `user` by `name` (others: `user_not_found`).
    pub fn set_user_name(&self, user: &str, name: &str) {
        self.shared
            .lock()
            .people
            .insert(user.to_owned(), name.to_owned());
    }

    /// Makes `usergroups.users.list` answer `members` for `group` (others:
    /// `no_such_subteam`).
    pub fn set_usergroup(&self, group: &str, members: &[&str]) {
        self.shared.lock().usergroups.insert(
            group.to_owned(),
            members.iter().map(|m| (*m).to_owned()).collect(),
        );
    }

    pub fn fail_next(&self, method: &str, error: &str) {
        self.inject(method, Injected::Error(error.to_string()));
    }

    /// Makes the next call of `method` answer HTTP 429 with
    /// `Retry-After: retry_after_secs`.
    pub fn rate_limit_next(&self, method: &str, retry_after_secs: u64) {
        self.inject(method, Injected::RateLimited(retry_after_secs));
    }

    /// The next call of `method` is handled at once but answered only
    /// after `hold` (for tests that kill the caller while it waits).
    pub fn hold_next(&self, method: &str, hold: Duration) {
        self.inject(method, Injected::Hold(hold));
    }

    /// Makes every call of `method` answer `{"ok": false, "error": error}`
    /// from now on (until [`FakeSlack::stop_failing`]), like an app that
    /// lacks a scope: `missing_scope` also names the scope the method
    /// needs (`needed`) and the ones the app has (`provided`), as Slack does.
    pub fn fail_always(&self, method: &str, error: &str) {
        self.shared
            .lock()
            .refused
            .insert(method.to_string(), error.to_string());
    }

    /// Undoes [`FakeSlack::fail_always`] for `method`.
    pub fn stop_failing(&self, method: &str) {
        self.shared.lock().refused.remove(method);
    }

    fn inject(&self, method: &str, what: Injected) {
        self.shared
            .lock()
            .injected
            .entry(method.to_string())
            .or_default()
            .push_back(what);
    }
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn slack_error(code: &str) -> Response {
    Json(json!({"ok": false, "error": code})).into_response()
}

/// The scopes an app installed with only `im:history` lacks for `method`.
const NEEDED_HISTORY: &str = "channels:history,groups:history,mpim:history";

/// A refusal of `method`, as Slack words it (`missing_scope` says which
/// scope is needed and which the app has).
fn refusal(method: &str, code: &str) -> Response {
    if code != "missing_scope" {
        return slack_error(code);
    }
    let needed = match method {
        "conversations.replies" | "conversations.history" => NEEDED_HISTORY,
        "assistant.threads.setStatus"
        | "chat.postMessage"
        | "chat.postEphemeral"
        | "chat.update"
        | "chat.startStream"
        | "chat.appendStream"
        | "chat.stopStream"
        | "agents.sessions.setStatus" => "chat:write",
        "assistant.threads.setSuggestedPrompts" | "assistant.threads.setTitle" => "assistant:write",
        "reactions.add" | "reactions.remove" => "reactions:write",
        "usergroups.users.list" => "usergroups:read",
        "chat.delete" => "chat:write",
        _ => "unknown",
    };
    Json(json!({"ok": false, "error": code, "needed": needed,
                "provided": "app_mentions:read,chat:write,im:history"}))
    .into_response()
}

/// `GET /files/{name}`: a file's bytes, for the bot token only (Slack's
/// file host answers others with its sign-in page; a 403 here).
async fn serve_file(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if token != Some(shared.token.as_str()) {
        return StatusCode::FORBIDDEN.into_response();
    }
    let mut inner = shared.lock();
    let Some(bytes) = inner.files.get(&name).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    *inner.downloads.entry(name).or_default() += 1;
    (
        [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
        bytes,
    )
        .into_response()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        None => return slack_error("not_authed"),
        Some(t) if t != shared.token => return slack_error("invalid_auth"),
        Some(_) => {}
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // Like Slack: methods that read take form fields, not JSON.
    let reads = matches!(
        method.as_str(),
        "conversations.replies"
            | "conversations.history"
            | "users.info"
            | "usergroups.users.list"
            | "files.getUploadURLExternal"
            | "files.info"
    );
    let body = if content_type.starts_with("application/json") && !reads {
        let Ok(body) = serde_json::from_slice::<Value>(&body) else {
            return slack_error("invalid_json");
        };
        body
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        let Ok(fields) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body) else {
            return slack_error("invalid_form_data");
        };
        Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        )
    } else {
        return slack_error("invalid_form_data");
    };

    let (injected, refused) = {
        let mut inner = shared.lock();
        let injected = inner
            .injected
            .get_mut(&method)
            .and_then(VecDeque::pop_front);
        (injected, inner.refused.get(&method).cloned())
    };
    let mut hold = None;
    match injected {
        Some(Injected::Hold(d)) => hold = Some(d),
        Some(Injected::Error(code)) => return refusal(&method, &code),
        Some(Injected::RateLimited(secs)) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", secs.to_string())],
                Json(json!({"ok": false, "error": "ratelimited"})),
            )
                .into_response();
        }
        None => {
            if let Some(code) = refused {
                return refusal(&method, &code);
            }
        }
    }

    let response = answer(&shared, &method, &body);
    if let Some(d) = hold {
        tokio::time::sleep(d).await;
    }
    response
}

/// What the fake answers to `method` with `body` (its state updated).
fn answer(shared: &Shared, method: &str, body: &Value) -> Response {
    let method = method.to_owned();
    let str_field = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    match method.as_str() {
        "chat.postMessage" => {
            let Some(channel) = str_field("channel") else {
                return slack_error("channel_not_found");
            };
            let text = str_field("text");
            let blocks = body.get("blocks").filter(|b| !b.is_null()).cloned();
            if text.is_none() && blocks.is_none() {
                return slack_error("no_text");
            }
            let ts = shared.new_ts();
            let msg = PostedMessage {
                channel: channel.clone(),
                thread_ts: str_field("thread_ts"),
                text: text.unwrap_or_default(),
                blocks,
                ts: ts.clone(),
                metadata: body.get("metadata").filter(|m| !m.is_null()).cloned(),
                streaming: false,
            };
            let mut inner = shared.lock();
            inner.calls.push((method.clone(), body.clone()));
            inner.posted.push(msg.clone());
            inner.messages.push(msg.clone());
            let mut message = json!({"type": "message", "text": msg.text, "ts": ts,
                                     "bot_id": "B0FAKEBOT", "user": "U0FAKEBOT"});
            if let Some(t) = &msg.thread_ts {
                message["thread_ts"] = json!(t);
            }
            Json(json!({"ok": true, "channel": channel, "ts": ts, "message": message}))
                .into_response()
        }
        "chat.update" => {
            let (Some(channel), Some(ts)) = (str_field("channel"), str_field("ts")) else {
                return slack_error("message_not_found");
            };
            let mut inner = shared.lock();
            let Some(msg) = inner
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts)
            else {
                return slack_error("message_not_found");
            };
            if let Some(text) = str_field("text") {
                msg.text = text;
            }
            if let Some(blocks) = body.get("blocks").filter(|b| !b.is_null()) {
                msg.blocks = Some(blocks.clone());
            }
            let text = msg.text.clone();
            inner.calls.push((method.clone(), body.clone()));
            Json(json!({"ok": true, "channel": channel, "ts": ts, "text": text})).into_response()
        }
        "conversations.replies" | "conversations.history" => {
            let Some(channel) = str_field("channel") else {
                return slack_error("channel_not_found");
            };
            let thread = str_field("ts");
            if method == "conversations.replies" && thread.is_none() {
                return slack_error("thread_not_found");
            }
            let with_metadata = str_field("include_all_metadata").as_deref() == Some("true");
            let mut inner = shared.lock();
            inner.calls.push((method.clone(), body.clone()));
            let messages: Vec<Value> = inner
                .messages
                .iter()
                .filter(|m| m.channel == channel)
                .filter(|m| match &thread {
                    Some(t) => m.thread_ts.as_deref() == Some(t.as_str()) || &m.ts == t,
                    None => m.thread_ts.is_none(),
                })
                .map(|m| {
                    let mut v = json!({"type": "message", "text": m.text, "ts": m.ts,
                                       "bot_id": "B0FAKEBOT", "user": "U0FAKEBOT"});
                    if let Some(t) = &m.thread_ts {
                        v["thread_ts"] = json!(t);
                    }
                    if let (true, Some(md)) = (with_metadata, &m.metadata) {
                        v["metadata"] = md.clone();
                    }
                    v
                })
                .collect();
            drop(inner);
            let messages = match &thread {
                Some(t) => thread::replies(shared, &channel, t, body, messages),
                None => messages,
            };
            Json(json!({"ok": true, "messages": messages, "has_more": false,
                        "response_metadata": {"next_cursor": ""}}))
            .into_response()
        }
        "users.info" => {
            let Some(user) = str_field("user") else {
                return slack_error("user_not_found");
            };
            let name = shared.lock().people.get(&user).cloned();
            shared.lock().calls.push((method.clone(), body.clone()));
            match name {
                Some(name) => Json(
                    json!({"ok": true, "user": {"id": user, "name": name.to_lowercase(),
                    "profile": {"display_name": name, "real_name": name}}}),
                )
                .into_response(),
                None => slack_error("user_not_found"),
            }
        }
        "usergroups.users.list" => {
            let group = str_field("usergroup").unwrap_or_default();
            let members = shared.lock().usergroups.get(&group).cloned();
            shared.lock().calls.push((method.clone(), body.clone()));
            match members {
                Some(users) => Json(json!({"ok": true, "users": users})).into_response(),
                None => slack_error("no_such_subteam"),
            }
        }
        "auth.test" => {
            shared.lock().calls.push((method.clone(), body.clone()));
            Json(
                json!({"ok": true, "user_id": "U0FAKEBOT", "bot_id": "B0FAKEBOT",
                        "team_id": "T1", "user": "baton"}),
            )
            .into_response()
        }
        "chat.postEphemeral" => {
            // Slack keeps no ephemeral message: it is only recorded here
            // (`FakeSlack::calls("chat.postEphemeral")`), never in `posted`.
            if str_field("channel").is_none() {
                return slack_error("channel_not_found");
            }
            if str_field("user").is_none() {
                return slack_error("user_not_in_channel");
            }
            if str_field("text").is_none() && body.get("blocks").is_none_or(Value::is_null) {
                return slack_error("no_text");
            }
            let n = shared.next_ts.fetch_add(1, Ordering::SeqCst);
            shared.lock().calls.push((method.clone(), body.clone()));
            Json(json!({"ok": true, "message_ts": format!("1700000000.{n:06}")})).into_response()
        }
        "assistant.threads.setStatus" => {
            if str_field("channel_id").is_none() {
                return slack_error("channel_not_found");
            }
            if str_field("thread_ts").is_none() {
                return slack_error("invalid_thread_ts");
            }
            // `status` may be "" (clears the status) but must be present.
            if !body.get("status").is_some_and(Value::is_string) {
                return slack_error("invalid_arguments");
            }
            shared.lock().calls.push((method.clone(), body.clone()));
            Json(json!({"ok": true})).into_response()
        }
        other => uploads::answer(
            shared,
            shared.base_url.get().map_or("", String::as_str),
            other,
            body,
        )
        .or_else(|| agent::answer(shared, other, body))
        .or_else(|| reactions::answer(shared, other, body))
        .or_else(|| thread::answer(shared, other, body))
        .unwrap_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                Json(json!({"ok": false, "error": "unknown_method"})),
            )
                .into_response()
        }),
    }
}

/// The `X-Slack-Request-Timestamp` and `X-Slack-Signature` headers Slack
/// would send with `body` at `now` (Unix seconds).
pub fn signed_headers(secret: &SigningSecret, body: &[u8], now: i64) -> Vec<(String, String)> {
    vec![
        (TIMESTAMP_HEADER.to_string(), now.to_string()),
        (SIGNATURE_HEADER.to_string(), sign(secret, now, body)),
    ]
}

/// The form body Slack sends to the interactivity URL for `payload`.
pub fn interactivity_body(payload: &Value) -> Vec<u8> {
    let json = payload.to_string();
    // Form-encoding a single string pair cannot fail; fall back to an empty
    // body rather than panic.
    serde_urlencoded::to_string([("payload", json.as_str())])
        .unwrap_or_default()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::verify;

    async fn raw_post(url: &str, auth: Option<&str>, content_type: &str, body: &str) -> Value {
        let mut req = reqwest::Client::new()
            .post(url)
            .header("content-type", content_type)
            .body(body.to_string());
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        req.send()
            .await
            .expect("send")
            .json::<Value>()
            .await
            .expect("json answer")
    }

    #[tokio::test]
    async fn answers_like_slack_on_bad_requests() {
        let fake = FakeSlack::start().await;
        let url = format!("{}/chat.postMessage", fake.base_url());
        let bearer = format!("Bearer {}", FakeSlack::TOKEN);
        let json_ct = "application/json; charset=utf-8";
        let cases = [
            (
                None,
                json_ct,
                r#"{"channel":"C1","text":"x"}"#,
                "not_authed",
            ),
            (
                Some("Bearer nope"),
                json_ct,
                r#"{"channel":"C1","text":"x"}"#,
                "invalid_auth",
            ),
            (
                Some(bearer.as_str()),
                "text/plain",
                r#"{"channel":"C1"}"#,
                "invalid_form_data",
            ),
            (Some(bearer.as_str()), json_ct, "{oops", "invalid_json"),
            (
                Some(bearer.as_str()),
                json_ct,
                r#"{"text":"x"}"#,
                "channel_not_found",
            ),
            (
                Some(bearer.as_str()),
                json_ct,
                r#"{"channel":"C1"}"#,
                "no_text",
            ),
        ];
        for (auth, ct, body, want) in cases {
            let answer = raw_post(&url, auth, ct, body).await;
            assert_eq!(answer, json!({"ok": false, "error": want}), "{body}");
        }
        assert!(fake.posted().is_empty());
        assert!(fake.calls("chat.postMessage").is_empty());

        let status_url = format!("{}/assistant.threads.setStatus", fake.base_url());
        let answer = raw_post(
            &status_url,
            Some(&bearer),
            json_ct,
            r#"{"channel_id":"C1"}"#,
        )
        .await;
        assert_eq!(answer["error"], "invalid_thread_ts");
        let unknown = format!("{}/chat.scheduleMessage", fake.base_url());
        let answer = raw_post(&unknown, Some(&bearer), json_ct, "{}").await;
        assert_eq!(answer["error"], "unknown_method");
    }

    #[tokio::test]
    async fn wait_for_posts_sees_posts_from_other_tasks() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        let poster = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            for i in 0..3 {
                client
                    .post_message("D1", Some("1.0"), &format!("m{i}"), None)
                    .await
                    .expect("post");
            }
        });
        let posts = fake.wait_for_posts(3, Duration::from_secs(5)).await;
        assert_eq!(
            posts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(),
            ["m0", "m1", "m2"]
        );
        poster.await.expect("poster");
        // A count that never arrives returns what there is after the timeout.
        let posts = fake.wait_for_posts(10, Duration::from_millis(50)).await;
        assert_eq!(posts.len(), 3);
    }

    #[tokio::test]
    async fn dropping_the_fake_stops_the_server() {
        let fake = FakeSlack::start().await;
        let client = fake.client();
        drop(fake);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(client.post_message("C1", None, "x", None).await.is_err());
    }

    #[test]
    fn signed_headers_verify() {
        let secret = SigningSecret::new("s3cret");
        let body = br#"{"type":"url_verification","challenge":"c"}"#;
        let headers = signed_headers(&secret, body, 1_700_000_000);
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .expect("header present")
        };
        assert_eq!(
            verify(
                &secret,
                &get(TIMESTAMP_HEADER),
                &get(SIGNATURE_HEADER),
                body,
                1_700_000_100
            ),
            Ok(())
        );
    }

    #[test]
    fn interactivity_body_round_trips() {
        let payload = json!({"type": "block_actions", "user": {"id": "U1", "team_id": "T1"},
                             "actions": [{"action_id": "deny", "value": "a&b=c"}]});
        let parsed = crate::interactivity::parse(&interactivity_body(&payload));
        let Ok(crate::interactivity::Interaction::BlockAction(a)) = parsed else {
            panic!("expected a block action, got {parsed:?}");
        };
        assert_eq!(a.action_id, "deny");
        assert_eq!(a.value.as_deref(), Some("a&b=c"));
    }
}
