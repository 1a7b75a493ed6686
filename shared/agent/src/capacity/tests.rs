use super::*;
use baton_core::testing::{MemoryTable, NoBlobs, SentQueue};
use baton_core::{Instant, Limits, TaskStatus};

struct Rig {
    store: TaskStore,
    queue: SentQueue,
    capacity: Capacity,
}

fn rig(caps: ConcurrencySettings) -> Rig {
    let table: Arc<dyn Table> = Arc::new(MemoryTable::default());
    Rig {
        store: TaskStore::new(table.clone(), Arc::new(NoBlobs)),
        queue: SentQueue::default(),
        capacity: Capacity::new(table, caps).unwrap(),
    }
}

fn slack(team: &str, user: &str) -> Origin {
    Origin::Slack {
        team_id: team.into(),
        channel: "C1".into(),
        thread_ts: "1.0".into(),
        user: user.into(),
        channel_type: None,
    }
}

impl Rig {
    /// A task created at `at` (its place in line).
    async fn task(&self, origin: Origin, at: u64) -> Task {
        let t = Task::new(
            TaskId::generate(),
            "default",
            origin,
            None,
            Limits::default(),
            Instant(at as _),
        );
        self.store.create(&t, Vec::new(), None).await.unwrap();
        t
    }

    async fn admit(&self, t: &Task) -> Admission {
        self.capacity
            .admit(&self.store, &self.queue, t)
            .await
            .unwrap()
    }

    async fn end(&self, t: &Task) {
        let (ended, _) = self
            .store
            .update(&t.id, None, |t| {
                t.finish(TaskStatus::Succeeded);
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        self.capacity
            .release(&self.store, &self.queue, &ended)
            .await
            .unwrap();
    }

    /// The task ids woken so far.
    fn woken(&self) -> Vec<String> {
        self.queue
            .sent()
            .into_iter()
            .filter_map(|(body, _)| Wake::parse(&body).ok().map(|w| w.task_id.to_string()))
            .collect()
    }
}

fn per_user(n: u32) -> ConcurrencySettings {
    ConcurrencySettings {
        per_user: Some(n),
        ..Default::default()
    }
}

#[test]
fn no_cap_means_nothing_to_do() {
    let table: Arc<dyn Table> = Arc::new(MemoryTable::default());
    assert!(Capacity::new(table, ConcurrencySettings::default()).is_none());
}

#[tokio::test]
async fn the_fourth_waits_and_is_woken_when_one_ends() {
    let r = rig(per_user(3));
    let mut tasks = Vec::new();
    for i in 0..4 {
        tasks.push(r.task(slack("T1", "U1"), 1000 + i).await);
    }
    for t in &tasks[..3] {
        assert_eq!(r.admit(t).await, Admission::Start);
    }
    let wait = Admission::Wait {
        scope: CapacityScope::User,
        limit: 3,
    };
    assert_eq!(r.admit(&tasks[3]).await, wait);
    // Asking again changes nothing, and another person is not held.
    assert_eq!(r.admit(&tasks[3]).await, wait);
    let other = r.task(slack("T1", "U2"), 2000).await;
    assert_eq!(r.admit(&other).await, Admission::Start);
    assert!(r.woken().is_empty());
    // An admitted task asking again still holds its slot.
    assert_eq!(r.admit(&tasks[0]).await, Admission::Start);

    r.end(&tasks[1]).await;
    assert_eq!(r.woken(), [tasks[3].id.to_string()]);
    assert_eq!(r.admit(&tasks[3]).await, Admission::Start);
}

#[tokio::test]
async fn tasks_start_in_order_of_arrival() {
    let r = rig(per_user(1));
    let first = r.task(slack("T1", "U1"), 1).await;
    let second = r.task(slack("T1", "U1"), 2).await;
    let third = r.task(slack("T1", "U1"), 3).await;
    assert_eq!(r.admit(&first).await, Admission::Start);
    assert!(matches!(r.admit(&third).await, Admission::Wait { .. }));
    assert!(matches!(r.admit(&second).await, Admission::Wait { .. }));
    r.end(&first).await;
    assert_eq!(r.woken(), [second.id.to_string()], "the earlier is woken");
    // The later one, woken by chance, does not jump the line.
    assert!(matches!(r.admit(&third).await, Admission::Wait { .. }));
    assert_eq!(r.admit(&second).await, Admission::Start);
}

#[tokio::test]
async fn a_slot_of_a_task_that_ended_without_giving_it_back_is_taken_over() {
    let r = rig(per_user(1));
    let crashed = r.task(slack("T1", "U1"), 1).await;
    assert_eq!(r.admit(&crashed).await, Admission::Start);
    // Ended (dead-lettered, say) without its slot given back.
    r.store
        .update(&crashed.id, None, |t| {
            t.finish(TaskStatus::Failed);
            Ok(Some(Vec::new()))
        })
        .await
        .unwrap();
    let next = r.task(slack("T1", "U1"), 2).await;
    assert_eq!(r.admit(&next).await, Admission::Start);
}

#[tokio::test]
async fn a_waiter_that_ended_does_not_block_the_line() {
    let r = rig(per_user(1));
    let running = r.task(slack("T1", "U1"), 1).await;
    let gone = r.task(slack("T1", "U1"), 2).await;
    let later = r.task(slack("T1", "U1"), 3).await;
    assert_eq!(r.admit(&running).await, Admission::Start);
    assert!(matches!(r.admit(&gone).await, Admission::Wait { .. }));
    assert!(matches!(r.admit(&later).await, Admission::Wait { .. }));
    // Cancelled while waiting, its place never given back.
    r.store
        .update(&gone.id, None, |t| {
            t.finish(TaskStatus::Cancelled);
            Ok(Some(Vec::new()))
        })
        .await
        .unwrap();
    r.end(&running).await;
    assert_eq!(r.woken(), [later.id.to_string()]);
    assert_eq!(r.admit(&later).await, Admission::Start);
}

#[tokio::test]
async fn one_full_scope_gives_back_the_others() {
    let r = rig(ConcurrencySettings {
        per_user: Some(1),
        per_team: Some(5),
        per_agent: None,
    });
    let a = r.task(slack("T1", "U1"), 1).await;
    let b = r.task(slack("T1", "U1"), 2).await;
    assert_eq!(r.admit(&a).await, Admission::Start);
    assert!(matches!(
        r.admit(&b).await,
        Admission::Wait {
            scope: CapacityScope::User,
            ..
        }
    ));
    // b's team slot went back: four others of the team still start.
    for i in 0..4 {
        let t = r.task(slack("T1", &format!("U{}", 10 + i)), 10 + i).await;
        assert_eq!(r.admit(&t).await, Admission::Start, "team task {i}");
    }
    let sixth = r.task(slack("T1", "U99"), 99).await;
    assert_eq!(
        r.admit(&sixth).await,
        Admission::Wait {
            scope: CapacityScope::Team,
            limit: 5
        }
    );
}

#[tokio::test]
async fn http_tasks_share_the_api_scope_and_children_are_not_counted() {
    let r = rig(ConcurrencySettings {
        per_user: Some(1),
        per_team: Some(1),
        per_agent: None,
    });
    let one = r.task(Origin::Http, 1).await;
    let two = r.task(Origin::Http, 2).await;
    assert_eq!(
        r.capacity
            .scopes_of(&one)
            .iter()
            .map(|c| c.key.as_str())
            .collect::<Vec<_>>(),
        ["api"]
    );
    assert_eq!(r.admit(&one).await, Admission::Start);
    assert_eq!(
        r.admit(&two).await,
        Admission::Wait {
            scope: CapacityScope::Api,
            limit: 1
        }
    );
    let mut child = r.task(slack("T1", "U1"), 3).await;
    child.source.parent = Some(baton_core::ParentLink {
        task_id: one.id.clone(),
        call_id: "c".into(),
        root_task_id: None,
        actor: None,
    });
    assert!(r.capacity.scopes_of(&child).is_empty());
}

#[tokio::test]
async fn a_schedule_that_posts_nowhere_counts_against_its_creator() {
    let r = rig(ConcurrencySettings {
        per_user: Some(1),
        per_team: Some(5),
        per_agent: None,
    });
    // The creator's own task holds their one slot.
    let theirs = r.task(slack("T1", "U1"), 1).await;
    assert_eq!(r.admit(&theirs).await, Admission::Start);
    // A firing of their `post_to = "none"` schedule: an HTTP task.
    let mut fired = Task::new(
        TaskId::generate(),
        "default",
        Origin::Http,
        None,
        Limits::default(),
        Instant(2),
    );
    fired.source.schedule_id = Some("s1".into());
    fired.source.schedule_owner = Some("slack:T1:U1".into());
    r.store.create(&fired, Vec::new(), None).await.unwrap();
    let keys: Vec<String> = r
        .capacity
        .scopes_of(&fired)
        .into_iter()
        .map(|c| c.key)
        .collect();
    assert_eq!(keys, ["team:T1", "user:T1:U1"]);
    assert_eq!(
        r.admit(&fired).await,
        Admission::Wait {
            scope: CapacityScope::User,
            limit: 1
        }
    );
    // A schedule made through the HTTP API is the API's.
    let mut api = fired.clone();
    api.source.schedule_owner = Some("api".into());
    let keys: Vec<String> = r
        .capacity
        .scopes_of(&api)
        .into_iter()
        .map(|c| c.key)
        .collect();
    assert_eq!(keys, ["api"]);
}
