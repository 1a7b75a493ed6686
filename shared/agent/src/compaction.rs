//! Compaction: older history summarised by the model.
//!
//! When the conversation since the last summary passes a share of the
//! model's window (or a message count), the older exchanges are summarised
//! by one LLM call and the summary is written to the transcript as an
//! [`EntryKind::Summary`]. Nothing is deleted: the entries stay in the log
//! and the context builder shows the summary instead of the ones it covers
//! (see [`crate::context`]). The last few exchanges stay verbatim.
//!
//! The task's first user message carries its instructions. It is given to
//! the summariser like everything else, and Baton also copies it verbatim
//! to the top of the summary, so no paraphrase can lose a directive. The
//! latest user request is copied the same way when it is among the
//! summarised messages.
//!
//! A failed summary changes nothing: without a `Summary` entry the next
//! context is built from the full history as before.
//!
//! Flow for the caller: [`needs_compaction`] or [`compact_requested`] →
//! [`compaction_plan`] → the LLM call → [`apply`] → commit the entry; or
//! [`compact`], which does the middle three.

use crate::context::{
    conversation_after, cut_middle, first_user_message, is_compact_command, latest_summary,
    summary_message, Thresholds,
};
use crate::sanitize::sanitize;
use crate::tokens::ModelProfile;
use baton_core::{
    Completion, CompletionRequest, Entry, EntryKind, LlmError, LlmProvider, Message, Usage,
};
use baton_settings::AgentConfig;

/// Output budget of the summarising call.
pub const SUMMARY_MAX_TOKENS: u32 = 2_048;

/// Longest verbatim copy of a user message kept in a summary; longer ones
/// keep their head and tail.
pub const VERBATIM_MAX_CHARS: usize = 8_000;

/// A token-triggered compaction must be able to summarise at least this
/// share of the window; below it, summarising gains too little to be worth
/// a call (pruning handles large recent tool results instead).
pub const COMPACT_MIN_GAIN: f64 = 0.10;

/// Characters kept at each end of a tool result shown to the summariser.
const RENDER_RESULT_KEEP_CHARS: usize = 1_500;

/// The summariser's input may use at most this share of the window.
const RENDER_MAX_SHARE: f64 = 0.6;

/// The summariser's instructions.
pub const SUMMARISER_PROMPT: &str = "You compress the history of a conversation between a user and an AI \
agent that uses tools, so the agent can continue its work with less context. The summary replaces the \
messages you are given; the agent will not see them again.\n\
Keep: the user's goals, requests, instructions and constraints (quote them exactly when short); decisions \
made and why; facts and results learned from tools (names, ids, numbers, URLs, file paths, errors); what \
has been done; what remains to be done; open questions.\n\
Drop: pleasantries, repetition, raw tool output that is no longer needed.\n\
Do not invent anything. Do not call tools. Write plain text or short Markdown lists, without a preamble.";

/// Why compaction produced no summary. The history is intact in every case.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// Too little history beyond the exchanges kept verbatim.
    #[error("nothing to compact: the conversation is already short")]
    NothingToCompact,
    /// The summarising call failed.
    #[error("the summarising model call failed: {0}")]
    Llm(#[from] LlmError),
    /// The model answered with no usable text (its usage still counts).
    #[error("the model returned an empty summary")]
    EmptySummary { usage: Usage },
}

/// What to summarise and how: built by [`compaction_plan`], completed by
/// one LLM call, turned into an entry by [`apply`].
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionPlan {
    /// The summarising request: no tools, one user message.
    pub request: CompletionRequest,
    /// The summary stands in for every conversational entry up to this seq.
    pub through_seq: u64,
    /// How many messages the summary replaces (since the previous summary).
    pub summarised_messages: usize,
    /// Verbatim user text placed above the model's summary.
    pub verbatim: String,
}

/// A successful compaction, ready to commit.
#[derive(Clone, Debug, PartialEq)]
pub struct Compacted {
    /// The [`EntryKind::Summary`] to append to the transcript.
    pub entry: EntryKind,
    /// Tokens the summarising call used (count them against the task).
    pub usage: Usage,
    pub through_seq: u64,
    pub summarised_messages: usize,
}

/// Whether a `/compact` command arrived that nothing has acted on yet: one
/// after both the latest summary and the latest model answer. Once the
/// model has answered after it, a stale command no longer forces anything,
/// so a failed forced compaction is not retried at every step.
pub fn compact_requested(entries: &[Entry]) -> bool {
    let after = entries
        .iter()
        .rposition(|e| {
            matches!(
                e.kind,
                EntryKind::Summary { .. } | EntryKind::AssistantMessage { .. }
            )
        })
        .map_or(0, |p| p + 1);
    entries[after..]
        .iter()
        .any(|e| matches!(&e.kind, EntryKind::UserMessage { text, .. } if is_compact_command(text)))
}

/// Whether the conversation, commands aside, ends with something the model
/// must respond to: a user message, a tool result, or tool calls. `false`
/// when it ends with a final answer (a `/compact` alone needs no answer)
/// or is empty.
pub fn answer_needed(entries: &[Entry]) -> bool {
    let last = entries.iter().rev().find(|e| match &e.kind {
        EntryKind::UserMessage { text, .. } => !is_compact_command(text),
        EntryKind::AssistantMessage { .. } | EntryKind::ToolResult { .. } => true,
        _ => false,
    });
    match last.map(|e| &e.kind) {
        Some(EntryKind::AssistantMessage { tool_calls, .. }) => !tool_calls.is_empty(),
        Some(_) => true,
        None => false,
    }
}

/// Whether the history since the last summary should be compacted now:
/// its estimate (system prompt included, pruning not applied) is past
/// `compact_at` of the window with at least [`COMPACT_MIN_GAIN`] of it
/// summarisable, or it holds more than the message-count limit; and there
/// is something older than the exchanges kept verbatim.
pub fn needs_compaction(agent: &AgentConfig, entries: &[Entry]) -> bool {
    let t = Thresholds::for_agent(agent);
    let profile = t.profile(agent);
    let summary = latest_summary(entries);
    let items = conversation_after(entries, summary.map(|(_, s)| s));
    let tokens: Vec<u64> = items.iter().map(|(_, m)| profile.message(m)).collect();
    needs_compaction_of(
        agent,
        &t,
        &profile,
        summary.map(|(s, _)| s),
        &items,
        &tokens,
    )
}

/// [`needs_compaction`] over the conversation after the latest summary
/// (`items`, with the estimate of each in `tokens`).
pub(crate) fn needs_compaction_of(
    agent: &AgentConfig,
    t: &Thresholds,
    profile: &ModelProfile,
    summary: Option<&str>,
    items: &[(u64, Message)],
    tokens: &[u64],
) -> bool {
    let Some(cut) = cut_index(items, t.compact_keep_exchanges) else {
        return false;
    };
    let old_tokens: u64 = tokens[..cut].iter().sum();
    let tail_tokens: u64 = tokens[cut..].iter().sum();
    let summary_tokens = summary.map_or(0, |s| profile.message(&summary_message(s)));
    let total = profile.text(&agent.system_prompt) + summary_tokens + old_tokens + tail_tokens;
    let by_size =
        profile.ratio(total) >= t.compact_at && profile.ratio(old_tokens) >= COMPACT_MIN_GAIN;
    by_size || items.len() > t.compact_max_messages
}

/// The summarising request for the history since the last summary, all but
/// the last exchanges; `None` when there is nothing older than those.
/// Thresholds are not checked here: [`needs_compaction`] decides when, a
/// `/compact` command forces it.
pub fn compaction_plan(agent: &AgentConfig, entries: &[Entry]) -> Option<CompactionPlan> {
    let t = Thresholds::for_agent(agent);
    let profile = t.profile(agent);
    let summary = latest_summary(entries);
    let items = conversation_after(entries, summary.map(|(_, s)| s));
    let cut = cut_index(&items, t.compact_keep_exchanges)?;
    let (old, tail) = items.split_at(cut);
    let through_seq = old.last()?.0;

    let mut verbatim = String::new();
    let first = first_user_message(entries).filter(|(seq, _)| *seq <= through_seq);
    if let Some((_, text)) = first {
        verbatim.push_str("## The task's instructions (the user's first message, verbatim)\n\n");
        verbatim.push_str(&cut_middle(text, VERBATIM_MAX_CHARS / 2, "this message"));
        verbatim.push_str("\n\n");
    }
    // The request being worked on, when the kept tail does not show it.
    let tail_has_user = tail.iter().any(|(_, m)| matches!(m, Message::User { .. }));
    let latest = entries.iter().rev().find_map(|e| match &e.kind {
        EntryKind::UserMessage { text, .. }
            if e.seq <= through_seq && !is_compact_command(text) =>
        {
            Some((e.seq, text))
        }
        _ => None,
    });
    if let Some((seq, text)) = latest.filter(|_| !tail_has_user) {
        if Some(seq) != first.map(|(s, _)| s) {
            verbatim.push_str("## The latest user message (verbatim)\n\n");
            verbatim.push_str(&cut_middle(text, VERBATIM_MAX_CHARS / 2, "this message"));
            verbatim.push_str("\n\n");
        }
    }

    let mut conversation = render(old);
    let budget = (t.window_tokens as f64 * RENDER_MAX_SHARE) as u64;
    let estimate = profile.text(&conversation);
    if estimate > budget {
        // Keep the same share of characters as of tokens, at both ends.
        let chars = conversation.chars().count() as u64;
        let keep = (chars.saturating_mul(budget) / estimate.max(1) / 2) as usize;
        conversation = cut_middle(&conversation, keep, "the conversation");
    }
    let mut content = String::from(
        "Summarise the conversation below. Your summary will replace these messages in the agent's context.\n\n",
    );
    if let Some((previous, _)) = summary {
        content.push_str("<previous_summary>\n");
        content.push_str(previous);
        content.push_str("\n</previous_summary>\n\n");
    }
    content.push_str("<conversation>\n");
    content.push_str(&conversation);
    content.push_str("</conversation>");

    Some(CompactionPlan {
        request: CompletionRequest {
            model: agent.model.clone(),
            system: SUMMARISER_PROMPT.to_owned(),
            messages: vec![Message::User { content }],
            tools: Vec::new(),
            max_tokens: SUMMARY_MAX_TOKENS,
            tool_choice: baton_core::ToolChoice::Auto,
        },
        through_seq,
        summarised_messages: old.len(),
        verbatim,
    })
}

/// The summary entry made from the summariser's answer: the verbatim user
/// text first, then the model's summary (cleaned of reasoning tags and
/// stray markup).
pub fn apply(plan: &CompactionPlan, completion: &Completion) -> Result<EntryKind, CompactionError> {
    let summary = sanitize(&completion.content);
    if summary.trim().is_empty() {
        return Err(CompactionError::EmptySummary {
            usage: completion.usage,
        });
    }
    let text = format!(
        "{}## Summary of the conversation so far\n\n{}",
        plan.verbatim,
        summary.trim()
    );
    Ok(EntryKind::Summary {
        text,
        through_seq: plan.through_seq,
    })
}

/// Plans, calls the model and applies: the summary entry to commit, or why
/// there is none (then commit nothing; the history stays as it was).
pub async fn compact(
    agent: &AgentConfig,
    entries: &[Entry],
    llm: &dyn LlmProvider,
) -> Result<Compacted, CompactionError> {
    let plan = compaction_plan(agent, entries).ok_or(CompactionError::NothingToCompact)?;
    let completion = llm.complete(&plan.request).await?;
    let entry = apply(&plan, &completion)?;
    Ok(Compacted {
        entry,
        usage: completion.usage,
        through_seq: plan.through_seq,
        summarised_messages: plan.summarised_messages,
    })
}

/// Where the verbatim tail begins: the start of the `keep`-th last exchange
/// (a user message, or an assistant message with the tool results after
/// it). `None` when nothing precedes it, so a cut never separates a tool
/// call from its results.
fn cut_index(items: &[(u64, Message)], keep: usize) -> Option<usize> {
    let starts: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, (_, m))| !matches!(m, Message::Tool { .. }))
        .map(|(i, _)| i)
        .collect();
    let keep = keep.max(1);
    if starts.len() <= keep {
        return None;
    }
    let cut = starts[starts.len() - keep];
    (cut > 0).then_some(cut)
}

/// The messages as a plain-text transcript for the summariser; long tool
/// results keep their head and tail.
fn render(items: &[(u64, Message)]) -> String {
    let mut out = String::new();
    for (_, m) in items {
        match m {
            Message::User { content } => {
                out.push_str("[user]\n");
                out.push_str(content);
                out.push_str("\n\n");
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if !content.trim().is_empty() {
                    out.push_str("[assistant]\n");
                    out.push_str(content);
                    out.push_str("\n\n");
                }
                for c in tool_calls {
                    let args = serde_json::to_string(&c.arguments).unwrap_or_default();
                    out.push_str(&format!(
                        "[assistant called tool {} with {}]\n\n",
                        c.name, args
                    ));
                }
            }
            Message::Tool {
                name,
                content,
                is_error,
                ..
            } => {
                let label = if *is_error { "error" } else { "result" };
                out.push_str(&format!("[tool {name} {label}]\n"));
                out.push_str(&cut_middle(
                    content,
                    RENDER_RESULT_KEEP_CHARS,
                    "this tool result",
                ));
                out.push_str("\n\n");
            }
            // Files are named (text files in part): a summary cannot hold them.
            Message::Attachment {
                name,
                media_type,
                content,
            } => {
                out.push_str("[user attached a file]\n");
                out.push_str(&cut_middle(
                    &content.as_text(name, media_type),
                    RENDER_RESULT_KEEP_CHARS,
                    "this file",
                ));
                out.push_str("\n\n");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::testkit::Log;
    use crate::context::{build_request, SUMMARY_HEADER};
    use async_trait::async_trait;
    use std::sync::Mutex;

    /// A provider that is a closure, recording the requests it was given.
    struct FnProvider<F> {
        f: F,
        seen: Mutex<Vec<CompletionRequest>>,
    }

    impl<F> FnProvider<F>
    where
        F: Fn(&CompletionRequest) -> Result<Completion, LlmError> + Send + Sync,
    {
        fn new(f: F) -> Self {
            FnProvider {
                f,
                seen: Mutex::new(Vec::new()),
            }
        }

        fn requests(&self) -> Vec<CompletionRequest> {
            self.seen.lock().map(|s| s.clone()).unwrap_or_default()
        }
    }

    #[async_trait]
    impl<F> LlmProvider for FnProvider<F>
    where
        F: Fn(&CompletionRequest) -> Result<Completion, LlmError> + Send + Sync,
    {
        fn name(&self) -> &str {
            "fn"
        }

        async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(request.clone());
            }
            (self.f)(request)
        }
    }

    fn says(text: &str) -> Result<Completion, LlmError> {
        Ok(Completion {
            content: text.into(),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
            },
            ..Completion::default()
        })
    }

    fn agent() -> AgentConfig {
        let mut a = AgentConfig::new("t", "gpt-4o");
        a.system_prompt = "sys".into();
        a.context.window_tokens = Some(100_000);
        a
    }

    const INSTRUCTIONS: &str =
        "INSTRUCTIONS: reply only in French. Never delete files. Task: audit the repo.";

    /// A task with its instructions and 8 tool steps, then a final answer.
    fn long_task() -> Log {
        let mut log = Log::default();
        log.user(INSTRUCTIONS);
        for i in 0..8 {
            log.tool_step(&format!("result number {i}"));
        }
        log.answer("voilà");
        log
    }

    fn commit(log: &mut Log, entry: EntryKind) {
        let seq = log.entries.len() as u64;
        log.entries.push(Entry {
            seq,
            at: baton_core::Instant(0),
            kind: entry,
        });
    }

    fn all_text(req: &CompletionRequest) -> String {
        serde_json::to_string(&req.messages).unwrap_or_default()
    }

    #[tokio::test]
    async fn summary_replaces_older_turns_and_keeps_the_last_ones_verbatim() {
        let mut log = long_task();
        let before = build_request(&agent(), &log.entries, Vec::new());
        assert!(all_text(&before).contains("result number 0"));
        let llm = FnProvider::new(|_: &CompletionRequest| {
            says("<thinking>hm</thinking>Audited 5 modules.")
        });
        let done = compact(&agent(), &log.entries, &llm)
            .await
            .expect("compacts");
        assert_eq!(done.usage.total(), 120);
        // The user message, 8 steps and the answer are 10 exchanges; the
        // last 4 are kept, so the user message and 5 steps (11 messages)
        // are summarised.
        assert_eq!(done.summarised_messages, 11);
        commit(&mut log, done.entry);

        let after = build_request(&agent(), &log.entries, Vec::new());
        let Message::User { content: opening } = &after.messages[0] else {
            panic!("no summary first: {:?}", after.messages[0]);
        };
        assert!(opening.starts_with(SUMMARY_HEADER));
        assert!(opening.contains("Audited 5 modules."));
        assert!(!opening.contains("thinking"), "reasoning tags are stripped");
        let text = all_text(&after);
        for i in 0..5 {
            assert!(
                !text.contains(&format!("result number {i}\"")),
                "old result {i} still shown"
            );
        }
        // The last three steps and the final answer, verbatim and paired.
        assert_eq!(after.messages.len(), 1 + 3 * 2 + 1);
        assert_eq!(
            &after.messages[1..],
            &before.messages[before.messages.len() - 7..]
        );
        assert!(
            matches!(&after.messages[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 1)
        );
    }

    #[tokio::test]
    async fn first_user_message_instructions_survive_verbatim() {
        let mut log = long_task();
        // A summariser that forgets the instructions entirely.
        let llm = FnProvider::new(|_: &CompletionRequest| says("Some modules were audited."));
        let done = compact(&agent(), &log.entries, &llm)
            .await
            .expect("compacts");
        // The summariser saw them too, to summarise the rest in context.
        let seen = llm.requests();
        assert_eq!(seen.len(), 1);
        assert!(all_text(&seen[0]).contains("reply only in French"));
        assert!(seen[0].tools.is_empty());
        assert_eq!(seen[0].system, SUMMARISER_PROMPT);
        assert_eq!(seen[0].model, "gpt-4o");
        assert_eq!(seen[0].max_tokens, SUMMARY_MAX_TOKENS);
        commit(&mut log, done.entry);
        let after = build_request(&agent(), &log.entries, Vec::new());
        let Message::User { content } = &after.messages[0] else {
            panic!("no summary")
        };
        assert!(content.contains(INSTRUCTIONS), "{content}");
        // They appear once, before the model's summary.
        assert_eq!(all_text(&after).matches("reply only in French").count(), 1);
        assert!(content.find(INSTRUCTIONS) < content.find("Some modules were audited."));
    }

    #[tokio::test]
    async fn a_second_compaction_builds_on_the_first() {
        let mut log = long_task();
        let llm = FnProvider::new(|r: &CompletionRequest| {
            if all_text(r).contains("FIRST SUMMARY") {
                says("SECOND SUMMARY")
            } else {
                says("FIRST SUMMARY")
            }
        });
        let first = compact(&agent(), &log.entries, &llm).await.expect("first");
        commit(&mut log, first.entry);
        log.user("now check the tests too");
        for i in 0..5 {
            log.tool_step(&format!("later result {i}"));
        }
        let second = compact(&agent(), &log.entries, &llm).await.expect("second");
        assert!(second.through_seq > first.through_seq);
        commit(&mut log, second.entry);
        let after = build_request(&agent(), &log.entries, Vec::new());
        let text = all_text(&after);
        assert!(text.contains("SECOND SUMMARY") && !text.contains("FIRST SUMMARY"));
        assert!(text.contains(INSTRUCTIONS));
        // The latest request was summarised: it is kept verbatim too.
        assert!(
            text.contains("## The latest user message (verbatim)\\n\\nnow check the tests too"),
            "{text}"
        );
        assert!(text.contains("later result 4") && !text.contains("later result 0"));
    }

    #[tokio::test]
    async fn failures_leave_history_intact() {
        let log = long_task();
        let before = build_request(&agent(), &log.entries, Vec::new());
        let overloaded = FnProvider::new(|_: &CompletionRequest| {
            Err(LlmError::Overloaded { retry_after: None })
        });
        let err = compact(&agent(), &log.entries, &overloaded).await;
        assert!(
            matches!(err, Err(CompactionError::Llm(LlmError::Overloaded { .. }))),
            "{err:?}"
        );
        let empty =
            FnProvider::new(|_: &CompletionRequest| says("  <thinking>only this</thinking> "));
        let err = compact(&agent(), &log.entries, &empty).await;
        assert!(
            matches!(err, Err(CompactionError::EmptySummary { usage }) if usage.total() == 120),
            "{err:?}"
        );
        // Nothing to commit, so the next context is what it was.
        assert_eq!(build_request(&agent(), &log.entries, Vec::new()), before);
        // Too short to compact: the provider is not even called.
        let mut short = Log::default();
        short.user("hi");
        short.answer("hello");
        let never = FnProvider::new(|_: &CompletionRequest| says("x"));
        assert!(matches!(
            compact(&agent(), &short.entries, &never).await,
            Err(CompactionError::NothingToCompact)
        ));
        assert!(never.requests().is_empty());
    }

    #[test]
    fn needs_compaction_past_three_quarters_of_the_window() {
        // Each step ≈ 1,530 tokens (6,000 chars): 100k window × 0.75 needs
        // about 49 steps; 20k × 0.75 needs 10.
        let mut log = Log::default();
        log.user("go");
        for _ in 0..9 {
            log.tool_step(&"x".repeat(6_000));
        }
        let mut a = agent();
        a.context.window_tokens = Some(20_000);
        assert!(!needs_compaction(&a, &log.entries), "≈70%: not yet");
        log.tool_step(&"x".repeat(6_000));
        assert!(needs_compaction(&a, &log.entries), "≈77%: compact");
        // The fraction is the agent's setting.
        a.context.compact_at = 0.9;
        assert!(!needs_compaction(&a, &log.entries));
        assert!(
            !needs_compaction(&agent(), &log.entries),
            "small share of a bigger window"
        );
    }

    #[test]
    fn needs_compaction_past_the_message_limit() {
        let mut log = Log::default();
        log.user("go");
        for _ in 0..24 {
            log.tool_step("ok");
        }
        assert!(!needs_compaction(&agent(), &log.entries), "49 messages");
        log.tool_step("ok");
        assert!(needs_compaction(&agent(), &log.entries), "51 messages");
        // After a summary, only the messages since it count.
        let plan = compaction_plan(&agent(), &log.entries).expect("plan");
        log.summary("s", plan.through_seq);
        assert!(!needs_compaction(&agent(), &log.entries));
    }

    #[test]
    fn no_compaction_when_only_the_kept_exchanges_are_big() {
        // Four huge recent steps: summarising the small rest gains nothing.
        let mut log = Log::default();
        log.user("go");
        log.answer("fine");
        for _ in 0..4 {
            log.tool_step(&"x".repeat(16_000));
        }
        let mut a = agent();
        a.context.window_tokens = Some(20_000);
        assert!(!needs_compaction(&a, &log.entries));
        // Forcing still works: there is something older than the tail.
        assert!(compaction_plan(&a, &log.entries).is_some());
    }

    #[test]
    fn the_cut_never_splits_a_tool_call_from_its_results() {
        let log = long_task();
        let plan = compaction_plan(&agent(), &log.entries).expect("plan");
        let cut_entry = log
            .entries
            .iter()
            .find(|e| e.seq == plan.through_seq)
            .expect("entry");
        assert!(
            matches!(cut_entry.kind, EntryKind::ToolResult { .. }),
            "{cut_entry:?}"
        );
        let next = log
            .entries
            .iter()
            .find(|e| e.seq > plan.through_seq && e.kind.is_conversational())
            .expect("next");
        assert!(matches!(next.kind, EntryKind::AssistantMessage { .. }));
    }

    #[test]
    fn oversized_history_is_cut_for_the_summariser() {
        let mut log = Log::default();
        log.user(&"u".repeat(200_000));
        for _ in 0..6 {
            log.answer("a");
        }
        let mut a = agent();
        a.context.window_tokens = Some(20_000);
        let plan = compaction_plan(&a, &log.entries).expect("plan");
        let est = crate::tokens::estimate_request(&plan.request);
        assert!(est < 13_000, "{est}");
        assert!(all_text(&plan.request).contains("of the conversation were trimmed"));
        // The verbatim copy of the instructions is bounded too.
        assert!(plan.verbatim.chars().count() < VERBATIM_MAX_CHARS + 300);
    }

    #[test]
    fn compact_command_recognition() {
        for yes in [
            "/compact",
            "  /COMPACT\n",
            "<@U123ABC> /compact",
            "<@U1><@U2>/Compact",
        ] {
            assert!(is_compact_command(yes), "{yes}");
        }
        for no in [
            "compact",
            "/compact now",
            "please /compact",
            "/compaction",
            "",
        ] {
            assert!(!is_compact_command(no), "{no}");
        }
    }

    #[test]
    fn compact_is_requested_until_acted_on() {
        let mut log = Log::default();
        log.user("task");
        log.answer("done");
        assert!(!compact_requested(&log.entries));
        assert!(!answer_needed(&log.entries));
        log.user("/compact");
        assert!(compact_requested(&log.entries));
        // A /compact alone needs no answer from the model.
        assert!(!answer_needed(&log.entries));
        log.user("and one more thing");
        assert!(compact_requested(&log.entries));
        assert!(answer_needed(&log.entries));
        // A summary, or a model answer, settles it.
        let mut with_summary = Log::default();
        with_summary.entries = log.entries.clone();
        with_summary.summary("s", 1);
        assert!(!compact_requested(&with_summary.entries));
        log.answer("sure");
        assert!(!compact_requested(&log.entries));
        // An empty transcript needs nothing.
        assert!(!answer_needed(&[]));
        log.tool_step("r");
        assert!(answer_needed(&log.entries));
    }
}
