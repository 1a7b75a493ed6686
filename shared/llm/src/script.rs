//! The scripted model's directive engine: a deterministic function from a
//! [`CompletionRequest`] to an answer. Shared by [`crate::ScriptedProvider`]
//! and the mock HTTP server.
//!
//! Directives are read from the FIRST user message of the conversation;
//! the turn number is the number of assistant messages in the request plus
//! one, so the engine needs no state:
//!
//! | directive | effect |
//! | --- | --- |
//! | `#steps=N` (1..=1000) | turns 1..N-1 call `current_time` (a different `timezone` each call); turn N answers `[scripted model] done after N steps` |
//! | `#parallel=K` (1..=100) | with `#steps`, K calls per tool turn |
//! | `#tool=NAME` `#args={"json":"object"}` | turn 1 calls NAME; turn 2 answers `[scripted model] tool NAME said: <result>` |
//! | `#sleep=MS` | wait that long before every answer |
//! | `#reply=TEXT…` (rest of the line) | the final answer is exactly TEXT, unlabelled |
//! | `#fail_first=N` | (mock server only) the first N calls of the conversation fail |
//! | `#empty=N` | turns 1..=N answer with nothing (no text, no tool calls) |
//! | `#narrate=N` | after those, N turns answer [`NARRATION`] (an intention to act, no call), then the conversation goes on as the other directives say, counting its turns from there |
//! | `#repeat=N` | with `#tool`, turns 1..=N all make the same call |
//! | `#then_args={"json":"object"}` | with `#tool`, one more call of the tool with these arguments after those, before the answer |
//! | `#also=NAME` `#also_args={"json":"object"}` | with `#tool`, turn 1 also calls NAME, in the same turn, after the `#tool` call |
//! | `#poll=N` | with `#tool`, turns alternate `sleep {"seconds": 2}` and the call, N calls in all |
//! | `#overflow_first=N` | (mock server only) the first N calls fail as too long for the context window |
//! | `#reject_first=N` | (mock server only) the first N calls are refused (HTTP 400 naming a model and an account) |
//! | `#chunk_ms=MS` | a streamed answer waits that long between pieces (default: none on the mock server, [`SCRIPTED_CHUNK_DELAY`] in the scripted provider) |
//! | `#stream_fail_after=N` | (mock server only) the conversation's first streamed answer breaks its connection after N events |
//! | `#stream_error_after=N` | (mock server only) the conversation's first streamed answer reports an overloaded error after N events |
//! | `#route=JSON` | a request forcing the tool `route` is answered with a call of it with these arguments (default `{"tier":"default","modules":[],"needs_plan":false}`) |
//! | `#plan=JSON` | the same for `plan` (default `{"steps":[{"title":"Do the task","done_when":"the answer is given"}]}`) |
//! | `#supervise=JSON` | the same for `supervise` (default `{"action":"continue"}`) |
//! | `#verdict=JSON` | the same for `verdict` (default `{"pass":true,"problems":[]}`) |
//! | `#grade=JSON` | the same for `grade`, the tool of `baton eval run`'s judge (default `{"score":1,"reason":"…"}`) |
//!
//! **Forced calls.** A request whose `tool_choice` forces a tool
//! ([`baton_core::ToolChoice::Tool`]) is answered with one call of that
//! tool and nothing else, whatever the other directives say (apart from
//! `#sleep`, and on the mock server the injected failures, which count
//! every call of the conversation); its answer is not an assistant
//! message of the conversation, so the turns above are counted as if it
//! had not happened. The arguments come from the tool's directive above,
//! whose JSON may hold spaces: an object for every call, or an array used
//! in order (the Nth forced call of the tool gets the Nth entry, later
//! ones the last; [`ForcedCalls`] counts them). `garbage`, as the value or
//! as an entry (`"garbage"`), answers that call with text instead, to test
//! fallbacks. A forced tool without a directive gets the default above
//! (`{}` for a tool not listed). Invalid directives answer with text, as
//! for any request. See [`forced`].
//!
//! A streamed answer comes in pieces: the text [`TEXT_PIECE_CHARS`]
//! characters at a time, a tool call's arguments [`ARGUMENT_PIECE_CHARS`]
//! at a time ([`pieces`]).
//!
//! A request that offers no tools and whose last message says "Do not call
//! any tools" is never answered with a call: it gets `[scripted model]
//! summary after N turns` instead.
//!
//! A request for a conversation's recap summary is answered by
//! [`recap`], with its own directives.
//!
//! Without a directive the model echoes the latest user message, or, when
//! it mentions the word "time", calls `current_time` and reports the result.

pub mod forced;
pub mod recap;

pub use forced::{ForcedAnswer, ForcedCalls, ForcedScript};

use baton_core::{Completion, CompletionRequest, Message, ToolCall, Usage};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Every labelled answer starts with this, so nobody mistakes the scripted
/// model for a real one.
pub const LABEL: &str = "[scripted model] ";

/// What a `#narrate` turn answers: the model announcing what it will do
/// instead of doing it.
pub const NARRATION: &str = "Let me check that for you…";

/// The most steps `#steps` accepts.
pub const MAX_STEPS: u32 = 1000;
/// The most parallel calls `#parallel` accepts.
pub const MAX_PARALLEL: u32 = 100;
/// The longest `#sleep` honoured.
pub const MAX_SLEEP: Duration = Duration::from_secs(600);
/// How much of a tool result the `#tool` answer quotes.
pub const QUOTE_CHARS: usize = 500;
/// The characters of a streamed answer's text per piece.
pub const TEXT_PIECE_CHARS: usize = 20;
/// The characters of a streamed tool call's arguments per piece.
pub const ARGUMENT_PIECE_CHARS: usize = 10;
/// The scripted provider's wait between the pieces of a streamed answer,
/// so that a local user sees it written.
pub const SCRIPTED_CHUNK_DELAY: Duration = Duration::from_millis(40);

/// `text` in pieces of at most `size` characters (never a character cut).
pub fn pieces(text: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.char_indices().nth(size).map_or(rest.len(), |(i, _)| i);
        let (piece, tail) = rest.split_at(end);
        out.push(piece);
        rest = tail;
    }
    out
}

/// The directives found in a message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Directives {
    pub steps: Option<u32>,
    pub parallel: u32,
    pub tool: Option<String>,
    pub args: Option<Value>,
    /// `#then_args`: a second call of `#tool`, with these arguments.
    pub then_args: Option<Value>,
    /// `#also`, `#also_args`: a second tool turn 1 calls beside `#tool`.
    pub also: Option<String>,
    pub also_args: Option<Value>,
    pub sleep: Duration,
    pub reply: Option<String>,
    pub fail_first: u32,
    pub empty: u32,
    /// `#narrate`: turns after the empty ones answering [`NARRATION`].
    pub narrate: u32,
    pub repeat: u32,
    pub poll: u32,
    pub overflow_first: u32,
    pub reject_first: u32,
    /// `#chunk_ms`: the wait between the pieces of a streamed answer.
    pub chunk_delay: Option<Duration>,
    pub stream_fail_after: Option<u32>,
    pub stream_error_after: Option<u32>,
    /// `#route=`, `#plan=`, `#supervise=`, `#verdict=`, `#grade=`: how forced calls
    /// of those tools are answered, by tool name.
    pub forced: BTreeMap<String, ForcedScript>,
    /// Directives that could not be read, explained.
    pub errors: Vec<String>,
}

impl Directives {
    /// Reads the `#key=value` directives of `text`.
    pub fn parse(text: &str) -> Self {
        // Read first: their JSON may hold spaces, and anything in it.
        let (forced, rest, errors) = forced::extract(text);
        let mut d = Directives {
            parallel: 1,
            forced,
            errors,
            ..Directives::default()
        };
        for line in rest.lines() {
            let (scan, reply) = match line.find("#reply=") {
                Some(i) => (&line[..i], Some(&line[i + "#reply=".len()..])),
                None => (line, None),
            };
            if let Some(reply) = reply {
                d.reply = Some(reply.trim_end_matches('\r').to_string());
            }
            for token in scan.split_whitespace() {
                let Some((key, value)) = token.strip_prefix('#').and_then(|t| t.split_once('='))
                else {
                    continue;
                };
                d.apply(key, value);
            }
        }
        d
    }

    fn apply(&mut self, key: &str, value: &str) {
        let number = |max: u32| -> Result<u32, String> {
            match value.parse::<u32>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(format!("#{key}={value}: expected a number in 1..={max}")),
            }
        };
        let result = match key {
            "steps" => number(MAX_STEPS).map(|n| self.steps = Some(n)),
            "parallel" => number(MAX_PARALLEL).map(|n| self.parallel = n),
            "tool" if !value.is_empty() => {
                self.tool = Some(value.to_string());
                Ok(())
            }
            "tool" => Err("#tool=: expected a tool name".to_string()),
            "also" if !value.is_empty() => {
                self.also = Some(value.to_string());
                Ok(())
            }
            "also" => Err("#also=: expected a tool name".to_string()),
            "args" | "then_args" | "also_args" => match serde_json::from_str::<Value>(value) {
                Ok(v @ Value::Object(_)) => {
                    match key {
                        "args" => self.args = Some(v),
                        "then_args" => self.then_args = Some(v),
                        _ => self.also_args = Some(v),
                    }
                    Ok(())
                }
                _ => Err(format!(
                    "#{key}={value}: expected a JSON object without spaces"
                )),
            },
            "sleep" => value
                .parse::<u64>()
                .map(|ms| self.sleep = Duration::from_millis(ms).min(MAX_SLEEP))
                .map_err(|_| format!("#sleep={value}: expected milliseconds")),
            "fail_first" => value
                .parse::<u32>()
                .map(|n| self.fail_first = n)
                .map_err(|_| format!("#fail_first={value}: expected a number")),
            "empty" => number(MAX_STEPS).map(|n| self.empty = n),
            "narrate" => number(MAX_STEPS).map(|n| self.narrate = n),
            "repeat" => number(MAX_STEPS).map(|n| self.repeat = n),
            "poll" => number(MAX_STEPS).map(|n| self.poll = n),
            "overflow_first" => number(MAX_STEPS).map(|n| self.overflow_first = n),
            "reject_first" => number(MAX_STEPS).map(|n| self.reject_first = n),
            "chunk_ms" => value
                .parse::<u64>()
                .map(|ms| self.chunk_delay = Some(Duration::from_millis(ms).min(MAX_SLEEP)))
                .map_err(|_| format!("#chunk_ms={value}: expected milliseconds")),
            "stream_fail_after" => value
                .parse::<u32>()
                .map(|n| self.stream_fail_after = Some(n))
                .map_err(|_| format!("#stream_fail_after={value}: expected a number")),
            "stream_error_after" => value
                .parse::<u32>()
                .map(|n| self.stream_error_after = Some(n))
                .map_err(|_| format!("#stream_error_after={value}: expected a number")),
            // Not ours (a hashtag, say): ignore.
            _ => Ok(()),
        };
        if let Err(e) = result {
            self.errors.push(e);
        }
    }
}

/// What the scripted model does for one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The answer.
    pub completion: Completion,
    /// How long to wait before giving it (`#sleep`).
    pub sleep: Duration,
    /// The wait between the pieces of a streamed answer (`#chunk_ms`),
    /// when the conversation sets one.
    pub chunk_delay: Option<Duration>,
}

/// The text of the conversation's first user message.
pub fn first_user_message(request: &CompletionRequest) -> Option<&str> {
    request.messages.iter().find_map(|m| match m {
        Message::User { content } => Some(content.as_str()),
        _ => None,
    })
}

/// The scripted model's answer to `request`. A forced call is answered
/// as the first call of its directive ([`respond_counting`] counts them).
pub fn respond(request: &CompletionRequest) -> Plan {
    answer(request, |_, _| 1)
}

/// The scripted model's answer to `request`, the forced calls of each
/// directive counted in `calls`, so the Nth gets the directive's Nth
/// answer.
pub fn respond_counting(request: &CompletionRequest, calls: &ForcedCalls) -> Plan {
    answer(request, |tool, script| calls.nth(tool, script, request))
}

/// `nth`: which call of the directive `script` of a forced `tool` this is.
fn answer(request: &CompletionRequest, nth: impl Fn(&str, &ForcedScript) -> usize) -> Plan {
    let first = first_user_message(request).unwrap_or_default();
    let d = Directives::parse(first);
    let (action, ids) = match request.tool_choice.forced() {
        _ if recap::is_recap_summary(request) => {
            (Action::Answer(recap::summary(request)), "recap".into())
        }
        Some(tool) => forced_action(tool, &d, nth),
        None => {
            let turn = request
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Assistant { .. }))
                .count()
                + 1;
            let action = match decide(request, &d, turn) {
                // Asked to stop and sum up without tools (Baton's closing summary).
                Action::Call(_) if request.tools.is_empty() && asks_for_no_tools(request) => {
                    Action::Answer(format!("{LABEL}summary after {} turns", turn - 1))
                }
                action => action,
            };
            (action, format!("call_{turn}"))
        }
    };
    let (content, tool_calls) = match action {
        Action::Answer(text) => (text, Vec::new()),
        Action::Call(calls) => (
            String::new(),
            calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall {
                    id: format!("{ids}_{i}"),
                    name,
                    arguments,
                })
                .collect(),
        ),
    };
    let output_chars = content.chars().count()
        + tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.to_string().len())
            .sum::<usize>();
    let completion = Completion {
        stop_reason: Some(
            if tool_calls.is_empty() {
                "end_turn"
            } else {
                "tool_use"
            }
            .into(),
        ),
        usage: Usage {
            input_tokens: tokens(input_chars(request)),
            output_tokens: tokens(output_chars),
        },
        model: if request.model.is_empty() {
            "scripted".into()
        } else {
            request.model.clone()
        },
        content,
        tool_calls,
    };
    Plan {
        completion,
        sleep: d.sleep,
        chunk_delay: d.chunk_delay,
    }
}

/// The answer to a request forcing `tool`, and the prefix of its call's
/// id (`call_route_2` for the second `route` call).
fn forced_action(
    tool: &str,
    d: &Directives,
    nth: impl Fn(&str, &ForcedScript) -> usize,
) -> (Action, String) {
    if !d.errors.is_empty() {
        let text = format!("{LABEL}invalid directive: {}", d.errors.join("; "));
        return (Action::Answer(text), format!("call_{tool}_1"));
    }
    let Some(script) = d.forced.get(tool) else {
        let call = (tool.to_owned(), forced::default_arguments(tool));
        return (Action::Call(vec![call]), format!("call_{tool}_1"));
    };
    let n = nth(tool, script);
    let action = match script.answer(n) {
        Some(ForcedAnswer::Call(arguments)) => {
            Action::Call(vec![(tool.to_owned(), arguments.clone())])
        }
        Some(ForcedAnswer::Garbage) | None => Action::Answer(format!(
            "{LABEL}I would rather chat than call {tool}. Maybe later?"
        )),
    };
    (action, format!("call_{tool}_{n}"))
}

/// Whether the last message is a user message telling the model not to
/// call tools.
fn asks_for_no_tools(request: &CompletionRequest) -> bool {
    matches!(request.messages.last(), Some(Message::User { content }) if content.contains("Do not call any tools"))
}

enum Action {
    Answer(String),
    Call(Vec<(String, Value)>),
}

/// Zones the `#steps` calls of `current_time` cycle through.
const ZONES: [&str; 40] = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Europe/London",
    "America/Los_Angeles",
    "Asia/Kolkata",
    "Africa/Cairo",
    "America/Sao_Paulo",
    "Europe/Paris",
    "Asia/Shanghai",
    "America/Chicago",
    "Europe/Madrid",
    "Asia/Singapore",
    "Pacific/Auckland",
    "Europe/Rome",
    "America/Denver",
    "Asia/Dubai",
    "Africa/Johannesburg",
    "Europe/Moscow",
    "America/Toronto",
    "Asia/Seoul",
    "Europe/Amsterdam",
    "America/Mexico_City",
    "Asia/Jakarta",
    "Europe/Stockholm",
    "America/Bogota",
    "Asia/Bangkok",
    "Europe/Vienna",
    "America/Lima",
    "Asia/Manila",
    "Europe/Warsaw",
    "America/Halifax",
    "Asia/Karachi",
    "Europe/Athens",
    "America/Anchorage",
    "Asia/Tehran",
    "Europe/Lisbon",
    "Pacific/Honolulu",
];

fn decide(request: &CompletionRequest, d: &Directives, turn: usize) -> Action {
    if !d.errors.is_empty() {
        return Action::Answer(format!("{LABEL}invalid directive: {}", d.errors.join("; ")));
    }
    let final_answer = |default: String| Action::Answer(d.reply.clone().unwrap_or(default));
    if turn <= d.empty as usize {
        return Action::Answer(String::new());
    }
    let turn = turn - d.empty as usize;
    if turn <= d.narrate as usize {
        return Action::Answer(NARRATION.to_owned());
    }
    let turn = turn - d.narrate as usize;
    if let Some(steps) = d.steps {
        return if turn < steps as usize {
            // A different zone each call, so a long run is not mistaken for
            // a stuck loop (the same call with the same arguments).
            Action::Call(
                (0..d.parallel as usize)
                    .map(|i| {
                        let zone = ZONES[(turn * d.parallel as usize + i) % ZONES.len()];
                        ("current_time".to_string(), json!({ "timezone": zone }))
                    })
                    .collect(),
            )
        } else {
            final_answer(format!("{LABEL}done after {steps} steps"))
        };
    }
    if let (Some(tool), true) = (&d.tool, d.poll > 0) {
        let args = d.args.clone().unwrap_or_else(|| json!({}));
        return if turn > 2 * d.poll as usize {
            final_answer(format!("{LABEL}polled {tool} {} times", d.poll))
        } else if turn % 2 == 1 {
            Action::Call(vec![("sleep".to_string(), json!({"seconds": 2}))])
        } else {
            Action::Call(vec![(tool.clone(), args)])
        };
    }
    if let Some(tool) = &d.tool {
        let repeated = d.repeat.max(1) as usize;
        return if turn <= repeated {
            let mut calls = vec![(tool.clone(), d.args.clone().unwrap_or_else(|| json!({})))];
            if let (1, Some(also)) = (turn, &d.also) {
                let args = d.also_args.clone().unwrap_or_else(|| json!({}));
                calls.push((also.clone(), args));
            }
            Action::Call(calls)
        } else if let Some(then) = d.then_args.as_ref().filter(|_| turn == repeated + 1) {
            Action::Call(vec![(tool.clone(), then.clone())])
        } else {
            let result = last_tool_result(&request.messages).unwrap_or("(no result)");
            final_answer(format!(
                "{LABEL}tool {tool} said: {}",
                result.chars().take(QUOTE_CHARS).collect::<String>()
            ))
        };
    }
    if let Some(reply) = &d.reply {
        return Action::Answer(reply.clone());
    }
    // No directive: react to the latest user message, so a thread that goes
    // on gets an answer to what was said last.
    let last_user = request
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }));
    let Some(at) = last_user else {
        return Action::Answer(format!("{LABEL}You said: "));
    };
    let text = match &request.messages[at] {
        Message::User { content } => content.as_str(),
        _ => "",
    };
    if let Some(result) = last_tool_result(&request.messages[at..]) {
        return Action::Answer(format!(
            "{LABEL}tool current_time said: {}",
            result.chars().take(QUOTE_CHARS).collect::<String>()
        ));
    }
    let mentions_time = text
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("time"));
    if mentions_time {
        Action::Call(vec![("current_time".to_string(), json!({}))])
    } else {
        Action::Answer(format!("{LABEL}You said: {text}"))
    }
}

fn last_tool_result(messages: &[Message]) -> Option<&str> {
    messages.iter().rev().find_map(|m| match m {
        Message::Tool { content, .. } => Some(content.as_str()),
        _ => None,
    })
}

/// The characters a request sends: its system prompt, messages (tool
/// calls as name and arguments) and tool specs. The scripted model's
/// input tokens are counted from it, and so are the benches'.
pub fn input_chars(request: &CompletionRequest) -> usize {
    let messages: usize = request
        .messages
        .iter()
        .map(|m| match m {
            Message::User { content } => content.chars().count(),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                content.chars().count()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.to_string().len())
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => content.chars().count(),
            Message::Attachment {
                name,
                media_type,
                content,
            } => content.as_text(name, media_type).chars().count(),
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
        .sum();
    request.system.chars().count() + messages + tools
}

/// A rough token count: four characters a token, at least one.
fn tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4).max(1)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            model: String::new(),
            system: "be brief".into(),
            messages,
            tools: vec![],
            max_tokens: 100,
            tool_choice: baton_core::ToolChoice::Auto,
        }
    }

    fn user(text: &str) -> Message {
        Message::User {
            content: text.into(),
        }
    }

    /// Plays the conversation the way the agent loop would: every tool call
    /// gets the result `result`. Returns the final completion and the turns.
    fn play(first: &str, result: &str) -> (Completion, Vec<Completion>) {
        let mut messages = vec![user(first)];
        let mut turns = Vec::new();
        loop {
            let plan = respond(&req(messages.clone()));
            let c = plan.completion;
            turns.push(c.clone());
            if c.tool_calls.is_empty() {
                return (c, turns);
            }
            messages.push(Message::Assistant {
                content: c.content.clone(),
                tool_calls: c.tool_calls.clone(),
            });
            for call in &c.tool_calls {
                messages.push(Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: result.into(),
                    is_error: false,
                });
            }
            assert!(turns.len() <= 1001, "runaway conversation");
        }
    }

    #[test]
    fn steps_run_n_turns() {
        let (last, turns) = play("please #steps=3", "12:00");
        assert_eq!(turns.len(), 3);
        assert_eq!(last.content, "[scripted model] done after 3 steps");
        assert_eq!(turns[0].tool_calls[0].name, "current_time");
        assert_eq!(turns[0].tool_calls[0].id, "call_1_0");
        assert_eq!(turns[1].tool_calls[0].id, "call_2_0");
        assert_eq!(turns[0].stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(last.stop_reason.as_deref(), Some("end_turn"));

        let (last, turns) = play("#steps=1", "x");
        assert_eq!(turns.len(), 1);
        assert_eq!(last.content, "[scripted model] done after 1 steps");
    }

    #[test]
    fn parallel_calls_have_distinct_ids() {
        let (_, turns) = play("#steps=2 #parallel=3", "t");
        let ids: Vec<_> = turns[0].tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_1_0", "call_1_1", "call_1_2"]);
    }

    #[test]
    fn answers_are_deterministic() {
        let r = req(vec![user("#steps=5 #parallel=2")]);
        assert_eq!(respond(&r), respond(&r));
    }

    #[test]
    fn tool_directive_calls_then_quotes() {
        let (last, turns) = play(
            r#"#tool=http_request #args={"url":"http://x"}"#,
            &"y".repeat(900),
        );
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].tool_calls[0].name, "http_request");
        assert_eq!(turns[0].tool_calls[0].arguments, json!({"url": "http://x"}));
        let expected = format!(
            "[scripted model] tool http_request said: {}",
            "y".repeat(500)
        );
        assert_eq!(last.content, expected);
    }

    #[test]
    fn then_args_make_a_second_call_before_the_answer() {
        let (last, turns) = play(
            r#"#tool=http_request #args={"url":"http://a"} #then_args={"url":"http://b"}"#,
            "page",
        );
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0].tool_calls[0].arguments, json!({"url": "http://a"}));
        assert_eq!(turns[1].tool_calls[0].arguments, json!({"url": "http://b"}));
        assert_eq!(
            last.content,
            "[scripted model] tool http_request said: page"
        );
    }

    #[test]
    fn also_makes_a_second_call_in_the_first_turn() {
        let (_, turns) = play(
            r#"#tool=wait_for_callback #args={"description":"CI"} #also=http_request #also_args={"url":"http://a"}"#,
            "ok",
        );
        let first: Vec<(&str, &Value)> = turns[0]
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), &c.arguments))
            .collect();
        assert_eq!(
            first,
            vec![
                ("wait_for_callback", &json!({"description": "CI"})),
                ("http_request", &json!({"url": "http://a"}))
            ]
        );
        assert_eq!(turns[1].tool_calls, vec![]);
    }

    #[test]
    fn reply_is_exact_and_unlabelled() {
        let (last, _) = play("#reply=NO_REPLY", "");
        assert_eq!(last.content, "NO_REPLY");
        let (last, turns) = play("#steps=2 #reply=**bold** and `code`\nnext line", "");
        assert_eq!(turns.len(), 2);
        assert_eq!(last.content, "**bold** and `code`");
    }

    #[test]
    fn sleep_is_reported() {
        let plan = respond(&req(vec![user("#sleep=25 hi")]));
        assert_eq!(plan.sleep, Duration::from_millis(25));
        assert!(plan.completion.content.starts_with(LABEL));
    }

    #[test]
    fn no_directive_echoes_or_tells_the_time() {
        let (last, turns) = play("hello there", "");
        assert_eq!(turns.len(), 1);
        assert_eq!(last.content, "[scripted model] You said: hello there");

        let (last, turns) = play("What TIME is it?", "2026-01-01T00:00:00Z");
        assert_eq!(turns.len(), 2);
        assert_eq!(
            last.content,
            "[scripted model] tool current_time said: 2026-01-01T00:00:00Z"
        );
        // "timeline" is not the word "time".
        let (_, turns) = play("show the timeline", "");
        assert_eq!(turns.len(), 1);
    }

    #[test]
    fn invalid_directives_are_answered_plainly() {
        for bad in [
            "#steps=0",
            "#steps=1001",
            "#steps=x",
            "#args={bad}",
            "#parallel=0",
        ] {
            let plan = respond(&req(vec![user(bad)]));
            assert!(
                plan.completion
                    .content
                    .starts_with("[scripted model] invalid directive"),
                "{bad}: {}",
                plan.completion.content
            );
        }
    }

    #[test]
    fn usage_grows_with_the_conversation() {
        let small = respond(&req(vec![user("hi")])).completion.usage;
        let big = respond(&req(vec![user(&"word ".repeat(400))]))
            .completion
            .usage;
        assert!(small.input_tokens >= 1 && small.output_tokens >= 1);
        assert!(big.input_tokens >= 500, "{big:?}");
        assert!(big.output_tokens > small.output_tokens);
    }

    #[test]
    fn pieces_never_cut_a_character() {
        assert_eq!(pieces("", 3), Vec::<&str>::new());
        assert_eq!(pieces("abcdefg", 3), ["abc", "def", "g"]);
        assert_eq!(pieces("é😀üx", 2), ["é😀", "üx"]);
        assert_eq!(pieces("ab", 0), ["a", "b"]);
    }

    #[test]
    fn streaming_directives_parse() {
        let d = Directives::parse("#chunk_ms=15 #stream_fail_after=3 #stream_error_after=0");
        assert_eq!(d.chunk_delay, Some(Duration::from_millis(15)));
        assert_eq!(d.stream_fail_after, Some(3));
        assert_eq!(d.stream_error_after, Some(0));
        assert!(d.errors.is_empty());
        assert_eq!(
            respond(&req(vec![user("#chunk_ms=15 hi")])).chunk_delay,
            Some(Duration::from_millis(15))
        );
        assert_eq!(Directives::parse("#chunk_ms=x").errors.len(), 1);
    }

    fn forced(messages: Vec<Message>, tool: &str) -> CompletionRequest {
        let mut r = req(messages);
        r.tools = [
            "route",
            "plan",
            "supervise",
            "verdict",
            "grade",
            "current_time",
        ]
        .iter()
        .map(|name| baton_core::ToolSpec {
            name: (*name).into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
        .collect();
        r.tool_choice = baton_core::ToolChoice::tool(tool);
        r
    }

    /// The one call of a forced answer: its name and arguments.
    fn forced_call(plan: &Plan) -> (String, Value) {
        let c = &plan.completion;
        assert!(c.content.is_empty(), "{c:?}");
        assert_eq!(c.tool_calls.len(), 1, "{c:?}");
        assert_eq!(c.stop_reason.as_deref(), Some("tool_use"));
        (
            c.tool_calls[0].name.clone(),
            c.tool_calls[0].arguments.clone(),
        )
    }

    #[test]
    fn forced_calls_take_the_directive_or_the_default() {
        let text = r#"plan it #route={"tier": "strong", "modules": ["sql"], "needs_plan": true} #verdict=garbage"#;
        let route = respond(&forced(vec![user(text)], "route"));
        assert_eq!(
            forced_call(&route),
            (
                "route".into(),
                json!({"tier": "strong", "modules": ["sql"], "needs_plan": true})
            )
        );
        assert_eq!(route.completion.tool_calls[0].id, "call_route_1_0");
        for (tool, default) in [
            (
                "plan",
                json!({"steps": [{"title": "Do the task", "done_when": "the answer is given"}]}),
            ),
            ("supervise", json!({"action": "continue"})),
            ("current_time", json!({})),
        ] {
            assert_eq!(
                forced_call(&respond(&forced(vec![user(text)], tool))),
                (tool.into(), default)
            );
        }
        assert_eq!(
            forced_call(&respond(&forced(vec![user("hi")], "route"))).1,
            json!({"tier": "default", "modules": [], "needs_plan": false})
        );
        assert_eq!(
            forced_call(&respond(&forced(vec![user("hi")], "verdict"))).1,
            json!({"pass": true, "problems": []})
        );
        // The eval judge's tool, its JSON holding spaces.
        let graded = r#"Is 2+2 4? #grade={"score": 0.25, "reason": "too vague"}"#;
        assert_eq!(
            forced_call(&respond(&forced(vec![user(graded)], "grade"))),
            (
                "grade".into(),
                json!({"score": 0.25, "reason": "too vague"})
            )
        );
        // Garbage: text, no call.
        let verdict = respond(&forced(vec![user(text)], "verdict")).completion;
        assert!(verdict.tool_calls.is_empty());
        assert!(verdict.content.starts_with(LABEL), "{}", verdict.content);
        assert_eq!(verdict.stop_reason.as_deref(), Some("end_turn"));
        // An unreadable directive: text too, saying why.
        let bad = respond(&forced(vec![user("#route={nope")], "route")).completion;
        assert!(bad.tool_calls.is_empty());
        assert!(
            bad.content.contains("invalid directive: #route=:"),
            "{}",
            bad.content
        );
    }

    #[test]
    fn forced_calls_leave_the_turns_alone() {
        // A forced call at every point of a #steps conversation answers
        // the forced tool, and the conversation goes on as without them.
        let first = r#"#steps=3 #supervise={"action":"note","note":"hurry"}"#;
        let mut messages = vec![user(first)];
        let mut turns = 0;
        loop {
            let sup = respond(&forced(messages.clone(), "supervise"));
            assert_eq!(
                forced_call(&sup).1,
                json!({"action": "note", "note": "hurry"})
            );
            let c = respond(&req(messages.clone())).completion;
            turns += 1;
            if c.tool_calls.is_empty() {
                assert_eq!(c.content, "[scripted model] done after 3 steps");
                break;
            }
            assert_eq!(c.tool_calls[0].id, format!("call_{turns}_0"));
            messages.push(Message::Assistant {
                content: String::new(),
                tool_calls: c.tool_calls.clone(),
            });
            messages.push(Message::Tool {
                call_id: c.tool_calls[0].id.clone(),
                name: "current_time".into(),
                content: "12:00".into(),
                is_error: false,
            });
        }
        assert_eq!(turns, 3);
        // #empty and the closing summary are not for forced calls.
        let r = forced(vec![user("#empty=3 Do not call any tools")], "plan");
        assert_eq!(forced_call(&respond(&r)).0, "plan");
    }

    #[test]
    fn counted_forced_calls_go_through_the_array() {
        let calls = ForcedCalls::default();
        let first = user(
            r#"#verdict=[{"pass": false, "problems": ["too short"]}, "garbage", {"pass": true}]"#,
        );
        let judged = |answer: &str| {
            let mut r = forced(vec![first.clone(), user(answer)], "verdict");
            r.system = "judge".into();
            respond_counting(&r, &calls).completion
        };
        let one = judged("answer 1");
        assert_eq!(
            one.tool_calls[0].arguments,
            json!({"pass": false, "problems": ["too short"]})
        );
        assert_eq!(one.tool_calls[0].id, "call_verdict_1_0");
        // The same request again (a retry) is the same call.
        assert_eq!(judged("answer 1"), one);
        assert!(judged("answer 2").tool_calls.is_empty(), "garbage");
        assert_eq!(
            judged("answer 3").tool_calls[0].arguments,
            json!({"pass": true})
        );
        assert_eq!(judged("answer 4").tool_calls[0].id, "call_verdict_4_0");
        // Uncounted, every call is the first.
        let r = forced(vec![first.clone(), user("answer 9")], "verdict");
        assert_eq!(respond(&r).completion, one_for(&r, &one));
    }

    /// `one` as it would answer `r` (the usage depends on the request).
    fn one_for(r: &CompletionRequest, one: &Completion) -> Completion {
        Completion {
            usage: respond(r).completion.usage,
            ..one.clone()
        }
    }

    #[test]
    fn narration_comes_first_then_the_conversation_as_scripted() {
        let mut messages = vec![user("#narrate=2 #reply=It is 42.")];
        for _ in 0..2 {
            let c = respond(&req(messages.clone())).completion;
            assert_eq!(c.content, NARRATION);
            assert!(c.tool_calls.is_empty());
            messages.push(Message::Assistant {
                content: c.content,
                tool_calls: Vec::new(),
            });
            messages.push(user("do it, do not say you will"));
        }
        assert_eq!(respond(&req(messages)).completion.content, "It is 42.");
        // With #steps, the steps start after the narration.
        let (last, turns) = play("#narrate=1 #steps=2", "12:00");
        assert_eq!(turns[0].content, NARRATION);
        assert!(turns[0].tool_calls.is_empty());
        // (`play` stops at the first answer without calls: the narration.)
        assert_eq!(last.content, NARRATION);
        let r = req(vec![
            user("#narrate=1 #steps=2"),
            Message::Assistant {
                content: NARRATION.into(),
                tool_calls: Vec::new(),
            },
            user("go on"),
        ]);
        assert_eq!(
            respond(&r).completion.tool_calls[0].id,
            "call_2_0",
            "the first step's call, in the conversation's second turn"
        );
    }

    #[test]
    fn directives_parse() {
        let d = Directives::parse("go #steps=4 #parallel=2 #sleep=10 #fail_first=2 #hashtag");
        assert_eq!(d.steps, Some(4));
        assert_eq!(d.parallel, 2);
        assert_eq!(d.sleep, Duration::from_millis(10));
        assert_eq!(d.fail_first, 2);
        assert!(d.errors.is_empty());
    }
}
