//! One table write for a turn whose calls are all safe to repeat (read-only
//! built-in tools, MCP tools annotated read-only or idempotent, declared
//! GET tools): the calls run as soon as the model asks for them, and the
//! model's message is written together with their results, in one
//! conditional commit instead of two.
//!
//! A crash between the model's answer and that commit loses the turn: the
//! next segment asks the model again, which may ask for other calls. Only
//! calls that may run twice are ever run this way; a turn with any other
//! call (or an approval, a wait, a refusal for repetition, or too little
//! time left to run the calls) keeps the two-phase checkpoint of
//! [`super::step`] and [`super::tools`]: the message first, each result as
//! it completes.

use super::events::Event;
use super::plan::{plan, Batch};
use super::result::{replayed_entry, result_entry};
use super::step::Spent;
use super::stuck::{repetition, Repetition};
use super::{Segment, Step};
use baton_core::{Entry, EntryKind, ToolCall};
use futures::stream::StreamExt;
use tokio::time::Instant;

impl Segment<'_> {
    /// The turn `message` asks for, if it may be written once: it has
    /// calls, every one is safe to repeat and runs now (or is refused at
    /// once), it repeats nothing, and the calls may fit the time left.
    pub(super) fn one_write_turn(&mut self, message: &EntryKind) -> Option<Batch> {
        let EntryKind::AssistantMessage {
            step, tool_calls, ..
        } = message
        else {
            return None;
        };
        if tool_calls.is_empty() || !self.budget.fits_another() {
            return None;
        }
        // The pure checks read the transcript as it would be with the
        // message written; it is taken back out before anything else.
        let seq = self.transcript.last().map_or(1, |e| e.seq + 1);
        self.transcript.push(Entry {
            seq,
            at: baton_core::Instant::now(),
            kind: message.clone(),
        });
        let turn = self.safe_turn(*step, tool_calls);
        self.transcript.pop();
        turn
    }

    fn safe_turn(&self, step: u32, calls: &[ToolCall]) -> Option<Batch> {
        if repetition(self.agent, &self.transcript) != Repetition::No {
            return None;
        }
        let pending = calls.iter().map(|c| (c.clone(), false)).collect();
        let batch = plan(&self.turn(step), pending).batch();
        // Nothing marked started (every call safe to repeat), nothing to
        // wait for, no approval decided: the calls run, or are answered.
        let safe = batch.started.is_empty()
            && batch.retried.is_empty()
            && batch.wait.is_none()
            && batch.decided.is_empty();
        safe.then_some(batch)
    }

    /// Runs a safe turn's calls, then writes the model's `message` and
    /// every result in one commit; but for a call that needs its person to
    /// connect an account first: that one waits ([`super::connection`]).
    pub(super) async fn run_safe_turn(
        &mut self,
        message: EntryKind,
        spent: Spent,
        turn: Batch,
    ) -> Step {
        let EntryKind::AssistantMessage { step, .. } = message else {
            return Ok(None);
        };
        let (max_chars, guard) = (self.agent.max_tool_result_chars, self.deps.input_guard);
        let mut entries = vec![message];
        entries.extend(
            turn.answered
                .into_iter()
                .map(|(call, out)| result_entry(step, &call, out, max_chars, guard)),
        );
        entries.extend(
            turn.replayed
                .into_iter()
                .map(|(call, out)| replayed_entry(step, &call, out)),
        );
        let clock = Instant::now();
        let mut running = self.start_calls(step, turn.runnable).await;
        let mut ran = Vec::new();
        let (mut needs, mut connected) = (Vec::new(), Vec::new());
        while let Some((call, output, started)) = running.next().await {
            if let Some(provider) = output.needs_connection {
                needs.push((call, provider));
                continue;
            }
            if !output.is_error {
                connected.extend(super::listing::connect_server(&self.transcript, &call.name));
            }
            self.show_call(&call, super::tools::ended_state(&output))
                .await;
            entries.push(result_entry(step, &call, output, max_chars, guard));
            ran.push((call, started, entries.len() - 1));
        }
        self.budget.record(clock.elapsed());
        self.commit(|t| {
            spent.count(t);
            Some(entries.clone())
        })
        .await?;
        for (call, started, at) in &ran {
            let answered = Event::ToolAnswered {
                started: *started,
                call,
                result: &entries[*at],
            };
            self.events.emit(&self.task, answered);
        }
        if !connected.is_empty() {
            connected.dedup();
            self.relist_connected(connected).await?;
        }
        if !needs.is_empty() {
            return self.wait_for_connection(step, needs).await;
        }
        self.advise_after_tool_errors().await?;
        Ok(None)
    }
}
