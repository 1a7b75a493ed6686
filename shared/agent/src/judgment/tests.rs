use super::calls::{self, Purpose};
use super::*;
use baton_core::{Completion, Limits, LlmError, Origin, TaskId, ToolCall, Usage};
use baton_settings::{PromptModule, Supervision};
use serde_json::json;
use std::time::Duration;

fn agent() -> AgentConfig {
    let mut a = AgentConfig::new("t", "mid-model");
    a.tiers.fast = Some("small-model".into());
    a.tiers.strong = Some("big-model".into());
    a.modules = vec![PromptModule {
        name: "sql".into(),
        description: "writing SQL".into(),
        prompt: "Always quote identifiers.".into(),
    }];
    a
}

fn task() -> Task {
    Task::new(
        TaskId::generate(),
        "t",
        Origin::Http,
        None,
        Limits::default(),
        0,
    )
}

fn log(kinds: Vec<EntryKind>) -> Vec<Entry> {
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Entry {
            seq: i as u64,
            at: Instant(i as i64 * 1_000),
            kind,
        })
        .collect()
}

fn user(text: &str) -> EntryKind {
    EntryKind::UserMessage {
        text: text.into(),
        from: None,
    }
}

fn called(purpose: Purpose, args: serde_json::Value) -> Completion {
    Completion {
        tool_calls: vec![ToolCall {
            id: "x".into(),
            name: purpose.as_str().into(),
            arguments: args,
        }],
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
        },
        ..Completion::default()
    }
}

fn route(tier: Tier, needs_plan: bool) -> EntryKind {
    EntryKind::Route {
        tier,
        modules: vec![],
        needs_plan,
        fallback: None,
    }
}

fn supervision(action: SupervisorAction, done: Vec<usize>) -> EntryKind {
    EntryKind::Supervision {
        step: 1,
        action,
        note: Some("n".into()),
        question: None,
        done,
    }
}

#[test]
fn a_task_is_routed_once_and_only_with_a_fast_tier() {
    let a = agent();
    assert!(needs_route(&a, &log(vec![user("hi")])));
    assert!(!needs_route(
        &a,
        &log(vec![user("hi"), route(Tier::Fast, false)])
    ));
    let mut plain = agent();
    plain.tiers.fast = None;
    assert!(!needs_route(&plain, &log(vec![user("hi")])));
    plain.tiers.fast = Some("f".into());
    plain.router = baton_settings::RouterMode::Off;
    assert!(!needs_route(&plain, &log(vec![user("hi")])));
}

#[test]
fn the_router_answer_is_parsed_and_garbage_means_the_default_tier() {
    let a = agent();
    let ok = called(
        Purpose::Route,
        json!({"tier": "strong", "modules": ["sql", "nope"], "needs_plan": true}),
    );
    assert_eq!(
        calls::route_entry(&a, Ok(&ok)),
        EntryKind::Route {
            tier: Tier::Strong,
            modules: vec!["sql".into()],
            needs_plan: true,
            fallback: None
        }
    );
    let text = Completion {
        content: "strong, I think".into(),
        ..Completion::default()
    };
    let bad_tier = called(Purpose::Route, json!({"tier": "huge", "modules": []}));
    let failed = LlmError::Transport("down".into());
    for answer in [Ok(&text), Ok(&bad_tier), Err(&failed)] {
        match calls::route_entry(&a, answer) {
            EntryKind::Route {
                tier: Tier::Default,
                modules,
                needs_plan: false,
                fallback: Some(_),
            } => assert!(modules.is_empty()),
            other => panic!("{other:?}"),
        }
    }
    let req = calls::route_request(&a, &log(vec![user("count the rows")]));
    assert_eq!(req.model, "small-model");
    assert_eq!(
        req.tool_choice,
        baton_core::ToolChoice::Tool("route".into())
    );
    let content = match &req.messages[0] {
        baton_core::Message::User { content } => content.clone(),
        other => panic!("{other:?}"),
    };
    assert!(content.contains("count the rows") && content.contains("`sql`: writing SQL"));
}

#[test]
fn the_tier_goes_up_never_down() {
    assert_eq!(tier(&log(vec![user("x")])), Tier::Default);
    assert_eq!(
        tier(&log(vec![user("x"), route(Tier::Fast, false)])),
        Tier::Fast
    );
    let escalated = log(vec![
        user("x"),
        route(Tier::Fast, false),
        supervision(SupervisorAction::Escalate, vec![]),
    ]);
    assert_eq!(tier(&escalated), Tier::Strong);
    let sent_back = log(vec![user("x"), calls::narration_verdict(1)]);
    assert_eq!(tier(&sent_back), Tier::Strong);
    let a = agent();
    assert_eq!(a.tier_model(tier(&escalated)), "big-model");
}

#[test]
fn modules_chosen_join_the_system_prompt() {
    let a = agent();
    let t = log(vec![
        user("x"),
        EntryKind::Route {
            tier: Tier::Default,
            modules: vec!["sql".into()],
            needs_plan: false,
            fallback: None,
        },
    ]);
    assert_eq!(
        calls::modules_prompt(&a, &t).as_deref(),
        Some("Always quote identifiers.")
    );
    assert_eq!(calls::modules_prompt(&a, &log(vec![user("x")])), None);
}

#[test]
fn plans_follow_the_mode_the_router_and_replans() {
    let mut a = agent();
    assert!(!needs_plan(
        &a,
        &log(vec![user("x"), route(Tier::Default, false)])
    ));
    assert!(needs_plan(
        &a,
        &log(vec![user("x"), route(Tier::Default, true)])
    ));
    let planned = vec![
        user("x"),
        route(Tier::Default, true),
        EntryKind::Plan {
            steps: vec![PlanStep {
                title: "a".into(),
                done_when: "b".into(),
            }],
        },
    ];
    assert!(!needs_plan(&a, &log(planned.clone())));
    let mut replan = planned.clone();
    replan.push(supervision(SupervisorAction::Replan, vec![]));
    assert!(needs_plan(&a, &log(replan)));
    a.plan = PlanMode::Always;
    assert!(needs_plan(&a, &log(vec![user("x")])));
    a.plan = PlanMode::Never;
    assert!(!needs_plan(
        &a,
        &log(vec![user("x"), route(Tier::Default, true)])
    ));
    // A failed planning call records an empty plan: no plan, no retry.
    let failed = calls::plan_entry(Err(&LlmError::Transport("down".into())));
    assert_eq!(failed, EntryKind::Plan { steps: vec![] });
    a.plan = PlanMode::Always;
    let t = log(vec![user("x"), failed]);
    assert!(!needs_plan(&a, &t) && plan(&t).is_none());
}

#[test]
fn plan_steps_are_marked_done_and_capped() {
    let many: Vec<serde_json::Value> = (0..14)
        .map(|i| json!({"title": format!("s{i}"), "done_when": "ok"}))
        .collect();
    let entry = calls::plan_entry(Ok(&called(Purpose::Plan, json!({ "steps": many }))));
    let EntryKind::Plan { steps } = &entry else {
        panic!("{entry:?}")
    };
    assert_eq!(steps.len(), calls::MAX_PLAN_STEPS);
    let t = log(vec![
        user("x"),
        entry.clone(),
        supervision(SupervisorAction::Continue, vec![0, 2, 99]),
    ]);
    let (steps, done) = plan(&t).unwrap();
    assert_eq!(done[..3], [true, false, true]);
    assert!(baton_core::reply::compact_checklist(&steps, &done).starts_with("Plan: ☑ s0 ☐ s1 ☑ s2"));
}

#[test]
fn supervision_is_due_by_steps_or_time_after_progress() {
    let mut a = agent();
    a.supervision = Supervision::On(baton_settings::Cadence {
        every_steps: 3,
        every: Duration::from_secs(60),
    });
    let mut t = task();
    let entries = log(vec![user("x")]); // at 0 ms
    t.budget.steps = 2;
    assert!(!supervision_due(&a, &t, &entries, Instant(1_000)));
    t.budget.steps = 3;
    assert!(supervision_due(&a, &t, &entries, Instant(1_000)));
    t.budget.steps = 1;
    assert!(
        supervision_due(&a, &t, &entries, Instant(61_000)),
        "a minute passed"
    );
    // After a checkpoint at step 1: nothing new, nothing due.
    let checked = log(vec![
        user("x"),
        supervision(SupervisorAction::Continue, vec![]),
    ]);
    assert!(!supervision_due(&a, &t, &checked, Instant(500_000)));
    t.budget.steps = 30;
    let mut plain = a.clone();
    plain.tiers.fast = None;
    assert!(
        !supervision_due(&plain, &t, &entries, Instant(500_000)),
        "no fast tier"
    );
    a.supervision = Supervision::Off;
    assert!(!supervision_due(&a, &t, &entries, Instant(500_000)));
}

#[test]
fn supervision_answers_become_entries_and_garbage_continues() {
    let ask = called(
        Purpose::Supervise,
        json!({"action": "ask_user", "question": "Which year?", "done": [1]}),
    );
    match calls::supervision_entry(4, true, Ok(&ask)) {
        EntryKind::Supervision {
            step: 4,
            action: SupervisorAction::AskUser,
            question: Some(q),
            done,
            ..
        } => assert_eq!((q.as_str(), done), ("Which year?", vec![1])),
        other => panic!("{other:?}"),
    }
    // Nobody to ask (a sub-agent): the question becomes a note.
    match calls::supervision_entry(4, false, Ok(&ask)) {
        EntryKind::Supervision {
            action: SupervisorAction::Note,
            note: Some(n),
            question: None,
            ..
        } => assert_eq!(n, "Which year?"),
        other => panic!("{other:?}"),
    }
    let garbage = Completion {
        content: "keep going".into(),
        ..Completion::default()
    };
    assert!(matches!(
        calls::supervision_entry(4, true, Ok(&garbage)),
        EntryKind::Supervision {
            action: SupervisorAction::Continue,
            ..
        }
    ));
    let stop = log(vec![
        user("x"),
        calls::supervision_entry(
            4,
            true,
            Ok(&called(
                Purpose::Supervise,
                json!({"action": "stop", "note": "it loops"}),
            )),
        ),
    ]);
    assert_eq!(stopped(&stop).as_deref(), Some("it loops"));
}

#[test]
fn the_gate_judges_once_and_retries_once_per_turn() {
    let a = agent();
    let t = task();
    let answered = log(vec![user("x")]);
    assert_eq!(
        gate(&a, &t, &answered, 1, "Here are the rows."),
        Gate::Judge { retried: false }
    );
    assert_eq!(
        gate(&a, &t, &answered, 1, "Let me check that for you..."),
        Gate::Narrates
    );
    assert_eq!(gate(&a, &t, &answered, 1, "NO_REPLY"), Gate::Deliver);
    let fail = called(
        Purpose::Verdict,
        json!({"pass": false, "problems": ["no rows"]}),
    );
    let first = calls::verdict_entry(1, false, Ok(&fail));
    assert!(matches!(
        first,
        EntryKind::Verdict {
            sent_back: true,
            ..
        }
    ));
    let after = log(vec![user("x"), first.clone()]);
    assert_eq!(
        gate(&a, &t, &after, 2, "Let me check that for you..."),
        Gate::Judge { retried: true },
        "the second answer is judged, not sent back by rule"
    );
    let second = calls::verdict_entry(2, true, Ok(&fail));
    assert!(matches!(
        second,
        EntryKind::Verdict {
            pass: false,
            sent_back: false,
            ..
        }
    ));
    let judged = log(vec![user("x"), first, second]);
    assert_eq!(gate(&a, &t, &judged, 2, "rows"), Gate::Deliver);
    // A failed gate call passes.
    assert!(matches!(
        calls::verdict_entry(1, false, Err(&LlmError::Transport("down".into()))),
        EntryKind::Verdict {
            pass: true,
            sent_back: false,
            ..
        }
    ));
    let mut off = agent();
    off.quality_gate = false;
    assert_eq!(gate(&off, &t, &answered, 1, "Let me check"), Gate::Deliver);
    // Without a fast tier to judge with, nothing is judged.
    let mut plain = agent();
    plain.tiers.fast = None;
    assert_eq!(
        gate(&plain, &t, &answered, 1, "Let me check"),
        Gate::Deliver
    );
}

#[test]
fn narration_is_caught_narrowly() {
    for n in [
        "Let me check that for you.",
        "I'll look into it:",
        "I’m going to search the docs…",
        "One moment while I fetch the numbers...",
    ] {
        assert!(narrates(n), "{n}");
    }
    for n in [
        "The total is 42.",
        "Let me know if you need more.\n\nThe table has 3 rows: a, b, c.",
        "I will need your account id to go on: which one?",
    ] {
        assert!(!narrates(n), "{n}");
    }
}
