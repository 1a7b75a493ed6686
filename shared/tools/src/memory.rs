//! Long-lived memory: the `remember`, `recall` and `forget` tools, and the
//! facts they keep per Slack workspace and per user in the task table.
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

use crate::args::{input_schema, run};
use crate::origin::task_origin;
use async_trait::async_trait;
use baton_core::{
    now_ms, rfc3339, Condition, Item, Key, Millis, Origin, Table, TableError, TaskStore, Tool,
    ToolContext, ToolOutput, ToolSpec, Write,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::sync::Arc;

/// The tool's name as the model sees it.
pub const REMEMBER: &str = "remember";
/// The tool's name as the model sees it.
pub const RECALL: &str = "recall";
/// The tool's name as the model sees it.
pub const FORGET: &str = "forget";

/// Default bound on the facts of one scope; more are refused.
pub const MAX_FACTS_PER_SCOPE: usize = 200;
/// Longest fact, in characters.
pub const MAX_FACT_CHARS: usize = 1_000;
/// Most facts one `recall` returns.
pub const MAX_RECALL: usize = 20;

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

    /// The user's and the workspace's scope of a task origin, in that order.
    /// HTTP tasks have a single shared scope, returned once.
    pub fn of_origin(origin: &Origin) -> Vec<MemoryScope> {
        match origin {
            Origin::Http => vec![MemoryScope::Api],
            Origin::Slack { team_id, user, .. } => vec![
                MemoryScope::User {
                    team_id: team_id.clone(),
                    user: user.clone(),
                },
                MemoryScope::Workspace {
                    team_id: team_id.clone(),
                },
            ],
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
    pub created_at: Millis,
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
            "remembered_at": rfc3339(self.created_at),
        })
    }
}

#[derive(Serialize, Deserialize)]
struct FactRecord {
    text: String,
    created_at: Millis,
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

fn valid_fact_id(id: &str) -> bool {
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
        now: Millis,
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

/// Which memory `remember` writes to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeArg {
    /// About or for the person asking (the default).
    #[default]
    User,
    /// True for everyone in this workspace.
    Workspace,
}

/// Arguments of `remember`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// The fact, short and self-contained, e.g. "Prefers answers in German".
    pub text: String,
    /// "user" (about or for the person asking; the default) or "workspace"
    /// (true for everyone in this Slack workspace).
    #[serde(default)]
    pub scope: Option<ScopeArg>,
}

/// Arguments of `recall`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// Keywords to look for, e.g. "deploy schedule". Empty: the most recent
    /// facts.
    #[serde(default)]
    pub query: String,
}

/// Arguments of `forget`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The id `remember` or `recall` gave.
    pub fact_id: String,
}

/// What the memory tools share.
#[derive(Clone)]
pub struct MemoryTools {
    memory: MemoryStore,
    tasks: TaskStore,
}

impl MemoryTools {
    /// Memory in the task store's table.
    pub fn new(tasks: TaskStore) -> Self {
        MemoryTools {
            memory: MemoryStore::new(tasks.table().clone()),
            tasks,
        }
    }

    /// Uses `memory` (e.g. with another cap) instead.
    pub fn with_memory(mut self, memory: MemoryStore) -> Self {
        self.memory = memory;
        self
    }

    /// The store behind the tools.
    pub fn memory(&self) -> &MemoryStore {
        &self.memory
    }

    /// `remember`, `recall` and `forget`.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(RememberTool(self.clone())),
            Arc::new(RecallTool(self.clone())),
            Arc::new(ForgetTool(self.clone())),
        ]
    }

    async fn remember(&self, args: RememberArgs, ctx: &ToolContext) -> Result<String, String> {
        let origin = task_origin(&self.tasks, ctx).await?;
        let scope = match (&origin, args.scope.unwrap_or_default()) {
            (Origin::Http, _) => MemoryScope::Api,
            (Origin::Slack { team_id, user, .. }, ScopeArg::User) => MemoryScope::User {
                team_id: team_id.clone(),
                user: user.clone(),
            },
            (Origin::Slack { team_id, .. }, ScopeArg::Workspace) => MemoryScope::Workspace {
                team_id: team_id.clone(),
            },
        };
        let id = fact_id_from_key(&ctx.idempotency_key);
        let done = self
            .memory
            .remember(&scope, &id, &args.text, ctx.task_id.as_str(), now_ms())
            .await
            .map_err(|e| e.to_string())?;
        Ok(match done {
            Remembered::New(f) => {
                format!("Remembered ({} memory, fact {}).", f.scope.label(), f.id)
            }
            Remembered::Existing(f) => format!(
                "Already remembered ({} memory, fact {}): {}",
                f.scope.label(),
                f.id,
                f.text
            ),
        })
    }

    async fn recall(&self, args: RecallArgs, ctx: &ToolContext) -> Result<String, String> {
        let origin = task_origin(&self.tasks, ctx).await?;
        let facts = self
            .memory
            .relevant(&origin, &args.query, MAX_RECALL)
            .await
            .map_err(|e| e.to_string())?;
        if facts.is_empty() {
            return Ok(if args.query.trim().is_empty() {
                "Nothing is remembered yet for this user or workspace.".to_owned()
            } else {
                format!("No remembered fact matches `{}`.", args.query.trim())
            });
        }
        let facts: Vec<_> = facts.iter().map(Fact::to_json).collect();
        Ok(serde_json::json!({ "facts": facts }).to_string())
    }

    async fn forget(&self, args: ForgetArgs, ctx: &ToolContext) -> Result<String, String> {
        let origin = task_origin(&self.tasks, ctx).await?;
        let f = self
            .memory
            .forget(&MemoryScope::of_origin(&origin), args.fact_id.trim())
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "Forgot fact {} ({} memory): {}",
            f.id,
            f.scope.label(),
            f.text
        ))
    }
}

struct RememberTool(MemoryTools);
struct RecallTool(MemoryTools);
struct ForgetTool(MemoryTools);

#[async_trait]
impl Tool for RememberTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: REMEMBER.into(),
            description: "Remember a lasting fact, preference or decision for later \
                conversations. scope \"user\" (default) is about or for the person asking; \
                \"workspace\" is true for everyone in this Slack workspace. Keep each fact short \
                and self-contained. Never store passwords, tokens or other secrets."
                .into(),
            input_schema: input_schema::<RememberArgs>(),
        }
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(REMEMBER, arguments, |args| self.0.remember(args, ctx)).await
    }
}

#[async_trait]
impl Tool for RecallTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: RECALL.into(),
            description: "Look up facts remembered in earlier conversations with this user and \
                workspace, most relevant first (at most 20). Use it when the request may depend \
                on preferences, names or decisions from before. An empty query lists the most \
                recent facts."
                .into(),
            input_schema: input_schema::<RecallArgs>(),
        }
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(RECALL, arguments, |args| self.0.recall(args, ctx)).await
    }
}

#[async_trait]
impl Tool for ForgetTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: FORGET.into(),
            description: "Forget a remembered fact that no longer holds, by the id `remember` \
                or `recall` gave."
                .into(),
            input_schema: input_schema::<ForgetArgs>(),
        }
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(FORGET, arguments, |args| self.0.forget(args, ctx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::testing::{MemoryTable, NoBlobs};
    use baton_core::{Limits, Task, TaskId};
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The in-memory table, with a gate: the first `gate` queries wait for
    /// each other after reading, so concurrent callers all read before any
    /// of them writes.
    struct MemTable {
        inner: MemoryTable,
        gate: usize,
        gated: AtomicUsize,
        barrier: tokio::sync::Barrier,
    }

    impl MemTable {
        fn gated(gate: usize) -> Self {
            MemTable {
                inner: MemoryTable::default(),
                gate,
                gated: AtomicUsize::new(0),
                barrier: tokio::sync::Barrier::new(gate.max(1)),
            }
        }
    }

    impl Default for MemTable {
        fn default() -> Self {
            MemTable::gated(0)
        }
    }

    #[async_trait]
    impl Table for MemTable {
        async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
            self.inner.get(key).await
        }
        async fn query(
            &self,
            pk: &str,
            prefix: &str,
            after: Option<&str>,
            limit: usize,
        ) -> Result<Vec<Item>, TableError> {
            let found = self.inner.query(pk, prefix, after, limit).await;
            if self.gated.fetch_add(1, Ordering::SeqCst) < self.gate {
                self.barrier.wait().await;
            }
            found
        }
        async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
            self.inner.query_index(index, limit).await
        }
        async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
            self.inner.transact(writes).await
        }
    }

    struct Env {
        table: Arc<MemTable>,
        tasks: TaskStore,
        tools: Toolbox,
    }

    struct Toolbox {
        remember: Arc<dyn Tool>,
        recall: Arc<dyn Tool>,
        forget: Arc<dyn Tool>,
    }

    fn env_with(max: usize) -> Env {
        env_gated(max, 0)
    }

    fn env_gated(max: usize, gate: usize) -> Env {
        let table = Arc::new(MemTable::gated(gate));
        let tasks = TaskStore::new(table.clone(), Arc::new(NoBlobs));
        let tools = MemoryTools::new(tasks.clone())
            .with_memory(MemoryStore::new(table.clone()).with_max_facts(max));
        let mut all = tools.tools().into_iter();
        let (Some(remember), Some(recall), Some(forget)) = (all.next(), all.next(), all.next())
        else {
            panic!("three tools")
        };
        Env {
            table,
            tasks,
            tools: Toolbox {
                remember,
                recall,
                forget,
            },
        }
    }

    fn slack(team: &str, user: &str) -> Origin {
        Origin::Slack {
            team_id: team.into(),
            channel: "C1".into(),
            thread_ts: "1.2".into(),
            user: user.into(),
        }
    }

    impl Env {
        /// A stored task for `origin`.
        async fn task(&self, origin: Origin) -> TaskId {
            let id = TaskId::generate();
            let task = Task::new(id.clone(), "default", origin, None, Limits::default(), 0);
            self.tasks.create(&task, Vec::new(), None).await.unwrap();
            id
        }

        async fn remember(&self, task: &TaskId, call: &str, args: serde_json::Value) -> ToolOutput {
            let ctx = ToolContext::new(task.clone(), 1, call);
            self.tools.remember.call(args, &ctx).await
        }

        async fn recall(&self, task: &TaskId, query: &str) -> Vec<String> {
            let ctx = ToolContext::new(task.clone(), 1, "recall");
            let out = self
                .tools
                .recall
                .call(json!({ "query": query }), &ctx)
                .await;
            assert!(!out.is_error, "{}", out.content);
            match serde_json::from_str::<serde_json::Value>(&out.content) {
                Ok(v) => v["facts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f["text"].as_str().unwrap().to_owned())
                    .collect(),
                Err(_) => Vec::new(),
            }
        }

        fn fact_items(&self) -> usize {
            self.table
                .inner
                .keys()
                .iter()
                .filter(|k| k.pk.starts_with("MEM#") && k.sk.starts_with("F#"))
                .count()
        }
    }

    #[tokio::test]
    async fn facts_are_kept_per_user_and_per_workspace() {
        let env = env_with(MAX_FACTS_PER_SCOPE);
        let alice = env.task(slack("T1", "UALICE")).await;
        let bob = env.task(slack("T1", "UBOB")).await;
        let other_team = env.task(slack("T2", "UALICE")).await;
        let api = env.task(Origin::Http).await;

        let out = env
            .remember(&alice, "c1", json!({"text": "Prefers answers in German"}))
            .await;
        assert!(
            !out.is_error && out.content.contains("user memory"),
            "{}",
            out.content
        );
        let out = env
            .remember(
                &alice,
                "c2",
                json!({"text": "Deploys happen on Tuesdays", "scope": "workspace"}),
            )
            .await;
        assert!(out.content.contains("workspace memory"), "{}", out.content);

        // Alice sees both; Bob only the workspace fact; another workspace
        // (even the same user id there) and the API see nothing.
        let mut a = env.recall(&alice, "").await;
        a.sort();
        assert_eq!(
            a,
            ["Deploys happen on Tuesdays", "Prefers answers in German"]
        );
        assert_eq!(env.recall(&bob, "").await, ["Deploys happen on Tuesdays"]);
        assert!(env.recall(&other_team, "").await.is_empty());
        assert!(env.recall(&api, "").await.is_empty());

        // HTTP tasks share one memory, whatever scope they ask for.
        let out = env
            .remember(
                &api,
                "c3",
                json!({"text": "Staging is at staging.example.com", "scope": "workspace"}),
            )
            .await;
        assert!(out.content.contains("api memory"), "{}", out.content);
        let api2 = env.task(Origin::Http).await;
        assert_eq!(
            env.recall(&api2, "staging").await,
            ["Staging is at staging.example.com"]
        );
        assert!(env.recall(&alice, "staging").await.is_empty());

        // The item layout of the brief.
        let keys: Vec<Key> = env.table.inner.keys();
        let pks: HashSet<&str> = keys
            .iter()
            .filter(|k| k.sk.starts_with("F#"))
            .map(|k| k.pk.as_str())
            .collect();
        assert_eq!(
            pks,
            HashSet::from(["MEM#user:T1:UALICE", "MEM#team:T1", "MEM#api"])
        );
    }

    #[tokio::test]
    async fn recall_orders_by_relevance_then_recency() {
        let store = MemoryStore::new(Arc::new(MemTable::default()));
        let user = MemoryScope::User {
            team_id: "T".into(),
            user: "U".into(),
        };
        let team = MemoryScope::Workspace {
            team_id: "T".into(),
        };
        let facts = [
            (&user, "a", "Likes short answers", 1),
            (&team, "b", "The deploy window is Tuesday afternoon", 2),
            (
                &user,
                "c",
                "Owns the deploy pipeline and the deployments dashboard",
                3,
            ),
            (&team, "d", "Deployments are frozen in December", 4),
            (&user, "e", "Lives in Berlin", 5),
        ];
        for (scope, key, text, at) in facts {
            let id = fact_id_from_key(key);
            let r = store.remember(scope, &id, text, "t", at).await.unwrap();
            assert!(matches!(r, Remembered::New(_)));
        }
        let scopes = [user.clone(), team.clone()];
        let texts = |v: Vec<Fact>| v.into_iter().map(|f| f.text).collect::<Vec<_>>();

        // "deploy" is a word of b and c (2 each; c is newer), only a prefix in d.
        // c also matches "dashboard". Stopwords count for nothing.
        let got = texts(
            store
                .recall(&scopes, "What is the deploy dashboard?", 20)
                .await
                .unwrap(),
        );
        assert_eq!(
            got,
            [
                "Owns the deploy pipeline and the deployments dashboard",
                "The deploy window is Tuesday afternoon",
                "Deployments are frozen in December",
            ]
        );
        // Case does not matter; unmatched facts are left out.
        let got = texts(store.recall(&scopes, "BERLIN", 20).await.unwrap());
        assert_eq!(got, ["Lives in Berlin"]);
        assert!(store
            .recall(&scopes, "kubernetes", 20)
            .await
            .unwrap()
            .is_empty());
        // No keywords: newest first, bounded.
        let got = texts(store.recall(&scopes, "  ", 2).await.unwrap());
        assert_eq!(
            got,
            ["Lives in Berlin", "Deployments are frozen in December"]
        );
        let got = texts(store.recall(&scopes, "the of", 20).await.unwrap());
        assert_eq!(got.len(), 5);
    }

    #[tokio::test]
    async fn recall_returns_at_most_twenty() {
        let env = env_with(MAX_FACTS_PER_SCOPE);
        let alice = env.task(slack("T1", "U1")).await;
        for i in 0..25 {
            let out = env
                .remember(
                    &alice,
                    &format!("c{i}"),
                    json!({"text": format!("fact number {i}")}),
                )
                .await;
            assert!(!out.is_error, "{}", out.content);
        }
        assert_eq!(env.recall(&alice, "fact").await.len(), MAX_RECALL);
        assert_eq!(env.recall(&alice, "").await.len(), MAX_RECALL);
    }

    #[tokio::test]
    async fn a_full_scope_refuses_with_a_clear_message() {
        let env = env_with(3);
        let alice = env.task(slack("T1", "U1")).await;
        for i in 0..3 {
            let out = env
                .remember(
                    &alice,
                    &format!("c{i}"),
                    json!({"text": format!("fact {i}")}),
                )
                .await;
            assert!(!out.is_error, "{}", out.content);
        }
        let out = env
            .remember(&alice, "c9", json!({"text": "one too many"}))
            .await;
        assert!(out.is_error);
        assert!(
            out.content.contains("user memory is full (3 facts)") && out.content.contains("forget"),
            "{}",
            out.content
        );
        assert_eq!(env.fact_items(), 3);

        // Other scopes have their own room.
        let out = env
            .remember(
                &alice,
                "c10",
                json!({"text": "team fact", "scope": "workspace"}),
            )
            .await;
        assert!(!out.is_error, "{}", out.content);

        // Forgetting makes room again.
        let first = fact_id_from_key(&ToolContext::new(alice.clone(), 1, "c0").idempotency_key);
        let ctx = ToolContext::new(alice.clone(), 1, "f1");
        let out = env
            .tools
            .forget
            .call(json!({ "fact_id": first }), &ctx)
            .await;
        assert!(
            !out.is_error && out.content.contains("fact 0"),
            "{}",
            out.content
        );
        let out = env
            .remember(&alice, "c9", json!({"text": "one too many"}))
            .await;
        assert!(!out.is_error, "{}", out.content);
        let out = env
            .tools
            .forget
            .call(json!({ "fact_id": first }), &ctx)
            .await;
        assert!(
            out.is_error && out.content.contains("no fact"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn retries_and_repeats_store_once() {
        let env = env_with(MAX_FACTS_PER_SCOPE);
        let alice = env.task(slack("T1", "U1")).await;
        let first = env
            .remember(&alice, "c1", json!({"text": "Likes tea"}))
            .await;
        assert!(first.content.starts_with("Remembered"), "{}", first.content);
        // The same call again (a retry after a crash): same fact, no new item.
        let again = env
            .remember(&alice, "c1", json!({"text": "Likes tea"}))
            .await;
        assert!(
            !again.is_error && again.content.starts_with("Already remembered"),
            "{}",
            again.content
        );
        // Another call with the same text (any case or spacing) is not a new fact.
        let same = env
            .remember(&alice, "c2", json!({"text": "  likes   TEA "}))
            .await;
        assert!(
            same.content.starts_with("Already remembered"),
            "{}",
            same.content
        );
        assert_eq!(env.fact_items(), 1);
        assert_eq!(env.recall(&alice, "tea").await, ["Likes tea"]);
    }

    #[tokio::test]
    async fn concurrent_remembers_respect_the_cap() {
        // All 12 read the (empty) scope before any writes.
        let env = env_gated(5, 12);
        let alice = env.task(slack("T1", "U1")).await;
        let calls = (0..12).map(|i| {
            let ctx = ToolContext::new(alice.clone(), 1, &format!("c{i}"));
            let tool = env.tools.remember.clone();
            async move { tool.call(json!({"text": format!("fact {i}")}), &ctx).await }
        });
        let outs = futures_join(calls).await;
        let ok = outs.iter().filter(|o| !o.is_error).count();
        assert_eq!(ok, 5);
        assert_eq!(env.fact_items(), 5);
    }

    async fn futures_join<F: std::future::Future<Output = ToolOutput> + Send + 'static>(
        calls: impl Iterator<Item = F>,
    ) -> Vec<ToolOutput> {
        let handles: Vec<_> = calls.map(tokio::spawn).collect();
        let mut outs = Vec::new();
        for h in handles {
            outs.push(h.await.unwrap());
        }
        outs
    }

    #[tokio::test]
    async fn bad_input_is_refused_with_reasons() {
        let env = env_with(MAX_FACTS_PER_SCOPE);
        let alice = env.task(slack("T1", "U1")).await;
        let out = env.remember(&alice, "c1", json!({"text": "   "})).await;
        assert!(
            out.is_error && out.content.contains("empty"),
            "{}",
            out.content
        );
        let long = "x".repeat(MAX_FACT_CHARS + 1);
        let out = env.remember(&alice, "c2", json!({"text": long})).await;
        assert!(
            out.is_error && out.content.contains("longer than"),
            "{}",
            out.content
        );
        let out = env
            .remember(&alice, "c3", json!({"text": "x", "scope": "everyone"}))
            .await;
        assert!(
            out.is_error && out.content.contains("scope"),
            "{}",
            out.content
        );
        let ctx = ToolContext::new(alice.clone(), 1, "f");
        let out = env
            .tools
            .forget
            .call(json!({"fact_id": "../../x"}), &ctx)
            .await;
        assert!(
            out.is_error && out.content.contains("no fact"),
            "{}",
            out.content
        );
        // A task the store does not know cannot use memory.
        let ghost = ToolContext::new(TaskId::generate(), 1, "g");
        let out = env.tools.remember.call(json!({"text": "x"}), &ghost).await;
        assert!(
            out.is_error && out.content.contains("not in the store"),
            "{}",
            out.content
        );
        assert_eq!(env.fact_items(), 0);
    }

    #[tokio::test]
    async fn empty_recall_says_so() {
        let env = env_with(MAX_FACTS_PER_SCOPE);
        let alice = env.task(slack("T1", "U1")).await;
        let ctx = ToolContext::new(alice.clone(), 1, "r");
        let out = env.tools.recall.call(serde_json::Value::Null, &ctx).await;
        assert_eq!(
            out.content,
            "Nothing is remembered yet for this user or workspace."
        );
        env.remember(&alice, "c1", json!({"text": "Likes tea"}))
            .await;
        let out = env
            .tools
            .recall
            .call(json!({"query": "coffee"}), &ctx)
            .await;
        assert_eq!(out.content, "No remembered fact matches `coffee`.");
    }

    #[test]
    fn specs_name_the_tools_and_ids_are_stable() {
        let env = env_with(1);
        assert_eq!(env.tools.remember.spec().name, REMEMBER);
        assert_eq!(env.tools.recall.spec().name, RECALL);
        assert_eq!(env.tools.forget.spec().name, FORGET);
        let schema = env.tools.remember.spec().input_schema.to_string();
        assert!(
            schema.contains("workspace") && schema.contains("text"),
            "{schema}"
        );
        let a = fact_id_from_key("t:1:c");
        assert_eq!(a, fact_id_from_key("t:1:c"));
        assert_ne!(a, fact_id_from_key("t:1:d"));
        assert!(valid_fact_id(&a));
    }
}
