//! Downloading the files shared with a message: `url_private_download`
//! with the bot token (the app needs the `files:read` scope).
//!
//! Only Slack's file host (`files.slack.com`) or the host of the
//! configured Web API URL (a fake Slack in tests) is ever sent the token:
//! any other URL, or a redirect to another host, is refused. The size
//! limit holds by the announced `Content-Length` and again while reading.

use std::sync::Arc;
use std::time::Duration;

use baton_core::attachment::{FetchError, FileSource};
use reqwest::header::CONTENT_TYPE;
use reqwest::redirect::{Attempt, Policy};
use reqwest::Url;

use crate::web::{BotToken, SlackError};

/// Slack's file host.
pub const FILE_HOST: &str = "files.slack.com";
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_REDIRECTS: usize = 5;

/// A [`FileSource`] over Slack's file host.
#[derive(Clone)]
pub struct SlackFiles {
    http: reqwest::Client,
    token: BotToken,
    hosts: Arc<Vec<String>>,
}

impl std::fmt::Debug for SlackFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackFiles")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

fn allowed(url: &Url, hosts: &[String]) -> bool {
    matches!(url.scheme(), "https" | "http")
        && url
            .host_str()
            .is_some_and(|h| hosts.iter().any(|a| a.eq_ignore_ascii_case(h)))
}

impl SlackFiles {
    /// Downloads with `token` from Slack's file host or the host of
    /// `api_url` (`SLACK_API_URL`).
    ///
    /// # Errors
    /// [`SlackError::Config`] when `api_url` is not a URL or the HTTP client
    /// cannot be built.
    pub fn new(api_url: &str, token: BotToken) -> Result<Self, SlackError> {
        let api = Url::parse(api_url).map_err(|e| SlackError::Config(format!("{api_url}: {e}")))?;
        let mut hosts = vec![FILE_HOST.to_owned()];
        if let Some(host) = api.host_str() {
            hosts.push(host.to_owned());
        }
        let hosts = Arc::new(hosts);
        let redirect_hosts = hosts.clone();
        let policy = Policy::custom(move |attempt: Attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                attempt.error("too many redirects")
            } else if allowed(attempt.url(), &redirect_hosts) {
                attempt.follow()
            } else {
                attempt.error("redirected away from Slack's file host")
            }
        });
        let http = reqwest::Client::builder()
            .redirect(policy)
            .timeout(DOWNLOAD_TIMEOUT)
            .build()
            .map_err(|e| SlackError::Config(e.to_string()))?;
        Ok(Self { http, token, hosts })
    }
}

#[async_trait::async_trait]
impl FileSource for SlackFiles {
    async fn fetch(&self, url: &str, max_bytes: u64) -> Result<Vec<u8>, FetchError> {
        let url =
            Url::parse(url).map_err(|_| FetchError::Failed("its link is not a URL".into()))?;
        if !allowed(&url, &self.hosts) {
            return Err(FetchError::Failed(format!(
                "its link is not on Slack's file host ({})",
                url.host_str().unwrap_or("no host")
            )));
        }
        let html_expected = url.path().ends_with(".html") || url.path().ends_with(".htm");
        let mut resp = self
            .http
            .get(url)
            .bearer_auth(self.token.expose())
            .send()
            .await
            .map_err(|e| FetchError::Failed(e.without_url().to_string()))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(FetchError::Failed(format!("Slack answered HTTP {status}")));
        }
        // Without `files:read`, Slack answers its sign-in page.
        let is_html = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().starts_with("text/html"));
        if is_html && !html_expected {
            return Err(FetchError::Failed(
                "Slack answered a web page, not the file (does the app have the files:read scope?)"
                    .into(),
            ));
        }
        if let Some(len) = resp.content_length().filter(|l| *l > max_bytes) {
            return Err(FetchError::TooLarge { bytes: len });
        }
        let mut data = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| FetchError::Failed(e.without_url().to_string()))?
        {
            let read = (data.len() + chunk.len()) as u64;
            if read > max_bytes {
                return Err(FetchError::TooLarge { bytes: read });
            }
            data.extend_from_slice(&chunk);
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;

    #[tokio::test]
    async fn downloads_with_the_token_from_the_api_host_only() {
        let fake = FakeSlack::start().await;
        let url = fake.add_file("notes.txt", b"hello".to_vec());
        let files = SlackFiles::new(&fake.base_url(), fake.bot_token()).unwrap();
        assert_eq!(files.fetch(&url, 100).await.unwrap(), b"hello");
        assert_eq!(fake.downloads("notes.txt"), 1);
        assert_eq!(
            files.fetch(&url, 3).await,
            Err(FetchError::TooLarge { bytes: 5 })
        );
        let elsewhere = url.replace("127.0.0.1", "localhost");
        assert!(matches!(
            files.fetch(&elsewhere, 100).await,
            Err(FetchError::Failed(e)) if e.contains("not on Slack's file host")
        ));
        // The wrong token is refused by the host.
        let stranger = SlackFiles::new(&fake.base_url(), BotToken::new("xoxb-other")).unwrap();
        assert!(matches!(
            stranger.fetch(&url, 100).await,
            Err(FetchError::Failed(e)) if e.contains("HTTP 403")
        ));
        let missing = url.replace("notes.txt", "gone.txt");
        assert!(matches!(
            files.fetch(&missing, 100).await,
            Err(FetchError::Failed(e)) if e.contains("HTTP 404")
        ));
    }
}
