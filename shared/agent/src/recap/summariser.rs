//! Summarising a conversation's overflowing turns ([`Recap::overflow`])
//! into its recap's summary with a model call, after a task on it ended.
//!
//! The call reads the recap, summarises its summary and overflow into the
//! next summary, and writes it back only if the recap still holds what it
//! summarised ([`Recap::settle`], under the thread record's version): two
//! summarisers at once cost a call but lose no turn. A failed, empty or
//! late answer folds the turns as before; a worker that dies before
//! writing leaves them waiting, folded for the next task, and the next
//! task's end summarises them with its own.
//!
//! [`Recap::overflow`]: baton_core::recap::Recap::overflow
//! [`Recap::settle`]: baton_core::recap::Recap::settle

use crate::sanitize::sanitize;
use baton_core::recap::{Pending, SUMMARISER_PROMPT};
use baton_core::{CompletionRequest, LlmError, LlmProvider, Message, TaskStore, ToolChoice, Usage};
use baton_settings::{AgentConfig, Tier};
use std::time::Duration;
use tokio::time::Instant;

/// The longest a summarising call may take; past it the turns are folded.
pub(crate) const CALL_MAX: Duration = Duration::from_secs(30);
/// Output tokens: room for the longest summary kept.
const MAX_TOKENS: u32 = 1_500;
/// Summaries tried when another writer changed the recap meanwhile.
const ROUNDS: usize = 2;
/// Writes tried under contention.
const WRITES: usize = 5;

/// The summarising request, on the agent's cheapest tier (its model when
/// it has no fast one).
pub(crate) fn request(agent: &AgentConfig, pending: &Pending) -> CompletionRequest {
    CompletionRequest {
        model: agent.tier_model(Tier::Fast).to_owned(),
        system: SUMMARISER_PROMPT.to_owned(),
        messages: vec![Message::User {
            content: pending.render(),
        }],
        tools: Vec::new(),
        max_tokens: MAX_TOKENS,
        tool_choice: ToolChoice::Auto,
    }
}

/// One summarising call made: for its span, its metrics and the budgets.
#[derive(Debug)]
pub(crate) struct Call {
    pub model: String,
    pub started: baton_core::Instant,
    pub took: Duration,
    /// What it used, when it answered.
    pub usage: Option<Usage>,
}

/// Why a call gave no summary; the turns are folded instead.
#[derive(Debug, thiserror::Error)]
enum NoSummary {
    #[error("the summarising call failed: {0}")]
    Llm(#[from] LlmError),
    #[error("no summary within {} s", .0.as_secs())]
    TimedOut(Duration),
    #[error("the model returned an empty summary")]
    Empty,
}

/// How a write of a summary went.
enum Written {
    Done,
    /// The recap no longer holds what was summarised.
    Stale,
    Failed,
}

/// Summarises the overflow of conversation `key`, within `window`; the
/// calls made. Nothing to do when no turn overflows.
pub(crate) async fn summarise(
    store: &TaskStore,
    llm: &dyn LlmProvider,
    agent: &AgentConfig,
    key: &str,
    window: Duration,
) -> Vec<Call> {
    let deadline = Instant::now() + window;
    let mut calls = Vec::new();
    for _ in 0..ROUNDS {
        let pending = match store.thread(key).await {
            Ok(Some(thread)) => thread.recap.pending(),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(thread = key, error = %e, "could not read the conversation to summarise it");
                None
            }
        };
        let Some(pending) = pending else {
            break;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // No time: the turns wait, folded, for the next task's end.
            break;
        }
        let (summary, call) = call(llm, &request(agent, &pending), left).await;
        calls.push(call);
        let summary = match summary {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(thread = key, error = %e, "no summary of the conversation: its oldest turns are folded");
                None
            }
        };
        match write(store, key, &pending, summary.as_deref()).await {
            Written::Done | Written::Failed => break,
            Written::Stale => continue,
        }
    }
    calls
}

async fn call(
    llm: &dyn LlmProvider,
    request: &CompletionRequest,
    window: Duration,
) -> (Result<String, NoSummary>, Call) {
    let started = baton_core::Instant::now();
    let clock = Instant::now();
    let answer = match tokio::time::timeout(window, llm.complete(request)).await {
        Ok(answer) => answer.map_err(NoSummary::from),
        Err(_) => Err(NoSummary::TimedOut(window)),
    };
    let call = Call {
        model: request.model.clone(),
        started,
        took: clock.elapsed(),
        usage: answer.as_ref().ok().map(|c| c.usage),
    };
    let summary = answer.and_then(|c| {
        let text = sanitize(&c.content);
        if text.trim().is_empty() {
            Err(NoSummary::Empty)
        } else {
            Ok(text)
        }
    });
    (summary, call)
}

/// Puts the summary of `pending` (or, with `None`, its fold) into the
/// recap, conditionally on the thread record's version.
async fn write(store: &TaskStore, key: &str, pending: &Pending, summary: Option<&str>) -> Written {
    for _ in 0..WRITES {
        let mut thread = match store.thread(key).await {
            Ok(Some(t)) => t,
            Ok(None) => return Written::Failed,
            Err(e) => {
                tracing::warn!(thread = key, error = %e, "could not read the conversation to write its summary");
                return Written::Failed;
            }
        };
        if !thread.recap.settle(pending, summary) {
            return Written::Stale;
        }
        match store.put_thread(&thread).await {
            Ok(true) => return Written::Done,
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(thread = key, error = %e, "could not write the conversation's summary");
                return Written::Failed;
            }
        }
    }
    tracing::warn!(
        thread = key,
        "could not write the conversation's summary under contention"
    );
    Written::Failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use baton_core::recap::{Recap, Speaker, Turn, MAX_TURNS};
    use baton_core::store::Thread;
    use baton_core::testing::{MemoryTable, NoBlobs};
    use baton_core::Completion;
    use baton_llm::ScriptedProvider;
    use std::sync::Arc;

    const KEY: &str = "http:t1";

    fn turn(text: String) -> Turn {
        Turn {
            speaker: Speaker::User,
            author: None,
            text,
            at: baton_core::Instant(0),
        }
    }

    /// A conversation of `MAX_TURNS + 3` turns whose first holds a fact
    /// past what a fold keeps, and `extra` in every turn.
    async fn conversation(extra: &str) -> TaskStore {
        let store = TaskStore::new(Arc::new(MemoryTable::default()), Arc::new(NoBlobs));
        let mut recap = Recap::default();
        for i in 0..MAX_TURNS + 3 {
            let fact = if i == 0 {
                format!("{}\n#remember the code is ZX-4471", "padding ".repeat(40))
            } else {
                String::new()
            };
            recap.push(turn(format!("turn {i} {extra}\n{fact}")));
        }
        let thread = Thread {
            key: KEY.into(),
            active_task: None,
            recap,
            seen_ts: None,
            always: Vec::new(),
            waiting: Vec::new(),
            version: 0,
        };
        assert!(store.put_thread(&thread).await.unwrap());
        store
    }

    async fn recap(store: &TaskStore) -> Recap {
        store.thread(KEY).await.unwrap().unwrap().recap
    }

    fn agent() -> AgentConfig {
        let mut agent = AgentConfig::new("default", "big");
        agent.tiers.fast = Some("small".into());
        agent
    }

    #[tokio::test]
    async fn the_overflow_becomes_a_summary_keeping_its_facts() {
        let store = conversation("").await;
        let folded = recap(&store).await.carried_summary().unwrap();
        assert!(!folded.contains("ZX-4471"), "the fold alone loses it");

        let calls = summarise(&store, &ScriptedProvider::new(), &agent(), KEY, CALL_MAX).await;
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].model, "small", "the cheapest tier");
        assert!(calls[0].usage.is_some_and(|u| u.input_tokens > 0));
        let r = recap(&store).await;
        assert!(r.overflow.is_empty());
        assert_eq!(
            r.summary.as_deref(),
            Some("[scripted model] summary of 3 turns\n#remember the code is ZX-4471")
        );
        assert_eq!(r.carried_summary(), r.summary);

        let again = summarise(&store, &ScriptedProvider::new(), &agent(), KEY, CALL_MAX).await;
        assert!(again.is_empty(), "nothing waits: no call");
    }

    #[tokio::test]
    async fn a_failed_call_folds_the_turns() {
        let store = conversation("#recap_fail").await;
        let calls = summarise(&store, &ScriptedProvider::new(), &agent(), KEY, CALL_MAX).await;
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].usage, None);
        let r = recap(&store).await;
        assert!(r.overflow.is_empty());
        let s = r.summary.unwrap();
        assert!(s.starts_with("user: turn 0 #recap_fail"), "{s}");
        assert!(s.ends_with("user: turn 2 #recap_fail\n"), "{s}");
    }

    /// A model that never answers in time.
    struct Slow;

    #[async_trait]
    impl LlmProvider for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        async fn complete(&self, _: &CompletionRequest) -> Result<Completion, LlmError> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Completion::default())
        }
    }

    #[tokio::test]
    async fn a_late_answer_folds_and_no_time_leaves_the_turns_waiting() {
        let store = conversation("").await;
        assert!(summarise(&store, &Slow, &agent(), KEY, Duration::ZERO)
            .await
            .is_empty());
        assert_eq!(recap(&store).await.overflow.len(), 3, "still waiting");

        let calls = summarise(&store, &Slow, &agent(), KEY, Duration::from_millis(50)).await;
        assert_eq!(calls.len(), 1);
        let r = recap(&store).await;
        assert!(r.overflow.is_empty());
        assert!(r.summary.unwrap().starts_with("user: turn 0"));
    }

    #[tokio::test]
    async fn two_summarisers_at_once_lose_no_turn() {
        let store = conversation("").await;
        let before = recap(&store).await;
        let model = ScriptedProvider::new();
        let a = agent();
        let (one, two) = tokio::join!(
            summarise(&store, &model, &a, KEY, CALL_MAX),
            summarise(&store, &model, &a, KEY, CALL_MAX)
        );
        assert!(!one.is_empty() || !two.is_empty());
        let r = recap(&store).await;
        assert!(r.overflow.is_empty());
        assert_eq!(
            r.turns, before.turns,
            "the turns kept word for word are untouched"
        );
        assert_eq!(
            r.summary.as_deref(),
            Some("[scripted model] summary of 3 turns\n#remember the code is ZX-4471")
        );
    }
}
