//! `disconnect NAME`: removes the sender's own connection to NAME (its
//! stored tokens), so their next call that needs it asks them to connect
//! again. Only ever the sender's: the person is the message's workspace
//! and user, never a name in the text. Alone, `disconnect` lists the
//! sender's connections.

use super::Context;
use crate::connections::provider_name;
use crate::response::ApiError;
use crate::Ingest;
use baton_core::connection::PersonKey;
use baton_core::store::connections::NOT_CONFIGURED;

pub(super) async fn answer(ingest: &Ingest, ctx: &Context) -> Result<String, ApiError> {
    let Some(store) = &ingest.connections else {
        return Ok(format!("I can't: {NOT_CONFIGURED}."));
    };
    let person = PersonKey::new(&ctx.team_id, &ctx.user);
    let Some(raw) = ctx.argument.as_deref() else {
        let mine = store
            .list_for(&person)
            .await
            .map_err(|e| ApiError::unavailable_on(ctx.conversation.as_deref(), e))?;
        if mine.is_empty() {
            return Ok("You have no connections.".to_owned());
        }
        let names: Vec<String> = mine.iter().map(|c| format!("`{}`", c.provider)).collect();
        return Ok(format!(
            "Your connections: {}. Send `disconnect NAME` to remove one.",
            names.join(", ")
        ));
    };
    let Some(provider) = provider_name(raw) else {
        return Ok(
            "`disconnect` takes the name of a connection (letters, digits, `.`, `_`, `-`)."
                .to_owned(),
        );
    };
    let removed = store
        .delete(&person, provider)
        .await
        .map_err(|e| ApiError::unavailable_on(ctx.conversation.as_deref(), e))?;
    if removed {
        tracing::info!(person = %person, provider, "connection removed by its person");
        Ok(format!("Disconnected {provider}"))
    } else {
        Ok(format!("You had no {provider} connection"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Command, Context};
    use crate::Ingest;
    use baton_core::connection::{PersonKey, Tokens};
    use baton_core::store::connections::{ConnectionStore, PutCondition};
    use baton_core::testing::TestSealer;
    use baton_core::{Instant, TaskStore};
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use secrecy::SecretString;
    use std::sync::Arc;

    fn ingest(dir: &std::path::Path, with_store: bool) -> (Ingest, ConnectionStore) {
        let b = EmbeddedBackend::open(dir, QueueConfig::default()).unwrap();
        let tasks = TaskStore::new(b.table.clone(), b.blobs.clone());
        let store = ConnectionStore::new(b.table.clone(), Arc::new(TestSealer));
        let agents = Agents::new(AgentConfig::new("default", "scripted"), Vec::new());
        let mut ingest = Ingest::new(tasks, b.queue.clone(), agents, None, None);
        if with_store {
            ingest = ingest.with_connections(store.clone());
        }
        (ingest, store)
    }

    fn ctx(user: &str, text: &str) -> Context {
        Context {
            team_id: "T1".into(),
            channel: "C1".into(),
            user: user.into(),
            conversation: Some("slack:T1:C1:1.0".into()),
            thread_ts: Some("1.0".into()),
            direct_message: false,
            dedupe_key: format!("k-{user}-{text}"),
            argument: Command::Disconnect.argument(text),
        }
    }

    async fn connect(store: &ConnectionStore, user: &str, provider: &str) {
        let tokens = Tokens {
            access_token: SecretString::from("at"),
            refresh_token: None,
            expires_at: None,
            scopes: vec![],
        };
        store
            .put(
                &PersonKey::new("T1", user),
                provider,
                &tokens,
                PutCondition::Replace,
                Instant(1),
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn removes_only_the_senders_own_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (ingest, store) = ingest(dir.path(), true);
        connect(&store, "U1", "github").await;
        connect(&store, "U1", "linear").await;
        connect(&store, "U2", "github").await;
        let say = |user: &str, text: &str| {
            let ctx = ctx(user, text);
            let ingest = ingest.clone();
            async move {
                ingest
                    .answer_command(Command::Disconnect, &ctx)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(say("U1", "disconnect github").await, "Disconnected github");
        assert!(store
            .get(&PersonKey::new("T1", "U1"), "github")
            .await
            .unwrap()
            .is_none());
        assert!(
            store
                .get(&PersonKey::new("T1", "U2"), "github")
                .await
                .unwrap()
                .is_some(),
            "another person's connection stays"
        );
        assert!(store
            .get(&PersonKey::new("T1", "U1"), "linear")
            .await
            .unwrap()
            .is_some());
        assert_eq!(
            say("U1", "disconnect github").await,
            "You had no github connection"
        );
        assert_eq!(
            say("U3", "disconnect github").await,
            "You had no github connection"
        );
        let list = say("U1", "disconnect").await;
        assert!(
            list.contains("`linear`") && !list.contains("github"),
            "{list}"
        );
        assert_eq!(say("U3", "disconnect").await, "You have no connections.");
        let odd = say("U1", "disconnect <@U2>").await;
        assert!(odd.starts_with("`disconnect` takes"), "{odd}");
        assert!(store
            .get(&PersonKey::new("T1", "U2"), "github")
            .await
            .unwrap()
            .is_some());
    }

    #[tokio::test]
    async fn without_a_store_it_says_connections_are_not_available() {
        let dir = tempfile::tempdir().unwrap();
        let (ingest, _) = ingest(dir.path(), false);
        let text = ingest
            .answer_command(Command::Disconnect, &ctx("U1", "disconnect github"))
            .await
            .unwrap();
        assert!(text.contains("BATON_CONNECTIONS_KEY"), "{text}");
    }
}
