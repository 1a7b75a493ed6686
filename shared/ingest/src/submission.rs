//! Input to submit, as a verified request gave it: its text, where it
//! came from and who wrote it, and the words that are commands rather
//! than input (`stop`, `new`).

use baton_core::{Claim, EntryKind, Origin, Task};

/// Input to submit.
pub(crate) struct Submission {
    pub text: String,
    pub agent: String,
    pub origin: Origin,
    /// The conversation key (`slack:T:C:ts`, `http:...`), if any.
    pub thread: Option<String>,
    /// The request's natural key (Slack `event_id`, HTTP `Idempotency-Key`).
    pub dedupe_key: Option<String>,
    /// A digest of what the request asked (HTTP), kept with its key: the
    /// key sent again with another request is refused, not taken for a
    /// retry.
    pub fingerprint: Option<String>,
    /// Files given with the input ([`baton_core::attachment`]): a new task
    /// gets them right after its input.
    pub attachments: Vec<EntryKind>,
    /// Files to download at the task's first segment (Slack's): the
    /// ingest answers Slack within its 3 seconds, so it does not fetch them.
    pub files: Vec<baton_core::attachment::PendingFile>,
    /// The Slack message (`ts`) this is, for a task to react on and to
    /// read the thread before.
    pub message_ts: Option<String>,
    /// The model a new task asks instead of the agent's
    /// ([`baton_core::Task::model`]); a message steering a running task
    /// leaves that task's model as it is.
    pub model: Option<String>,
    /// The person a new task acts for, named by an HTTP client
    /// ([`baton_core::task::parts::Source::user`]); a message steering a running task
    /// leaves whom that task acts for as it is.
    pub user: Option<baton_core::connection::PersonKey>,
}

impl Submission {
    /// Who wrote it, as the request's verified source says: the signed
    /// Slack event's user, or the API's client and the person it named.
    pub(crate) fn author(&self) -> baton_core::Actor {
        match &self.origin {
            Origin::Slack { team_id, user, .. } => baton_core::Actor::slack(team_id, user)
                .unwrap_or(baton_core::Actor::Api { person: None }),
            Origin::Http => baton_core::Actor::Api {
                person: self.user.clone(),
            },
        }
    }

    /// Whether `task` acts for this message's author: only then may the
    /// message steer it. Anyone else's message is a turn of their own.
    pub(crate) fn is_for(&self, task: &Task) -> bool {
        task.actor() == self.author()
    }

    /// The message as a running task's inbox holds it.
    pub(crate) fn inbox_message(&self) -> baton_core::InboxMessage {
        baton_core::InboxMessage::new(self.text.clone(), baton_core::Author::Person(self.author()))
    }

    /// The request's claim on its dedupe key.
    pub(crate) fn claim(&self) -> Option<Claim<'_>> {
        self.dedupe_key.as_deref().map(|key| Claim {
            key,
            fingerprint: self.fingerprint.as_deref(),
        })
    }
}

/// `new` or `reset` alone (any case, trailing punctuation allowed).
pub(crate) fn is_reset_word(text: &str) -> bool {
    matches!(
        text.trim()
            .trim_end_matches(['.', '!'])
            .to_ascii_lowercase()
            .as_str(),
        "new" | "reset"
    )
}

/// `stop` or `cancel` alone (any case, trailing punctuation allowed).
pub(crate) fn is_stop_word(text: &str) -> bool {
    matches!(
        text.trim()
            .trim_end_matches(['.', '!'])
            .to_ascii_lowercase()
            .as_str(),
        "stop" | "cancel"
    )
}

/// The Slack user a message came from (`None` over HTTP).
pub(crate) fn slack_user(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::Slack { user, .. } if !user.is_empty() => Some(user.as_str()),
        _ => None,
    }
}
