//! Display names from Slack (`users.info`), cached: the Slack
//! implementation of the people port (`baton_core::People`).

use crate::web::{BotToken, QuickClient, SlackClient};
use async_trait::async_trait;
use baton_core::People;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a name (or the lack of one) is kept before asking again.
pub const NAME_TTL: Duration = Duration::from_secs(3600);
/// The longest one lookup may take: the worker waits for it before a
/// model call.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// The most names kept (a cache, not a directory).
const MAX_CACHED: usize = 10_000;

/// Looks names up with `users.info` and keeps them for [`NAME_TTL`].
pub struct SlackPeople {
    client: Client,
    cache: Mutex<HashMap<String, (Option<String>, Instant)>>,
}

/// The worker shares its Slack client; the ingest builds one at its first
/// lookup, so a cold start that shows no names pays nothing for it.
enum Client {
    Ready(SlackClient),
    Lazy(QuickClient),
}

impl SlackPeople {
    pub fn new(client: SlackClient) -> Self {
        SlackPeople {
            client: Client::Ready(client),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Names from the Web API at `api_url`, its client built at the first
    /// lookup.
    pub fn lazy(api_url: &str, token: BotToken) -> Self {
        SlackPeople {
            client: Client::Lazy(QuickClient::new(api_url, token, LOOKUP_TIMEOUT)),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn client(&self) -> Option<&SlackClient> {
        match &self.client {
            Client::Ready(c) => Some(c),
            Client::Lazy(q) => q
                .get()
                .map_err(|e| tracing::debug!(error = %e, "no Slack client for users.info"))
                .ok(),
        }
    }

    fn cached(&self, key: &str) -> Option<Option<String>> {
        let cache = self.cache.lock().ok()?;
        let (name, at) = cache.get(key)?;
        (at.elapsed() < NAME_TTL).then(|| name.clone())
    }

    fn keep(&self, key: String, name: Option<String>) {
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            cache.insert(key, (name, Instant::now()));
        }
    }
}

/// The name Slack shows for a `users.info` answer: the display name, else
/// the real name, else the handle.
fn name_of(answer: &Value) -> Option<String> {
    let user = answer.get("user")?;
    let profile = user.get("profile");
    [
        profile.and_then(|p| p.get("display_name")),
        profile.and_then(|p| p.get("real_name")),
        user.get("real_name"),
        user.get("name"),
    ]
    .into_iter()
    .flatten()
    .filter_map(Value::as_str)
    .map(str::trim)
    .find(|n| !n.is_empty())
    .map(|n| n.chars().take(80).collect())
}

#[async_trait]
impl People for SlackPeople {
    async fn display_name(&self, team: &str, user: &str) -> Option<String> {
        let key = format!("{team}:{user}");
        if let Some(known) = self.cached(&key) {
            return known;
        }
        let client = self.client()?;
        let fields = [("user", user)];
        let lookup = client.call_form("users.info", &fields);
        let name = match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
            Ok(Ok(answer)) => name_of(&answer),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "users.info failed; the user is shown by id");
                // A passing failure is asked again next time; a refusal
                // (no such user, a missing scope) is kept.
                if e.is_transient() {
                    return None;
                }
                None
            }
            Err(_) => return None,
        };
        self.keep(key, name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;

    #[test]
    fn names_prefer_the_display_name() {
        let v = serde_json::json!({"ok": true, "user": {"name": "alice", "real_name": "Alice Liddell",
            "profile": {"display_name": "", "real_name": "Alice L."}}});
        assert_eq!(name_of(&v).as_deref(), Some("Alice L."));
        let v = serde_json::json!({"ok": true, "user": {"name": "bob", "profile": {"display_name": "Bobby"}}});
        assert_eq!(name_of(&v).as_deref(), Some("Bobby"));
        assert_eq!(name_of(&serde_json::json!({"ok": true})), None);
    }

    #[tokio::test]
    async fn names_are_looked_up_once_and_cached() {
        let slack = FakeSlack::start().await;
        slack.set_user_name("U1", "Alice");
        let people = SlackPeople::new(slack.client());
        assert_eq!(
            people.display_name("T1", "U1").await.as_deref(),
            Some("Alice")
        );
        assert_eq!(
            people.display_name("T1", "U1").await.as_deref(),
            Some("Alice")
        );
        assert_eq!(slack.calls("users.info").len(), 1, "cached");
        assert_eq!(people.display_name("T1", "U404").await, None);
    }
}
