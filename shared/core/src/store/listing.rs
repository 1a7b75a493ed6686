//! The task listing (`GET /tasks`): every task, newest first, read from
//! the table's sorted listing index, never by a scan.
//!
//! A task enters the index when it is created, under `tasks#NN` (NN the
//! FNV-1a hash of its id modulo [`LISTING_SHARDS`], so no index partition
//! takes more than its share of task creations) with the sort key
//! `{created_at ms, 13 digits}#{task id}`. Every later write of the task
//! carries the same key, which on a keys-only index costs nothing. A page
//! reads the next entries of every shard below its position, merges them
//! newest first, and reads only the tasks it keeps.

use super::error::StoreError;
use crate::clock::Instant;
use crate::ids::TaskId;
use crate::table::{shard_of, ListingEntry, ListingKey, Table};
use crate::task::feedback::{self, Rating};
use crate::task::{Task, TaskStatus};
use base64::Engine;
use std::sync::Arc;

/// Shards of the listing index. Part of stored keys: never change it (a
/// task stays in the shard it was created in).
pub const LISTING_SHARDS: u32 = 16;
/// The most tasks one page holds.
pub const MAX_PAGE: usize = 100;
/// The page size when none is asked for.
pub const DEFAULT_PAGE: usize = 20;
/// The most index entries one filtered page examines before it returns
/// what it found with a cursor to go on from (so a filter that matches
/// little costs a bounded read per page).
pub const MAX_EXAMINED: usize = 500;
/// Entries a filtered page examines per round.
const FILTERED_BATCH: usize = 100;
const PARTITION_PREFIX: &str = "tasks#";

/// The listing index key of a task, fixed at its creation.
pub fn listing_key(id: &TaskId, created_at: Instant) -> ListingKey {
    ListingKey {
        partition: partition(shard_of(id.as_str(), LISTING_SHARDS)),
        sort: format!("{:013}#{id}", created_at.millis().max(0)),
    }
}

fn partition(shard: u32) -> String {
    format!("{PARTITION_PREFIX}{shard:02}")
}

/// A position in the listing: the page that follows starts below it.
/// Opaque to clients: base64url of the sort key of the last task examined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor(String);

/// A cursor that this listing did not hand out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed cursor")]
pub struct BadCursor;

impl Cursor {
    pub fn encode(&self) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&self.0)
    }

    /// Reads a cursor from a client, checking it names a listing position.
    pub fn decode(raw: &str) -> Result<Cursor, BadCursor> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(raw)
            .map_err(|_| BadCursor)?;
        let text = String::from_utf8(bytes).map_err(|_| BadCursor)?;
        let (ms, id) = text.split_once('#').ok_or(BadCursor)?;
        if ms.len() != 13 || !ms.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BadCursor);
        }
        match TaskId::parse(id) {
            Ok(parsed) if parsed.as_str() == id => Ok(Cursor(text)),
            _ => Err(BadCursor),
        }
    }
}

/// What a listing keeps; `None` keeps every task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    pub status: Option<TaskStatus>,
    pub agent: Option<String>,
    /// The thread as the status JSON shows it ([`crate::task::parts::Conversation::shown_thread`]).
    pub thread: Option<String>,
    /// Text the task's summary (the first line of its input), id, agent
    /// or Slack requester contains, in any case. Like every filter it is
    /// applied to the listing's pages ([`MAX_EXAMINED`] entries at most
    /// per page), never by a scan.
    pub text: Option<String>,
    /// What the votes on the task's answer say ([`feedback::verdict`]).
    pub feedback: Option<FeedbackFilter>,
    /// Only tasks created at or after this instant. The listing is sorted
    /// by creation, so it ends at the first older entry: no task is read
    /// for it and no page goes past it.
    pub since: Option<Instant>,
}

/// Which rated tasks a listing keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedbackFilter {
    /// The majority voted thumbs-up.
    Up,
    /// The majority voted thumbs-down, or the votes are tied.
    Down,
    /// Any vote at all.
    Any,
}

impl FeedbackFilter {
    /// `up`, `down` or `any`, as `GET /tasks?feedback=` and `baton eval
    /// export --feedback` name them.
    pub fn parse(name: &str) -> Option<FeedbackFilter> {
        match name {
            "up" => Some(FeedbackFilter::Up),
            "down" => Some(FeedbackFilter::Down),
            "any" => Some(FeedbackFilter::Any),
            _ => None,
        }
    }

    fn keeps(self, task: &Task) -> bool {
        match (self, feedback::verdict(&task.answer.feedback)) {
            (_, None) => false,
            (FeedbackFilter::Any, Some(_)) => true,
            (FeedbackFilter::Up, Some(r)) => r == Rating::Positive,
            (FeedbackFilter::Down, Some(r)) => r == Rating::Negative,
        }
    }
}

impl TaskFilter {
    /// Whether every task read is kept (`since` is applied to the index
    /// entries, before any task is read).
    fn is_empty(&self) -> bool {
        self.status.is_none()
            && self.agent.is_none()
            && self.thread.is_none()
            && self.text.is_none()
            && self.feedback.is_none()
    }

    fn matches_text(task: &Task, text: &str) -> bool {
        let needle = text.to_lowercase();
        let has = |hay: &str| hay.to_lowercase().contains(&needle);
        task.conversation.summary.as_deref().is_some_and(has)
            || has(task.id.as_str())
            || has(&task.agent)
            || matches!(&task.source.origin, crate::task::Origin::Slack { user, .. } if has(user))
    }

    fn matches(&self, task: &Task) -> bool {
        self.status.is_none_or(|s| task.status == s)
            && self.agent.as_deref().is_none_or(|a| task.agent == a)
            && self.thread.as_deref().is_none_or(|t| {
                task.conversation.thread.as_deref() == Some(stored_thread(t).as_ref())
            })
            && self
                .text
                .as_deref()
                .is_none_or(|t| Self::matches_text(task, t))
            && self.feedback.is_none_or(|f| f.keeps(task))
    }
}

/// The stored key of a thread as clients name it: a Slack conversation by
/// its key (`slack:…`, a name HTTP threads may not take), any other name
/// an HTTP `thread` (stored as `http:{thread}`), so one filter never
/// matches both.
fn stored_thread(shown: &str) -> std::borrow::Cow<'_, str> {
    if shown.starts_with(crate::task::SLACK_THREAD_PREFIX) {
        shown.into()
    } else {
        format!("http:{shown}").into()
    }
}

/// One page of the listing.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskPage {
    /// Newest first. With a filter, possibly fewer than asked for even
    /// when more follow: `next` says whether to go on.
    pub tasks: Vec<Task>,
    /// Where the next page starts; `None` at the end of the listing.
    pub next: Option<Cursor>,
}

/// Up to `limit` tasks (1 to [`MAX_PAGE`]) that `filter` keeps, newest
/// first, starting below `after`. A filtered page examines at most
/// [`MAX_EXAMINED`] index entries, so it may hold fewer than `limit` tasks
/// (even none) with a `next` cursor.
pub(crate) async fn page(
    table: &Arc<dyn Table>,
    filter: &TaskFilter,
    limit: usize,
    after: Option<&Cursor>,
) -> Result<TaskPage, StoreError> {
    let limit = limit.clamp(1, MAX_PAGE);
    let mut position = after.map(|c| c.0.clone());
    let mut tasks = Vec::with_capacity(limit);
    let mut examined = 0;
    loop {
        let want = limit - tasks.len();
        // One entry more than needed tells whether another page follows.
        let batch = if filter.is_empty() {
            want + 1
        } else {
            FILTERED_BATCH.max(want + 1)
        };
        let (mut entries, mut shard_full) =
            merged_entries(table, position.as_deref(), batch).await?;
        if let Some(since) = filter.since {
            // Newest first: the listing ends at the first older entry.
            if let Some(cut) = entries
                .iter()
                .position(|e| created_ms(&e.sort) < since.millis())
            {
                entries.truncate(cut);
                shard_full = false;
            }
        }
        // Unfiltered, only the tasks shown are read.
        let fetch = if filter.is_empty() { want } else { batch }.min(entries.len());
        let keys: Vec<_> = entries[..fetch].iter().map(|e| e.key.clone()).collect();
        let items = table.get_many(&keys).await?;
        for (i, item) in items.into_iter().enumerate() {
            examined += 1;
            position = Some(entries[i].sort.clone());
            // Gone meanwhile (expired), or not a task record.
            let Some(item) = item.filter(|it| it.listing.is_some() && it.key.sk == "TASK") else {
                continue;
            };
            let task = Task::from_record(&item.data, item.version)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            if filter.matches(&task) {
                tasks.push(task);
            }
            if tasks.len() == limit {
                let more = shard_full || i + 1 < entries.len();
                return Ok(TaskPage {
                    tasks,
                    next: more.then(|| Cursor(position.unwrap_or_default())),
                });
            }
        }
        let more = shard_full || fetch < entries.len();
        if !more {
            return Ok(TaskPage { tasks, next: None });
        }
        if examined >= MAX_EXAMINED {
            return Ok(TaskPage {
                tasks,
                next: position.map(Cursor),
            });
        }
    }
}

/// The creation instant (ms) of a listing sort key (`{ms:013}#{id}`); a
/// key that is not one sorts as the oldest.
fn created_ms(sort: &str) -> i64 {
    sort.split_once('#')
        .and_then(|(ms, _)| ms.parse().ok())
        .unwrap_or(i64::MIN)
}

/// The first `batch` entries below `before` over all shards, newest first,
/// and whether entries beyond them may exist. The `batch` newest overall
/// are among each shard's `batch` newest, so reading that many per shard
/// is enough; the shards are read concurrently.
async fn merged_entries(
    table: &Arc<dyn Table>,
    before: Option<&str>,
    batch: usize,
) -> Result<(Vec<ListingEntry>, bool), StoreError> {
    let mut reads = tokio::task::JoinSet::new();
    for shard in 0..LISTING_SHARDS {
        let table = table.clone();
        let before = before.map(str::to_owned);
        reads.spawn(async move {
            table
                .query_listing(&partition(shard), before.as_deref(), batch)
                .await
        });
    }
    let mut entries = Vec::new();
    let mut more = false;
    while let Some(read) = reads.join_next().await {
        let got = read.map_err(|e| StoreError::Corrupt(format!("listing read failed: {e}")))??;
        more |= got.len() >= batch;
        entries.extend(got);
    }
    entries.sort_by(|a, b| b.sort.cmp(&a.sort));
    if entries.len() > batch {
        entries.truncate(batch);
        more = true;
    }
    Ok((entries, more))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TaskStore;
    use crate::task::{Limits, Origin};
    use crate::testing::{MemoryTable, NoBlobs};

    fn store() -> TaskStore {
        TaskStore::new(Arc::new(MemoryTable::default()), Arc::new(NoBlobs))
    }

    #[test]
    fn cursors_round_trip_and_refuse_what_was_not_handed_out() {
        let id = TaskId::generate();
        let key = listing_key(&id, Instant(1_700_000_000_123));
        assert_eq!(key.sort, format!("1700000000123#{id}"));
        assert!(key.partition.starts_with("tasks#") && key.partition.len() == 8);
        let cursor = Cursor(key.sort.clone());
        assert_eq!(Cursor::decode(&cursor.encode()), Ok(cursor.clone()));
        assert!(!cursor.encode().contains(['+', '/', '=']));
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        for bad in [
            "".to_owned(),
            "!!!".to_owned(),
            b64("1700000000123"),
            b64(&format!("170000000012#{id}")),
            b64(&format!("17000000001x3#{id}")),
            b64("1700000000123#not-a-task"),
            b64(&format!("1700000000123#{}", id.as_str().to_uppercase())),
        ] {
            assert_eq!(Cursor::decode(&bad), Err(BadCursor), "{bad}");
        }
    }

    async fn create(store: &TaskStore, agent: &str, thread: Option<&str>, at: i64) -> Task {
        let task = Task::new(
            TaskId::generate(),
            agent,
            Origin::Http,
            thread.map(|t| format!("http:{t}")),
            Limits::default(),
            at,
        );
        store.create(&task, Vec::new(), None).await.unwrap();
        task
    }

    async fn all_pages(store: &TaskStore, filter: &TaskFilter, limit: usize) -> Vec<Vec<TaskId>> {
        let mut pages = Vec::new();
        let mut cursor = None;
        loop {
            let page = store
                .list_tasks(filter, limit, cursor.as_ref())
                .await
                .unwrap();
            pages.push(page.tasks.iter().map(|t| t.id.clone()).collect());
            match page.next {
                Some(c) => cursor = Some(Cursor::decode(&c.encode()).unwrap()),
                None => return pages,
            }
            assert!(pages.len() < 1000, "the listing does not end");
        }
    }

    #[tokio::test]
    async fn pages_go_newest_first_without_duplicates_or_gaps() {
        let store = store();
        let mut made = Vec::new();
        for i in 0..45 {
            // Some share a millisecond: the id breaks the tie.
            made.push(create(&store, "default", None, 1_000 + i / 3).await);
        }
        let mut want: Vec<(Instant, TaskId)> =
            made.iter().map(|t| (t.created_at, t.id.clone())).collect();
        want.sort();
        want.reverse();
        let want: Vec<TaskId> = want.into_iter().map(|(_, id)| id).collect();
        let pages = all_pages(&store, &TaskFilter::default(), 10).await;
        assert_eq!(
            pages.iter().map(Vec::len).collect::<Vec<_>>(),
            [10, 10, 10, 10, 5]
        );
        assert_eq!(pages.concat(), want);
        // An exact multiple ends without an empty last page.
        let pages = all_pages(&store, &TaskFilter::default(), 15).await;
        assert_eq!(pages.len(), 3);
        assert_eq!(pages.concat(), want);
        let one = store
            .list_tasks(&TaskFilter::default(), 100, None)
            .await
            .unwrap();
        assert_eq!(one.tasks.len(), 45);
        assert_eq!(one.next, None);
    }

    #[tokio::test]
    async fn a_task_is_found_by_the_first_line_of_its_input() {
        let store = store();
        let mut found = Vec::new();
        for i in 0..25 {
            let task = Task::new(
                TaskId::generate(),
                "default",
                Origin::Http,
                None,
                Limits::default(),
                20_000 + i,
            );
            let input = if i % 5 == 0 {
                format!("\n  Deploy the Billing service #{i}\nsecond line mentions nothing")
            } else {
                format!("unrelated {i}\nbilling only on line two")
            };
            store
                .create(
                    &task,
                    vec![crate::EntryKind::UserMessage {
                        text: input,
                        from: None,
                    }],
                    None,
                )
                .await
                .unwrap();
            if i % 5 == 0 {
                found.push(task.id);
            }
        }
        found.reverse();
        let filter = TaskFilter {
            text: Some("bILLing SERV".into()),
            ..TaskFilter::default()
        };
        assert_eq!(all_pages(&store, &filter, 2).await.concat(), found);
        let first = store.get(&found[0]).await.unwrap().unwrap();
        assert_eq!(
            first.conversation.summary.as_deref(),
            Some("Deploy the Billing service #20")
        );
        let long = crate::task::parts::summary_of(&"x".repeat(500));
        assert_eq!(long.chars().count(), crate::task::parts::SUMMARY_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[tokio::test]
    async fn filters_keep_only_matching_tasks_across_pages() {
        let store = store();
        let mut ours = Vec::new();
        for i in 0..30 {
            let (agent, thread) = if i % 3 == 0 {
                ("ops", Some("t1"))
            } else {
                ("default", None)
            };
            let t = create(&store, agent, thread, 10_000 + i).await;
            if agent == "ops" {
                ours.push(t.id);
            }
        }
        ours.reverse();
        for filter in [
            TaskFilter {
                agent: Some("ops".into()),
                ..TaskFilter::default()
            },
            TaskFilter {
                thread: Some("t1".into()),
                ..TaskFilter::default()
            },
        ] {
            let pages = all_pages(&store, &filter, 4).await;
            assert_eq!(pages.concat(), ours, "{filter:?}");
        }
        let finished = &ours[2];
        store
            .update(finished, None, |t| {
                t.finish(TaskStatus::Succeeded);
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        let page = store
            .list_tasks(
                &TaskFilter {
                    status: Some(TaskStatus::Succeeded),
                    ..TaskFilter::default()
                },
                20,
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            page.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(),
            [finished]
        );
        assert_eq!(page.next, None);
        let none = store
            .list_tasks(
                &TaskFilter {
                    agent: Some("nobody".into()),
                    ..TaskFilter::default()
                },
                20,
                None,
            )
            .await
            .unwrap();
        assert!(none.tasks.is_empty() && none.next.is_none());
    }

    #[tokio::test]
    async fn a_filter_that_matches_little_stops_after_a_bounded_read() {
        let store = store();
        let rare = create(&store, "rare", None, 1).await;
        for i in 0..(MAX_EXAMINED as i64 + 50) {
            create(&store, "default", None, 100 + i).await;
        }
        let filter = TaskFilter {
            agent: Some("rare".into()),
            ..TaskFilter::default()
        };
        let first = store.list_tasks(&filter, 20, None).await.unwrap();
        assert!(first.tasks.is_empty(), "the rare task is beyond the bound");
        let next = first.next.expect("a cursor to go on");
        let second = store.list_tasks(&filter, 20, Some(&next)).await.unwrap();
        assert_eq!(
            second.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(),
            [&rare.id]
        );
        assert_eq!(second.next, None);
    }
}

#[cfg(test)]
mod contract {
    #[tokio::test]
    async fn the_listing_contract_holds_on_the_memory_table() {
        let store = crate::TaskStore::new(
            std::sync::Arc::new(crate::testing::MemoryTable::default()),
            std::sync::Arc::new(crate::testing::NoBlobs),
        );
        crate::testing::check_task_listing(&store).await;
    }
}
