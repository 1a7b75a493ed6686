//! Forced tool calls in the scripted engine: a request whose
//! `tool_choice` names a tool is answered with a call of that tool, its
//! arguments taken from the conversation's `#route=`, `#plan=`,
//! `#supervise=`, `#verdict=` or `#grade=` directive (one per forced tool
//! name; `grade` is the tool `baton eval run`'s judge forces), or
//! a default when there is none.
//!
//! A directive's value is JSON, read whole even when it holds spaces (so
//! `#plan={"steps": [{"title": "Read the page", …}]}` works): an object
//! (the arguments of every forced call of the tool), or an array whose
//! entries are used in order, the Nth forced call of the tool getting the
//! Nth entry and later calls the last. The word `garbage`, alone or as
//! an entry (`"garbage"`), answers that call with text instead of a call,
//! to test the fallbacks. Arguments are sent as written, unchecked, so a
//! test can also send wrong ones.
//!
//! Which call of its tool a request is cannot be read from the request
//! (forced answers are not kept as assistant messages), so
//! [`ForcedCalls`] keeps a small count per directive; see there.

use baton_core::CompletionRequest;
use serde_json::{json, Value};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// The forced tools the engine has a directive for, each with the
/// arguments it answers with when the conversation gives none.
pub const FORCED_DEFAULTS: [(&str, &str); 5] = [
    (
        "route",
        r#"{"tier":"default","modules":[],"needs_plan":false}"#,
    ),
    (
        "plan",
        r#"{"steps":[{"title":"Do the task","done_when":"the answer is given"}]}"#,
    ),
    ("supervise", r#"{"action":"continue"}"#),
    ("verdict", r#"{"pass":true,"problems":[]}"#),
    (
        "grade",
        r#"{"score":1,"reason":"[scripted model] graded without a #grade directive"}"#,
    ),
];

/// The most entries a directive's array may have, and the most distinct
/// requests [`ForcedCalls`] counts per directive.
pub const MAX_FORCED_ENTRIES: usize = 1000;

/// How many directives [`ForcedCalls`] keeps counts for before it starts
/// afresh (a long `baton dev` run on the scripted model stays bounded).
const MAX_COUNTED_DIRECTIVES: usize = 10_000;

/// What one forced call of a tool answers.
#[derive(Clone, Debug, PartialEq)]
pub enum ForcedAnswer {
    /// A call of the tool with these arguments.
    Call(Value),
    /// Text instead of a call.
    Garbage,
}

/// A `#route=`-style directive: its answers in order, and its text as
/// written (what [`ForcedCalls`] counts calls under).
#[derive(Clone, Debug, PartialEq)]
pub struct ForcedScript {
    pub answers: Vec<ForcedAnswer>,
    pub source: String,
}

impl ForcedScript {
    /// The answer of the `nth` forced call (1-based): the Nth entry, or
    /// the last for calls past the end.
    pub fn answer(&self, nth: usize) -> Option<&ForcedAnswer> {
        self.answers
            .get(nth.saturating_sub(1))
            .or_else(|| self.answers.last())
    }
}

/// The arguments a forced call of `tool` gets without a directive: the
/// defaults of [`FORCED_DEFAULTS`], `{}` for any other tool.
pub fn default_arguments(tool: &str) -> Value {
    FORCED_DEFAULTS
        .iter()
        .find(|(name, _)| *name == tool)
        .and_then(|(_, args)| serde_json::from_str(args).ok())
        .unwrap_or_else(|| json!({}))
}

/// Reads the forced-tool directives of `text`. Returns them by tool name,
/// the text with their spans blanked (so the other directives are read
/// from what is left, and JSON inside these is never mistaken for one),
/// and the directives that could not be read, explained.
pub(super) fn extract(text: &str) -> (BTreeMap<String, ForcedScript>, String, Vec<String>) {
    let mut markers: Vec<(usize, &str)> = FORCED_DEFAULTS
        .iter()
        .flat_map(|(tool, _)| {
            let marker = format!("#{tool}=");
            text.match_indices(&marker)
                .map(|(at, _)| (at, *tool))
                .collect::<Vec<_>>()
        })
        .collect();
    markers.sort_unstable();
    let mut found = BTreeMap::new();
    let mut errors = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (at, tool) in markers {
        let inside_earlier = spans.last().is_some_and(|(_, end)| at < *end);
        let starts_token = text[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        if inside_earlier || !starts_token {
            continue;
        }
        let value_at = at + tool.len() + 2;
        let (len, parsed) = read_value(&text[value_at..]);
        spans.push((at, value_at + len));
        match parsed {
            Ok(answers) => {
                let source = text[value_at..value_at + len].to_owned();
                found.insert(tool.to_owned(), ForcedScript { answers, source });
            }
            Err(why) => errors.push(format!("#{tool}=: {why}")),
        }
    }
    let mut rest = text.to_owned();
    for (start, end) in spans {
        // Same length, newlines kept: `#reply=` reads to the end of its line.
        let blank: String = text[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        rest.replace_range(start..end, &pad_to(blank, end - start));
    }
    (found, rest, errors)
}

/// `s` padded with spaces to `len` bytes (a multi-byte character blanked
/// to one space leaves it short).
fn pad_to(mut s: String, len: usize) -> String {
    while s.len() < len {
        s.push(' ');
    }
    s
}

/// The value at the start of `text`: its length in bytes, and its
/// answers or why it cannot be read.
fn read_value(text: &str) -> (usize, Result<Vec<ForcedAnswer>, String>) {
    let word_end = text.find(char::is_whitespace).unwrap_or(text.len());
    if &text[..word_end] == "garbage" {
        return (word_end, Ok(vec![ForcedAnswer::Garbage]));
    }
    let expected = "expected a JSON object, an array of them, or garbage";
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => {
            let len = values.byte_offset();
            (len, answers(value).ok_or_else(|| expected.to_owned()))
        }
        // Unreadable: skip to the end of the token, and say so.
        _ => (word_end, Err(expected.to_owned())),
    }
}

fn answers(value: Value) -> Option<Vec<ForcedAnswer>> {
    let one = |v: Value| match v {
        Value::Object(_) => Some(ForcedAnswer::Call(v)),
        Value::String(s) if s == "garbage" => Some(ForcedAnswer::Garbage),
        _ => None,
    };
    match value {
        Value::Array(entries) if (1..=MAX_FORCED_ENTRIES).contains(&entries.len()) => {
            entries.into_iter().map(one).collect()
        }
        Value::Array(_) => None,
        other => one(other).map(|a| vec![a]),
    }
}

/// Counts the forced calls of each directive, so that the Nth call of a
/// tool gets the directive's Nth answer: the one state the engine keeps
/// (as the mock server keeps `#fail_first`'s count), held by
/// [`crate::ScriptedProvider`] and by the mock server.
///
/// Calls are counted under the directive's tool and text as written,
/// whatever else the request holds (a forced request may well be built
/// afresh, with its own first message, at each checkpoint). A request
/// seen before — the same system prompt and messages, retried after a
/// failure or a crash — is the same call and gets the same answer; a new
/// one is the next call. So two conversations running at once with the
/// very same directive text share one count: write them differently.
#[derive(Debug, Default)]
pub struct ForcedCalls(Mutex<HashMap<u64, Vec<u64>>>);

impl ForcedCalls {
    /// Which call (1-based) of `tool`'s directive `script` `request` is,
    /// counting it if it is new.
    pub fn nth(&self, tool: &str, script: &ForcedScript, request: &CompletionRequest) -> usize {
        let key = hash(&(tool, &script.source));
        let seen = fingerprint(request);
        let Ok(mut counts) = self.0.lock() else {
            return 1;
        };
        if counts.len() >= MAX_COUNTED_DIRECTIVES && !counts.contains_key(&key) {
            counts.clear();
        }
        let calls = counts.entry(key).or_default();
        if let Some(i) = calls.iter().position(|f| *f == seen) {
            return i + 1;
        }
        if calls.len() < MAX_FORCED_ENTRIES {
            calls.push(seen);
        }
        calls.len()
    }
}

/// What makes two forced requests the same call: the system prompt and
/// the messages (not the model, which a fallback changes).
fn fingerprint(request: &CompletionRequest) -> u64 {
    let messages = serde_json::to_string(&request.messages).unwrap_or_default();
    hash(&(&request.system, messages))
}

fn hash(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{Message, ToolChoice};

    #[test]
    fn values_are_read_whole_spaces_and_all() {
        let text = "check it #plan={\"steps\": [{\"title\": \"Read #steps=3\", \"done_when\": \"x\"}]} #steps=2\n#verdict=garbage #route=[{\"tier\":\"fast\"},\"garbage\"]";
        let (found, rest, errors) = extract(text);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            found["plan"].answers,
            [ForcedAnswer::Call(
                json!({"steps": [{"title": "Read #steps=3", "done_when": "x"}]})
            )]
        );
        assert_eq!(found["verdict"].answers, [ForcedAnswer::Garbage]);
        assert_eq!(
            found["route"].answers,
            [
                ForcedAnswer::Call(json!({"tier": "fast"})),
                ForcedAnswer::Garbage
            ]
        );
        // What is left holds the other directives only, lines kept.
        assert_eq!(rest.len(), text.len());
        assert_eq!(rest.lines().count(), 2);
        assert_eq!(
            rest.split_whitespace().collect::<Vec<_>>(),
            ["check", "it", "#steps=2"]
        );
    }

    #[test]
    fn bad_values_are_explained() {
        for bad in [
            "#route={oops",
            "#plan=[]",
            "#verdict=3",
            "#supervise=[{},4]",
            "#route=",
        ] {
            let (found, _, errors) = extract(bad);
            assert!(found.is_empty(), "{bad}");
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert!(errors[0].contains("expected a JSON object"), "{errors:?}");
        }
        // Not at the start of a token: not a directive.
        assert!(extract("x#route={}").0.is_empty());
        // Inside another directive's value: part of that value.
        let (found, _, _) = extract(r#"#plan={"steps":[{"title":"a #verdict=garbage b"}]}"#);
        assert_eq!(found.keys().collect::<Vec<_>>(), ["plan"]);
    }

    #[test]
    fn answers_go_in_order_and_the_last_repeats() {
        let (found, _, _) = extract(r#"#supervise=[{"action":"note"},{"action":"stop"}]"#);
        let s = &found["supervise"];
        assert_eq!(
            s.answer(1),
            Some(&ForcedAnswer::Call(json!({"action": "note"})))
        );
        assert_eq!(
            s.answer(2),
            Some(&ForcedAnswer::Call(json!({"action": "stop"})))
        );
        assert_eq!(
            s.answer(9),
            Some(&ForcedAnswer::Call(json!({"action": "stop"})))
        );
    }

    #[test]
    fn defaults_are_json() {
        for (tool, _) in FORCED_DEFAULTS {
            assert!(default_arguments(tool).is_object(), "{tool}");
        }
        assert_eq!(default_arguments("route")["tier"], "default");
        assert_eq!(default_arguments("grade")["score"], 1);
        assert_eq!(default_arguments("anything"), json!({}));
    }

    fn request(system: &str, text: &str) -> CompletionRequest {
        CompletionRequest {
            model: "m".into(),
            system: system.into(),
            messages: vec![Message::User {
                content: text.into(),
            }],
            tools: vec![],
            max_tokens: 1,
            tool_choice: ToolChoice::tool("verdict"),
        }
    }

    #[test]
    fn calls_count_per_directive_and_a_repeat_is_the_same_call() {
        let calls = ForcedCalls::default();
        let (found, _, _) = extract(r#"#verdict=[{"pass":false},{"pass":true}]"#);
        let script = &found["verdict"];
        let first = request("judge", "answer one");
        assert_eq!(calls.nth("verdict", script, &first), 1);
        // Retried (another model, say): the same call.
        let mut retried = first.clone();
        retried.model = "fallback".into();
        assert_eq!(calls.nth("verdict", script, &retried), 1);
        assert_eq!(
            calls.nth("verdict", script, &request("judge", "answer two")),
            2
        );
        assert_eq!(calls.nth("verdict", script, &first), 1);
        // Another directive counts apart.
        let (other, _, _) = extract(r#"#verdict={"pass":true}"#);
        assert_eq!(
            calls.nth("verdict", &other["verdict"], &request("judge", "x")),
            1
        );
    }
}
