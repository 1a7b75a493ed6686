//! Who people are: the people port, implemented for Slack in
//! `baton_slack::people` (`users.info`, cached).
//!
//! The worker tells the model who is in a conversation by name; a name it
//! cannot learn is simply left out (the Slack user id still shows).

use async_trait::async_trait;

/// Display names of the people Baton talks with.
#[async_trait]
pub trait People: Send + Sync {
    /// The display name of Slack user `user` of workspace `team`, if known.
    async fn display_name(&self, team: &str, user: &str) -> Option<String>;
}
