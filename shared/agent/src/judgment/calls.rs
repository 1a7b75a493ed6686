//! The four forced calls — `route`, `plan`, `supervise`, `verdict` — as
//! requests built from the transcript and entries made of their answers.
//! The segment makes the calls (timed, counted, traced); everything here is
//! pure. An answer that fails, is not the forced call, or does not parse
//! never fails the task: each purpose has a fallback (the default tier, no
//! plan, `continue`, a pass), recorded as such.

use super::{plan, route};
use baton_core::judgment::{plan_text, PlanStep, SupervisorAction, Tier};
use baton_core::{
    Completion, CompletionRequest, Entry, EntryKind, LlmError, Message, ToolChoice, ToolSpec,
};
use baton_settings::AgentConfig;
use serde::Deserialize;
use serde_json::json;

/// Why a side call is made (a forced judging call, or the recap summary):
/// the span's `call.purpose`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Route,
    Plan,
    Supervise,
    Verdict,
    /// A conversation's recap summary, made after the task ended
    /// ([`crate::recap::summariser`]); it forces no tool.
    Recap,
}

impl Purpose {
    /// The forced tool's name, which is also the purpose's (`recap`, which
    /// forces none, only names it).
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Route => "route",
            Purpose::Plan => "plan",
            Purpose::Supervise => "supervise",
            Purpose::Verdict => "verdict",
            Purpose::Recap => "recap",
        }
    }
}

/// At most this many plan steps are kept.
pub const MAX_PLAN_STEPS: usize = 10;
/// Characters of the request shown to the judging calls.
const REQUEST_CHARS: usize = 4_000;
/// Characters of the answer shown to the gate.
const ANSWER_CHARS: usize = 8_000;
/// Recent steps in the supervisor's digest, and characters of each part.
const DIGEST_STEPS: usize = 6;
const DIGEST_CHARS: usize = 240;
/// Output tokens a forced call may use.
const MAX_TOKENS: u32 = 1_024;

const ROUTER_PROMPT: &str = "You route requests for an AI agent. Call the `route` tool once: \
pick the cheapest model tier that will do the request well (`fast` for greetings, simple \
questions and lookups; `default` for ordinary work with tools; `strong` for hard reasoning, \
long research or code), the prompt modules it needs (only from the list given, often none), \
and whether it needs a written plan first (several steps or deliverables).";
const PLANNER_PROMPT: &str = "You plan work for an AI agent that has tools. Call the `plan` \
tool once with at most 10 short steps, in order, each with a check that tells when it is \
done. Plan only what the request asks for.";
const SUPERVISOR_PROMPT: &str = "You supervise an AI agent at work. From the request, its plan \
and its recent steps, call the `supervise` tool once: `continue` if it is on track; `note` \
with advice when it drifts; `replan` when the plan no longer fits; `escalate` when the model \
is struggling; `ask_user` with a question only when it cannot go on without the person; \
`stop` with the reason when the task cannot succeed or loops. Mark the plan steps now \
complete in `done` (indexes from 0).";
const GATE_PROMPT: &str = "You check an AI agent's answer before the person who asked sees it. \
Call the `verdict` tool once: `pass` unless the answer fails the request — it does not do \
what was asked, misses a part, only says what it will do instead of doing it, or claims \
something it could not have found. List each problem in a sentence the agent can act on.";

/// The request the judging calls are about: the task's first message and,
/// when a later one started this turn, that one.
fn request_text(transcript: &[Entry]) -> String {
    let users: Vec<&str> = transcript
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let cut = |t: &str| crate::context::cut_middle(t, REQUEST_CHARS / 2, "this message");
    match (users.first(), users.last()) {
        (Some(first), Some(last)) if users.len() > 1 => format!(
            "The task's first message:\n{}\n\nThe latest message:\n{}",
            cut(first),
            cut(last)
        ),
        (Some(first), _) => cut(first),
        _ => String::new(),
    }
}

fn forced(model: &str, system: &str, content: String, tool: ToolSpec) -> CompletionRequest {
    CompletionRequest {
        model: model.to_owned(),
        system: system.to_owned(),
        messages: vec![Message::User { content }],
        tool_choice: ToolChoice::Tool(tool.name.clone()),
        tools: vec![tool],
        max_tokens: MAX_TOKENS,
    }
}

fn spec(name: &str, description: &str, schema: serde_json::Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
    }
}

/// The forced call's arguments, or why there are none.
fn arguments<T: for<'de> Deserialize<'de>>(
    purpose: Purpose,
    answer: Result<&Completion, &LlmError>,
) -> Result<T, String> {
    let completion = answer.map_err(|e| format!("the call failed: {e}"))?;
    let call = completion
        .tool_calls
        .iter()
        .find(|c| c.name == purpose.as_str())
        .ok_or_else(|| format!("the model did not call `{}`", purpose.as_str()))?;
    serde_json::from_value(call.arguments.clone())
        .map_err(|e| format!("the `{}` arguments do not parse: {e}", purpose.as_str()))
}

/// The routing call, on the fast tier.
pub fn route_request(agent: &AgentConfig, transcript: &[Entry]) -> CompletionRequest {
    let modules: Vec<String> = agent
        .modules
        .iter()
        .map(|m| format!("- `{}`: {}", m.name, m.description))
        .collect();
    let content = format!(
        "{}\n\nPrompt modules you may choose from:\n{}",
        request_text(transcript),
        if modules.is_empty() {
            "(none)".to_owned()
        } else {
            modules.join("\n")
        }
    );
    let names: Vec<&str> = agent.modules.iter().map(|m| m.name.as_str()).collect();
    // An empty `enum` is not a valid schema for every provider.
    let modules_schema = if names.is_empty() {
        json!({"type": "array", "items": {"type": "string"}, "maxItems": 0})
    } else {
        json!({"type": "array", "items": {"type": "string", "enum": names}})
    };
    let tool = spec(
        Purpose::Route.as_str(),
        "Choose the model tier and prompt modules for this request.",
        json!({
            "type": "object",
            "properties": {
                "tier": {"type": "string", "enum": ["fast", "default", "strong"]},
                "modules": modules_schema,
                "needs_plan": {"type": "boolean"}
            },
            "required": ["tier", "modules", "needs_plan"]
        }),
    );
    forced(agent.tier_model(Tier::Fast), ROUTER_PROMPT, content, tool)
}

#[derive(Deserialize)]
struct RouteArgs {
    tier: Tier,
    #[serde(default)]
    modules: Vec<String>,
    #[serde(default)]
    needs_plan: bool,
}

/// The `route` entry of the routing call's answer: the default tier and
/// no modules when it failed or answered garbage; modules the agent does
/// not have are left out.
pub fn route_entry(agent: &AgentConfig, answer: Result<&Completion, &LlmError>) -> EntryKind {
    match arguments::<RouteArgs>(Purpose::Route, answer) {
        Ok(a) => {
            let mut modules: Vec<String> = Vec::new();
            for m in a.modules {
                if agent.module(&m).is_some() && !modules.contains(&m) {
                    modules.push(m);
                } else {
                    tracing::warn!(module = %m, "the router chose a module the agent does not have; left out");
                }
            }
            EntryKind::Route {
                tier: a.tier,
                modules,
                needs_plan: a.needs_plan,
                fallback: None,
            }
        }
        Err(why) => {
            tracing::warn!(reason = %why, "routing failed; the default tier answers");
            EntryKind::Route {
                tier: Tier::Default,
                modules: Vec::new(),
                needs_plan: false,
                fallback: Some(why),
            }
        }
    }
}

/// The prompt modules the router chose, as the system prompt's addition.
pub fn modules_prompt(agent: &AgentConfig, transcript: &[Entry]) -> Option<String> {
    let (_, chosen) = route(transcript)?;
    let texts: Vec<&str> = chosen
        .iter()
        .filter_map(|name| agent.module(name))
        .map(|m| m.prompt.trim())
        .filter(|p| !p.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// The planning call, on the default tier; after a supervisor's `replan`,
/// with its note and the plan it replaces.
pub fn plan_request(
    agent: &AgentConfig,
    transcript: &[Entry],
    tools: &[String],
) -> CompletionRequest {
    let mut content = request_text(transcript);
    if let Some((steps, _)) = plan(transcript) {
        content.push_str(&format!(
            "\n\nThe current plan, which no longer fits:\n{}",
            plan_text(&steps)
        ));
    }
    let guidance = transcript.iter().rev().find_map(|e| match &e.kind {
        EntryKind::Supervision {
            action: SupervisorAction::Replan,
            note: Some(n),
            ..
        } => Some(n.as_str()),
        _ => None,
    });
    if let Some(n) = guidance {
        content.push_str(&format!("\n\nThe supervisor says: {n}"));
    }
    if !tools.is_empty() {
        content.push_str(&format!("\n\nThe agent's tools: {}", tools.join(", ")));
    }
    let tool = spec(
        Purpose::Plan.as_str(),
        "Write the plan for this request.",
        json!({
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array",
                    "maxItems": MAX_PLAN_STEPS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string"},
                            "done_when": {"type": "string"}
                        },
                        "required": ["title", "done_when"]
                    }
                }
            },
            "required": ["steps"]
        }),
    );
    forced(
        agent.tier_model(Tier::Default),
        PLANNER_PROMPT,
        content,
        tool,
    )
}

#[derive(Deserialize)]
struct PlanArgs {
    steps: Vec<PlanStep>,
}

/// The `plan` entry of the planning call's answer: at most
/// [`MAX_PLAN_STEPS`] steps; empty (no plan) when it failed.
pub fn plan_entry(answer: Result<&Completion, &LlmError>) -> EntryKind {
    let steps = match arguments::<PlanArgs>(Purpose::Plan, answer) {
        Ok(a) => a
            .steps
            .into_iter()
            .filter(|s| !s.title.trim().is_empty())
            .take(MAX_PLAN_STEPS)
            .collect(),
        Err(why) => {
            tracing::warn!(reason = %why, "planning failed; the task goes on without a plan");
            Vec::new()
        }
    };
    EntryKind::Plan { steps }
}

/// A digest of the last steps: each call with the start of its result.
fn digest(transcript: &[Entry]) -> String {
    let short = |t: &str| crate::context::cut_middle(t, DIGEST_CHARS / 2, "this text");
    let mut lines: Vec<String> = transcript
        .iter()
        .rev()
        .filter_map(|e| match &e.kind {
            EntryKind::AssistantMessage {
                step,
                text,
                tool_calls,
                ..
            } => Some(if tool_calls.is_empty() {
                format!("step {step}: answered: {}", short(text))
            } else {
                let calls: Vec<String> = tool_calls
                    .iter()
                    .map(|c| format!("{}({})", c.name, short(&c.arguments.to_string())))
                    .collect();
                format!("step {step}: called {}", calls.join(", "))
            }),
            EntryKind::ToolResult {
                name,
                content,
                is_error,
                ..
            } => Some(format!(
                "  {name} {}: {}",
                if *is_error { "failed" } else { "returned" },
                short(content)
            )),
            _ => None,
        })
        .take(DIGEST_STEPS * 3)
        .collect();
    lines.reverse();
    lines.join("\n")
}

/// The supervision call, on the fast tier.
pub fn supervise_request(
    agent: &AgentConfig,
    transcript: &[Entry],
    steps: u32,
    elapsed_s: i64,
) -> CompletionRequest {
    let plan_part = match plan(transcript) {
        Some((steps, done)) => steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "{i}. [{}] {} (done when: {})",
                    if done[i] { "done" } else { "open" },
                    s.title,
                    s.done_when
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        None => "(no plan)".to_owned(),
    };
    let content = format!(
        "{}\n\nPlan:\n{plan_part}\n\nSteps so far: {steps}, over {elapsed_s} s. The latest:\n{}",
        request_text(transcript),
        digest(transcript)
    );
    let tool = spec(
        Purpose::Supervise.as_str(),
        "Decide how the agent goes on.",
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["continue", "note", "replan", "escalate", "ask_user", "stop"]},
                "note": {"type": "string"},
                "question": {"type": "string"},
                "done": {"type": "array", "items": {"type": "integer", "minimum": 0}}
            },
            "required": ["action"]
        }),
    );
    forced(
        agent.tier_model(Tier::Fast),
        SUPERVISOR_PROMPT,
        content,
        tool,
    )
}

#[derive(Deserialize)]
struct SuperviseArgs {
    action: SupervisorAction,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    done: Vec<usize>,
}

/// The `supervision` entry of the checkpoint at step `step`: `continue`
/// when the call failed; an `ask_user` without a question, or where
/// nobody can be asked (`can_ask` false: a sub-agent), becomes a `note`.
pub fn supervision_entry(
    step: u32,
    can_ask: bool,
    answer: Result<&Completion, &LlmError>,
) -> EntryKind {
    let clean = |t: Option<String>| t.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    match arguments::<SuperviseArgs>(Purpose::Supervise, answer) {
        Ok(a) => {
            let (note, question) = (clean(a.note), clean(a.question));
            let action = match (a.action, &question) {
                (SupervisorAction::AskUser, Some(_)) if can_ask => SupervisorAction::AskUser,
                (SupervisorAction::AskUser, _) => SupervisorAction::Note,
                (other, _) => other,
            };
            let note = if action == SupervisorAction::Note && note.is_none() {
                question.clone()
            } else {
                note
            };
            EntryKind::Supervision {
                step,
                action,
                note,
                question: question.filter(|_| action == SupervisorAction::AskUser),
                done: a.done,
            }
        }
        Err(why) => {
            tracing::warn!(reason = %why, "supervision failed; the task goes on");
            EntryKind::Supervision {
                step,
                action: SupervisorAction::Continue,
                note: None,
                question: None,
                done: Vec::new(),
            }
        }
    }
}

/// The gate's call on `answer`, on the fast tier.
pub fn verdict_request(
    agent: &AgentConfig,
    transcript: &[Entry],
    answer: &str,
) -> CompletionRequest {
    let plan_part = plan(transcript)
        .map(|(steps, _)| format!("\n\nThe plan it worked to:\n{}", plan_text(&steps)))
        .unwrap_or_default();
    let content = format!(
        "{}{plan_part}\n\nThe agent's answer:\n{}",
        request_text(transcript),
        crate::context::cut_middle(answer, ANSWER_CHARS / 2, "the answer")
    );
    let tool = spec(
        Purpose::Verdict.as_str(),
        "Judge the answer.",
        json!({
            "type": "object",
            "properties": {
                "pass": {"type": "boolean"},
                "problems": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["pass", "problems"]
        }),
    );
    forced(agent.tier_model(Tier::Fast), GATE_PROMPT, content, tool)
}

#[derive(Deserialize)]
struct VerdictArgs {
    pass: bool,
    #[serde(default)]
    problems: Vec<String>,
}

/// The `verdict` entry on step `step`'s answer. A fail sends the answer
/// back unless it is the turn's second (`retried`); a failed call passes.
pub fn verdict_entry(
    step: u32,
    retried: bool,
    answer: Result<&Completion, &LlmError>,
) -> EntryKind {
    match arguments::<VerdictArgs>(Purpose::Verdict, answer) {
        Ok(a) => {
            let mut problems: Vec<String> = a
                .problems
                .into_iter()
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect();
            if !a.pass && problems.is_empty() {
                problems.push("the answer does not do what was asked".to_owned());
            }
            EntryKind::Verdict {
                step,
                pass: a.pass,
                sent_back: !a.pass && !retried,
                problems,
                rule: false,
            }
        }
        Err(why) => {
            tracing::warn!(reason = %why, "the quality gate failed; the answer is delivered");
            EntryKind::Verdict {
                step,
                pass: true,
                problems: Vec::new(),
                rule: false,
                sent_back: false,
            }
        }
    }
}

/// The verdict of the narration rule: sent back, no call made.
pub fn narration_verdict(step: u32) -> EntryKind {
    EntryKind::Verdict {
        step,
        pass: false,
        problems: vec![
            "the answer only says what you are about to do; nothing was done. Call the tool \
             now, or answer with the result."
                .to_owned(),
        ],
        rule: true,
        sent_back: true,
    }
}
