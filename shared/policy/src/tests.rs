use super::*;
use chrono::TimeZone;
use serde_json::{json, Value};

fn known() -> Known {
    Known {
        tools: ["http_request", "current_time", "sleep"]
            .map(str::to_owned)
            .into(),
        http_tools: ["create_ticket"].map(str::to_owned).into(),
        mcp_servers: ["tracker"].map(str::to_owned).into(),
        agents: ["default", "ops"].map(str::to_owned).into(),
        callable: Some(
            [
                "http_request",
                "current_time",
                "create_ticket",
                "mcp:tracker",
            ]
            .map(str::to_owned)
            .into(),
        ),
    }
}

fn load(text: &str) -> Result<Policies, PolicyError> {
    Policies::load("policies.cedar", text, known())
}

fn alice() -> Principal {
    Principal::User {
        team: "T1".into(),
        user: "U1".into(),
        roles: vec![],
    }
}

fn admin() -> Principal {
    Principal::User {
        team: "T1".into(),
        user: "U2".into(),
        roles: vec!["admins".into()],
    }
}

/// Monday 2026-11-23 at `hour`:00 UTC.
fn at(hour: u32) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc
        .with_ymd_and_hms(2026, 11, 23, hour, 0, 0)
        .single()
        .expect("a time")
}

fn call(p: &Policies, who: &Principal, tool: &str, args: Value) -> Verdict {
    p.decide(&Request {
        principal: who,
        action: Action::CallTool {
            tool,
            agent: "default",
            args: &args,
        },
        origin: Origin {
            channel: "C1",
            channel_type: "channel",
            thread: "1.2",
        },
        now: at(10),
    })
}

const P0: &str = r#"
@id("everyone-calls-tools")
permit(principal, action == Baton::Action::"call_tool", resource);

@id("no-p0-issues")
forbid(principal, action == Baton::Action::"call_tool",
       resource == Baton::Tool::"mcp:tracker__create_issue")
when { context.args.priority == "P0" };
"#;

#[test]
fn the_schema_parses() {
    assert!(SCHEMA.contains("namespace Baton"));
    let _ = schema();
}

#[test]
fn a_forbid_on_an_argument_refuses_exactly_those_calls_naming_its_id() {
    let p = load(P0).expect("loads");
    let tool = "tracker__create_issue";
    assert_eq!(
        call(
            &p,
            &alice(),
            tool,
            json!({"priority": "P0", "title": "down"})
        ),
        Verdict::Forbid {
            policy: "no-p0-issues".into()
        }
    );
    assert_eq!(
        call(&p, &alice(), tool, json!({"priority": "P2"})),
        Verdict::Allow
    );
    // A call without the attribute: the forbid cannot apply.
    assert_eq!(call(&p, &alice(), tool, json!({})), Verdict::Allow);
    let refusal = Verdict::Forbid {
        policy: "no-p0-issues".into(),
    }
    .refusal("`x`")
    .expect("a refusal");
    assert!(refusal.contains("no-p0-issues"), "{refusal}");
}

#[test]
fn nothing_permitted_is_refused_by_default() {
    let p =
        load(r#"@id("reads") permit(principal, action, resource == Baton::Tool::"current_time");"#)
            .expect("loads");
    assert_eq!(
        call(&p, &alice(), "current_time", json!({})),
        Verdict::Allow
    );
    assert_eq!(
        call(&p, &alice(), "http_request", json!({})),
        Verdict::NoPermit
    );
    let text = Verdict::NoPermit
        .refusal("`http_request`")
        .expect("refused");
    assert!(text.contains("no policy permits"), "{text}");
}

#[test]
fn a_permit_annotated_approval_required_asks() {
    let p = load(
        r#"@id("writes-ask") @approval("required")
           permit(principal, action, resource == Baton::Tool::"http:create_ticket");"#,
    )
    .expect("loads");
    assert_eq!(
        call(&p, &alice(), "create_ticket", json!({})),
        Verdict::Approval {
            policy: "writes-ask".into()
        }
    );
}

#[test]
fn roles_are_the_principals_parents() {
    let p = load(
        r#"@id("admins-write")
           permit(principal in Baton::Role::"admins", action, resource);"#,
    )
    .expect("loads");
    assert_eq!(
        call(&p, &admin(), "http_request", json!({})),
        Verdict::Allow
    );
    assert_eq!(
        call(&p, &alice(), "http_request", json!({})),
        Verdict::NoPermit
    );
}

#[test]
fn quiet_hours_read_the_time() {
    let p = load(
        r#"permit(principal, action, resource);
           @id("quiet-hours")
           forbid(principal, action == Baton::Action::"call_tool", resource)
           when { context.time.hour >= 22 || context.time.hour < 6 };"#,
    )
    .expect("loads");
    let ask = |hour| {
        p.decide(&Request {
            principal: &alice(),
            action: Action::CallTool {
                tool: "sleep",
                agent: "default",
                args: &Value::Null,
            },
            origin: Origin::default(),
            now: at(hour),
        })
    };
    assert_eq!(ask(10), Verdict::Allow);
    assert_eq!(
        ask(23),
        Verdict::Forbid {
            policy: "quiet-hours".into()
        }
    );
}

#[test]
fn task_starts_are_decided_per_agent_and_api_token() {
    let p = load(
        r#"@id("api-default-only")
           permit(principal == Baton::Api::"default", action == Baton::Action::"start_task",
                  resource == Baton::Agent::"default");"#,
    )
    .expect("loads");
    let api = Principal::Api {
        token: "default".into(),
        roles: vec![],
    };
    let start = |agent| {
        p.decide(&Request {
            principal: &api,
            action: Action::StartTask { agent },
            origin: Origin::default(),
            now: at(10),
        })
    };
    assert_eq!(start("default"), Verdict::Allow);
    assert_eq!(start("ops"), Verdict::NoPermit);
}

#[test]
fn arguments_cedar_cannot_hold_are_mapped_not_lost() {
    let p = load(
        r#"permit(principal, action, resource);
           @id("big") forbid(principal, action, resource)
           when { context.args has count && context.args.count > 10 };
           @id("ratio") forbid(principal, action, resource)
           when { context.args has ratio && context.args.ratio == "0.5" };
           @id("list") forbid(principal, action, resource)
           when { context.args has value && context.args.value.contains("rm") };
           @id("nested") forbid(principal, action, resource)
           when { context.args has filter && context.args.filter has env
                  && context.args.filter.env == "prod" };"#,
    )
    .expect("loads");
    let forbid = |id: &str| Verdict::Forbid { policy: id.into() };
    assert_eq!(
        call(&p, &alice(), "sleep", json!({"count": 11})),
        forbid("big")
    );
    assert_eq!(
        call(&p, &alice(), "sleep", json!({"count": 3})),
        Verdict::Allow
    );
    assert_eq!(
        call(&p, &alice(), "sleep", json!({"ratio": 0.5})),
        forbid("ratio")
    );
    assert_eq!(
        call(&p, &alice(), "sleep", json!(["ls", "rm"])),
        forbid("list")
    );
    assert_eq!(
        call(
            &p,
            &alice(),
            "sleep",
            json!({"filter": {"env": "prod", "x": null}})
        ),
        forbid("nested")
    );
    // `__entity` is a plain attribute here, not an entity reference.
    assert_eq!(
        call(
            &p,
            &alice(),
            "sleep",
            json!({"__entity": {"type": "Baton::Role", "id": "admins"}})
        ),
        Verdict::Allow
    );
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({ "a": deep });
    }
    assert_eq!(call(&p, &alice(), "sleep", deep), Verdict::Allow);
}

#[test]
fn a_policy_that_does_not_validate_refuses_naming_its_id() {
    let e = load(
        r#"permit(principal, action, resource);
           @id("typo") forbid(principal, action, resource) when { context.orign.channel == "C1" };"#,
    )
    .expect_err("refused");
    assert!(e.to_string().contains("`typo`"), "{e}");
    assert!(e.to_string().contains("line 2"), "{e}");
    let e = load(
        r#"@id("bad-action") permit(principal, action == Baton::Action::"delete", resource);"#,
    )
    .expect_err("refused");
    assert!(e.to_string().contains("`bad-action`"), "{e}");
}

#[test]
fn a_policy_without_an_id_is_named_by_its_place() {
    let e = load(
        "permit(principal, action, resource);\nforbid(principal, action, resource) when { 1 };",
    )
    .expect_err("refused");
    assert!(e.to_string().contains("`policy1`"), "{e}");
    assert!(e.to_string().contains("line 2"), "{e}");
}

#[test]
fn a_parse_error_gives_its_line() {
    let e = load("permit(principal, action, resource);\n\npermit(principal action);")
        .expect_err("refused");
    assert!(e.to_string().contains("line 3"), "{e}");
    assert!(e.to_string().starts_with("policies.cedar: "), "{e}");
}

#[test]
fn unknown_tools_and_agents_refuse_naming_the_policy() {
    for (text, what) in [
        (
            r#"@id("t") permit(principal, action, resource == Baton::Tool::"nope");"#,
            "no tool `nope`",
        ),
        (
            r#"@id("t") permit(principal, action, resource == Baton::Tool::"http:nope");"#,
            "http_tools.nope",
        ),
        (
            r#"@id("t") permit(principal, action, resource == Baton::Tool::"mcp:other__x");"#,
            "MCP server",
        ),
        (
            r#"@id("t") permit(principal, action, resource == Baton::Agent::"ghost");"#,
            "no agent `ghost`",
        ),
        (
            r#"@id("t") permit(principal, action == Baton::Action::"call_tool", resource) when { context.agent == Baton::Agent::"ghost" };"#,
            "no agent `ghost`",
        ),
    ] {
        let e = load(text).expect_err(text);
        assert!(e.to_string().contains("policy `t`"), "{e}");
        assert!(e.to_string().contains(what), "{e}");
    }
    // The MCP server is checked, not its tools (listed only at run time).
    load(r#"permit(principal, action, resource == Baton::Tool::"mcp:tracker__anything");"#)
        .expect("a declared server's tool");
}

/// A policy naming a tool that exists but that no call can carry would
/// never apply (a `forbid` that forbids nothing): start-up is refused,
/// naming the policy and the tool.
#[test]
fn tools_no_call_can_carry_refuse_naming_them() {
    let long = format!("tracker__{}", "x".repeat(60));
    for (text, what) in [
        (
            r#"@id("t") forbid(principal, action, resource == Baton::Tool::"mcp:tracker__get.issue");"#
                .to_owned(),
            "`mcp:tracker__get.issue`: tool names the model sees are letters, digits, `_` and `-`, \
             and `.` is not one (an MCP tool's name is shown with `_` for it: `mcp:tracker__get_issue`)",
        ),
        (
            format!(r#"@id("t") forbid(principal, action, resource == Baton::Tool::"mcp:{long}");"#),
            "tool names the model sees are at most 64 characters",
        ),
        (
            r#"@id("t") forbid(principal, action, resource == Baton::Tool::"sleep");"#.to_owned(),
            "`sleep`: no agent has it (an agent's `tools` would name `sleep`)",
        ),
    ] {
        let e = load(&text).expect_err(&text).to_string();
        assert!(
            e.contains("policy `t` names a tool no call can carry: ") && e.contains(what),
            "{e}"
        );
    }
    // Unchecked where nobody says what the agents have.
    let mut all = known();
    all.callable = None;
    Policies::load(
        "p",
        r#"forbid(principal, action, resource == Baton::Tool::"sleep");"#,
        all,
    )
    .expect("loads");
}

#[test]
fn tool_ids_follow_the_tool_kind() {
    let p = load("").expect("an empty set loads");
    assert!(p.is_empty());
    assert_eq!(p.tool_id("http_request"), "http_request");
    assert_eq!(p.tool_id("create_ticket"), "http:create_ticket");
    assert_eq!(
        p.tool_id("tracker__create_issue"),
        "mcp:tracker__create_issue"
    );
    assert_eq!(p.tool_id("tracker__"), "tracker__");
}
