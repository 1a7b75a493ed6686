//! The task's phase as chat front ends show it ([`TaskPhase`]): processing
//! while a segment runs, suspended while it waits, closed once it ended.
//! Children post nothing of their own, so they show no phase either.

use super::{Segment, SegmentEnd};
use crate::error::WorkerError;
use baton_core::{EntryKind, TaskPhase};

impl Segment<'_> {
    /// The segment starts: processing. On the task's first segment the
    /// sink also gets its first message, to title the conversation with
    /// (once per task: `segments` is counted durably when the lease is
    /// taken, so a re-run of that segment is the second) — and only on the
    /// conversation's first task: a follow-up (which carries earlier
    /// turns) keeps the title its conversation has.
    pub(super) async fn show_processing(&self) {
        if self.task.source.parent.is_some() {
            return;
        }
        let title = (self.task.budget.segments == 1 && self.task.conversation.carried == 0)
            .then(|| {
                self.transcript
                    .iter()
                    .skip(usize::try_from(self.task.conversation.carried).unwrap_or(usize::MAX))
                    .find_map(|e| match &e.kind {
                        EntryKind::UserMessage { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
            })
            .flatten();
        self.deps
            .replies
            .phase(&self.task, TaskPhase::Processing { title })
            .await;
    }

    /// The segment ended: suspended when the task waits, closed when it
    /// ended; nothing when it handed over (the next segment is processing).
    pub(super) async fn show_end(&self, result: &Result<SegmentEnd, WorkerError>) {
        if self.task.source.parent.is_some() {
            return;
        }
        let phase = match result {
            Ok(SegmentEnd::Waiting) => TaskPhase::Suspended,
            Ok(SegmentEnd::Finished(_)) => TaskPhase::Closed,
            _ => return,
        };
        self.deps.replies.phase(&self.task, phase).await;
    }
}
