//! Per-person OAuth connections (`[mcp.NAME] auth = "oauth"`,
//! `[oauth.NAME]`): whose accounts a task acts with, and the records of a
//! connection being made. The tokens themselves are sealed at rest
//! ([`Sealer`]) and handed to tools only through [`Credentials`]; nothing
//! here holds them in clear in a form that serialises.
//!
//! - A [`PersonKey`] is whose connection it is: a Slack user of a
//!   workspace, or a person an HTTP client named (workspace `api`).
//! - A [`ConnectRequest`] is one pending "Connect NAME" link: minted by
//!   the worker when a call needs a connection the person lacks, followed
//!   by `GET /connect/{state}` and completed, once, by
//!   `GET /oauth/callback`.

use crate::clock::Instant;
use crate::ids::TaskId;
use async_trait::async_trait;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The workspace of people named by HTTP clients (`user` in `POST /tasks`).
pub const API_WORKSPACE: &str = "api";

/// Whose connection: `(workspace, user)`. Shown as `workspace:user`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PersonKey {
    /// A Slack team id, or [`API_WORKSPACE`].
    pub workspace: String,
    /// A Slack user id, or the id an HTTP client named.
    pub user: String,
}

impl PersonKey {
    pub fn new(workspace: impl Into<String>, user: impl Into<String>) -> Self {
        PersonKey {
            workspace: workspace.into(),
            user: user.into(),
        }
    }

    /// Reads `workspace:user` back; `None` when either part is empty.
    pub fn parse(text: &str) -> Option<PersonKey> {
        let (workspace, user) = text.split_once(':')?;
        (!workspace.is_empty() && !user.is_empty()).then(|| PersonKey::new(workspace, user))
    }
}

impl fmt::Display for PersonKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.workspace, self.user)
    }
}

/// A person's tokens for one provider, in clear: only ever in memory.
/// Debug never shows the tokens.
#[derive(Clone, Debug)]
pub struct Tokens {
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    /// When the access token stops working, when the provider said.
    pub expires_at: Option<Instant>,
    /// The scopes granted, as the provider said (or as asked).
    pub scopes: Vec<String>,
}

/// What may be shown of a connection (`baton connections list`): never
/// a token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionSummary {
    pub person: PersonKey,
    pub provider: String,
    #[serde(with = "crate::clock::as_millis")]
    pub connected_at: Instant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshed_at: Option<Instant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Instant>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// One pending connection: the `state` of a Connect link, bound to the
/// person, the provider and the waiting task's call. Stored under the
/// state's hash, never the state itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectRequest {
    pub person: PersonKey,
    pub provider: String,
    pub task_id: TaskId,
    /// The tool call that needs the connection (retried once connected).
    pub call_id: String,
    #[serde(with = "crate::clock::as_millis")]
    pub created_at: Instant,
    /// The link works until then (the task's wait ends then too).
    #[serde(with = "crate::clock::as_millis")]
    pub expires_at: Instant,
}

/// A tool call that waits (or waited) for its person to connect to a
/// provider. Kept on the task so that, once woken, the call is run again
/// rather than taken for one a crash interrupted, and so that a call
/// still unconnected at `expires_at` is answered that the person did not
/// connect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionWait {
    pub step: u32,
    pub call_id: String,
    pub provider: String,
    /// Whose connection is awaited: asked again if someone else is served
    /// by the time the call runs again.
    pub person: PersonKey,
    /// The Connect link (`{public_url}/connect/{state}`): the person's
    /// alone, shown in `waiting_for` and never in events.
    pub url: String,
    #[serde(with = "crate::clock::as_millis")]
    pub created_at: Instant,
    #[serde(with = "crate::clock::as_millis")]
    pub expires_at: Instant,
    /// Set (in the same commit) before the call runs again once woken: a
    /// crash from then on interrupted a call that may have run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retrying: bool,
}

/// The lookup key of a Connect link's `state`: its SHA-256, hex. The
/// state itself is stored nowhere (the link is the capability).
pub fn state_hash(state: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(state.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The path of a Connect link, before its state (`GET /connect/{state}`).
pub const CONNECT_PATH: &str = "/connect/";

/// The wait of `call_id`, if it waited for a connection.
pub fn wait_of<'a>(waits: &'a [ConnectionWait], call_id: &str) -> Option<&'a ConnectionWait> {
    waits.iter().rev().find(|w| w.call_id == call_id)
}

/// The result a call gets when its person did not connect in time.
pub fn not_connected_text(provider: &str) -> String {
    format!(
        "not connected: the person did not connect their `{provider}` account in time, so this \
         call was not made. Go on without it, or ask them to connect and try again later."
    )
}

/// The name of the `{server}__connect` tool offered for a per-person MCP
/// server the person has not connected yet.
pub fn connect_tool_name(server: &str) -> String {
    format!("{server}__connect")
}

/// Reads the `user` an HTTP client names in `POST /tasks`:
/// `slack:TEAM:USER` acts as that Slack person, an id
/// `[A-Za-z0-9._@+-]{1,128}` as the person `api:ID`.
pub fn person_named(user: &str) -> Result<PersonKey, String> {
    let id_ok = |s: &str| {
        (1..=128).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._@+-".contains(&b))
    };
    if let Some(rest) = user.strip_prefix("slack:") {
        return match rest.split_once(':') {
            Some((team, u)) if id_ok(team) && id_ok(u) => Ok(PersonKey::new(team, u)),
            _ => Err(
                "`user` must be `slack:TEAM:USER` or an id of 1 to 128 letters, digits or `._@+-`"
                    .into(),
            ),
        };
    }
    if id_ok(user) {
        Ok(PersonKey::new(API_WORKSPACE, user))
    } else {
        Err(
            "`user` must be `slack:TEAM:USER` or an id of 1 to 128 letters, digits or `._@+-`"
                .into(),
        )
    }
}

/// Why a connection cannot be used for a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The person has no connection to the provider, or it was revoked or
    /// rejected and cannot be refreshed: ask them to connect.
    #[error("{person} has no working connection to `{provider}`")]
    NotConnected { person: PersonKey, provider: String },
    /// The task serves nobody (an HTTP task without `user`): per-user
    /// tools cannot be used.
    #[error(
        "this task acts for no person, so `{provider}` (a per-person connection) cannot be used"
    )]
    NoPerson { provider: String },
    /// The store, the key or the provider failed; readable, never a token.
    #[error("{0}")]
    Unavailable(String),
}

/// Hands a person's bearer token for a provider to a tool, refreshed when
/// it is about to expire (once, however many segments ask at the same
/// moment). Implemented in `baton-connect`.
#[async_trait]
pub trait Credentials: Send + Sync {
    /// A working access token of `person` for `provider`.
    async fn bearer(
        &self,
        person: &PersonKey,
        provider: &str,
    ) -> Result<SecretString, CredentialError>;

    /// The provider refused `rejected` (HTTP 401): refresh it if it can
    /// be, else forget the connection. `Ok` holds a new token to retry
    /// with; `Err(NotConnected)` means ask the person again.
    async fn rejected(
        &self,
        person: &PersonKey,
        provider: &str,
        rejected: &SecretString,
    ) -> Result<SecretString, CredentialError>;
}

/// Why sealing or opening failed (a wrong key, a tampered item, KMS down).
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} a connection's tokens: {reason}")]
pub struct SealError {
    pub action: &'static str,
    pub reason: String,
}

/// Encryption at rest of connection tokens: envelope encryption under a
/// KMS key on AWS, a key file in the data directory on `baton dev`.
/// `context` (the item's person and provider) is bound to the ciphertext
/// (AAD / KMS encryption context): an item copied under another person
/// does not open.
#[async_trait]
pub trait Sealer: Send + Sync {
    async fn seal(&self, plaintext: &[u8], context: &str) -> Result<Vec<u8>, SealError>;
    async fn open(&self, sealed: &[u8], context: &str) -> Result<Vec<u8>, SealError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_person_key_reads_back() {
        let p = PersonKey::new("T1", "U2");
        assert_eq!(p.to_string(), "T1:U2");
        assert_eq!(PersonKey::parse("T1:U2"), Some(p));
        assert_eq!(PersonKey::parse("T1:"), None);
        assert_eq!(PersonKey::parse("nothing"), None);
    }

    #[test]
    fn an_http_user_is_a_slack_person_or_an_api_id() {
        assert_eq!(person_named("slack:T1:U2"), Ok(PersonKey::new("T1", "U2")));
        assert_eq!(
            person_named("alice@example.com"),
            Ok(PersonKey::new(API_WORKSPACE, "alice@example.com"))
        );
        for bad in [
            "",
            "slack:T1",
            "slack::U2",
            "slack:T1:",
            "a b",
            "a:b",
            "ü",
            &"x".repeat(129),
        ] {
            assert!(person_named(bad).is_err(), "{bad:?}");
        }
        assert!(person_named(&"x".repeat(128)).is_ok());
    }

    #[test]
    fn tokens_never_show_in_debug() {
        let t = Tokens {
            access_token: SecretString::from("at-SECRET"),
            refresh_token: Some(SecretString::from("rt-SECRET")),
            expires_at: None,
            scopes: vec![],
        };
        assert!(!format!("{t:?}").contains("SECRET"));
    }
}
