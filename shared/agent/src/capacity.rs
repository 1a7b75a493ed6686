//! `[limits.concurrency]`: how many tasks run at once per person, per
//! workspace (the HTTP API counts as one, `api`) and per agent.
//!
//! A task takes one **slot** in each scope that has a cap when its first
//! segment starts, and gives them back when it ends. A cap of N is N slot
//! items, each its own partition (`CAPSLOT#{scope}#{k}`, holding the task
//! id), so the writes of a busy workspace are spread over N keys and no
//! counter is hot: a slot is taken with a write conditional on it being
//! free, and there is no shared count to keep exact.
//!
//! A slot cannot leak: it belongs to its holder only while that task is
//! not terminal. The end of a task deletes its slots (and wakes the next
//! waiter); a task that ended any other way (dead-lettered, a worker that
//! crashed between the end and the delete) leaves a slot whose holder is
//! terminal, and the next task that finds the scope full reads the
//! holders of the slots and takes over those of ended tasks.
//!
//! A task over a cap stays `queued` with `waiting_for: capacity`, no
//! lease and no wake: it costs nothing. It waits in line in
//! `CAPWAIT#{scope}`, sorted by when the task was created, and is woken by
//! the task that frees a slot. A task starts only when a slot is free and
//! no earlier task waits in that scope, so tasks start in order of
//! arrival. The order of writes rules out a lost wake: a waiter writes its
//! place in line before it reads the slots again, and an ending task
//! deletes its slot before it reads the line, so one of them sees the
//! other. The reaper's sweep re-sends the wake of any queued task left
//! without progress (a crash between the delete and the wake), so even
//! then a waiter is delayed, never lost.
//!
//! Child tasks (delegation) take no slots: their parent holds its own, and
//! a parent waiting for children that wait for its slot would never end.

use baton_core::table::shard_of;
use baton_core::{
    CapacityScope, Condition, Item, Key, Origin, Table, TableError, Task, TaskId, TaskStore, Wake,
    WorkQueue, Write,
};
use baton_settings::ConcurrencySettings;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The most slot items read in one batch (DynamoDB's `BatchGetItem`).
const BATCH: usize = 100;
/// How often a slot taken by another task at the same moment is retried.
const MAX_RACES: usize = 8;
/// Waiters read from the front of a line at once.
const LINE_PAGE: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error("capacity slots: {0}")]
    Table(#[from] TableError),
    #[error("capacity slots: {0}")]
    Store(#[from] baton_core::StoreError),
    #[error("capacity slots: {0}")]
    Queue(#[from] baton_core::QueueError),
    #[error("capacity slots: the slots of {0} kept changing under concurrent starts")]
    Contended(String),
}

/// One capped scope of a task: which, its cap, and its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capped {
    pub scope: CapacityScope,
    pub limit: u32,
    /// E.g. `user:T1:U1`, `team:T1`, `api`, `agent:researcher`.
    pub key: String,
}

/// Whether a task may start now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// It holds a slot in every capped scope (or there is none).
    Start,
    /// `scope` is at its cap: the task waits in its line.
    Wait { scope: CapacityScope, limit: u32 },
}

#[derive(Serialize, Deserialize)]
struct Holder {
    task: String,
}

/// The concurrency caps, over the task table.
#[derive(Clone)]
pub struct Capacity {
    table: Arc<dyn Table>,
    caps: ConcurrencySettings,
}

impl Capacity {
    /// `None` when no cap is set: nothing to take or give back.
    pub fn new(table: Arc<dyn Table>, caps: ConcurrencySettings) -> Option<Self> {
        caps.any().then_some(Capacity { table, caps })
    }

    /// The capped scopes of `task`, in the order they are taken. The
    /// person is the task's requester: a schedule's task is its creator's
    /// (its origin names them; for one that posts nowhere, an HTTP task,
    /// the schedule's owner kept on it), so crons and heartbeats count
    /// against the person who made them.
    pub fn scopes_of(&self, task: &Task) -> Vec<Capped> {
        if task.source.parent.is_some() {
            return Vec::new();
        }
        let mut out = Vec::new();
        if let Some(limit) = self.caps.per_agent {
            out.push(Capped {
                scope: CapacityScope::Agent,
                limit,
                key: format!("agent:{}", task.agent),
            });
        }
        let person = match &task.source.origin {
            Origin::Slack { team_id, user, .. } => Some((team_id.as_str(), user.as_str())),
            Origin::Http => task.source.schedule_person(),
        };
        match person {
            None => {
                if let Some(limit) = self.caps.per_team {
                    out.push(Capped {
                        scope: CapacityScope::Api,
                        limit,
                        key: "api".into(),
                    });
                }
            }
            Some((team_id, user)) => {
                if let Some(limit) = self.caps.per_team {
                    out.push(Capped {
                        scope: CapacityScope::Team,
                        limit,
                        key: format!("team:{team_id}"),
                    });
                }
                if let Some(limit) = self.caps.per_user {
                    out.push(Capped {
                        scope: CapacityScope::User,
                        limit,
                        key: format!("user:{team_id}:{user}"),
                    });
                }
            }
        }
        out
    }

    /// Takes a slot in every capped scope of `task`, or none: at the first
    /// scope at its cap, the slots taken are given back and the task is
    /// put in that scope's line. Idempotent: a slot the task already holds
    /// counts as taken.
    pub async fn admit(
        &self,
        store: &TaskStore,
        queue: &dyn WorkQueue,
        task: &Task,
    ) -> Result<Admission, CapacityError> {
        let scopes = self.scopes_of(task);
        let mut taken: Vec<&Capped> = Vec::new();
        for capped in &scopes {
            if self.take(store, capped, task).await? {
                taken.push(capped);
                continue;
            }
            for held in taken {
                self.give_back(store, queue, held, &task.id).await?;
            }
            return Ok(Admission::Wait {
                scope: capped.scope,
                limit: capped.limit,
            });
        }
        // Started: when several slots freed at once only one wake came, so
        // the next in line is woken while a slot is still free.
        for capped in &scopes {
            if self.first_waiter(store, capped).await?.is_some()
                && self.slots(store, capped, &task.id).await?.free.is_some()
            {
                self.wake_next(store, queue, capped, &task.id).await?;
            }
        }
        Ok(Admission::Start)
    }

    /// Gives back every slot `task` holds and leaves every line it is in,
    /// waking the next waiter of each scope. Safe to repeat.
    pub async fn release(
        &self,
        store: &TaskStore,
        queue: &dyn WorkQueue,
        task: &Task,
    ) -> Result<(), CapacityError> {
        for capped in self.scopes_of(task) {
            self.table
                .transact(vec![Write::Delete {
                    key: line_key(&capped.key, task),
                    condition: Condition::None,
                }])
                .await?;
            self.give_back(store, queue, &capped, &task.id).await?;
        }
        Ok(())
    }

    /// Takes a slot of `capped` for `task` if one is free and no earlier
    /// task waits; otherwise puts the task in line (it is woken when a
    /// slot frees) and returns false.
    async fn take(
        &self,
        store: &TaskStore,
        capped: &Capped,
        task: &Task,
    ) -> Result<bool, CapacityError> {
        let line = line_key(&capped.key, task);
        let mut in_line = false;
        for _ in 0..MAX_RACES {
            let slots = self.slots(store, capped, &task.id).await?;
            if slots.mine {
                self.leave_line(&line, in_line).await?;
                return Ok(true);
            }
            let first = self.first_waiter(store, capped).await?;
            let ahead = first.as_ref().is_some_and(|(sk, _)| *sk < line.sk);
            match slots.free {
                Some((k, version)) if !ahead => {
                    let item = Item {
                        key: slot_key(&capped.key, k),
                        version: version.map_or(1, |v| v + 1),
                        data: serde_json::to_string(&Holder {
                            task: task.id.to_string(),
                        })
                        .map_err(|e| TableError::Corrupt(e.to_string()))?,
                        index: None,
                        expires_at: None,
                        listing: None,
                    };
                    let condition = version.map_or(Condition::NotExists, Condition::VersionIs);
                    match self
                        .table
                        .transact(vec![Write::Put { item, condition }])
                        .await
                    {
                        Ok(()) => {
                            self.leave_line(&line, in_line).await?;
                            return Ok(true);
                        }
                        // Another task took it at the same moment: look again.
                        Err(TableError::ConditionFailed { .. } | TableError::Contention) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                _ if in_line => return Ok(false),
                _ => {
                    // Into the line first, then look again: a slot freed
                    // meanwhile is seen now, or its holder sees us.
                    let item = Item {
                        key: line.clone(),
                        version: 1,
                        data: serde_json::to_string(&Holder {
                            task: task.id.to_string(),
                        })
                        .map_err(|e| TableError::Corrupt(e.to_string()))?,
                        index: None,
                        expires_at: None,
                        listing: None,
                    };
                    self.table
                        .transact(vec![Write::Put {
                            item,
                            condition: Condition::None,
                        }])
                        .await?;
                    in_line = true;
                }
            }
        }
        Err(CapacityError::Contended(capped.key.clone()))
    }

    async fn leave_line(&self, line: &Key, in_line: bool) -> Result<(), CapacityError> {
        if in_line {
            self.table
                .transact(vec![Write::Delete {
                    key: line.clone(),
                    condition: Condition::None,
                }])
                .await?;
        }
        Ok(())
    }

    /// Deletes the slot `id` holds in `capped`, if any, then wakes the
    /// first waiter.
    async fn give_back(
        &self,
        store: &TaskStore,
        queue: &dyn WorkQueue,
        capped: &Capped,
        id: &TaskId,
    ) -> Result<(), CapacityError> {
        let keys = slot_keys(capped);
        for chunk in keys.chunks(BATCH) {
            for item in self.table.get_many(chunk).await?.into_iter().flatten() {
                if holder_of(&item).as_deref() == Some(id.as_str()) {
                    let deleted = self
                        .table
                        .transact(vec![Write::Delete {
                            key: item.key.clone(),
                            condition: Condition::VersionIs(item.version),
                        }])
                        .await;
                    match deleted {
                        Ok(()) | Err(TableError::ConditionFailed { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        self.wake_next(store, queue, capped, id).await
    }

    /// Sends a wake to the first live task in `capped`'s line (other than
    /// `except`), dropping the places of tasks that ended meanwhile.
    async fn wake_next(
        &self,
        store: &TaskStore,
        queue: &dyn WorkQueue,
        capped: &Capped,
        except: &TaskId,
    ) -> Result<(), CapacityError> {
        if let Some((_, id)) = self.first_waiter(store, capped).await? {
            if &id != except {
                tracing::debug!(task_id = %id, scope = %capped.key, "a capacity slot freed: waking the next in line");
                queue
                    .send(&Wake::new(id, "capacity").to_body(), Duration::ZERO)
                    .await?;
            }
        }
        Ok(())
    }

    /// The first place in `capped`'s line whose task has not ended (sort
    /// key, task id); places of ended or unknown tasks are removed.
    async fn first_waiter(
        &self,
        store: &TaskStore,
        capped: &Capped,
    ) -> Result<Option<(String, TaskId)>, CapacityError> {
        let pk = line_pk(&capped.key);
        let mut after: Option<String> = None;
        loop {
            let page = self
                .table
                .query(&pk, "", after.as_deref(), LINE_PAGE)
                .await?;
            let Some(last) = page.last() else {
                return Ok(None);
            };
            after = Some(last.key.sk.clone());
            for item in page {
                let Some(id) = holder_of(&item).and_then(|h| TaskId::parse(&h).ok()) else {
                    continue;
                };
                let live = store
                    .get(&id)
                    .await?
                    .is_some_and(|t| !t.status().is_terminal());
                if live {
                    return Ok(Some((item.key.sk, id)));
                }
                self.table
                    .transact(vec![Write::Delete {
                        key: item.key,
                        condition: Condition::None,
                    }])
                    .await?;
            }
        }
    }

    /// The slots of `capped` as `id` sees them: whether it holds one, and
    /// a free one to try (its number, and the version to overwrite when it
    /// is held by a task that ended), starting from a place of its own so
    /// that tasks starting together try different slots.
    async fn slots(
        &self,
        store: &TaskStore,
        capped: &Capped,
        id: &TaskId,
    ) -> Result<Slots, CapacityError> {
        let keys = slot_keys(capped);
        let mut items: Vec<Option<Item>> = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH) {
            items.extend(self.table.get_many(chunk).await?);
        }
        if items
            .iter()
            .flatten()
            .any(|i| holder_of(i).as_deref() == Some(id.as_str()))
        {
            return Ok(Slots {
                mine: true,
                free: None,
            });
        }
        let n = items.len();
        let start = shard_of(id.as_str(), capped.limit.max(1)) as usize;
        let order: Vec<usize> = (0..n).map(|i| (start + i) % n).collect();
        if let Some(&k) = order.iter().find(|&&k| items[k].is_none()) {
            return Ok(Slots {
                mine: false,
                free: Some((k as u32, None)),
            });
        }
        // All written: a slot whose holder ended (or is unknown) is free.
        for k in order {
            let Some(item) = &items[k] else { continue };
            let holder = holder_of(item).and_then(|h| TaskId::parse(&h).ok());
            let ended = match holder {
                Some(h) => store
                    .get(&h)
                    .await?
                    .is_none_or(|t| t.status().is_terminal()),
                None => true,
            };
            if ended {
                return Ok(Slots {
                    mine: false,
                    free: Some((k as u32, Some(item.version))),
                });
            }
        }
        Ok(Slots {
            mine: false,
            free: None,
        })
    }
}

struct Slots {
    mine: bool,
    free: Option<(u32, Option<u64>)>,
}

fn holder_of(item: &Item) -> Option<String> {
    serde_json::from_str::<Holder>(&item.data)
        .ok()
        .map(|h| h.task)
}

fn slot_key(scope: &str, k: u32) -> Key {
    Key::new(format!("CAPSLOT#{scope}#{k}"), "S")
}

fn slot_keys(capped: &Capped) -> Vec<Key> {
    (0..capped.limit)
        .map(|k| slot_key(&capped.key, k))
        .collect()
}

fn line_pk(scope: &str) -> String {
    format!("CAPWAIT#{scope}")
}

/// A task's place in line: by when it was created, then its id.
fn line_key(scope: &str, task: &Task) -> Key {
    Key::new(
        line_pk(scope),
        format!("{:016}#{}", task.created_at.0, task.id),
    )
}

#[cfg(test)]
mod tests;
