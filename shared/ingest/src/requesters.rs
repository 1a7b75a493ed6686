//! Who asked for a task, by name: the status JSON names a Slack requester
//! by id ([`baton_core::Task::requester_json`]); the routes that show tasks
//! to people (`GET /tasks`, `GET /tasks/{id}`, and so the console) add
//! their display name, looked up when shown rather than kept on the task,
//! so a renamed person shows under their new name.

use crate::Ingest;
use baton_core::{Origin, Task};
use serde_json::{json, Value};
use std::collections::HashMap;

impl Ingest {
    /// Adds `requester.name` to each of `statuses` (the status JSON of
    /// `tasks`, in the same order) whose requester is a Slack user with a
    /// known name. Each person is looked up once, all at the same time;
    /// a lookup that fails leaves them shown by id.
    pub(crate) async fn name_requesters(&self, tasks: &[Task], statuses: &mut [Value]) {
        let Some(people) = &self.people else {
            return;
        };
        let mut wanted: Vec<(&str, &str)> = tasks.iter().filter_map(slack_requester).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let names = futures::future::join_all(
            wanted
                .iter()
                .map(|(team, user)| people.display_name(team, user)),
        )
        .await;
        let names: HashMap<(&str, &str), String> = wanted
            .into_iter()
            .zip(names)
            .filter_map(|(who, name)| Some((who, name?)))
            .collect();
        for (task, status) in tasks.iter().zip(statuses.iter_mut()) {
            let Some(name) = slack_requester(task).and_then(|who| names.get(&who)) else {
                continue;
            };
            if status["requester"]["kind"] == "slack" {
                status["requester"]["name"] = json!(name);
            }
        }
    }
}

/// The Slack workspace and user who asked for `task`, if one did.
fn slack_requester(task: &Task) -> Option<(&str, &str)> {
    match &task.source.origin {
        Origin::Slack { team_id, user, .. } => Some((team_id.as_str(), user.as_str())),
        Origin::Http => None,
    }
}
