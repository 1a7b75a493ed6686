//! Long-lived memory: the facts the `remember`, `recall` and `forget` tools
//! keep per Slack workspace and per user, in the task table.
//!
//! Item layout (same table as tasks, over the [`Table`] port):
//!
//! | item | pk | sk | data |
//! | --- | --- | --- | --- |
//! | fact | `MEM#{scope}` | `F#{fact-id}` | `{text, created_at, task_id}` |
//! | scope version | `MEM#{scope}` | `VERSION` | `{}` |
//!
//! where `scope` is `team:{TEAM}` (a Slack workspace), `user:{TEAM}:{USER}`
//! (one Slack user) or `api` (tasks made through the HTTP API, which have no
//! user). Every `remember` bumps the scope's version item in the same
//! transaction as the new fact, so concurrent calls serialise and the cap
//! ([`MAX_FACTS_PER_SCOPE`]) holds. A fact's id derives from the call's
//! idempotency key, so a retried call finds the fact it stored.
//!
//! The tools learn the user and workspace from the task's origin in the
//! store, never from their arguments: the model cannot read or write
//! another user's memory.

use crate::clock::{self, Instant};
use crate::{Condition, Item, Key, Origin, Table, TableError, Write};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::sync::Arc;

/// Default bound on the facts of one scope; more are refused.
pub const MAX_FACTS_PER_SCOPE: usize = 200;
/// Longest fact, in characters.
pub const MAX_FACT_CHARS: usize = 1_000;

const FACT_PREFIX: &str = "F#";
const VERSION_SK: &str = "VERSION";
/// Attempts of a remember that lost a race with another writer of its scope.
const MAX_CONFLICT_RETRIES: usize = 10;
/// Facts read per query page.
const PAGE: usize = 100;

/// Whose memory a fact belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemoryScope {
    /// Everyone in a Slack workspace.
    Workspace { team_id: String },
    /// One Slack user in one workspace.
    User { team_id: String, user: String },
    /// Tasks made through the HTTP API (one shared memory).
    Api,
}

impl MemoryScope {
    /// The scope's name in item keys: `team:T`, `user:T:U` or `api`.
    pub fn key(&self) -> String {
        match self {
            MemoryScope::Workspace { team_id } => format!("team:{team_id}"),
            MemoryScope::User { team_id, user } => format!("user:{team_id}:{user}"),
            MemoryScope::Api => "api".to_owned(),
        }
    }

    /// What the model is told the scope is: `user`, `workspace` or `api`.
    pub fn label(&self) -> &'static str {
        match self {
            MemoryScope::Workspace { .. } => "workspace",
            MemoryScope::User { .. } => "user",
            MemoryScope::Api => "api",
        }
    }

    /// The scopes a task may read (and forget from): in a person's direct
    /// messages with the bot, that person's scope and the workspace's, in
    /// that order; anywhere else in Slack (channels, group DMs), where
    /// others read along, the workspace's only. HTTP tasks have a single
    /// shared scope.
    pub fn of_origin(origin: &Origin) -> Vec<MemoryScope> {
        match origin {
            Origin::Http => vec![MemoryScope::Api],
            Origin::Slack { team_id, user, .. } => {
                let workspace = MemoryScope::Workspace {
                    team_id: team_id.clone(),
                };
                if origin.is_direct_message() {
                    let user = MemoryScope::User {
                        team_id: team_id.clone(),
                        user: user.clone(),
                    };
                    vec![user, workspace]
                } else {
                    vec![workspace]
                }
            }
        }
    }

    fn pk(&self) -> String {
        format!("MEM#{}", self.key())
    }
}

/// One remembered fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// 16 lowercase hex digits.
    pub id: String,
    pub scope: MemoryScope,
    pub text: String,
    pub created_at: Instant,
    /// The task that stored it.
    pub task_id: String,
}

impl Fact {
    /// The fact as the model sees it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "scope": self.scope.label(),
            "text": self.text,
            "remembered_at": self.created_at.to_string(),
        })
    }
}

#[derive(Serialize, Deserialize)]
struct FactRecord {
    text: String,
    /// Integer milliseconds in the item, as facts were always stored.
    #[serde(with = "clock::as_millis")]
    created_at: Instant,
    task_id: String,
}

/// Why a memory operation did not happen.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum MemoryError {
    #[error("the fact is empty")]
    Empty,
    #[error("the fact is longer than {max} characters; store a shorter summary")]
    TooLong { max: usize },
    #[error(
        "the {scope} memory is full ({max} facts); forget facts that no longer hold before \
         remembering new ones"
    )]
    Full { scope: &'static str, max: usize },
    #[error("no fact {0} (already forgotten?)")]
    NotFound(String),
    #[error("the memory kept changing under concurrent writers; try again")]
    Conflict,
    #[error("memory storage failed: {0}")]
    Table(#[from] TableError),
    #[error("stored memory unreadable: {0}")]
    Corrupt(String),
}

/// The outcome of [`MemoryStore::remember`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remembered {
    /// Stored now.
    New(Fact),
    /// Already there: stored by an earlier try of the same call, or the
    /// same text remembered before. Nothing was written.
    Existing(Fact),
}

/// A fact id from a stable key (a tool call's idempotency key): a retried
/// call makes the same id and finds the fact it stored.
pub fn fact_id_from_key(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `id` has the form of a fact id (what `forget` accepts).
pub fn valid_fact_id(id: &str) -> bool {
    id.len() == 16
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Facts per scope over the table. Cheap to clone.
#[derive(Clone)]
pub struct MemoryStore {
    table: Arc<dyn Table>,
    max_facts: usize,
}

impl MemoryStore {
    /// Memory over `table`, at most [`MAX_FACTS_PER_SCOPE`] facts per scope.
    pub fn new(table: Arc<dyn Table>) -> Self {
        MemoryStore {
            table,
            max_facts: MAX_FACTS_PER_SCOPE,
        }
    }

    /// Changes the bound on the facts of one scope.
    pub fn with_max_facts(mut self, max: usize) -> Self {
        self.max_facts = max;
        self
    }

    /// All facts of a scope, in no set order.
    pub async fn facts(&self, scope: &MemoryScope) -> Result<Vec<Fact>, MemoryError> {
        let pk = scope.pk();
        let mut facts = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .table
                .query(&pk, FACT_PREFIX, after.as_deref(), PAGE)
                .await?;
            let full = page.len() == PAGE;
            after = page.last().map(|i| i.key.sk.clone());
            for item in page {
                facts.push(fact_of(scope, &item)?);
            }
            if !full {
                return Ok(facts);
            }
        }
    }

    /// Stores `text` in `scope` under `id` (see [`fact_id_from_key`]).
    /// Idempotent: a fact already stored under `id`, or with the same text
    /// (ignoring case and spacing), is returned as [`Remembered::Existing`].
    pub async fn remember(
        &self,
        scope: &MemoryScope,
        id: &str,
        text: &str,
        task_id: &str,
        now: Instant,
    ) -> Result<Remembered, MemoryError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(MemoryError::Empty);
        }
        if text.chars().count() > MAX_FACT_CHARS {
            return Err(MemoryError::TooLong {
                max: MAX_FACT_CHARS,
            });
        }
        let pk = scope.pk();
        let fact_key = Key::new(pk.clone(), format!("{FACT_PREFIX}{id}"));
        let version_key = Key::new(pk, VERSION_SK);
        for _ in 0..MAX_CONFLICT_RETRIES {
            if let Some(item) = self.table.get(&fact_key).await? {
                return Ok(Remembered::Existing(fact_of(scope, &item)?));
            }
            // Read the version before the facts: a write in between changes
            // the version and our transaction fails and is retried.
            let version = self.table.get(&version_key).await?.map(|i| i.version);
            let facts = self.facts(scope).await?;
            let wanted = normalise(text);
            if let Some(same) = facts.iter().find(|f| normalise(&f.text) == wanted) {
                return Ok(Remembered::Existing(same.clone()));
            }
            if facts.len() >= self.max_facts {
                return Err(MemoryError::Full {
                    scope: scope.label(),
                    max: self.max_facts,
                });
            }
            let record = FactRecord {
                text: text.to_owned(),
                created_at: now,
                task_id: task_id.to_owned(),
            };
            let data =
                serde_json::to_string(&record).map_err(|e| MemoryError::Corrupt(e.to_string()))?;
            let writes = vec![
                Write::Put {
                    item: Item {
                        key: fact_key.clone(),
                        version: 1,
                        data,
                        index: None,
                        expires_at: None,
                        listing: None,
                    },
                    condition: Condition::NotExists,
                },
                Write::Put {
                    item: Item {
                        key: version_key.clone(),
                        version: version.map_or(1, |v| v + 1),
                        data: "{}".to_owned(),
                        index: None,
                        expires_at: None,
                        listing: None,
                    },
                    condition: version.map_or(Condition::NotExists, Condition::VersionIs),
                },
            ];
            match self.table.transact(writes).await {
                Ok(()) => {
                    return Ok(Remembered::New(Fact {
                        id: id.to_owned(),
                        scope: scope.clone(),
                        text: record.text,
                        created_at: now,
                        task_id: record.task_id,
                    }))
                }
                // The fact appeared (a concurrent try of this call) or the
                // scope changed: look again.
                Err(TableError::ConditionFailed { .. } | TableError::Contention) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(MemoryError::Conflict)
    }

    /// Deletes fact `id` from the first of `scopes` holding it.
    pub async fn forget(&self, scopes: &[MemoryScope], id: &str) -> Result<Fact, MemoryError> {
        if !valid_fact_id(id) {
            return Err(MemoryError::NotFound(id.to_owned()));
        }
        for scope in scopes {
            let key = Key::new(scope.pk(), format!("{FACT_PREFIX}{id}"));
            let Some(item) = self.table.get(&key).await? else {
                continue;
            };
            let fact = fact_of(scope, &item)?;
            let write = Write::Delete {
                key,
                condition: Condition::VersionIs(item.version),
            };
            return match self.table.transact(vec![write]).await {
                Ok(()) => Ok(fact),
                // Facts never change, so a failed condition means it is gone.
                Err(TableError::ConditionFailed { .. }) => {
                    Err(MemoryError::NotFound(id.to_owned()))
                }
                Err(e) => Err(e.into()),
            };
        }
        Err(MemoryError::NotFound(id.to_owned()))
    }

    /// The facts of `scopes` matching `query`, most relevant first (the
    /// newest first when the query has no keywords), at most `limit`.
    pub async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &str,
        limit: usize,
    ) -> Result<Vec<Fact>, MemoryError> {
        let mut all = Vec::new();
        for scope in scopes {
            all.extend(self.facts(scope).await?);
        }
        Ok(rank(all, query, limit))
    }

    /// [`MemoryStore::recall`] for whoever a task serves: for a system
    /// prompt, facts relevant to the task's input.
    pub async fn relevant(
        &self,
        origin: &Origin,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Fact>, MemoryError> {
        self.recall(&MemoryScope::of_origin(origin), query, limit)
            .await
    }
}

fn fact_of(scope: &MemoryScope, item: &Item) -> Result<Fact, MemoryError> {
    let record: FactRecord =
        serde_json::from_str(&item.data).map_err(|e| MemoryError::Corrupt(e.to_string()))?;
    let id = item
        .key
        .sk
        .strip_prefix(FACT_PREFIX)
        .unwrap_or(&item.key.sk)
        .to_owned();
    Ok(Fact {
        id,
        scope: scope.clone(),
        text: record.text,
        created_at: record.created_at,
        task_id: record.task_id,
    })
}

fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Words too common to say anything about relevance.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "at", "be", "by", "do", "does", "for", "from", "how", "i",
    "in", "is", "it", "me", "my", "of", "on", "or", "our", "that", "the", "this", "to", "us",
    "was", "we", "what", "when", "where", "which", "who", "why", "with", "you", "your",
];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The query's keywords: lowercase words, no stopwords, no repeats.
fn keywords(query: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    words(query)
        .into_iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// How well `text` matches `keywords`: 2 per keyword that is a word of the
/// text, 1 per keyword that only starts a word ("deploy" in "deployments").
fn score(text: &str, keywords: &[String]) -> usize {
    let text_words = words(text);
    keywords
        .iter()
        .map(|k| {
            if text_words.iter().any(|w| w == k) {
                2
            } else if text_words.iter().any(|w| w.starts_with(k.as_str())) {
                1
            } else {
                0
            }
        })
        .sum()
}

/// Orders facts by relevance to `query` (ties: newest first), dropping those
/// that match no keyword; with no keywords, the newest first. At most `limit`.
pub fn rank(facts: Vec<Fact>, query: &str, limit: usize) -> Vec<Fact> {
    let keys = keywords(query);
    let mut scored: Vec<(usize, Fact)> = facts
        .into_iter()
        .map(|f| (score(&f.text, &keys), f))
        .filter(|(s, _)| keys.is_empty() || *s > 0)
        .collect();
    scored.sort_by(|(sa, a), (sb, b)| {
        sb.cmp(sa)
            .then(b.created_at.cmp(&a.created_at))
            .then(a.id.cmp(&b.id))
    });
    scored.into_iter().take(limit).map(|(_, f)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::ChannelType;

    fn slack(channel_type: ChannelType) -> Origin {
        Origin::Slack {
            team_id: "T1".into(),
            channel: "X1".into(),
            thread_ts: "1.0".into(),
            user: "U1".into(),
            channel_type: Some(channel_type),
        }
    }

    #[test]
    fn personal_facts_are_read_only_in_direct_messages() {
        let user = MemoryScope::User {
            team_id: "T1".into(),
            user: "U1".into(),
        };
        let team = MemoryScope::Workspace {
            team_id: "T1".into(),
        };
        assert_eq!(
            MemoryScope::of_origin(&slack(ChannelType::Im)),
            vec![user, team.clone()]
        );
        for shared in [ChannelType::Channel, ChannelType::Group, ChannelType::Mpim] {
            assert_eq!(MemoryScope::of_origin(&slack(shared)), vec![team.clone()]);
        }
        assert_eq!(
            MemoryScope::of_origin(&Origin::Http),
            vec![MemoryScope::Api]
        );
    }

    #[test]
    fn a_stored_fact_reads_and_writes_as_before() {
        let old = r#"{"text":"Prefers German","created_at":1767225600123,"task_id":"t1"}"#;
        let record: FactRecord = serde_json::from_str(old).unwrap();
        assert_eq!(record.created_at, Instant(1_767_225_600_123));
        assert_eq!(serde_json::to_string(&record).unwrap(), old);
        let item = Item {
            key: Key::new("MEM#api", "F#0123456789abcdef"),
            version: 1,
            data: old.to_owned(),
            index: None,
            expires_at: None,
            listing: None,
        };
        let fact = fact_of(&MemoryScope::Api, &item).unwrap();
        assert_eq!(fact.to_json()["remembered_at"], "2026-01-01T00:00:00.123Z");
    }
}
