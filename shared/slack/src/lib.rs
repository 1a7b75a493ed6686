//! Slack for Baton.
//!
//! - [`signature`]: verify Slack's `v0` request signatures (and sign, for tests).
//! - [`events`]: Events API envelopes and [`events::classify`], which turns a
//!   request body into a message to act on, a URL-verification challenge, or
//!   something to ignore.
//! - [`interactivity`]: `block_actions` payloads (approve/deny buttons).
//! - [`mrkdwn`]: Markdown (what LLMs write) to Slack's mrkdwn.
//! - [`web`]: a small Web API client: post/update messages, thread status.
//! - `testing` (feature `testing`): a fake Slack Web API server and helpers
//!   to build signed requests.
//!
//! This crate does not depend on `baton-core`; the ingest and agent crates
//! adapt its types to the domain.

pub mod events;
pub mod interactivity;
pub mod mrkdwn;
pub mod signature;
#[cfg(feature = "testing")]
pub mod testing;
pub mod web;

pub use events::{classify, EventError, Inbound, InboundMessage, MessageKind};
pub use signature::{sign, verify, SignatureError, SigningSecret};
pub use web::{BotToken, SlackClient, SlackError};
