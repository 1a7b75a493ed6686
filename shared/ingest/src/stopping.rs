//! Who may stop a task from Slack.
//!
//! A `stop` / `cancel` message in a task's thread, or a click on its Cancel
//! button, stops it only when it comes from the task's requester, one of
//! its agent's `approvers` or one of the deployment's admins
//! (`BATON_ADMINS`). Anyone else is told so in a note only they see
//! (`chat.postEphemeral`), and nothing changes: the task is not written and
//! the message's dedupe key is not claimed. Over HTTP the bearer token is
//! the permission: `POST /tasks` with a thread and `stop`, and
//! `POST /tasks/{id}/cancel`, may stop any task.

use crate::Ingest;
use baton_core::{approval, Origin, Person, RoleName, Task};

impl Ingest {
    /// Whether `user`, who has `roles`, may stop `task`: any HTTP caller
    /// (`None`, who holds the API token), else its requester, an approver
    /// of its agent, or an admin of the deployment (by id or by role).
    pub(crate) fn may_stop(&self, user: Option<&str>, roles: &[RoleName], task: &Task) -> bool {
        let Some(user) = user else {
            return true;
        };
        let rules = &self.agents.resolve(&task.agent).approval;
        rules.may_decide(user, approval::requester(task), roles)
            || self.admins.iter().any(|a| a == user || roles.contains(a))
    }

    /// The roles of Slack user `user` of workspace `team` (none for an
    /// HTTP caller, `user` empty).
    pub(crate) async fn roles_of(&self, team: &str, user: &str) -> Vec<RoleName> {
        if user.is_empty() {
            return Vec::new();
        }
        self.roles.of(&Person::slack(team, user)).await
    }

    /// The roles of the Slack user a message came from, if it did.
    pub(crate) async fn roles_of_origin(&self, origin: &Origin) -> Vec<RoleName> {
        match origin {
            Origin::Slack { team_id, user, .. } => self.roles_of(team_id, user).await,
            Origin::Http => Vec::new(),
        }
    }

    /// A `stop` in `task`'s thread that [`Ingest::may_stop`] refused: tells
    /// its author (the Slack user of `origin`) in that thread.
    pub(crate) async fn refuse_stop_message(&self, task: &Task, origin: &Origin) {
        if let Origin::Slack {
            channel,
            thread_ts,
            user,
            ..
        } = origin
        {
            self.refuse_stop(task, user, Some(channel), Some(thread_ts))
                .await;
        }
    }

    /// Logs a refused stop of `task` by `user` and tells them, in `channel`
    /// (the thread `thread_ts`), or else in the task's own thread. Best
    /// effort: a note that cannot be posted is logged, never an error.
    pub(crate) async fn refuse_stop(
        &self,
        task: &Task,
        user: &str,
        channel: Option<&str>,
        thread_ts: Option<&str>,
    ) {
        tracing::info!(task_id = %task.id, user, "stop by someone who may not stop the task; refused");
        let (task_channel, task_thread) = match &task.source.origin {
            Origin::Slack {
                channel, thread_ts, ..
            } => (Some(channel.as_str()), Some(thread_ts.as_str())),
            Origin::Http => (None, None),
        };
        let (channel, thread_ts) = match (channel, task_channel) {
            (Some(c), Some(tc)) if c == tc => (c, thread_ts.or(task_thread)),
            (Some(c), _) => (c, thread_ts),
            (None, Some(tc)) => (tc, task_thread),
            (None, None) => return,
        };
        self.tell(channel, user, thread_ts, &refusal(task)).await;
    }
}

/// What someone who may not stop `task` is told.
pub(crate) fn refusal(task: &Task) -> String {
    match approval::requester(task) {
        Some(requester) => format!(
            "Only <@{requester}> (who asked for it), an approver or an admin can stop this task."
        ),
        None => "Only an approver or an admin can stop this task.".to_owned(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::submission::Submission;
    use crate::threads::Submitted;
    use crate::{Ingest, SlackIngest};
    use async_trait::async_trait;
    use baton_core::{NoticeError, Notices, Origin, TaskId, TaskStore};
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use baton_slack::signature::{sign, SigningSecret};
    use bytes::Bytes;
    use serde_json::{json, Value};
    use std::sync::{Arc, Mutex};

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const THREAD_TS: &str = "1700000000.000100";
    const THREAD: &str = "slack:T1:C1:1700000000.000100";

    /// (channel, user, thread_ts, text) of a note.
    pub(crate) type Note = (String, String, Option<String>, String);

    /// A notice port that keeps the notes it is given.
    #[derive(Default)]
    pub(crate) struct Recorded(pub(crate) Mutex<Vec<Note>>);

    #[async_trait]
    impl Notices for Recorded {
        async fn ephemeral(
            &self,
            channel: &str,
            user: &str,
            thread_ts: Option<&str>,
            text: &str,
        ) -> Result<(), NoticeError> {
            self.0.lock().unwrap().push((
                channel.to_owned(),
                user.to_owned(),
                thread_ts.map(str::to_owned),
                text.to_owned(),
            ));
            Ok(())
        }
    }

    /// A notice port that always fails.
    struct Broken;

    #[async_trait]
    impl Notices for Broken {
        async fn ephemeral(
            &self,
            _: &str,
            _: &str,
            _: Option<&str>,
            _: &str,
        ) -> Result<(), NoticeError> {
            Err(NoticeError("channel_not_found".into()))
        }
    }

    struct Setup {
        ingest: Ingest,
        store: TaskStore,
        notes: Arc<Recorded>,
        _dir: tempfile::TempDir,
    }

    /// The default agent has approver U9; U7 is an admin.
    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(b.table.clone(), b.blobs.clone());
        let mut agent = AgentConfig::new("default", "scripted");
        agent.approval.approvers = vec!["U9".into()];
        let agents = Agents::new(agent, Vec::new());
        let slack = SlackIngest {
            signing_secret: SigningSecret::new(SECRET),
            bot_user_id: Some("UBOT".into()),
        };
        let notes = Arc::new(Recorded::default());
        let ingest = Ingest::new(store.clone(), b.queue.clone(), agents, None, Some(slack))
            .with_admins(vec!["U7".into()])
            .with_notices(notes.clone());
        Setup {
            ingest,
            store,
            notes,
            _dir: dir,
        }
    }

    fn from_slack(user: &str, ts: &str, text: &str) -> Submission {
        Submission {
            text: text.to_owned(),
            agent: "default".to_owned(),
            origin: Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: THREAD_TS.into(),
                user: user.into(),
                channel_type: None,
            },
            thread: Some(THREAD.to_owned()),
            dedupe_key: Some(format!("slack:T1:C1:{ts}")),
            fingerprint: None,
            attachments: Vec::new(),
            files: Vec::new(),
            message_ts: None,
            model: None,
            user: None,
        }
    }

    /// U1 asks for a task on the thread; its id.
    async fn started(s: &Setup) -> TaskId {
        match s
            .ingest
            .submit_screened(from_slack("U1", THREAD_TS, "deploy it"))
            .await
            .unwrap()
        {
            Submitted::Created(id) => id,
            other => panic!("expected a new task, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn roles_among_the_approvers_or_the_admins_may_stop() {
        let mut s = setup();
        let mut agent = AgentConfig::new("default", "scripted");
        agent.approval.approvers = vec!["oncall".into()];
        s.ingest.agents = Agents::new(agent, Vec::new());
        let role = |name: &str, user: &str| baton_settings::RoleDecl {
            name: name.into(),
            users: vec![user.into()],
            ..Default::default()
        };
        let table = baton_settings::RoleTable::new(vec![role("oncall", "U5"), role("ops", "U6")]);
        s.ingest = s
            .ingest
            .with_admins(vec!["ops".into()])
            .with_roles(Arc::new(baton_settings::RoleLookup::new(table, None)));
        let id = started(&s).await;
        let task = s.store.get(&id).await.unwrap().unwrap();
        for (user, may) in [("U5", true), ("U6", true), ("U2", false)] {
            let roles = s.ingest.roles_of("T1", user).await;
            assert_eq!(s.ingest.may_stop(Some(user), &roles, &task), may, "{user}");
        }
        // A role alone is no permission: without it, U5 may not.
        assert!(!s.ingest.may_stop(Some("U5"), &[], &task));
        // The stop word in the thread, from the role's member, is taken.
        let stop = from_slack("U5", "1700000000.000300", "stop");
        let out = s.ingest.submit_screened(stop).await.unwrap();
        assert_eq!(out, Submitted::CancelRequested(id.clone()));
        assert!(s.store.get(&id).await.unwrap().unwrap().cancel_requested);
    }

    #[tokio::test]
    async fn only_the_requester_an_approver_or_an_admin_may_stop() {
        let s = setup();
        let id = started(&s).await;
        let task = s.store.get(&id).await.unwrap().unwrap();
        for (user, may) in [
            (Some("U1"), true),
            (Some("U9"), true),
            (Some("U7"), true),
            (Some("U2"), false),
            (None, true),
        ] {
            assert_eq!(s.ingest.may_stop(user, &[], &task), may, "{user:?}");
        }
        // A task nobody in Slack asked for: approvers and admins only.
        let mut http = task.clone();
        http.source.origin = Origin::Http;
        assert!(!s.ingest.may_stop(Some("U1"), &[], &http));
        assert!(s.ingest.may_stop(Some("U9"), &[], &http));
        assert_eq!(
            super::refusal(&http),
            "Only an approver or an admin can stop this task."
        );
    }

    #[tokio::test]
    async fn a_refused_stop_changes_nothing_and_tells_its_author() {
        let s = setup();
        let id = started(&s).await;
        let before = s.store.get(&id).await.unwrap().unwrap();

        let stop = from_slack("U2", "1700000000.000200", "stop");
        let out = s.ingest.submit_screened(stop).await.unwrap();
        assert_eq!(out, Submitted::StopRefused(id.clone()));
        let after = s.store.get(&id).await.unwrap().unwrap();
        assert!(!after.cancel_requested);
        assert_eq!(after.version, before.version, "the task is not written");
        let notes = s.notes.0.lock().unwrap().clone();
        assert_eq!(
            notes,
            vec![(
                "C1".to_owned(),
                "U2".to_owned(),
                Some(THREAD_TS.to_owned()),
                "Only <@U1> (who asked for it), an approver or an admin can stop this task."
                    .to_owned()
            )]
        );
        // Its dedupe key was not claimed: Slack's retry is refused again,
        // not taken for a stop already made.
        let again = from_slack("U2", "1700000000.000200", "stop");
        let out = s.ingest.submit_screened(again).await.unwrap();
        assert_eq!(out, Submitted::StopRefused(id.clone()));
        assert!(!s.store.get(&id).await.unwrap().unwrap().cancel_requested);

        // Someone else's other messages are their own turn, behind it.
        let theirs = from_slack("U2", "1700000000.000300", "use staging");
        let out = s.ingest.submit_screened(theirs).await.unwrap();
        assert!(
            matches!(&out, Submitted::Queued { behind, .. } if *behind == id),
            "{out:?}"
        );
        assert!(s
            .store
            .get(&id)
            .await
            .unwrap()
            .unwrap()
            .conversation
            .inbox
            .is_empty());

        // The requester's stop stops it.
        let stop = from_slack("U1", "1700000000.000400", "Stop!");
        let out = s.ingest.submit_screened(stop).await.unwrap();
        assert_eq!(out, Submitted::CancelRequested(id.clone()));
        assert!(s.store.get(&id).await.unwrap().unwrap().cancel_requested);
        assert_eq!(s.notes.0.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn an_admin_or_an_approver_may_stop_anyones_task() {
        for stopper in ["U7", "U9"] {
            let s = setup();
            let id = started(&s).await;
            let stop = from_slack(stopper, "1700000000.000200", "cancel");
            let out = s.ingest.submit_screened(stop).await.unwrap();
            assert_eq!(out, Submitted::CancelRequested(id.clone()), "{stopper}");
            assert!(s.store.get(&id).await.unwrap().unwrap().cancel_requested);
            assert!(s.notes.0.lock().unwrap().is_empty());
        }
    }

    #[tokio::test]
    async fn a_note_that_cannot_be_posted_changes_nothing() {
        let s = setup();
        let ingest = s.ingest.clone().with_notices(Arc::new(Broken));
        let id = started(&s).await;
        let stop = from_slack("U2", "1700000000.000200", "stop");
        let out = ingest.submit_screened(stop).await.unwrap();
        assert_eq!(out, Submitted::StopRefused(id.clone()));
        assert!(!s.store.get(&id).await.unwrap().unwrap().cancel_requested);
    }

    async fn post(ingest: &Ingest, path: &str, content_type: &str, body: Vec<u8>) -> Value {
        let ts = baton_core::now_ms() / 1000;
        let signature = sign(&SigningSecret::new(SECRET), ts, &body);
        let req = http::Request::builder()
            .method("POST")
            .uri(path)
            .header("content-type", content_type)
            .header("x-slack-request-timestamp", ts.to_string())
            .header("x-slack-signature", signature)
            .body(Bytes::from(body))
            .unwrap();
        let resp = ingest.handle(req).await;
        assert_eq!(resp.status(), 200);
        serde_json::from_slice(resp.body()).unwrap()
    }

    async fn mention_stop(ingest: &Ingest, user: &str, ts: &str) -> Value {
        let body = json!({
            "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event_id": format!("Ev{ts}"), "event_time": 1_700_000_000,
            "event": {"type": "app_mention", "user": user, "text": "<@UBOT> stop",
                      "ts": ts, "thread_ts": THREAD_TS, "channel": "C1", "event_ts": ts}
        });
        post(
            ingest,
            "/slack/events",
            "application/json",
            serde_json::to_vec(&body).unwrap(),
        )
        .await
    }

    async fn click_cancel(ingest: &Ingest, user: &str, id: &TaskId) -> Value {
        let payload = json!({
            "type": "block_actions",
            "user": {"id": user, "team_id": "T1"},
            "team": {"id": "T1"},
            "channel": {"id": "C1"},
            "container": {"type": "message", "message_ts": "1700000000.000150",
                          "channel_id": "C1", "thread_ts": THREAD_TS},
            "actions": [{"action_id": "cancel_task", "value": id.as_str(),
                         "type": "button", "block_id": "b"}]
        });
        post(
            ingest,
            "/slack/interactivity",
            "application/x-www-form-urlencoded",
            baton_slack::testing::interactivity_body(&payload),
        )
        .await
    }

    #[tokio::test]
    async fn slack_answers_200_to_a_refused_stop() {
        let s = setup();
        let id = started(&s).await;
        let v = mention_stop(&s.ingest, "U2", "1700000000.000200").await;
        assert_eq!(v, json!({"ok": true, "ignored": "not allowed to stop"}));
        assert!(!s.store.get(&id).await.unwrap().unwrap().cancel_requested);
        assert_eq!(s.notes.0.lock().unwrap()[0].1, "U2");
        let v = mention_stop(&s.ingest, "U1", "1700000000.000300").await;
        assert_eq!(v, json!({"ok": true}));
        assert!(s.store.get(&id).await.unwrap().unwrap().cancel_requested);
    }

    #[tokio::test]
    async fn the_cancel_button_follows_the_same_rule() {
        let s = setup();
        let id = started(&s).await;
        let v = click_cancel(&s.ingest, "U2", &id).await;
        assert_eq!(v, json!({"ok": true, "ignored": "not allowed to stop"}));
        let task = s.store.get(&id).await.unwrap().unwrap();
        assert!(!task.cancel_requested);
        let notes = s.notes.0.lock().unwrap().clone();
        assert_eq!(
            (
                notes[0].0.as_str(),
                notes[0].1.as_str(),
                notes[0].2.as_deref()
            ),
            ("C1", "U2", Some(THREAD_TS))
        );
        let v = click_cancel(&s.ingest, "U7", &id).await;
        assert_eq!(v, json!({"ok": true}));
        assert!(s.store.get(&id).await.unwrap().unwrap().cancel_requested);
        // The requester's click on a task already stopping is fine too.
        let v = click_cancel(&s.ingest, "U1", &id).await;
        assert_eq!(v, json!({"ok": true}));
        assert_eq!(s.notes.0.lock().unwrap().len(), 1);
    }
}
