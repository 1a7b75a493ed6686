//! Slack's agent surfaces: agent sessions (`agents.sessions.setStatus`)
//! and assistant threads (`assistant.threads.setSuggestedPrompts`,
//! `assistant.threads.setTitle`).
//!
//! Shapes from Slack's references (docs.slack.dev):
//!
//! - `agents.sessions.setStatus {status, channel_id?, thread_ts?, title?,
//!   initiator_user_id?}`, `status` one of `active`, `processing`,
//!   `suspended`, `closed`. It creates the session when there is none;
//!   `title` (at most 200 characters) and `initiator_user_id` count only
//!   then. Only apps declared as agents (`agent_view` in the manifest) have
//!   sessions. While a session is `processing` Slack shows a Stop button,
//!   whose click is the `agent_session_stopped` event.
//! - `assistant.threads.setSuggestedPrompts {channel_id, prompts: [{title,
//!   message}], thread_ts?, title?}`: up to four prompts. Slack: "The
//!   thread_ts parameter should only be used in the legacy assistant
//!   messaging experience. Including it in a call for an agent app will
//!   cause the call to silently fail."
//! - `assistant.threads.setTitle {channel_id, thread_ts, title}`.

use crate::web::{BotToken, QuickClient, SlackClient, SlackError};
use serde::Serialize;
use serde_json::json;
use std::time::Duration;

/// The most prompts Slack shows.
pub const MAX_SUGGESTED_PROMPTS: usize = 4;
/// The longest session title Slack takes.
pub const MAX_SESSION_TITLE_CHARS: usize = 200;
/// How long a thread title Baton makes from a first message (Slack shows
/// titles on one line in a list: long ones only get cut there).
pub const THREAD_TITLE_CHARS: usize = 80;

/// An agent session's lifecycle status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStatus {
    /// Waiting for the user, nothing running.
    Active,
    /// The agent works (Slack shows its Stop button).
    Processing,
    /// The agent waits for something (an approval, a reply, other tasks).
    Suspended,
    /// Done.
    Closed,
}

impl SessionStatus {
    /// Slack's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Active => "active",
            SessionStatus::Processing => "processing",
            SessionStatus::Suspended => "suspended",
            SessionStatus::Closed => "closed",
        }
    }
}

/// One suggested prompt: its label and the message it sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Prompt {
    pub title: String,
    pub message: String,
}

/// Where an agent session lives and who started it (only used when the
/// call creates it).
#[derive(Clone, Copy, Debug, Default)]
pub struct SessionTarget<'a> {
    pub channel: &'a str,
    pub thread_ts: &'a str,
    pub title: Option<&'a str>,
    pub initiator: Option<&'a str>,
}

impl SlackClient {
    /// Sets the status of the agent session of the thread (creating it).
    pub async fn set_session_status(
        &self,
        target: SessionTarget<'_>,
        status: SessionStatus,
    ) -> Result<(), SlackError> {
        let mut body = json!({
            "status": status.as_str(),
            "channel_id": target.channel,
            "thread_ts": target.thread_ts,
        });
        if let Some(title) = target.title.filter(|t| !t.is_empty()) {
            body["title"] = json!(cut(title, MAX_SESSION_TITLE_CHARS));
        }
        if let Some(user) = target.initiator.filter(|u| !u.is_empty()) {
            body["initiator_user_id"] = json!(user);
        }
        self.call("agents.sessions.setStatus", &body)
            .await
            .map(drop)
    }

    /// Offers `prompts` (the first [`MAX_SUGGESTED_PROMPTS`]) in an
    /// assistant thread, under `title` if given. `thread_ts` only for the
    /// assistant experience, never for an agent app (see the module docs).
    pub async fn set_suggested_prompts(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        title: Option<&str>,
        prompts: &[Prompt],
    ) -> Result<(), SlackError> {
        let prompts = &prompts[..prompts.len().min(MAX_SUGGESTED_PROMPTS)];
        let mut body = json!({ "channel_id": channel, "prompts": prompts });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        if let Some(title) = title.filter(|t| !t.is_empty()) {
            body["title"] = json!(title);
        }
        self.call("assistant.threads.setSuggestedPrompts", &body)
            .await
            .map(drop)
    }

    /// Titles the assistant thread `thread_ts`.
    pub async fn set_thread_title(
        &self,
        channel: &str,
        thread_ts: &str,
        title: &str,
    ) -> Result<(), SlackError> {
        let body = json!({ "channel_id": channel, "thread_ts": thread_ts, "title": title });
        self.call("assistant.threads.setTitle", &body)
            .await
            .map(drop)
    }
}

/// `text` cut to `max` characters, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A thread title made from a message in Slack's markup: one line, at most
/// [`THREAD_TITLE_CHARS`] characters, with no markup left in it — a link
/// or mention shows its label (or its target), the three escaped
/// characters are read back and `<` / `>` dropped, so the title reads the
/// same whether Slack shows it as plain text or as mrkdwn. `None` when
/// nothing is left.
pub fn thread_title(text: &str) -> Option<String> {
    plain_line(text, THREAD_TITLE_CHARS)
}

/// `text` as plain text on one line of at most `max` characters, read as
/// [`thread_title`] reads it (plan steps shown in Slack are made plain the
/// same way). `None` when nothing is left.
pub fn plain_line(text: &str, max: usize) -> Option<String> {
    let mut plain = String::with_capacity(text.len().min(1024));
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        plain.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            rest = after;
            continue;
        };
        let inner = &after[..close];
        // `<url|label>`, `<@U123|name>`, `<#C1|general>`, `<!here>`.
        let shown = match inner.split_once('|') {
            Some((_, label)) if !label.trim().is_empty() => label,
            _ => inner.trim_start_matches(['!', '#']),
        };
        plain.push_str(shown);
        rest = &after[close + 1..];
        if plain.len() > 4 * max {
            break;
        }
    }
    plain.push_str(rest);
    let plain = plain
        .replace("&lt;", "")
        .replace("&gt;", "")
        .replace("&amp;", "&")
        .replace(['<', '>'], "");
    let one_line = plain
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!one_line.is_empty()).then(|| cut(&one_line, max))
}

/// The longest the ingest waits for an assistant-thread call: it answers
/// Slack within 3 seconds.
pub const SETUP_TIMEOUT: Duration = Duration::from_millis(1500);

/// Sets up new assistant threads from the ingest (suggested prompts), once,
/// without waiting for a rate limit, within [`SETUP_TIMEOUT`]. The client
/// is built at the first call, like [`crate::SlackNotices`]'s.
pub struct SlackThreadSetup {
    /// The app is an agent (`SLACK_AGENT_SESSIONS`): no `thread_ts`.
    agent_app: bool,
    client: QuickClient,
}

impl SlackThreadSetup {
    pub fn new(api_url: impl Into<String>, token: BotToken, agent_app: bool) -> Self {
        SlackThreadSetup {
            agent_app,
            client: QuickClient::new(api_url, token, SETUP_TIMEOUT),
        }
    }

    fn client(&self) -> Result<&SlackClient, String> {
        self.client.get().map_err(str::to_owned)
    }

    /// Offers `prompts` in the new thread `thread_ts` of `channel`.
    pub async fn suggest(
        &self,
        channel: &str,
        thread_ts: &str,
        title: Option<&str>,
        prompts: &[Prompt],
    ) -> Result<(), String> {
        let thread_ts = (!self.agent_app).then_some(thread_ts);
        self.client()?
            .set_suggested_prompts(channel, thread_ts, title, prompts)
            .await
            .map_err(|e| e.to_string())
    }
}

impl std::fmt::Debug for SlackThreadSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackThreadSetup")
            .field("api_url", &self.client.api_url())
            .field("agent_app", &self.agent_app)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;

    #[test]
    fn titles_are_plain_short_and_on_one_line() {
        let cases = [
            (
                "what is the status of the deploy?",
                Some("what is the status of the deploy?"),
            ),
            (
                "compare <https://example.com/a?b=1&amp;c=2|the runbook> &amp; <@U1|ann>\nnow",
                Some("compare the runbook & ann now"),
            ),
            (
                "<https://example.com>  and <!here>",
                Some("https://example.com and here"),
            ),
            ("a &lt;script&gt; b <broken", Some("a script b broken")),
            ("   \n\t ", None),
            ("<@U1>", Some("@U1")),
        ];
        for (text, want) in cases {
            assert_eq!(thread_title(text).as_deref(), want, "{text:?}");
        }
        let long = thread_title(&"word ".repeat(100)).unwrap();
        assert_eq!(long.chars().count(), THREAD_TITLE_CHARS);
        assert!(long.ends_with('…'));
    }

    #[tokio::test]
    async fn sessions_prompts_and_titles_reach_slack() {
        let fake = FakeSlack::start().await;
        let c = fake.client();
        let long = "t".repeat(300);
        c.set_session_status(
            SessionTarget {
                channel: "C1",
                thread_ts: "1.0",
                title: Some(&long),
                initiator: Some("U1"),
            },
            SessionStatus::Processing,
        )
        .await
        .expect("status");
        let call = &fake.calls("agents.sessions.setStatus")[0];
        assert_eq!(call["status"], "processing");
        assert_eq!(call["channel_id"], "C1");
        assert_eq!(call["thread_ts"], "1.0");
        assert_eq!(call["initiator_user_id"], "U1");
        assert_eq!(call["title"].as_str().unwrap().chars().count(), 200);
        assert_eq!(fake.session("C1", "1.0").as_deref(), Some("processing"));

        let prompts: Vec<Prompt> = (0..6)
            .map(|i| Prompt {
                title: format!("p{i}"),
                message: format!("m{i}"),
            })
            .collect();
        c.set_suggested_prompts("D1", Some("2.0"), Some("Try"), &prompts)
            .await
            .expect("prompts");
        let call = &fake.calls("assistant.threads.setSuggestedPrompts")[0];
        assert_eq!(call["prompts"].as_array().unwrap().len(), 4);
        assert_eq!(call["prompts"][0], json!({"title": "p0", "message": "m0"}));
        assert_eq!(call["title"], "Try");
        c.set_thread_title("D1", "2.0", "Deploy status")
            .await
            .expect("title");
        assert_eq!(
            fake.calls("assistant.threads.setTitle")[0]["title"],
            "Deploy status"
        );

        // Slack's checks.
        let err = c
            .set_session_status(SessionTarget::default(), SessionStatus::Closed)
            .await
            .expect_err("no channel");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "channel_not_found"));
        let err = c
            .set_suggested_prompts("D1", None, None, &[])
            .await
            .expect_err("no prompts");
        assert!(matches!(&err, SlackError::Api { code, .. } if code == "invalid_arguments"));
    }

    #[tokio::test]
    async fn an_agent_app_sets_prompts_without_the_thread() {
        let fake = FakeSlack::start().await;
        let prompts = [Prompt {
            title: "Status".into(),
            message: "What is the deploy status?".into(),
        }];
        for agent_app in [false, true] {
            SlackThreadSetup::new(fake.base_url(), fake.bot_token(), agent_app)
                .suggest("D1", "3.0", None, &prompts)
                .await
                .expect("set");
        }
        let calls = fake.calls("assistant.threads.setSuggestedPrompts");
        assert_eq!(calls[0]["thread_ts"], "3.0");
        assert!(calls[1].get("thread_ts").is_none(), "{}", calls[1]);
    }
}
