//! Decisions on approvals: `POST /tasks/{id}/approvals/{approval_id}` and
//! the Approve / Deny / "Always in this thread" buttons of Slack.
//!
//! A decision is a conditional update of the task
//! ([`baton_core::approval::decide`]); when it ends the task's wait, a
//! wake follows. It is recorded even when the task does not wait yet, so a
//! fast click is never lost to the worker still recording the wait.
//! "Always" also keeps a rule on the task's conversation
//! ([`baton_core::always`]), written before the decision so the task,
//! once woken, finds it for its next call of the kind.

use crate::response::parse_id;
use crate::response::{json, json_body, Answer, ApiError};
use crate::Ingest;
use baton_core::always::{self, AlwaysRule};
use baton_core::approval::{self, DecideError};
use baton_core::{EntryKind, Instant, Task, TaskId, TaskStatus, Verdict, Wake};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    approve: bool,
    /// Also allow the call's kind for the rest of the task's conversation.
    #[serde(default)]
    always: bool,
}

/// What a person chose on an approval request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    Approve,
    Deny,
    /// Approve, and allow the call's kind for the rest of the conversation.
    Always,
}

impl Choice {
    fn verdict(self) -> Verdict {
        match self {
            Choice::Approve | Choice::Always => Verdict::Approved,
            Choice::Deny => Verdict::Denied,
        }
    }
}

/// Longest approval id accepted (they are `ap-STEP-CALLID`).
const MAX_APPROVAL_ID: usize = 100;

impl Ingest {
    pub(crate) async fn decide_approval(
        &self,
        id: &str,
        approval_id: &str,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Answer {
        let id = parse_id(id)?;
        check_approval_id(approval_id)?;
        let decision: DecisionBody = json_body(headers, body)?;
        let choice = match (decision.approve, decision.always) {
            (true, false) => Choice::Approve,
            (false, false) => Choice::Deny,
            (true, true) => Choice::Always,
            (false, true) => {
                return Err(ApiError::bad_request(
                    "`always` goes with `approve: true`: a denial keeps no rule",
                ))
            }
        };
        let by = baton_core::task::API_DECIDER;
        let kept = if choice == Choice::Always {
            let task = self
                .store
                .get(&id)
                .await
                .map_err(ApiError::unavailable)?
                .ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
            self.keep_always(&task, approval_id, by).await?
        } else {
            None
        };
        let task = self
            .decide(&id, approval_id, choice.verdict(), by, kept.as_ref())
            .await?;
        let mut answer = json!({
            "task_id": task.id,
            "approval_id": approval_id,
            "decision": if decision.approve { "approved" } else { "denied" },
            "status": task.status().as_str(),
        });
        if let Some(rule) = &kept {
            answer["always"] = json!(rule.describe());
        }
        Ok(json(StatusCode::ACCEPTED, &answer))
    }

    /// Records `verdict` by `by`, waking the task if that ends its wait.
    /// `kept`: the always-rule this decision also kept, said in the task's
    /// events.
    pub(crate) async fn decide(
        &self,
        id: &TaskId,
        approval_id: &str,
        verdict: Verdict,
        by: &str,
        kept: Option<&AlwaysRule>,
    ) -> Result<Task, ApiError> {
        let mut refused = None;
        let task = self
            .update_task(id, |t| {
                refused = None;
                let now = Instant::now();
                // The task's other calls of the kind, waiting beside this
                // one, are decided by the new rule first, so this decision
                // lifts the wait whichever of them it is on.
                let mut by_rule = match kept {
                    Some(rule) if !t.status().is_terminal() => {
                        approval::decide_matching(t, rule, approval_id, now)
                    }
                    _ => Vec::new(),
                };
                match approval::decide(t, approval_id, verdict, Some(by), now) {
                    Ok((mut entries, _)) => {
                        if let Some(rule) = kept {
                            entries.push(EntryKind::Status {
                                status: t.status(),
                                detail: format!(
                                    "rule kept on the conversation: {}",
                                    rule.describe()
                                ),
                            });
                        }
                        entries.append(&mut by_rule);
                        Some(entries)
                    }
                    Err(e) => {
                        refused = Some(e);
                        None
                    }
                }
            })
            .await?;
        if let Some(e @ DecideError::Unknown { .. }) = refused {
            return Err(ApiError::not_found(e.to_string()));
        }
        // Also after a repeated decision: the first one's wake may be the
        // one that failed to send.
        if task.status() == TaskStatus::Queued && task.lease().is_free() {
            self.queue
                .send(&Wake::new(id.clone(), "approval").to_body(), Duration::ZERO)
                .await
                .map_err(ApiError::unavailable)?;
        }
        if let Some(e) = refused {
            return Err(ApiError::new(StatusCode::CONFLICT, e.to_string()));
        }
        tracing::info!(task_id = %id, approval_id, ?verdict, "approval decided");
        Ok(task)
    }

    /// Keeps the rule "Always in this thread" on approval `approval_id` of
    /// `task` would keep, chosen by `by`. `None` when the approval is
    /// decided already or the task ended (the decision that follows is
    /// refused, and no rule is kept); a 404 for an unknown approval; a 409
    /// when the request offers no rule (a task without a conversation, or
    /// a call with nothing to match later calls by).
    async fn keep_always(
        &self,
        task: &Task,
        approval_id: &str,
        by: &str,
    ) -> Result<Option<AlwaysRule>, ApiError> {
        let Some(a) = task.waits.approval(approval_id) else {
            return Err(ApiError::not_found(format!(
                "task {} has no approval `{approval_id}`",
                task.id
            )));
        };
        if task.status().is_terminal() || a.decision.is_some() {
            return Ok(None);
        }
        let no_rule = || {
            ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "approval `{approval_id}` offers no \"always in this thread\": its task has no \
                     conversation (an HTTP task without `thread`), or the call names nothing a \
                     later call could be matched by; approve it alone"
                ),
            )
        };
        let (Some(key), Some(allowed)) = (task.conversation.thread.as_deref(), a.always.clone())
        else {
            return Err(no_rule());
        };
        let rule = AlwaysRule {
            allowed,
            by: by.to_owned(),
            at: Instant::now(),
        };
        let kept = self
            .store
            .change_always(key, |rules| always::add(rules, rule.clone()))
            .await
            .map_err(|e| ApiError::unavailable_on(Some(key), e))?;
        if kept.is_none() {
            return Err(no_rule());
        }
        tracing::info!(task_id = %task.id, approval_id, by, rule = %rule.describe(), "always-rule kept");
        Ok(Some(rule))
    }

    /// A Slack Approve / Deny / Always click by `user` of workspace `team`
    /// on a button carrying `value`. Only the requester and the agent's
    /// configured approvers (by id, or by role) may decide; anyone else's
    /// click changes nothing.
    /// `task` is the task the value names, as the click's check read it.
    pub(crate) async fn slack_decision(
        &self,
        team: &str,
        user: &str,
        value: &str,
        choice: Choice,
        task: Option<baton_core::Task>,
    ) -> Answer {
        let (task_id, approval_id) = baton_slack::approvals::parse_button_value(value)
            .ok_or_else(|| ApiError::bad_request("the button's value is not TASK:APPROVAL"))?;
        let id = parse_id(task_id)?;
        check_approval_id(approval_id)?;
        let task = task
            .filter(|t| t.id == id)
            .ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
        let rules = &self.agents.resolve(&task.agent).approval;
        let requester = approval::requester(&task);
        // Roles are looked up only when they can matter: the requester and
        // approvers named by id need none.
        let may = rules.may_decide(user, requester, &[])
            || (rules.names_roles()
                && rules.may_decide(user, requester, &self.roles_of(team, user).await));
        if !may {
            tracing::info!(task_id = %id, user, "approval click by someone who may not decide; ignored");
            return Ok(json(
                StatusCode::OK,
                &json!({"ok": true, "ignored": "only the requester or a configured approver may decide"}),
            ));
        }
        let kept = if choice == Choice::Always {
            match self.keep_always(&task, approval_id, user).await {
                Ok(kept) => kept,
                // A click on a button Baton did not offer: nothing changes.
                Err(e) if e.status == StatusCode::CONFLICT => {
                    return Ok(json(
                        StatusCode::OK,
                        &json!({"ok": true, "ignored": e.message}),
                    ))
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        match self
            .decide(&id, approval_id, choice.verdict(), user, kept.as_ref())
            .await
        {
            Ok(_) => Ok(json(StatusCode::OK, &json!({"ok": true}))),
            // A second click, or a click after the task ended: Slack only
            // needs its 200.
            Err(e) if e.status == StatusCode::CONFLICT => Ok(json(
                StatusCode::OK,
                &json!({"ok": true, "ignored": e.message}),
            )),
            Err(e) => Err(e),
        }
    }
}

fn check_approval_id(approval_id: &str) -> Result<(), ApiError> {
    if approval_id.is_empty()
        || approval_id.len() > MAX_APPROVAL_ID
        || !approval_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ApiError::bad_request(format!(
            "`{}` is not an approval id",
            approval_id
                .chars()
                .take(MAX_APPROVAL_ID)
                .collect::<String>()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{ApiToken, Ingest, SlackIngest};
    use baton_core::wait;
    use baton_core::{
        now_ms, Approval, EntryKind, Limits, Origin, Task, TaskId, TaskStore, Verdict, WaitingFor,
        WorkQueue,
    };
    use baton_embedded::{EmbeddedBackend, QueueConfig};
    use baton_settings::{AgentConfig, Agents};
    use baton_slack::signature::{sign, SigningSecret};
    use bytes::Bytes;
    use serde_json::{json, Value};
    use std::time::Duration;

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TOKEN: &str = "test-token-0123456789abcdef";
    const APPROVAL: &str = "ap-1-call_1";

    struct Rig {
        _dir: tempfile::TempDir,
        backend: EmbeddedBackend,
        store: TaskStore,
        ingest: Ingest,
    }

    async fn rig() -> (Rig, TaskId) {
        let dir = tempfile::tempdir().unwrap();
        let backend = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(backend.table.clone(), backend.blobs.clone());
        let mut agent = AgentConfig::new("default", "scripted");
        agent.approval.approvers = vec!["U_BOSS".into()];
        let ingest = Ingest::new(
            store.clone(),
            backend.queue.clone(),
            Agents::new(agent, Vec::new()),
            Some(ApiToken::parse(TOKEN).unwrap()),
            Some(SlackIngest {
                signing_secret: SigningSecret::new(SECRET),
                bot_user_id: None,
            }),
        );
        let mut t = Task::new(
            TaskId::generate(),
            "default",
            Origin::Slack {
                team_id: "T1".into(),
                channel: "C1".into(),
                thread_ts: "1.0".into(),
                user: "U_REQ".into(),
                channel_type: None,
            },
            None,
            Limits::default(),
            now_ms(),
        );
        t.wait(WaitingFor::Approval(wait::Approval {
            approval_id: APPROVAL.into(),
            tool: "http_request".into(),
            summary: "POST https://example.com".into(),
        }));
        t.waits.approvals.push(Approval {
            approval_id: APPROVAL.into(),
            step: 1,
            call_id: "call_1".into(),
            tool: "http_request".into(),
            summary: "POST https://example.com".into(),
            requested_at: baton_core::Instant::now(),
            expires_at: baton_core::Instant::now() + Duration::from_secs(3600),
            message: None,
            decision: None,
            always: None,
        });
        store
            .create(
                &t,
                vec![EntryKind::UserMessage {
                    text: "x".into(),
                    from: None,
                }],
                None,
            )
            .await
            .unwrap();
        let id = t.id.clone();
        (
            Rig {
                _dir: dir,
                backend,
                store,
                ingest,
            },
            id,
        )
    }

    async fn post(r: &Rig, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
        let req = http::Request::builder()
            .method("POST")
            .uri(path)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", content_type)
            .body(Bytes::copy_from_slice(body))
            .unwrap();
        let resp = r.ingest.handle(req).await;
        (
            resp.status().as_u16(),
            serde_json::from_slice(resp.body()).unwrap(),
        )
    }

    async fn click(r: &Rig, user: &str, action: &str, value: &str) -> (u16, Value) {
        let payload = json!({
            "type": "block_actions",
            "user": {"id": user, "team_id": "T1"},
            "team": {"id": "T1"},
            "channel": {"id": "C1"},
            "container": {"message_ts": "2.0", "channel_id": "C1"},
            "actions": [{"action_id": action, "block_id": "b", "value": value, "type": "button"}]
        });
        let body = baton_slack::testing::interactivity_body(&payload);
        let ts = now_ms() / 1000;
        let req = http::Request::builder()
            .method("POST")
            .uri("/slack/interactivity")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-slack-request-timestamp", ts.to_string())
            .header(
                "x-slack-signature",
                sign(&SigningSecret::new(SECRET), ts, &body),
            )
            .body(Bytes::from(body))
            .unwrap();
        let resp = r.ingest.handle(req).await;
        (
            resp.status().as_u16(),
            serde_json::from_slice(resp.body()).unwrap(),
        )
    }

    async fn wakes(r: &Rig) -> usize {
        r.backend
            .queue
            .receive(10, Duration::from_millis(50))
            .await
            .unwrap()
            .len()
    }

    async fn decision(r: &Rig, id: &TaskId) -> Option<(Verdict, Option<String>)> {
        let t = r.store.get(id).await.unwrap().unwrap();
        t.waits
            .approval(APPROVAL)
            .and_then(|a| a.decision.clone())
            .map(|d| (d.verdict, d.by))
    }

    #[tokio::test]
    async fn the_http_route_decides_once_and_wakes_the_task() {
        let (r, id) = rig().await;
        let path = format!("/tasks/{id}/approvals/{APPROVAL}");
        let json_ct = "application/json";
        // Hostile or wrong input changes nothing.
        for (ct, body, want) in [
            ("text/plain", &br#"{"approve": true}"#[..], 415),
            (json_ct, b"{not json", 400),
            (json_ct, br#"{"approve": "yes"}"#, 400),
            (json_ct, br#"{"approve": true, "extra": 1}"#, 400),
        ] {
            let (status, v) = post(&r, &path, ct, body).await;
            assert_eq!(status, want, "{v}");
            assert!(v["error"].is_string());
        }
        let (status, _) = post(
            &r,
            &format!("/tasks/{id}/approvals/nope"),
            json_ct,
            br#"{"approve": true}"#,
        )
        .await;
        assert_eq!(status, 404, "an approval the task never asked for");
        let (status, _) = post(
            &r,
            &format!("/tasks/{id}/approvals/a%20b"),
            json_ct,
            br#"{"approve": true}"#,
        )
        .await;
        assert_eq!(status, 400);
        assert_eq!(decision(&r, &id).await, None);
        assert_eq!(wakes(&r).await, 0);

        let (status, v) = post(&r, &path, json_ct, br#"{"approve": true}"#).await;
        assert_eq!(status, 202, "{v}");
        assert_eq!(v["decision"], "approved");
        assert_eq!(v["status"], "queued");
        assert_eq!(
            decision(&r, &id).await,
            Some((Verdict::Approved, Some("api".into())))
        );
        assert_eq!(wakes(&r).await, 1, "the wait is over: a wake follows");

        let (status, v) = post(&r, &path, json_ct, br#"{"approve": false}"#).await;
        assert_eq!(status, 409, "{v}");
        assert_eq!(
            decision(&r, &id).await,
            Some((Verdict::Approved, Some("api".into())))
        );
    }

    #[tokio::test]
    async fn only_the_requester_or_an_approver_may_click() {
        let (r, id) = rig().await;
        let value = format!("{id}:{APPROVAL}");
        let (status, v) = click(&r, "U_STRANGER", "approve", &value).await;
        assert_eq!(status, 200);
        assert!(v["ignored"].is_string(), "{v}");
        assert_eq!(decision(&r, &id).await, None);

        let (status, v) = click(&r, "U_BOSS", "deny", &value).await;
        assert_eq!((status, &v), (200, &json!({"ok": true})));
        assert_eq!(
            decision(&r, &id).await,
            Some((Verdict::Denied, Some("U_BOSS".into())))
        );
        assert_eq!(wakes(&r).await, 1);

        // A late second click is acknowledged and changes nothing.
        let (status, v) = click(&r, "U_REQ", "approve", &value).await;
        assert_eq!(status, 200);
        assert!(v["ignored"].is_string(), "{v}");
        assert_eq!(
            decision(&r, &id).await,
            Some((Verdict::Denied, Some("U_BOSS".into())))
        );

        let (status, _) = click(&r, "U_REQ", "approve", "garbage").await;
        assert_eq!(status, 400);
    }

    #[tokio::test]
    async fn a_role_among_the_approvers_may_click() {
        let (mut r, id) = rig().await;
        let mut agent = AgentConfig::new("default", "scripted");
        agent.approval.approvers = vec!["oncall".into()];
        r.ingest.agents = Agents::new(agent, Vec::new());
        let roles = baton_settings::RoleTable::new(vec![baton_settings::RoleDecl {
            name: "oncall".into(),
            users: vec!["U_ONCALL".into()],
            ..Default::default()
        }]);
        r.ingest = r
            .ingest
            .with_roles(std::sync::Arc::new(baton_settings::RoleLookup::new(
                roles, None,
            )));
        let value = format!("{id}:{APPROVAL}");
        // Not in the role: ignored, nothing decided.
        let (status, v) = click(&r, "U_STRANGER", "approve", &value).await;
        assert_eq!(status, 200);
        assert!(v["ignored"].is_string(), "{v}");
        assert_eq!(decision(&r, &id).await, None);
        // In the role: decided.
        let (status, v) = click(&r, "U_ONCALL", "approve", &value).await;
        assert_eq!((status, &v), (200, &json!({"ok": true})));
        assert_eq!(
            decision(&r, &id).await,
            Some((Verdict::Approved, Some("U_ONCALL".into())))
        );
    }

    #[tokio::test]
    async fn always_keeps_a_rule_only_for_who_may_decide_and_where_offered() {
        use baton_core::always::Allowed;
        let (r, id) = rig().await;
        let value = format!("{id}:{APPROVAL}");
        let path = format!("/tasks/{id}/approvals/{APPROVAL}");
        let json_ct = "application/json";
        // No conversation: the button is not offered; a forged click, and
        // the HTTP form, change nothing.
        let (status, v) = click(&r, "U_REQ", "always", &value).await;
        assert_eq!(status, 200);
        assert!(v["ignored"].as_str().unwrap().contains("offers no"), "{v}");
        let (status, v) = post(&r, &path, json_ct, br#"{"approve": true, "always": true}"#).await;
        assert_eq!(status, 409, "{v}");
        let (status, v) = post(&r, &path, json_ct, br#"{"approve": false, "always": true}"#).await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(decision(&r, &id).await, None);
        assert_eq!(wakes(&r).await, 0);

        // The task in a conversation, its request offering the rule.
        const KEY: &str = "slack:T1:C1:1.0";
        let thread = baton_core::store::Thread {
            key: KEY.into(),
            active_task: Some(id.clone()),
            recap: Default::default(),
            seen_ts: None,
            always: Vec::new(),
            waiting: Vec::new(),
            version: 0,
        };
        assert!(r.store.put_thread(&thread).await.unwrap());
        r.store
            .update(&id, None, |t| {
                t.conversation.thread = Some(KEY.into());
                t.waits.approvals[0].always = Some(Allowed::Http {
                    method: "POST".into(),
                    host: "example.com".into(),
                });
                Ok(Some(Vec::new()))
            })
            .await
            .unwrap();
        let rules = || async { r.store.thread(KEY).await.unwrap().unwrap().always };

        // Someone who may not decide: the same refusal as Approve, no rule.
        let (status, v) = click(&r, "U_STRANGER", "always", &value).await;
        assert_eq!(status, 200);
        assert_eq!(
            v["ignored"],
            "only the requester or a configured approver may decide"
        );
        assert!(rules().await.is_empty());
        assert_eq!(decision(&r, &id).await, None);

        // An approver: approved, and the rule kept on the conversation.
        let (status, v) = click(&r, "U_BOSS", "always", &value).await;
        assert_eq!((status, &v), (200, &json!({"ok": true})));
        assert_eq!(
            decision(&r, &id).await,
            Some((Verdict::Approved, Some("U_BOSS".into())))
        );
        let kept = rules().await;
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(
            kept[0].describe(),
            "always in this thread: http_request POST example.com, by U_BOSS"
        );
        assert_eq!(wakes(&r).await, 1);
        // A second click keeps no second rule.
        let (_, v) = click(&r, "U_REQ", "always", &value).await;
        assert!(v["ignored"].is_string(), "{v}");
        assert_eq!(rules().await.len(), 1);
    }
}
