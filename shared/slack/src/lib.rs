//! Slack for Baton.
//!
//! - [`signature`]: verify Slack's `v0` request signatures (and sign, for tests).
//! - [`events`]: Events API envelopes and [`events::classify`], which turns a
//!   request body into a message to act on, a URL-verification challenge, or
//!   something to ignore.
//! - [`interactivity`]: `block_actions` payloads (approve/deny buttons).
//! - [`mrkdwn`]: Markdown (what LLMs write) to Slack's mrkdwn.
//! - [`web`]: a small Web API client: post/update messages, ephemeral notes,
//!   thread status; [`stream`] (streamed answers) and [`assistant`] (agent
//!   sessions, suggested prompts, thread titles) add Slack's AI surfaces.
//! - [`feedback`]: the feedback buttons under an answer.
//! - [`replies`], [`approvals`], [`notices`], [`status`]: the Slack
//!   implementations of the domain's reply, approval and notice ports
//!   (`baton_core::ReplySink`, `baton_core::approval::ApprovalPrompts`,
//!   `baton_core::Notices`), and the limiter of status updates; [`plan`]:
//!   how a task's plan shows (in its streamed message, else its status).
//! - [`uploads`]: files sent into a thread (`send_file`), the Slack
//!   implementation of `baton_core::upload::FileUploads`.
//! - [`reactions`]: the reaction on a message Baton took, replaced by how
//!   the task ended; and (`progress_message`) the progress message of a
//!   task in a thread that shows no status.
//! - [`thread`]: a thread's earlier messages, for a task that joins it
//!   (`baton_core::ThreadHistory`).
//! - [`openid`]: Sign in with Slack (OpenID Connect), who is in a browser
//!   (the Connect links, docs/connections.md).
//! - `testing` (feature `testing`): a fake Slack Web API server and helpers
//!   to build signed requests.
//!
//! Parsing and the Web API client know nothing of tasks; only the port
//! implementations use `baton-core`.
//!
//! # Handling `POST /slack/events`
//!
//! ```
//! use baton_slack::{classify, sign, verify, Inbound, SigningSecret};
//!
//! let secret = SigningSecret::new("test-secret");
//! let body = br#"{"type":"url_verification","challenge":"abc"}"#;
//! let now = 1_700_000_000;
//! // What Slack would send in X-Slack-Request-Timestamp / X-Slack-Signature:
//! let (ts_header, sig_header) = (now.to_string(), sign(&secret, now, body));
//!
//! // Bad, missing or stale signature: answer 401 and queue nothing.
//! verify(&secret, &ts_header, &sig_header, body, now).expect("401 otherwise");
//! match classify(body, Some("U0BOT")).expect("400 otherwise") {
//!     Inbound::UrlVerification { challenge } => assert_eq!(challenge, "abc"),
//!     Inbound::Message(msg) => { /* dedupe on (team, channel, message ts), queue a task */ }
//!     Inbound::ThreadReply(msg) => { /* may answer the thread's open question */ }
//!     Inbound::SessionStopped(stop) => { /* the Stop button: stop the thread's task */ }
//!     Inbound::ThreadStarted(thread) => { /* a new assistant thread: suggest prompts */ }
//!     Inbound::Ignored { reason } => { /* 200, nothing to do */ let _ = reason; }
//! }
//! ```
//!
//! # Replying
//!
//! ```no_run
//! # async fn reply() -> Result<(), baton_slack::SlackError> {
//! use baton_slack::{mrkdwn, BotToken, SlackClient};
//! let slack = SlackClient::new("https://slack.com/api", BotToken::new("xoxb-…"))?;
//! slack.set_thread_status("C123", "1700000000.000100", "is thinking…").await?;
//! let text = mrkdwn::from_markdown("**Done**: see [the run](https://example.com/r/1)");
//! let ts = slack.post_message("C123", Some("1700000000.000100"), &text, None).await?;
//! # let _ = ts; Ok(()) }
//! ```

pub mod approvals;
pub mod assistant;
pub mod commands;
pub mod events;
pub mod feedback;
pub mod files;
pub mod interactivity;
pub mod mrkdwn;
pub mod notices;
pub mod openid;
pub mod people;
pub mod plan;
mod progress_message;
pub mod reactions;
pub mod replies;
pub mod safe_markdown;
pub mod signature;
pub mod status;
pub mod stream;
mod streamed;
#[cfg(feature = "testing")]
pub mod testing;
pub mod thread;
mod tool_calls;
pub mod uploads;
pub mod usergroups;
pub mod web;

pub use approvals::SlackApprovals;
pub use events::{classify, EventError, Inbound, InboundMessage, MessageKind};
pub use files::SlackFiles;
pub use notices::SlackNotices;
pub use replies::SlackReplies;
pub use signature::{sign, verify, SignatureError, SigningSecret};
pub use status::StatusLimiter;
pub use uploads::SlackUploads;
pub use web::{BotToken, SlackClient, SlackError};
