//! Notes to one person in a Slack conversation (`chat.postEphemeral`): the
//! Slack implementation of the notice port (`baton_core::Notices`).

use crate::web::{BotToken, QuickClient, SlackClient};
use async_trait::async_trait;
use baton_core::{NoticeError, Notices};
use std::time::Duration;

/// The longest a notice may take: the ingest posts it while Slack waits
/// for its answer (3 seconds, after which Slack retries the event).
pub const NOTICE_TIMEOUT: Duration = Duration::from_millis(1500);

/// Posts notices with `chat.postEphemeral`: once, without waiting for a
/// rate limit, within [`NOTICE_TIMEOUT`].
///
/// The Web API client is built at the first notice, not with this value,
/// so a process that never sends one (most ingest invocations) pays
/// nothing for it at start-up.
pub struct SlackNotices {
    client: QuickClient,
}

impl SlackNotices {
    /// Notices through the Web API at `api_url` with `token`.
    pub fn new(api_url: impl Into<String>, token: BotToken) -> Self {
        SlackNotices {
            client: QuickClient::new(api_url, token, NOTICE_TIMEOUT),
        }
    }

    fn client(&self) -> Result<&SlackClient, NoticeError> {
        self.client.get().map_err(|e| NoticeError(e.to_owned()))
    }
}

impl std::fmt::Debug for SlackNotices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackNotices")
            .field("api_url", &self.client.api_url())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Notices for SlackNotices {
    async fn ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), NoticeError> {
        self.client()?
            .post_ephemeral(channel, user, thread_ts, text)
            .await
            .map_err(|e| NoticeError(e.to_string()))
    }

    async fn post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<String, NoticeError> {
        self.client()?
            .post_message(channel, thread_ts, text, None)
            .await
            .map_err(|e| NoticeError(e.to_string()))
    }

    /// A section saying what is asked and a **Connect NAME** url button:
    /// Slack opens the link in the person's browser (no interaction
    /// payload comes back for a url button; the ingest's acknowledgement
    /// of `block_actions` ignores it).
    async fn connect_prompt(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        provider: &str,
        url: &str,
    ) -> Result<(), NoticeError> {
        let text =
            format!("To go on, I need to act as you with `{provider}`: connect your account.");
        self.client()?
            .post_ephemeral_blocks(
                channel,
                user,
                thread_ts,
                &text,
                connect_blocks(&text, provider, url),
            )
            .await
            .map_err(|e| NoticeError(e.to_string()))
    }

    /// Only to Slack's `hooks.slack.com` (or the configured Web API's
    /// host): see [`crate::commands::response_url_allowed`].
    async fn respond(&self, response_url: &str, text: &str) -> Result<(), NoticeError> {
        let client = self.client()?;
        crate::commands::respond(client.http_client(), client.base_url(), response_url, text)
            .await
            .map_err(|e| NoticeError(e.to_string()))
    }
}

/// The Block Kit of a connect prompt: the text, then the button.
fn connect_blocks(text: &str, provider: &str, url: &str) -> serde_json::Value {
    // Slack's limit for a button's text is 75 characters.
    let label: String = format!("Connect {provider}").chars().take(75).collect();
    serde_json::json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "elements": [
            {"type": "button", "action_id": CONNECT_ACTION, "style": "primary",
             "text": {"type": "plain_text", "text": label}, "url": url}
        ]}
    ])
}

/// The `action_id` of a connect prompt's button (a url button: Slack still
/// sends a `block_actions` payload, which needs only an acknowledgement).
pub const CONNECT_ACTION: &str = "baton_connect";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;

    #[tokio::test]
    async fn posts_an_ephemeral_note_in_the_thread() {
        let fake = FakeSlack::start().await;
        let notices = SlackNotices::new(fake.base_url(), fake.bot_token());
        notices
            .ephemeral(
                "C1",
                "U2",
                Some("1700000000.000100"),
                "Only <@U1> may stop it.",
            )
            .await
            .expect("posted");
        let calls = fake.calls("chat.postEphemeral");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["channel"], "C1");
        assert_eq!(calls[0]["user"], "U2");
        assert_eq!(calls[0]["thread_ts"], "1700000000.000100");
        assert_eq!(calls[0]["text"], "Only <@U1> may stop it.");
        // Nobody else sees it: it is no message of the conversation.
        assert!(fake.posted().is_empty());
    }

    #[tokio::test]
    async fn a_connect_prompt_is_a_button_to_one_person() {
        let fake = FakeSlack::start().await;
        let notices = SlackNotices::new(fake.base_url(), fake.bot_token());
        let url = "https://api.example/connect/abc";
        notices
            .connect_prompt("C1", "U2", Some("1.0"), "github", url)
            .await
            .expect("posted");
        let calls = fake.calls("chat.postEphemeral");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["user"], "U2");
        assert_eq!(calls[0]["thread_ts"], "1.0");
        let button = &calls[0]["blocks"][1]["elements"][0];
        assert_eq!(button["type"], "button");
        assert_eq!(button["text"]["text"], "Connect github");
        assert_eq!(button["url"], url);
        assert!(fake.posted().is_empty(), "nobody else sees it");
    }

    #[tokio::test]
    async fn a_refusal_is_an_error_and_a_rate_limit_is_not_waited_for() {
        let fake = FakeSlack::start().await;
        let notices = SlackNotices::new(fake.base_url(), fake.bot_token());
        fake.fail_next("chat.postEphemeral", "user_not_in_channel");
        let err = notices
            .ephemeral("C1", "U2", None, "x")
            .await
            .expect_err("refused");
        assert!(err.to_string().contains("user_not_in_channel"), "{err}");
        fake.rate_limit_next("chat.postEphemeral", 30);
        let started = std::time::Instant::now();
        notices
            .ephemeral("C1", "U2", None, "x")
            .await
            .expect_err("rate limited");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(fake.calls("chat.postEphemeral").is_empty());
        // A bad token is an error too, never the token itself.
        let wrong = SlackNotices::new(fake.base_url(), BotToken::new("xoxb-wrong-secret"));
        let err = wrong.ephemeral("C1", "U2", None, "x").await.unwrap_err();
        assert!(!err.to_string().contains("xoxb-wrong-secret"), "{err}");
        // A base URL that is not http(s) is reported at the first notice.
        let bad = SlackNotices::new("ftp://nope", fake.bot_token());
        assert!(bad.ephemeral("C1", "U2", None, "x").await.is_err());
    }
}
