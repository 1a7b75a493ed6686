//! Feedback buttons under an answer: a `context_actions` block holding a
//! `feedback_buttons` element (Slack's Block Kit reference: "The feedback
//! buttons element must be used inside the context actions block").
//!
//! A message with blocks shows the blocks, not its `text` (which becomes
//! the notification fallback), so an answer with buttons carries its text
//! as `section` blocks too: at most [`MAX_SECTION_CHARS`] characters each
//! (Slack's limit for a section's text), cut between paragraphs or lines
//! where it can, never inside an `&amp;` entity or a `<…>` link.
//!
//! Each button's value is `RATING:TASK_ID` (Slack allows 2000 characters;
//! this is under 60); the element's `action_id` is [`FEEDBACK_ACTION`].

use baton_core::feedback::Rating;
use serde_json::{json, Value};

/// The `action_id` of the feedback buttons.
pub const FEEDBACK_ACTION: &str = "feedback";
/// Slack's limit on a section block's text.
pub const MAX_SECTION_CHARS: usize = 3000;
/// Slack's limit on blocks in a message; one is kept for the buttons.
const MAX_BLOCKS: usize = 50;

/// The button value for `rating` of `task_id`.
pub fn button_value(rating: Rating, task_id: &str) -> String {
    format!("{}:{task_id}", rating.as_str())
}

/// The rating and task id a button value names (`None`: not one of ours).
pub fn parse_button_value(value: &str) -> Option<(Rating, &str)> {
    let (rating, task) = value.split_once(':')?;
    Some((Rating::parse(rating)?, task))
}

/// The blocks of an answer in mrkdwn with feedback buttons for `task_id`;
/// `None` when the text does not fit in one message's blocks (it is then
/// posted as plain text, without buttons).
pub fn answer_blocks(mrkdwn: &str, task_id: &str) -> Option<Value> {
    let mut blocks: Vec<Value> = split_sections(mrkdwn, MAX_SECTION_CHARS)
        .into_iter()
        .map(|text| json!({"type": "section", "text": {"type": "mrkdwn", "text": text}}))
        .collect();
    if blocks.len() >= MAX_BLOCKS {
        return None;
    }
    blocks.push(feedback_block(task_id));
    Some(Value::Array(blocks))
}

/// The `context_actions` block with the two buttons.
pub fn feedback_block(task_id: &str) -> Value {
    let button = |emoji: &str, label: &str, rating: Rating| {
        json!({
            "text": {"type": "plain_text", "text": emoji},
            "accessibility_label": label,
            "value": button_value(rating, task_id),
        })
    };
    json!({
        "type": "context_actions",
        // Unique per message, as Slack asks of block ids.
        "block_id": format!("feedback-{task_id}"),
        "elements": [{
            "type": "feedback_buttons",
            "action_id": FEEDBACK_ACTION,
            "positive_button": button("👍", "Good answer", Rating::Positive),
            "negative_button": button("👎", "Bad answer", Rating::Negative),
        }],
    })
}

/// `text` in pieces of at most `max` characters, none empty.
fn split_sections(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if rest.chars().count() <= max {
            out.push(rest.to_owned());
            break;
        }
        let end = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let cut = safe_cut(&rest[..end]);
        let (head, tail) = rest.split_at(cut);
        out.push(head.trim_end().to_owned());
        rest = tail.trim_start();
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Where to cut `head` (a prefix that fits): after the last blank line,
/// else the last line break, else the last space, in its second half;
/// then backed off from a half-written entity or link. Never 0.
fn safe_cut(head: &str) -> usize {
    let half = head.len() / 2;
    let mut cut = ["\n\n", "\n", " "]
        .iter()
        .find_map(|sep| head.rfind(sep).filter(|&i| i > half).map(|i| i + sep.len()))
        .unwrap_or(head.len());
    let part = &head[..cut];
    if let Some(amp) = part.rfind('&') {
        if part.len() - amp < 8 && !part[amp..].contains(';') && amp > 0 {
            cut = amp;
        }
    }
    let part = &head[..cut];
    if let Some(lt) = part.rfind('<') {
        if !part[lt..].contains('>') && lt > 0 {
            cut = lt;
        }
    }
    cut.max(head.char_indices().nth(1).map_or(head.len(), |(i, _)| i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_answer_is_one_section_and_the_buttons() {
        let blocks = answer_blocks("*Done*: see <https://x.test|the run>", "t-1").unwrap();
        assert_eq!(blocks.as_array().unwrap().len(), 2);
        assert_eq!(
            blocks[0]["text"]["text"],
            "*Done*: see <https://x.test|the run>"
        );
        let fb = &blocks[1];
        assert_eq!(fb["type"], "context_actions");
        let el = &fb["elements"][0];
        assert_eq!(el["type"], "feedback_buttons");
        assert_eq!(el["action_id"], FEEDBACK_ACTION);
        assert_eq!(el["positive_button"]["value"], "positive:t-1");
        assert_eq!(el["negative_button"]["value"], "negative:t-1");
        assert_eq!(
            parse_button_value("negative:t-1"),
            Some((Rating::Negative, "t-1"))
        );
        assert_eq!(parse_button_value("maybe:t-1"), None);
        assert_eq!(parse_button_value("positive"), None);
    }

    #[test]
    fn long_answers_are_cut_between_lines_never_inside_links() {
        let para = format!("{}\n\n", "word ".repeat(150));
        let text = format!(
            "{}<https://example.com/{}|link> tail",
            para.repeat(8),
            "p".repeat(50)
        );
        let parts = split_sections(&text, MAX_SECTION_CHARS);
        assert!(parts.len() > 1);
        for p in &parts {
            assert!(p.chars().count() <= MAX_SECTION_CHARS);
            assert_eq!(p.matches('<').count(), p.matches('>').count(), "{p}");
        }
        assert_eq!(
            parts.join(" ").split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        // A word longer than a section is still cut.
        let parts = split_sections(&"x".repeat(7000), MAX_SECTION_CHARS);
        assert_eq!(parts.len(), 3);
        // A link at the cut goes whole to the next piece.
        let text = format!("{} <https://a.test/{}>", "y".repeat(20), "z".repeat(10));
        let parts = split_sections(&text, 40);
        assert!(parts
            .iter()
            .all(|p| p.matches('<').count() == p.matches('>').count()));
    }

    #[test]
    fn an_answer_too_long_for_one_message_has_no_buttons() {
        assert!(answer_blocks(&"a ".repeat(80_000), "t").is_none());
        assert!(answer_blocks(&"a ".repeat(20_000), "t").is_some());
    }
}
