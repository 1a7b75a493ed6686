//! The `remember`, `recall` and `forget` tools over the memory store
//! ([`baton_core::memory`]).

use crate::args::{input_schema, run};
use crate::origin::task_origin;
use async_trait::async_trait;
use baton_core::memory::*;
use baton_core::{Instant, Origin, TaskStore, Tool, ToolContext, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The tool's name as the model sees it.
pub const REMEMBER: &str = baton_core::tool_names::REMEMBER;
/// The tool's name as the model sees it.
pub const RECALL: &str = baton_core::tool_names::RECALL;
/// The tool's name as the model sees it.
pub const FORGET: &str = baton_core::tool_names::FORGET;

/// Most facts one `recall` returns.
pub const MAX_RECALL: usize = 20;

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
            .remember(
                &scope,
                &id,
                &args.text,
                ctx.task_id.as_str(),
                Instant::now(),
            )
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

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<RememberArgs>(arguments)
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

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<RecallArgs>(arguments)
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

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<ForgetArgs>(arguments)
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        run(FORGET, arguments, |args| self.0.forget(args, ctx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::testing::{MemoryTable, NoBlobs};
    use baton_core::{Item, Key, Table, TableError, Write};
    use baton_core::{Limits, Task, TaskId};
    use serde_json::json;
    use std::collections::HashSet;
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

    /// The user's direct messages with the bot.
    fn slack(team: &str, user: &str) -> Origin {
        Origin::Slack {
            team_id: team.into(),
            channel: "D1".into(),
            thread_ts: "1.2".into(),
            user: user.into(),
            channel_type: Some(baton_core::ChannelType::Im),
        }
    }

    /// A channel others read along in.
    fn channel(team: &str, user: &str) -> Origin {
        Origin::Slack {
            team_id: team.into(),
            channel: "C1".into(),
            thread_ts: "1.3".into(),
            user: user.into(),
            channel_type: Some(baton_core::ChannelType::Channel),
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
        // In a channel, where others read along, Alice's own facts stay
        // hidden: only the workspace's are recalled.
        let alice_in_channel = env.task(channel("T1", "UALICE")).await;
        assert_eq!(
            env.recall(&alice_in_channel, "").await,
            ["Deploys happen on Tuesdays"]
        );
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
            let r = store
                .remember(scope, &id, text, "t", Instant(at))
                .await
                .unwrap();
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
