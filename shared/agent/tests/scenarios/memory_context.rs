//! Remembered facts in the system prompt, over the store: facts stored with
//! `remember` are found for the latest user message and shown, as data,
//! only to their user and workspace, and a failing store only leaves them
//! out.

use async_trait::async_trait;
use baton_agent::context::{
    build_request, memory_query, recall_for_prompt, with_memory, MEMORY_HEADING,
};
use baton_core::memory::{fact_id_from_key, MemoryScope, MemoryStore};
use baton_core::testing::MemoryTable;
use baton_core::tool_names::RECALL;
use baton_core::{
    Entry, EntryKind, Instant, Item, Key, Origin, Table, TableError, ToolSpec, Write,
};
use baton_settings::AgentConfig;
use std::sync::Arc;

fn origin(user: &str) -> Origin {
    Origin::Slack {
        team_id: "T1".into(),
        channel: "D1".into(),
        thread_ts: "1.0".into(),
        user: user.into(),
        channel_type: Some(baton_core::ChannelType::Im),
    }
}

/// A mention of the bot in a channel others read along in.
fn channel_origin(user: &str) -> Origin {
    Origin::Slack {
        team_id: "T1".into(),
        channel: "C1".into(),
        thread_ts: "2.0".into(),
        user: user.into(),
        channel_type: None,
    }
}

fn user_scope(user: &str) -> MemoryScope {
    MemoryScope::User {
        team_id: "T1".into(),
        user: user.into(),
    }
}

fn transcript(texts: &[&str]) -> Vec<Entry> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Entry {
            seq: i as u64,
            at: Instant(0),
            kind: EntryKind::UserMessage {
                text: (*t).to_owned(),
                from: None,
            },
        })
        .collect()
}

fn recall_spec() -> ToolSpec {
    ToolSpec {
        name: RECALL.into(),
        description: "recall".into(),
        input_schema: serde_json::json!({"type": "object"}),
    }
}

#[tokio::test]
async fn remembered_facts_relevant_to_the_message_appear_in_the_request() {
    let memory = MemoryStore::new(Arc::new(MemoryTable::default()));
    let ws = MemoryScope::Workspace {
        team_id: "T1".into(),
    };
    let facts = [
        (
            user_scope("U1"),
            "k1",
            "Prefers answers in the German language",
        ),
        (ws.clone(), "k2", "Production deploys happen on Tuesdays"),
        (ws, "k3", "The office plant is called Gerald"),
        (user_scope("U2"), "k4", "U2 deploys from a laptop"),
    ];
    for (i, (scope, key, text)) in facts.iter().enumerate() {
        memory
            .remember(
                scope,
                &fact_id_from_key(key),
                text,
                "task",
                Instant(1_000 + i as i64),
            )
            .await
            .unwrap();
    }
    let log = transcript(&[
        "hi",
        "When do we deploy to production, and in which language?",
    ]);
    let mut agent = AgentConfig::new("default", "gpt-4o");
    agent.system_prompt = "You are helpful.".into();
    let mut request = build_request(&agent, &log, vec![recall_spec()]);

    let query = memory_query(&request, &log).expect("recall is offered");
    let found = recall_for_prompt(&memory, &origin("U1"), query).await;
    assert_eq!(with_memory(&mut request, &found), 2);

    let system = &request.system;
    assert!(system.starts_with("You are helpful.\n\n"), "{system}");
    assert!(system.contains(MEMORY_HEADING));
    let deploy = format!(
        "- fact {} (workspace memory, 1970-01-01): \"Production deploys happen on Tuesdays\"",
        fact_id_from_key("k2")
    );
    assert!(system.contains(&deploy), "{system}");
    assert!(
        system.contains("\"Prefers answers in the German language\""),
        "{system}"
    );
    // The most relevant first: two keywords beat one.
    assert!(system.find("deploys happen").unwrap() < system.find("German").unwrap());
    // Not relevant, or not this user's: not shown.
    assert!(!system.contains("Gerald"));
    assert!(!system.contains("laptop"));

    // The same message from the same user in a channel: only the
    // workspace's fact; what is personal to U1 stays out of a shared place.
    let mut request = build_request(&agent, &log, vec![recall_spec()]);
    let found = recall_for_prompt(&memory, &channel_origin("U1"), query).await;
    assert_eq!(with_memory(&mut request, &found), 1);
    assert!(request.system.contains("deploys happen"));
    assert!(!request.system.contains("German"), "{}", request.system);
}

#[tokio::test]
async fn without_the_recall_tool_nothing_is_looked_up() {
    let memory = MemoryStore::new(Arc::new(MemoryTable::default()));
    memory
        .remember(
            &user_scope("U1"),
            &fact_id_from_key("k"),
            "Likes tea",
            "t",
            Instant(1),
        )
        .await
        .unwrap();
    let log = transcript(&["tea?"]);
    let agent = AgentConfig::new("default", "gpt-4o");
    let request = build_request(&agent, &log, Vec::new());
    assert_eq!(memory_query(&request, &log), None);
}

/// A table that is down.
struct Down;

#[async_trait]
impl Table for Down {
    async fn get(&self, _: &Key) -> Result<Option<Item>, TableError> {
        Err(TableError::Unavailable("down".into()))
    }
    async fn query(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: usize,
    ) -> Result<Vec<Item>, TableError> {
        Err(TableError::Unavailable("down".into()))
    }
    async fn query_index(&self, _: &str, _: usize) -> Result<Vec<Item>, TableError> {
        Err(TableError::Unavailable("down".into()))
    }
    async fn transact(&self, _: Vec<Write>) -> Result<(), TableError> {
        Err(TableError::Unavailable("down".into()))
    }
}

#[tokio::test]
async fn a_failing_store_only_leaves_the_facts_out() {
    let memory = MemoryStore::new(Arc::new(Down));
    let found = recall_for_prompt(&memory, &origin("U1"), "anything").await;
    assert!(found.is_empty());
    let log = transcript(&["anything"]);
    let agent = AgentConfig::new("default", "gpt-4o");
    let mut request = build_request(&agent, &log, vec![recall_spec()]);
    let before = request.system.clone();
    assert_eq!(with_memory(&mut request, &found), 0);
    assert_eq!(request.system, before);
}
