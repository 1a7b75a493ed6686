//! Slack's agent surfaces on the ingest side: the Stop button of an agent
//! session (`agent_session_stopped`), new assistant threads
//! (`assistant_thread_started`: the agent's suggested prompts) and the
//! feedback buttons under answers.

use crate::response::parse_id;
use crate::response::{json, Answer, ApiError};
use crate::submission::Submission;
use crate::threads::Submitted;
use crate::Ingest;
use baton_core::feedback::{self, Unchanged, Vote};
use baton_core::metric::{self, Measurement};
use baton_core::{Instant, Origin};
use baton_slack::assistant::Prompt;
use baton_slack::events::{SessionStopped, ThreadStarted};
use baton_slack::interactivity::BlockAction;
use http::StatusCode;
use serde_json::json;

impl Ingest {
    /// Someone clicked Stop on a thread's agent session: the thread's task
    /// is stopped exactly as a `stop` message from them would stop it (the
    /// same permission rule, the same note when refused). The event's id
    /// is claimed with the cancel, so a redelivered click acts once.
    pub(crate) async fn session_stopped(&self, s: SessionStopped) -> Answer {
        let channel_thread = format!("slack:{}:{}:{}", s.team_id, s.channel, s.thread_ts);
        // A direct-message conversation is keyed by its channel alone
        // (`slack_submission`); its task must be this thread's.
        let dm = s
            .channel
            .starts_with('D')
            .then(|| format!("slack:{}:{}", s.team_id, s.channel));
        for key in std::iter::once(channel_thread).chain(dm) {
            let Some(thread) = self
                .store
                .thread(&key)
                .await
                .map_err(ApiError::unavailable)?
            else {
                continue;
            };
            let Some(active) = thread.active_task.clone() else {
                continue;
            };
            let task = self
                .store
                .get(&active)
                .await
                .map_err(ApiError::unavailable)?;
            let same_thread = task.is_some_and(|t| {
                matches!(&t.source.origin, Origin::Slack { thread_ts, .. } if *thread_ts == s.thread_ts)
            });
            if !same_thread {
                continue;
            }
            let stop = Submission {
                text: "stop".to_owned(),
                agent: String::new(),
                origin: Origin::Slack {
                    team_id: s.team_id.clone(),
                    channel: s.channel.clone(),
                    thread_ts: s.thread_ts.clone(),
                    user: s.user.clone(),
                    channel_type: None,
                },
                thread: Some(key.clone()),
                dedupe_key: Some(format!("slack:{}:stopped:{}", s.team_id, s.event_id)),
                fingerprint: None,
                attachments: Vec::new(),
                files: Vec::new(),
                message_ts: None,
                model: None,
                user: None,
            };
            let answer = match self.steer(&thread, &stop).await?.map(|a| a.outcome) {
                None => continue,
                Some(Submitted::StopRefused(_)) => {
                    json!({"ok": true, "ignored": super::slack::NOT_ALLOWED_TO_STOP})
                }
                Some(Submitted::Duplicate(_)) => json!({"ok": true, "duplicate": true}),
                Some(done) => {
                    tracing::info!(task_id = %done.task_id(), user = %s.user, "stopped from Slack's Stop button");
                    json!({"ok": true})
                }
            };
            return Ok(json(StatusCode::OK, &answer));
        }
        Ok(json(
            StatusCode::OK,
            &json!({"ok": true, "ignored": "no task runs in this thread"}),
        ))
    }

    /// A user opened an assistant thread: offer the suggested prompts of
    /// the agent serving the app's direct messages, if it has any. Best
    /// effort: Slack gets its 200 whatever happens.
    pub(crate) async fn thread_started(&self, t: ThreadStarted) -> Answer {
        let agent = self.routes.agent_for(&t.team_id, &t.channel, true);
        let slack = &self.agents.resolve(agent).slack;
        if slack.suggested_prompts.is_empty() {
            return Ok(json(
                StatusCode::OK,
                &json!({"ok": true, "ignored": "no suggested prompts"}),
            ));
        }
        let Some(setup) = &self.thread_setup else {
            return Ok(json(
                StatusCode::OK,
                &json!({"ok": true, "ignored": "no bot token"}),
            ));
        };
        let prompts: Vec<Prompt> = slack
            .suggested_prompts
            .iter()
            .map(|p| Prompt {
                title: p.title.clone(),
                message: p.message.clone(),
            })
            .collect();
        let title = slack.prompts_title.as_deref();
        if let Err(e) = setup
            .suggest(&t.channel, &t.thread_ts, title, &prompts)
            .await
        {
            tracing::warn!(channel = %t.channel, error = %e, "could not set the suggested prompts");
        }
        Ok(json(StatusCode::OK, &json!({"ok": true})))
    }

    /// A click on the feedback buttons under an answer: recorded on the
    /// task, one vote per person (see [`baton_core::feedback`]).
    pub(crate) async fn slack_feedback(&self, action: &BlockAction) -> Answer {
        let value = action.value.as_deref().unwrap_or_default();
        let (rating, task_id) = baton_slack::feedback::parse_button_value(value)
            .ok_or_else(|| ApiError::bad_request("the button's value is not RATING:TASK"))?;
        let id = parse_id(task_id)?;
        let vote = Vote {
            user: &action.user_id,
            rating,
            action_ts: action.action_ts.as_deref(),
        };
        let mut unchanged = None;
        let task = self
            .update_task(&id, |t| {
                unchanged = None;
                match feedback::record(t, &vote, Instant::now()) {
                    Ok(entries) => Some(entries),
                    Err(why) => {
                        unchanged = Some(why);
                        None
                    }
                }
            })
            .await?;
        if let Some(why) = unchanged {
            if why == Unchanged::Full {
                tracing::info!(task_id = %id, "feedback not recorded: {why}");
            }
            return Ok(json(
                StatusCode::OK,
                &json!({"ok": true, "ignored": why.to_string()}),
            ));
        }
        let counted = match rating {
            feedback::Rating::Positive => metric::FEEDBACK_POSITIVE,
            feedback::Rating::Negative => metric::FEEDBACK_NEGATIVE,
        };
        self.metrics.emit(
            &Measurement::for_agent(&task.agent)
                .count(counted)
                .property("task_id", id.to_string()),
        );
        tracing::info!(task_id = %id, user = %action.user_id, rating = rating.as_str(), "feedback recorded");
        Ok(json(StatusCode::OK, &json!({"ok": true})))
    }
}
