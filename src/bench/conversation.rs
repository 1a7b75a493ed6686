//! `baton bench --conversation 5,50,500`: the input tokens of each
//! message's first model call in a conversation of N messages, each a new
//! task on the same thread that starts with the conversation's recap
//! (`baton_core::recap`), measured with the context pipeline's own
//! estimator. The goal is flat: what a message costs must not grow with
//! the conversation.

use baton_agent::context::build_context;
use baton_core::recap::{Recap, Speaker, Turn};
use baton_core::{Entry, EntryKind, TaskId};
use baton_settings::AgentConfig;

/// A user message and an answer of realistic length.
fn user_text(i: usize) -> String {
    format!(
        "Message {i}: can you check the deploy of service-{i} and tell me whether the error rate \
went back to normal after the rollback? {}",
        "Some more detail about what I saw in the dashboard. ".repeat(3)
    )
}

fn answer_text(i: usize) -> String {
    format!(
        "About message {i}: the deploy finished and the error rate is back under 0.1%. {}",
        "Here is what I checked and what I found, in a few sentences. ".repeat(12)
    )
}

/// Input tokens of the first model call of each message, 1..=n.
pub(crate) fn tokens_per_message(agent: &AgentConfig, n: usize) -> Vec<(u64, u64)> {
    let mut recap = Recap::default();
    let mut out = Vec::with_capacity(n);
    for i in 1..=n {
        let mut kinds = recap.entries();
        kinds.push(EntryKind::UserMessage { text: user_text(i) });
        let transcript: Vec<Entry> = kinds
            .into_iter()
            .enumerate()
            .map(|(seq, kind)| Entry {
                seq: seq as u64,
                at: 0,
                kind,
            })
            .collect();
        let (_, report) = build_context(agent, &transcript, Vec::new());
        out.push((report.estimated_tokens, report.window_tokens));
        recap.record(
            &TaskId::generate(),
            vec![
                Turn {
                    speaker: Speaker::User,
                    author: Some("U1".into()),
                    text: user_text(i),
                    at: 0,
                },
                Turn {
                    speaker: Speaker::Agent,
                    author: None,
                    text: answer_text(i),
                    at: 0,
                },
            ],
        );
    }
    out
}

pub(crate) fn run(lengths: &[usize]) {
    let agent = AgentConfig::new("default", "claude-sonnet-4-5");
    println!(
        "# baton bench --conversation (context pipeline estimate, model {})\n",
        agent.model
    );
    println!("| messages | tokens, message 1 | tokens, message 5 | tokens, message 50 | tokens, last message | most, any message | window |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &n in lengths {
        let per = tokens_per_message(&agent, n);
        let at = |k: usize| {
            per.get(k - 1)
                .map_or("—".to_owned(), |(t, _)| t.to_string())
        };
        let most = per.iter().map(|(t, _)| *t).max().unwrap_or(0);
        let window = per.first().map_or(0, |(_, w)| *w);
        println!(
            "| {n} | {} | {} | {} | {} | {most} | {window} |",
            at(1),
            at(5),
            at(50),
            at(n)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fiftieth_message_fits_the_window_and_cost_is_flat() {
        let agent = AgentConfig::new("default", "claude-sonnet-4-5");
        let per = tokens_per_message(&agent, 500);
        let (t50, window) = per[49];
        assert!(t50 < window, "{t50} tokens for message 50, window {window}");
        // Flat once the recap is full: message 500 costs no more than the
        // most any message cost by message 100.
        let by_100 = per[..100].iter().map(|(t, _)| *t).max().unwrap();
        assert!(per[499].0 <= by_100, "{} > {by_100}", per[499].0);
        // And it does grow at first: the earlier turns are really there.
        assert!(per[4].0 > per[0].0);
    }
}
