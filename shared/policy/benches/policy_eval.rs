//! What policy evaluation adds to one tool call: `Policies::decide` for a
//! 50-policy set (the request built from the call's JSON arguments, the
//! principal with two roles, Cedar's authorizer over every policy).
//!
//! `cargo bench -p baton-policy --bench policy_eval`. Goal: under 0.1 ms.
//! Results and the machine: docs/performance.md.

use baton_policy::{Action, Known, Origin, Policies, Principal, Request};
use chrono::Utc;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::hint::black_box;

/// 50 policies of the kinds docs/policies.md shows: reads for everyone,
/// writes for a role, argument conditions, quiet hours, per-agent rules.
fn policy_set(tools: &[String]) -> String {
    let mut text = String::from(
        r#"@id("reads") permit(principal, action == Baton::Action::"call_tool", resource)
           when { context.args has method && context.args.method == "GET" };
           @id("quiet-hours") forbid(principal, action == Baton::Action::"call_tool", resource)
           when { context.time.hour >= 23 && context.time.weekday > 5 };
        "#,
    );
    for (i, tool) in tools.iter().enumerate().take(16) {
        text.push_str(&format!(
            r#"@id("writers-{i}") permit(principal in Baton::Role::"writers",
                  action == Baton::Action::"call_tool", resource == Baton::Tool::"{tool}");
               @id("no-p0-{i}") forbid(principal, action == Baton::Action::"call_tool",
                  resource == Baton::Tool::"{tool}")
               when {{ context.args has priority && context.args.priority == "P0" }};
               @id("ask-{i}") @approval("required") permit(principal in Baton::Role::"oncall",
                  action == Baton::Action::"call_tool", resource == Baton::Tool::"{tool}")
               when {{ context.origin.channel_type == "channel" && context.args has count
                       && context.args.count > {i} }};
            "#
        ));
    }
    text
}

fn bench(c: &mut Criterion) {
    let tools: Vec<String> = (0..16).map(|i| format!("mcp:tracker__tool_{i}")).collect();
    let text = policy_set(&tools);
    let known = Known {
        tools: ["http_request".to_owned()].into(),
        mcp_servers: ["tracker".to_owned()].into(),
        agents: ["default".to_owned()].into(),
        ..Known::default()
    };
    let policies = Policies::load("bench", &text, known).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(policies.len(), 50);
    let principal = Principal::User {
        team: "T0123".into(),
        user: "U0456".into(),
        roles: vec!["writers".into(), "oncall".into()],
    };
    let args = json!({
        "title": "Checkout is down",
        "priority": "P1",
        "count": 3,
        "labels": ["outage", "payments"],
        "assignee": {"team": "payments", "escalate": true},
        "ratio": 0.25,
    });
    c.bench_function("decide a tool call, 50 policies", |b| {
        b.iter(|| {
            policies.decide(black_box(&Request {
                principal: &principal,
                action: Action::CallTool {
                    tool: "tracker__tool_7",
                    agent: "default",
                    args: &args,
                },
                origin: Origin {
                    channel: "C0789",
                    channel_type: "channel",
                    thread: "1700000000.000100",
                },
                now: Utc::now(),
            }))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
