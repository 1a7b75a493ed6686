//! Words Baton answers itself, with no model call and no task: `help`,
//! `status`, `tasks`, `cancel`, `model`, `forget approvals` and
//! `disconnect NAME`, sent as a message to Baton (a
//! mention, or a direct message) or as the slash command `/baton WORD`.
//!
//! One [`Command`] enum, one short module per word: to add a word, add a
//! variant, its entry in [`Command::ALL`] and its module. A message's
//! answer is a note only its sender sees (`chat.postEphemeral`), or, in a
//! direct message (where Slack's assistant threads cannot show one), a
//! reply in the thread; a slash command's goes to its `response_url`
//! ([`crate::slash`]).

mod cancel;
mod disconnect;
mod forget;
mod help;
mod model;
mod status;
mod tasks;

use crate::response::ApiError;
use crate::Ingest;
use baton_core::{ChannelType, Origin};

/// A word Baton answers itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Help,
    Status,
    Tasks,
    Cancel,
    Model,
    ForgetApprovals,
    Disconnect,
}

impl Command {
    /// Every command, in the order `help` lists them.
    pub(crate) const ALL: &'static [Command] = &[
        Command::Help,
        Command::Status,
        Command::Tasks,
        Command::Cancel,
        Command::Model,
        Command::ForgetApprovals,
        Command::Disconnect,
    ];

    /// The word that asks for it.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Command::Help => "help",
            Command::Status => "status",
            Command::Tasks => "tasks",
            Command::Cancel => "cancel",
            Command::Model => "model",
            Command::ForgetApprovals => "forget approvals",
            Command::Disconnect => "disconnect",
        }
    }

    /// How it is written, for `help`: the word and its argument, if any.
    fn usage(self) -> String {
        match self {
            Command::Disconnect => format!("{} NAME", self.word()),
            _ => self.word().to_owned(),
        }
    }

    /// The argument `text` gives the command (`disconnect github`:
    /// `github`); `None` for words that take none or when none is given.
    pub(crate) fn argument(self, text: &str) -> Option<String> {
        if self != Command::Disconnect {
            return None;
        }
        let mut words = text.split_whitespace().skip(1);
        words
            .next()
            .map(|w| w.trim_end_matches(['.', '!', '?']).to_owned())
            .filter(|w| !w.is_empty())
    }

    /// What it does, for `help`.
    fn summary(self) -> &'static str {
        match self {
            Command::Help => "these commands",
            Command::Status => "what this thread's task is doing and what it waits for",
            Command::Tasks => "your running and waiting tasks",
            Command::Cancel => "stops this thread's task (its requester, an approver or an admin)",
            Command::Model => "the agent and model that answer here",
            Command::ForgetApprovals => {
                "removes this thread's *Always in this thread* approvals: those calls ask again"
            }
            Command::Disconnect => {
                "removes your own connection to NAME (alone: lists your connections)"
            }
        }
    }

    /// The command `text` is: one of the words alone, trimmed, in any case,
    /// a trailing `.`, `!` or `?` allowed (the bot's mention is already
    /// removed from a message's text).
    pub(crate) fn parse(text: &str) -> Option<Command> {
        let word = text.trim().trim_end_matches(['.', '!', '?']).trim();
        // `disconnect` and at most one name after it.
        let mut words = word.split_whitespace();
        if words
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case(Command::Disconnect.word()))
            && words.nth(1).is_none()
        {
            return Some(Command::Disconnect);
        }
        Command::ALL
            .iter()
            .copied()
            .find(|c| c.word().eq_ignore_ascii_case(word))
    }
}

/// Where a command was sent and by whom.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    pub(crate) team_id: String,
    pub(crate) channel: String,
    pub(crate) user: String,
    /// The conversation's key (a channel thread, or a whole direct
    /// message), when the command names one: a slash command in a channel
    /// does not (Slack does not say from which thread it was sent).
    pub(crate) conversation: Option<String>,
    /// The thread it was sent in (a message's thread, or the message).
    pub(crate) thread_ts: Option<String>,
    pub(crate) direct_message: bool,
    /// Claimed by `cancel`, so a redelivered request acts once.
    pub(crate) dedupe_key: String,
    /// What followed the word ([`Command::argument`]).
    pub(crate) argument: Option<String>,
}

impl Context {
    /// The command's sender as the origin of a message in its thread.
    fn origin(&self) -> Origin {
        Origin::Slack {
            team_id: self.team_id.clone(),
            channel: self.channel.clone(),
            thread_ts: self.thread_ts.clone().unwrap_or_default(),
            user: self.user.clone(),
            channel_type: self.direct_message.then_some(ChannelType::Im),
        }
    }
}

/// What a command about "this thread" says when it names none.
const NO_THREAD: &str = "Slack doesn't tell me which thread a slash command comes from: \
     mention me in the task's thread instead (`@Baton status`, `@Baton cancel`).";

/// What a command about "this thread" says when nothing runs there.
const NOTHING_RUNS: &str = "No task is running in this thread.";

impl Ingest {
    /// The answer to `command` sent in `ctx`. Reads the store (and, for
    /// `cancel`, asks the task to stop); never calls a model.
    pub(crate) async fn answer_command(
        &self,
        command: Command,
        ctx: &Context,
    ) -> Result<String, ApiError> {
        match command {
            Command::Help => Ok(help::answer()),
            Command::Status => status::answer(self, ctx).await,
            Command::Tasks => tasks::answer(self, ctx).await,
            Command::Cancel => cancel::answer(self, ctx).await,
            Command::Model => Ok(model::answer(self, ctx)),
            Command::ForgetApprovals => forget::answer(self, ctx).await,
            Command::Disconnect => disconnect::answer(self, ctx).await,
        }
    }

    /// The task running in `ctx`'s conversation, if there is one.
    async fn thread_task(
        &self,
        ctx: &Context,
    ) -> Result<Option<(baton_core::store::Thread, baton_core::Task)>, ApiError> {
        let Some(key) = ctx.conversation.as_deref() else {
            return Ok(None);
        };
        let Some(thread) = self
            .store
            .thread(key)
            .await
            .map_err(|e| ApiError::unavailable_on(Some(key), e))?
        else {
            return Ok(None);
        };
        let Some(id) = thread.active_task.clone() else {
            return Ok(None);
        };
        let task = self
            .store
            .get(&id)
            .await
            .map_err(|e| ApiError::unavailable_on(Some(key), e))?;
        Ok(task
            .filter(|t| !t.status().is_terminal())
            .map(|t| (thread, t)))
    }
}

#[cfg(test)]
mod tests {
    use super::Command;

    #[test]
    fn words_match_trimmed_in_any_case_and_nothing_else_does() {
        assert_eq!(Command::parse(" Help "), Some(Command::Help));
        assert_eq!(Command::parse("STATUS?"), Some(Command::Status));
        assert_eq!(Command::parse("tasks"), Some(Command::Tasks));
        assert_eq!(Command::parse("Cancel!"), Some(Command::Cancel));
        assert_eq!(Command::parse("model."), Some(Command::Model));
        assert_eq!(
            Command::parse("Forget approvals."),
            Some(Command::ForgetApprovals)
        );
        for other in [
            "",
            "help me",
            "what is the status",
            "stop",
            "models",
            "status of X",
            "forget",
            "forget approvals please",
            "disconnect me from github",
            "disconnected",
        ] {
            assert_eq!(Command::parse(other), None, "{other}");
        }
        for c in Command::ALL {
            assert_eq!(Command::parse(c.word()), Some(*c));
        }
        for text in ["disconnect github", "Disconnect  linear.", " disconnect"] {
            assert_eq!(Command::parse(text), Some(Command::Disconnect), "{text}");
        }
    }

    #[test]
    fn disconnect_takes_the_name_after_it() {
        assert_eq!(
            Command::Disconnect.argument("disconnect github!"),
            Some("github".to_owned())
        );
        assert_eq!(Command::Disconnect.argument("disconnect"), None);
        assert_eq!(Command::Status.argument("status github"), None);
    }
}
