//! The context kept between the steps of a segment, so a step does not
//! rebuild it from the whole transcript.
//!
//! What the pipeline ([`crate::context`]) and the compaction check
//! ([`crate::compaction::needs_compaction`]) read of the transcript is the
//! latest summary, the conversational messages after it and the first user
//! message. [`ContextCache`] keeps those, each message with its token
//! estimate, and is extended with the entries each commit appends: every
//! entry is converted and estimated once per segment instead of at every
//! step. The results are those of the functions over the transcript (the
//! tests below compare them).

use crate::context::is_compact_command;
use crate::context::{self, repair_pairing, History, Thresholds};
use crate::tokens::ModelProfile;
use baton_core::{CompletionRequest, Entry, EntryKind, Message, ToolSpec};
use baton_settings::AgentConfig;

/// The conversation since the latest summary, with token estimates; and
/// the last request's messages, which the next step extends with its own.
#[derive(Clone, Debug)]
pub struct ContextCache {
    profile: ModelProfile,
    thresholds: Thresholds,
    /// The latest summary's text and the last seq it stands for.
    summary: Option<(String, u64)>,
    /// How many summaries were taken in: a request kept from before the
    /// latest one is not extended.
    summaries: u64,
    /// The conversational messages after the summary, with their entries'
    /// seqs.
    items: Vec<(u64, Message)>,
    /// The estimate of each of `items`.
    tokens: Vec<u64>,
    /// The task's first user message (its instructions), kept even when
    /// it is older than the summary.
    first_user: Option<(u64, Message)>,
    /// The last seq taken in.
    last_seq: Option<u64>,
    /// What the last request was built from, when the next may extend it.
    kept: Option<Kept>,
    /// The last request's messages, handed back by [`ContextCache::keep`].
    messages: Option<Vec<Message>>,
    /// Requests extended rather than built: the tests check the cheap path
    /// is the one they test.
    #[cfg(test)]
    extensions: u32,
}

/// What a request's messages were built from, for extending them.
///
/// The messages are the history's opening (summary, instructions, the
/// note of omitted turns) and then the kept items, each tool call paired
/// with its result. Pairing starts afresh at every assistant or user
/// message, so only the *open tail*, from the last such item on, can
/// change when items are added; everything before it is final.
#[derive(Clone, Copy, Debug)]
struct Kept {
    /// [`ContextCache::summaries`] when it was built.
    summaries: u64,
    /// How many of the items the messages hold.
    items: usize,
    /// Where the open tail starts, in the items and in the messages.
    open: usize,
    tail_at: usize,
    /// How many messages there were, to recognise them handed back.
    len: usize,
    /// The estimate of the history (nothing was pruned).
    tokens: u64,
}

impl ContextCache {
    /// The cache of `agent`'s context over `entries`.
    pub fn new(agent: &AgentConfig, entries: &[Entry]) -> Self {
        let thresholds = Thresholds::for_agent(agent);
        let mut cache = ContextCache {
            profile: thresholds.profile(agent),
            thresholds,
            summary: None,
            summaries: 0,
            items: Vec::new(),
            tokens: Vec::new(),
            first_user: None,
            last_seq: None,
            kept: None,
            messages: None,
            #[cfg(test)]
            extensions: 0,
        };
        cache.extend(entries);
        cache
    }

    /// Takes in `entries` appended to the transcript (ones already taken
    /// in are skipped).
    pub fn extend(&mut self, entries: &[Entry]) {
        for e in entries {
            if self.last_seq.is_some_and(|last| e.seq <= last) {
                continue;
            }
            self.last_seq = Some(e.seq);
            match &e.kind {
                EntryKind::Summary { text, through_seq } => {
                    let keep_from = self.items.partition_point(|(s, _)| *s <= *through_seq);
                    self.items.drain(..keep_from);
                    self.tokens.drain(..keep_from);
                    self.summary = Some((text.clone(), *through_seq));
                    self.summaries += 1;
                    self.messages = None;
                }
                EntryKind::UserMessage { text, .. } if is_compact_command(text) => {}
                kind => {
                    if let (None, EntryKind::UserMessage { text, .. }) = (&self.first_user, kind) {
                        self.first_user = Some((
                            e.seq,
                            Message::User {
                                content: text.clone(),
                            },
                        ));
                    }
                    for m in kind.to_messages() {
                        self.tokens.push(self.profile.message(&m));
                        self.items.push((e.seq, m));
                    }
                }
            }
        }
    }

    /// Whether the history is due for compaction: what
    /// [`crate::compaction::needs_compaction`] says of the transcript.
    pub fn needs_compaction(&self, agent: &AgentConfig) -> bool {
        crate::compaction::needs_compaction_of(
            agent,
            &self.thresholds,
            &self.profile,
            self.summary.as_ref().map(|(s, _)| s.as_str()),
            &self.items,
            &self.tokens,
        )
    }

    /// The request for the next call: what [`context::build_request`]
    /// builds from the transcript.
    ///
    /// When the last request was handed back ([`ContextCache::keep`]) and
    /// only steps were added since (no user message or file, no summary),
    /// its messages are extended with theirs: the cost is that of the new
    /// step, not of the history. A new turn, a summary, or a history big
    /// enough for pruning (which may rewrite any old tool result) builds
    /// the messages afresh.
    pub fn request(&mut self, agent: &AgentConfig, tools: Vec<ToolSpec>) -> CompletionRequest {
        let fixed = self.profile.text(&agent.system_prompt)
            + tools.iter().map(|s| self.profile.tool_spec(s)).sum::<u64>();
        let kept = self.kept.take().zip(self.messages.take());
        let extended = match kept {
            Some((kept, messages)) if kept.summaries == self.summaries => {
                self.extended(kept, messages, fixed)
            }
            _ => None,
        };
        match extended {
            Some(messages) => request(agent, messages, tools),
            None => self.built(agent, fixed, tools),
        }
    }

    /// Hands back the request [`ContextCache::request`] returned, its
    /// messages unchanged, for the next step to extend. A request whose
    /// messages were changed (old results cleared for an overflow) must
    /// not be handed back.
    pub fn keep(&mut self, request: CompletionRequest) {
        if self.kept.is_some_and(|k| k.len == request.messages.len()) {
            self.messages = Some(request.messages);
        }
    }

    /// The request built afresh; its messages kept for extending when
    /// nothing was pruned.
    fn built(
        &mut self,
        agent: &AgentConfig,
        fixed: u64,
        tools: Vec<ToolSpec>,
    ) -> CompletionRequest {
        let history: History = context::select_items(
            self.summary.as_ref().map(|(s, _)| s.as_str()),
            self.items.iter().cloned().zip(self.tokens.iter().copied()),
            self.first_user.clone(),
            self.thresholds.keep_last_turns,
            &self.profile,
        );
        let tokens = history.tokens.iter().sum::<u64>();
        if self.profile.ratio(fixed + tokens) >= self.thresholds.soft_trim_at {
            return context::finish_request(agent, &self.thresholds, &self.profile, history, tools)
                .0;
        }
        // The items before `cut` are left out with their turns.
        let cut = self.items.len() - (history.messages.len() - history.head);
        let open = self.open_tail(cut);
        let mut messages = history.messages;
        let tail = messages.split_off(history.head + (open - cut));
        let middle = messages.split_off(history.head);
        messages.extend(repair_pairing(middle));
        let tail_at = messages.len();
        messages.extend(repair_pairing(tail));
        self.kept = Some(Kept {
            summaries: self.summaries,
            items: self.items.len(),
            open,
            tail_at,
            len: messages.len(),
            tokens,
        });
        request(agent, messages, tools)
    }

    /// `messages`, built as `kept` says, extended with the items added
    /// since; `None` when they must be built afresh.
    fn extended(
        &mut self,
        kept: Kept,
        mut messages: Vec<Message>,
        fixed: u64,
    ) -> Option<Vec<Message>> {
        if messages.len() != kept.len || kept.items > self.items.len() {
            return None;
        }
        let added = &self.items[kept.items..];
        // A new turn may move the turn limit, a file the files shown.
        if added
            .iter()
            .any(|(_, m)| matches!(m, Message::User { .. } | Message::Attachment { .. }))
        {
            return None;
        }
        let tokens = kept.tokens + self.tokens[kept.items..].iter().sum::<u64>();
        if self.profile.ratio(fixed + tokens) >= self.thresholds.soft_trim_at {
            return None;
        }
        let open = self.open_tail(kept.open);
        let owned = |items: &[(u64, Message)]| items.iter().map(|(_, m)| m.clone()).collect();
        messages.truncate(kept.tail_at);
        messages.extend(repair_pairing(owned(&self.items[kept.open..open])));
        let tail_at = messages.len();
        messages.extend(repair_pairing(owned(&self.items[open..])));
        self.kept = Some(Kept {
            summaries: kept.summaries,
            items: self.items.len(),
            open,
            tail_at,
            len: messages.len(),
            tokens,
        });
        #[cfg(test)]
        {
            self.extensions += 1;
        }
        Some(messages)
    }

    /// Where the open tail starts among the items from `from` on: at the
    /// last assistant or user message, or at `from` when there is none
    /// (pairing starts afresh there too: after the history's opening, or
    /// at the start).
    fn open_tail(&self, from: usize) -> usize {
        self.items[from..]
            .iter()
            .rposition(|(_, m)| !matches!(m, Message::Tool { .. }))
            .map_or(from, |i| from + i)
    }
}

/// What [`context::finish_request`] makes of messages that needed no
/// pruning.
fn request(agent: &AgentConfig, messages: Vec<Message>, tools: Vec<ToolSpec>) -> CompletionRequest {
    CompletionRequest {
        model: agent.model.clone(),
        system: agent.system_prompt.clone(),
        messages,
        tools,
        max_tokens: agent.max_tokens,
        tool_choice: baton_core::ToolChoice::Auto,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::needs_compaction;
    use crate::context::build_request;
    use baton_core::{ToolCall, Usage};
    use serde_json::json;

    fn agent(window: u32) -> AgentConfig {
        let mut a = AgentConfig::new("t", "gpt-4o");
        a.system_prompt = "sys".into();
        a.context.window_tokens = Some(window);
        a
    }

    fn push(entries: &mut Vec<Entry>, kind: EntryKind) {
        let seq = entries.len() as u64 + 1;
        entries.push(Entry {
            seq,
            at: baton_core::Instant(0),
            kind,
        });
    }

    fn step(entries: &mut Vec<Entry>, n: u32, result: &str) {
        let id = format!("c{n}");
        push(
            entries,
            EntryKind::AssistantMessage {
                step: n,
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: id.clone(),
                    name: "read".into(),
                    arguments: json!({"n": n}),
                }],
                usage: Usage::default(),
                model: "m".into(),
            },
        );
        push(
            entries,
            EntryKind::ToolResult {
                step: n,
                call_id: id,
                name: "read".into(),
                content: result.into(),
                is_error: false,
                truncated_chars: 0,
            },
        );
    }

    /// The cache, built up one entry at a time as commits append them,
    /// agrees with the pipeline over the whole transcript at every point.
    #[test]
    fn the_kept_context_is_the_rebuilt_one_at_every_step() {
        for window in [2_000, 20_000, 200_000] {
            let a = agent(window);
            let mut entries = Vec::new();
            push(
                &mut entries,
                EntryKind::UserMessage {
                    text: "the instructions".into(),
                    from: None,
                },
            );
            let mut cache = ContextCache::new(&a, &entries);
            for n in 1..=80u32 {
                let size = if n % 7 == 0 { 9_000 } else { 40 };
                step(&mut entries, n, &"x".repeat(size));
                if n % 15 == 0 {
                    push(
                        &mut entries,
                        EntryKind::UserMessage {
                            text: format!("and now {n}"),
                            from: None,
                        },
                    );
                }
                if n % 33 == 0 {
                    let through = entries.len() as u64 - 4;
                    push(
                        &mut entries,
                        EntryKind::Summary {
                            text: "so far".into(),
                            through_seq: through,
                        },
                    );
                }
                if n == 50 {
                    push(
                        &mut entries,
                        EntryKind::UserMessage {
                            text: "/compact".into(),
                            from: None,
                        },
                    );
                }
                let start = entries.len().saturating_sub(3);
                cache.extend(&entries[start..]);
                let request = cache.request(&a, Vec::new());
                assert_eq!(
                    request,
                    build_request(&a, &entries, Vec::new()),
                    "window {window}, step {n}"
                );
                // Handed back, as the segment does after each call, so
                // the next step extends it.
                cache.keep(request);
                assert_eq!(
                    cache.needs_compaction(&a),
                    needs_compaction(&a, &entries),
                    "window {window}, step {n}"
                );
            }
            if window == 200_000 {
                assert!(cache.extensions > 60, "{}", cache.extensions);
            }
        }
    }

    /// Turns of every shape — several calls, results out of order or
    /// missing, notes, files, summaries — with requests taken at random
    /// points and handed back or not: the extended request is always the
    /// one built from the whole transcript.
    #[test]
    fn extended_requests_match_rebuilt_ones_for_any_shape_of_turn() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut roll = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for window in [3_000, 1_000_000] {
            let mut a = agent(window);
            a.context.keep_last_turns = 3;
            let mut entries = Vec::new();
            push(
                &mut entries,
                EntryKind::UserMessage {
                    text: "go".into(),
                    from: None,
                },
            );
            let mut cache = ContextCache::new(&a, &entries);
            let mut calls = 0u32;
            for n in 1..=300u32 {
                let from = entries.len();
                match roll(20) {
                    0 => push(
                        &mut entries,
                        EntryKind::UserMessage {
                            text: format!("more {n}"),
                            from: None,
                        },
                    ),
                    1 => push(
                        &mut entries,
                        EntryKind::Note {
                            reason: baton_core::NoteReason::Repeating,
                            text: "careful".into(),
                        },
                    ),
                    2 if entries.len() > 6 => {
                        let through = entries[entries.len() - 5].seq;
                        push(
                            &mut entries,
                            EntryKind::Summary {
                                text: format!("summary {n}"),
                                through_seq: through,
                            },
                        )
                    }
                    3 => push(
                        &mut entries,
                        EntryKind::Attachment {
                            name: format!("f{n}.txt"),
                            media_type: "text/plain".into(),
                            text: Some("file text".into()),
                            data_base64: None,
                            note: None,
                            bytes: 9,
                        },
                    ),
                    _ => {
                        let k = roll(4) as usize;
                        let ids: Vec<String> = (0..k)
                            .map(|_| {
                                calls += 1;
                                format!("c{calls}")
                            })
                            .collect();
                        push(
                            &mut entries,
                            EntryKind::AssistantMessage {
                                step: n,
                                text: if k == 0 {
                                    "an answer".into()
                                } else {
                                    String::new()
                                },
                                tool_calls: ids
                                    .iter()
                                    .map(|id| ToolCall {
                                        id: id.clone(),
                                        name: "read".into(),
                                        arguments: json!({"id": id}),
                                    })
                                    .collect(),
                                usage: Usage::default(),
                                model: "m".into(),
                            },
                        );
                        // Results in any order; now and then one missing.
                        let mut order = ids.clone();
                        order.rotate_left(roll(k.max(1) as u64) as usize);
                        for id in order {
                            if roll(10) == 0 {
                                continue;
                            }
                            let size = if roll(5) == 0 { 2_000 } else { 30 };
                            push(
                                &mut entries,
                                EntryKind::ToolResult {
                                    step: n,
                                    call_id: id,
                                    name: "read".into(),
                                    content: "y".repeat(size),
                                    is_error: false,
                                    truncated_chars: 0,
                                },
                            );
                        }
                    }
                }
                cache.extend(&entries[from..]);
                if roll(3) == 0 {
                    continue; // no call this time
                }
                let request = cache.request(&a, Vec::new());
                assert_eq!(
                    request,
                    build_request(&a, &entries, Vec::new()),
                    "window {window}, step {n}"
                );
                if roll(8) != 0 {
                    cache.keep(request);
                }
            }
            if window == 1_000_000 {
                assert!(cache.extensions > 50, "{}", cache.extensions);
            }
        }
    }
}
