//! Members of Slack user groups (`usergroups.users.list`), cached: what
//! the roles lookup (`baton_settings::RoleLookup`) reads for a role's
//! `usergroups`.

use crate::web::{BotToken, QuickClient, SlackClient};
use async_trait::async_trait;
use baton_core::UsergroupMembers;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a group's members are kept before asking again.
pub const MEMBERS_TTL: Duration = Duration::from_secs(600);
/// The longest one lookup may take: a click waits for it.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// The most groups kept (a cache, not a directory).
const MAX_CACHED: usize = 1_000;

/// Reads group members with `usergroups.users.list` and keeps them for
/// [`MEMBERS_TTL`]. A failure is not kept: the next lookup asks again.
pub struct SlackUsergroups {
    client: Client,
    cache: Mutex<HashMap<String, (Vec<String>, Instant)>>,
}

/// The worker shares its Slack client; the ingest builds one at its first
/// lookup.
enum Client {
    Ready(SlackClient),
    Lazy(QuickClient),
}

impl SlackUsergroups {
    pub fn new(client: SlackClient) -> Self {
        SlackUsergroups {
            client: Client::Ready(client),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Members from the Web API at `api_url`, its client built at the
    /// first lookup.
    pub fn lazy(api_url: &str, token: BotToken) -> Self {
        SlackUsergroups {
            client: Client::Lazy(QuickClient::new(api_url, token, LOOKUP_TIMEOUT)),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn client(&self) -> Result<&SlackClient, String> {
        match &self.client {
            Client::Ready(c) => Ok(c),
            Client::Lazy(q) => q.get().map_err(str::to_owned),
        }
    }

    fn cached(&self, key: &str) -> Option<Vec<String>> {
        let cache = self.cache.lock().ok()?;
        let (members, at) = cache.get(key)?;
        (at.elapsed() < MEMBERS_TTL).then(|| members.clone())
    }

    fn keep(&self, key: String, members: Vec<String>) {
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            cache.insert(key, (members, Instant::now()));
        }
    }
}

/// The user ids of a `usergroups.users.list` answer.
fn members_of(answer: &Value) -> Result<Vec<String>, String> {
    let users = answer
        .get("users")
        .and_then(Value::as_array)
        .ok_or("usergroups.users.list answered without `users`")?;
    Ok(users
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect())
}

#[async_trait]
impl UsergroupMembers for SlackUsergroups {
    async fn members(&self, team: &str, group: &str) -> Result<Vec<String>, String> {
        let key = format!("{team}:{group}");
        if let Some(known) = self.cached(&key) {
            return Ok(known);
        }
        let client = self.client()?;
        // `team_id` matters only to org-wide apps; Slack ignores it for a
        // workspace's own token.
        let fields = [("usergroup", group), ("team_id", team)];
        let lookup = client.call_form("usergroups.users.list", &fields);
        let members = match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
            Ok(Ok(answer)) => members_of(&answer)?,
            Ok(Err(e)) => return Err(format!("usergroups.users.list: {e}")),
            Err(_) => return Err("usergroups.users.list: no answer in time".to_owned()),
        };
        self.keep(key, members.clone());
        Ok(members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSlack;

    #[tokio::test]
    async fn members_are_read_once_and_cached() {
        let slack = FakeSlack::start().await;
        slack.set_usergroup("S1", &["U1", "U2"]);
        let groups = SlackUsergroups::new(slack.client());
        assert_eq!(groups.members("T1", "S1").await.unwrap(), ["U1", "U2"]);
        assert_eq!(groups.members("T1", "S1").await.unwrap(), ["U1", "U2"]);
        let calls = slack.calls("usergroups.users.list");
        assert_eq!(calls.len(), 1, "cached");
        assert_eq!(calls[0]["usergroup"], "S1");
    }

    #[tokio::test]
    async fn a_failure_is_an_error_and_is_not_kept() {
        let slack = FakeSlack::start().await;
        let groups = SlackUsergroups::new(slack.client());
        let e = groups.members("T1", "S404").await.unwrap_err();
        assert!(e.contains("no_such_subteam"), "{e}");
        slack.set_usergroup("S404", &["U3"]);
        assert_eq!(groups.members("T1", "S404").await.unwrap(), ["U3"]);
        assert_eq!(slack.calls("usergroups.users.list").len(), 2);
    }
}
