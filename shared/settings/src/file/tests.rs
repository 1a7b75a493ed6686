use super::duration::parse_duration;
use super::*;
use crate::{ApprovalRule, ApprovalRules, Escalation, GlobalSettings, InputGuardMode, ModelPrice};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const KNOWN: &[&str] = &[
    "current_time",
    "http_request",
    "remember",
    "recall",
    "delegate",
];
const DOCS: &str = include_str!("../../../../docs/configuration.md");

fn base() -> AgentConfig {
    let mut a = AgentConfig::new("default", "env-model");
    a.limits.max_steps = 77;
    a
}

fn load_in(dir: &Path, text: &str) -> Result<AgentsConfig, ConfigFileError> {
    AgentsSource::new("baton.toml", text, dir).load(&base(), KNOWN)
}

fn load(text: &str) -> Result<AgentsConfig, ConfigFileError> {
    load_in(Path::new("/nonexistent-baton-dir"), text)
}

/// The error's text, failing the test if the file was accepted.
fn err(text: &str) -> String {
    match load(text) {
        Ok(c) => panic!("accepted: {:?}", c.agents.names().collect::<Vec<_>>()),
        Err(e) => e.to_string(),
    }
}

fn assert_err(text: &str, expected: &str) {
    let e = err(text);
    assert!(e.contains(expected), "expected `{expected}` in:\n{e}");
}

/// The TOML blocks of docs/configuration.md; the first is the complete
/// example.
fn doc_blocks() -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in DOCS.lines() {
        match &mut current {
            None if line.trim() == "```toml" => current = Some(String::new()),
            Some(b) if line.trim() == "```" => {
                blocks.push(std::mem::take(b));
                current = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    blocks
}

fn docs_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    std::fs::write(
        dir.path().join("prompts/researcher.md"),
        "You research questions.\n",
    )
    .unwrap();
    dir
}

#[test]
fn the_complete_example_in_the_docs_loads() {
    let marker = DOCS
        .find("<!-- example: baton.toml -->")
        .expect("marker in docs");
    let example = &doc_blocks()[0];
    assert!(
        DOCS[marker..].contains(example.as_str()),
        "the first toml block is the marked example"
    );
    let dir = docs_dir();
    let cfg = load_in(dir.path(), example).unwrap_or_else(|e| panic!("{e}"));

    let names: Vec<&str> = cfg.agents.names().collect();
    assert_eq!(names, ["default", "researcher"]);

    let d = cfg.agents.get("default").unwrap();
    assert_eq!(d.model, "claude-sonnet-4-5");
    assert_eq!(d.fallback_models, ["claude-haiku-4-5"]);
    assert!(d
        .system_prompt
        .starts_with("You are Baton, the team's assistant"));
    assert_eq!(d.tools.as_deref().unwrap().len(), 5);
    assert_eq!(d.delegates, ["researcher"]);
    assert_eq!(d.limits.max_steps, 40);
    assert_eq!(d.limits.max_segments, 200);
    assert_eq!(d.limits.max_tokens, 200_000);
    assert_eq!(d.deadline_after, Some(Duration::from_secs(2 * 3600)));
    assert_eq!(d.max_cost_usd, Some(2.0));
    assert_eq!(d.tool_call_caps.get("http_request"), Some(&20));
    assert_eq!(d.approval.approvers, ["U024BE7LH"]);
    assert_eq!(d.approval.expires_after, Duration::from_secs(3600));
    assert!(d
        .approval
        .requires_approval("http_request", &json!({"method": "POST"}), false));
    assert_eq!(d.context.window_tokens, Some(200_000));
    assert_eq!(d.context.keep_last_turns, 20);
    // Tiers from [models], the default tier from [defaults]; routing on.
    assert_eq!(
        d.tiers,
        crate::Tiers {
            fast: Some("claude-haiku-4-5".into()),
            strong: Some("claude-sonnet-5".into()),
        }
    );
    assert!(d.routes());
    assert_eq!(d.modules.len(), 1);
    assert_eq!(d.modules[0].name, "incident");
    assert!(d.modules[0].prompt.starts_with("For incidents:"));
    assert_eq!(
        d.supervision.cadence(),
        Some(crate::Cadence {
            every_steps: 8,
            every: Duration::from_secs(300)
        })
    );
    assert!(d.quality_gate);
    assert_eq!(d.plan, crate::PlanMode::Auto);

    let r = cfg.agents.get("researcher").unwrap();
    assert_eq!(r.model, "claude-haiku-4-5");
    assert!(r.fallback_models.is_empty());
    assert_eq!(r.system_prompt, "You research questions.\n");
    assert_eq!(
        r.description.as_deref(),
        Some("Finds and summarises information from web pages and APIs.")
    );
    assert!(!r.allows_tool("delegate"));
    // Own values win; the rest of [defaults.limits] is inherited.
    assert_eq!(r.limits.max_steps, 20);
    assert_eq!(r.deadline_after, Some(Duration::from_secs(15 * 60)));
    assert_eq!(r.limits.max_tokens, 200_000);
    assert_eq!(r.max_cost_usd, Some(2.0));
    assert_eq!(r.tool_call_caps.get("http_request"), Some(&40));
    assert_eq!(r.approval.require, Some(Vec::new()));
    assert_eq!(r.approval.approvers, ["U024BE7LH"]);
    assert!(!r
        .approval
        .requires_approval("http_request", &json!({"method": "DELETE"}), true));
    assert_eq!(
        r.escalation,
        Some(Escalation {
            model: "claude-sonnet-4-5".into(),
            after_tool_errors: 3
        })
    );
    assert!(!r.routes());
    assert_eq!(r.plan, crate::PlanMode::Always);
    assert!(!r.quality_gate);
    assert!(r.modules.is_empty());
    // Inherited from [models]; its own model is its default tier.
    assert_eq!(r.tier_model(crate::Tier::Fast), "claude-haiku-4-5");
    assert_eq!(r.tier_model(crate::Tier::Default), "claude-haiku-4-5");
    assert_eq!(r.supervision, crate::Supervision::default());

    assert_eq!(cfg.settings.guard.input_guard, InputGuardMode::Warn);
    assert_eq!(
        cfg.settings.budgets.workspace_monthly_tokens,
        Some(5_000_000)
    );
    assert_eq!(cfg.settings.budgets.user_monthly_tokens, Some(500_000));
}

#[test]
fn schedule_limits_default_and_are_read() {
    let defaults = load("").unwrap().settings.schedules;
    assert_eq!(defaults, crate::ScheduleSettings::default());
    assert_eq!(defaults.max_per_user, 10);
    assert_eq!(defaults.max_per_team, 100);
    assert_eq!(defaults.min_interval, std::time::Duration::from_secs(900));
    let set = load("[schedules]\nmax_per_user = 3\nmax_per_team = 30\nmin_interval = \"1h\"\n")
        .unwrap()
        .settings
        .schedules;
    assert_eq!(
        (
            set.max_per_user,
            set.max_per_team,
            set.min_interval.as_secs()
        ),
        (3, 30, 3600)
    );
}

#[test]
fn every_toml_block_in_the_docs_loads() {
    let blocks = doc_blocks();
    assert!(blocks.len() >= 3, "found {} blocks", blocks.len());
    let dir = docs_dir();
    for b in &blocks {
        if let Err(e) = load_in(dir.path(), b) {
            panic!("{e}\nin:\n{b}");
        }
    }
}

#[test]
fn the_error_examples_in_the_docs_are_real() {
    let misplaced = "[defaults]\nmodel = \"m\"\n\n\n\n\nmax_steps = 40\n";
    let e = err(misplaced);
    assert!(
        e.starts_with("baton.toml:7:1: defaults.max_steps: unknown field `max_steps`"),
        "{e}"
    );
    assert!(
        e.ends_with("(limits go in a `limits` table: `[defaults.limits]`)"),
        "{e}"
    );
    let e = err(r#"
        [agents.lead]
        tools = ["delegate"]
        delegates = ["researcher"]
        [agents.researcher]
        tools = ["http_request", "current_time", "web_search", "delegate"]
        delegates = ["lead"]
        [agents.researcher.limits]
        max_steps = 0
        "#);
    for line in [
        "baton.toml: 3 problems:",
        "  agents.researcher.limits.max_steps: must be at least 1",
        "  agents.researcher.tools[2]: unknown tool `web_search`; known tools: current_time, delegate, http_request, recall, remember",
        "  agents.lead.delegates: delegation cycle: lead → researcher → lead",
    ] {
        assert!(e.lines().any(|l| l == line), "missing line `{line}` in:\n{e}");
        assert!(DOCS.contains(line.trim()), "docs do not show `{line}`");
    }
}

#[test]
fn no_file_means_the_environment_agent() {
    let cfg = AgentsConfig::from_base(base());
    assert_eq!(cfg.agents.resolve("default").model, "env-model");
    assert_eq!(cfg.settings, GlobalSettings::default());
    // An empty file is the same.
    let cfg = load("").unwrap();
    assert_eq!(cfg.agents.names().collect::<Vec<_>>(), ["default"]);
    assert_eq!(cfg.agents.get("default").unwrap(), &base());
}

#[test]
fn layers_inherit_environment_then_defaults_then_agent() {
    let cfg = load(
        r#"
        [defaults]
        fallback_models = ["fb"]
        [defaults.limits]
        max_tokens = 1000
        max_tool_calls = { http_request = 5, current_time = 2 }
        [defaults.context]
        keep_last_turns = 8
        [agents.a]
        tools = ["current_time"]
        [agents.b]
        model = "b-model"
        [agents.b.limits]
        max_steps = 3
        max_tool_calls = { http_request = 9 }
        [agents.b.context]
        compact_at = 0.9
        "#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Synthesised from [defaults] over the environment.
    let d = cfg.agents.get("default").unwrap();
    assert_eq!(d.model, "env-model");
    assert_eq!(d.limits.max_steps, 77);
    assert_eq!(d.fallback_models, ["fb"]);
    assert_eq!(d.system_prompt, crate::agent::DEFAULT_SYSTEM_PROMPT);
    assert_eq!(d.approval, ApprovalRules::default());
    let a = cfg.agents.get("a").unwrap();
    assert_eq!(a.name, "a");
    assert_eq!(
        (a.model.as_str(), a.limits.max_steps, a.limits.max_tokens),
        ("env-model", 77, 1000)
    );
    assert!(a.allows_tool("current_time") && !a.allows_tool("http_request"));
    assert_eq!(a.context.keep_last_turns, 8);
    let b = cfg.agents.get("b").unwrap();
    assert_eq!(
        (b.model.as_str(), b.limits.max_steps, b.limits.max_tokens),
        ("b-model", 3, 1000)
    );
    assert_eq!(b.fallback_models, ["fb"]);
    assert_eq!(
        b.tool_call_caps,
        BTreeMap::from([("current_time".into(), 2), ("http_request".into(), 9)])
    );
    assert_eq!(
        (
            b.context.keep_last_turns,
            b.context.compact_at,
            b.context.soft_trim_at
        ),
        (8, 0.9, 0.30)
    );
    assert_eq!(b.tools, None);
}

#[test]
fn an_explicit_default_agent_overrides_defaults() {
    let cfg = load(
        r#"
        [defaults]
        system_prompt = "from defaults"
        [agents.default]
        system_prompt = "own"
        [agents.other]
        "#,
    )
    .unwrap();
    assert_eq!(cfg.agents.get("default").unwrap().system_prompt, "own");
    assert_eq!(
        cfg.agents.get("other").unwrap().system_prompt,
        "from defaults"
    );
}

#[test]
fn prompt_files_are_read_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.md"), "from a file").unwrap();
    let cfg = load_in(
        dir.path(),
        "[defaults]\nsystem_prompt_file = \"p.md\"\n[agents.x]\n",
    )
    .unwrap();
    assert_eq!(cfg.agents.get("x").unwrap().system_prompt, "from a file");
    // A file at a more specific level replaces an inline prompt.
    let cfg = load_in(
        dir.path(),
        "[defaults]\nsystem_prompt = \"inline\"\n[agents.x]\nsystem_prompt_file = \"p.md\"\n",
    )
    .unwrap();
    assert_eq!(cfg.agents.get("x").unwrap().system_prompt, "from a file");
    assert_eq!(cfg.agents.get("default").unwrap().system_prompt, "inline");
    std::fs::write(dir.path().join("empty.md"), " \n").unwrap();
    let e = load_in(
        dir.path(),
        "[agents.x]\nsystem_prompt_file = \"empty.md\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("agents.x.system_prompt_file: ") && e.contains("is empty"),
        "{e}"
    );
}

#[test]
fn schema_mistakes_name_the_field() {
    // Unknown key, nested.
    assert_err(
        "[agents.r.limits]\nmax_stepz = 3\n",
        "baton.toml:2:1: agents.r.limits.max_stepz: unknown field `max_stepz`",
    );
    // Unknown top-level table.
    assert_err("[agent.r]\nmodel = \"m\"\n", "agent: unknown field `agent`");
    // Wrong types.
    assert_err(
        "[agents.r.limits]\nmax_steps = \"ten\"\n",
        "agents.r.limits.max_steps: invalid type: string \"ten\"",
    );
    assert_err(
        "[agents.r.limits]\nmax_steps = -1\n",
        "agents.r.limits.max_steps: invalid value: integer `-1`",
    );
    assert_err(
        "[agents.r]\ntools = \"http_request\"\n",
        "agents.r.tools: invalid type: string",
    );
    // Durations.
    assert_err(
        "[agents.r.limits]\ndeadline = \"2 hours\"\n",
        "agents.r.limits.deadline: `2 hours` is not a duration",
    );
    assert_err(
        "[agents.r.limits]\ndeadline = 7200\n",
        "agents.r.limits.deadline: invalid type: integer `7200`, expected a duration",
    );
    assert_err(
        "[agents.r.approval]\nexpires_after = \"0s\"\n",
        "agents.r.approval.expires_after: `0s`: must be longer than zero",
    );
    // Enum.
    assert_err(
        "[guard]\ninput_guard = \"loud\"\n",
        "guard.input_guard: unknown variant `loud`, expected one of",
    );
    // Not TOML at all: the line is given.
    assert_err("[agents.r]\nmodel = \n", "baton.toml:2:");
    // Limit keys directly in an agent table get a hint.
    assert_err(
        "[agents.r]\nmax_steps = 3\n",
        "agents.r.max_steps: unknown field `max_steps`",
    );
    assert_err("[agents.r]\nmax_steps = 3\n", "`[agents.r.limits]`");
}

#[test]
fn prices_are_read_over_the_built_in_ones() {
    let cfg = load(
        r#"
        [prices."env-model"]
        input_per_mtok = 0.5
        output_per_mtok = 2
        [prices."claude-haiku-4-5"]
        input_per_mtok = 0.8
        output_per_mtok = 4.0
        "#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = cfg.agents.get("default").unwrap();
    assert_eq!(
        d.prices.get("env-model"),
        Some(ModelPrice {
            input_per_mtok: 0.5,
            output_per_mtok: 2.0
        })
    );
    assert_eq!(
        d.prices.get("claude-haiku-4-5").unwrap().input_per_mtok,
        0.8
    );
    assert_eq!(
        d.prices.get("claude-sonnet-4-5").unwrap().output_per_mtok,
        15.0
    );
    // Every agent sees the same table.
    let cfg = load("[prices.m]\ninput_per_mtok = 1\noutput_per_mtok = 1\n[agents.r]\n").unwrap();
    assert!(cfg.agents.get("r").unwrap().prices.get("m").is_some());
}

#[test]
fn a_cost_budget_needs_a_price_for_every_model() {
    // env-model has no price: the budget could not be counted.
    assert_err(
        "[agents.r.limits]\nmax_cost_usd = 1.0\n",
        "agents.r.limits.max_cost_usd: cannot be enforced: no price for `env-model`; \
         add a [prices.\"env-model\"] table with input_per_mtok and output_per_mtok",
    );
    // Fallbacks and the escalation model count too; reported once, at
    // [defaults], when inherited.
    let e = err(r#"
        [defaults]
        model = "claude-sonnet-4-5"
        fallback_models = ["cheap"]
        [defaults.limits]
        max_cost_usd = 1.0
        [agents.r.escalation]
        model = "big"
        "#);
    assert!(
        e.contains("defaults.limits.max_cost_usd: cannot be enforced: no price for `cheap`;"),
        "{e}"
    );
    assert!(
        e.contains(
            "agents.r.limits.max_cost_usd: cannot be enforced: no price for `big`, `cheap`;"
        ),
        "{e}"
    );
    // Priced, it loads.
    let cfg = load(
        r#"
        [defaults]
        model = "claude-sonnet-4-5"
        fallback_models = ["cheap"]
        [defaults.limits]
        max_cost_usd = 1.0
        [agents.r.escalation]
        model = "big"
        [prices.cheap]
        input_per_mtok = 0.1
        output_per_mtok = 0.4
        [prices.big]
        input_per_mtok = 15
        output_per_mtok = 75
        "#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.agents.get("r").unwrap().max_cost_usd, Some(1.0));
}

#[test]
fn price_mistakes_name_the_field() {
    for (text, expected) in [
        (
            "[prices.m]\ninput_per_mtok = -1\noutput_per_mtok = 1\n",
            "prices.\"m\".input_per_mtok: must be an amount of US dollars per million tokens, 0 or more",
        ),
        (
            "[prices.m]\ninput_per_mtok = 1\noutput_per_mtok = inf\n",
            "prices.\"m\".output_per_mtok: must be an amount",
        ),
        (
            "[prices.m]\ninput_per_mtok = 1\n",
            "prices.\"m\".output_per_mtok: required (US dollars per million tokens)",
        ),
        (
            "[prices.\"my model\"]\ninput_per_mtok = 1\noutput_per_mtok = 1\n",
            "prices.\"my model\": must be a model id",
        ),
        (
            "[prices.m]\ninput = 1\n",
            "prices.m.input: unknown field `input`, expected `input_per_mtok` or `output_per_mtok`",
        ),
        (
            "[prices.m]\ninput_per_mtok = \"3\"\n",
            "prices.m.input_per_mtok: invalid type: string",
        ),
    ] {
        assert_err(text, expected);
    }
    // Free models are fine.
    load("[prices.m]\ninput_per_mtok = 0\noutput_per_mtok = 0.0\n").unwrap();
}

#[test]
fn value_mistakes_name_the_field() {
    let cases: &[(&str, &str)] = &[
        (
            "[agents.r.limits]\nmax_steps = 0\n",
            "agents.r.limits.max_steps: must be at least 1",
        ),
        (
            "[defaults.limits]\nmax_segments = 0\n",
            "defaults.limits.max_segments: must be at least 1",
        ),
        (
            "[agents.r.limits]\nmax_tokens = 0\n",
            "agents.r.limits.max_tokens: must be at least 1",
        ),
        (
            "[agents.r.limits]\nmax_cost_usd = -1.5\n",
            "agents.r.limits.max_cost_usd: must be a positive amount",
        ),
        (
            "[agents.r.limits]\nmax_cost_usd = nan\n",
            "agents.r.limits.max_cost_usd: must be a positive amount",
        ),
        (
            "[agents.r.limits]\nmax_identical_calls = 1\n",
            "agents.r.limits.max_identical_calls: must be at least 2",
        ),
        (
            "[agents.r.limits]\nmax_tool_calls = { http_request = 0 }\n",
            "agents.r.limits.max_tool_calls.http_request: must be at least 1",
        ),
        (
            "[agents.r.limits]\nmax_tool_calls = { shell = 3 }\n",
            "agents.r.limits.max_tool_calls.shell: unknown tool `shell`",
        ),
        (
            "[agents.r]\ntools = [\"current_time\", \"shell\"]\n",
            "agents.r.tools[1]: unknown tool `shell`",
        ),
        (
            "[agents.r]\ntools = [\"current_time\", \"current_time\"]\n",
            "agents.r.tools[1]: `current_time` is listed twice",
        ),
        (
            "[agents.r]\nmodel = \"\"\n",
            "agents.r.model: must be a model id",
        ),
        (
            "[agents.r]\nmodel = \"a b\"\n",
            "agents.r.model: must be a model id",
        ),
        (
            "[agents.r]\nfallback_models = [\"x\", \"\"]\n",
            "agents.r.fallback_models[1]: must be a model id",
        ),
        (
            "[agents.r]\nfallback_models = [\"x\", \"x\"]\n",
            "agents.r.fallback_models[1]: `x` is listed twice",
        ),
        (
            "[agents.r]\nfallback_models = [\"env-model\"]\n",
            "agents.r.fallback_models: repeats the primary model `env-model`",
        ),
        (
            "[agents.r]\nsystem_prompt = \"  \"\n",
            "agents.r.system_prompt: must not be empty",
        ),
        (
            "[agents.r]\nsystem_prompt = \"a\"\nsystem_prompt_file = \"b.md\"\n",
            "agents.r.system_prompt_file: set system_prompt or system_prompt_file, not both",
        ),
        (
            "[agents.r]\nsystem_prompt_file = \"missing.md\"\n",
            "agents.r.system_prompt_file: cannot read /nonexistent-baton-dir/missing.md",
        ),
        (
            "[agents.r]\nmax_output_tokens = 0\n",
            "agents.r.max_output_tokens: must be at least 1",
        ),
        (
            "[agents.r]\ndescription = \"\"\n",
            "agents.r.description: must not be empty",
        ),
        (
            "[defaults]\ndescription = \"x\"\n",
            "defaults.description: describe each agent in its own table",
        ),
        (
            "[defaults]\ndelegates = [\"x\"]\n",
            "defaults.delegates: name delegates in each agent's own table",
        ),
        (
            "[agents.Research]\n",
            "agents.Research: agent names are lower-case",
        ),
        (
            "[agents.r.approval]\nrequire = [\"http_request:FETCH\"]\n",
            "agents.r.approval.require[0]: unknown HTTP method `FETCH`",
        ),
        (
            "[agents.r.approval]\nrequire = [\"current_time:GET\"]\n",
            "agents.r.approval.require[0]: only `http_request` takes a method",
        ),
        (
            "[agents.r.approval]\nrequire = [\"shell\"]\n",
            "agents.r.approval.require[0]: unknown tool `shell`",
        ),
        (
            "[agents.r.approval]\nrequire = [\":POST\"]\n",
            "agents.r.approval.require[0]: expected `TOOL`",
        ),
        (
            "[agents.r.approval]\napprovers = [\"alice\"]\n",
            "agents.r.approval.approvers[0]: `alice` is neither a Slack user id (like U024BE7LH) nor a declared role (declare it with `[roles.alice]`)",
        ),
        (
            "[agents.r.approval]\napprovers = [\"C0123ABCD\"]\n",
            "agents.r.approval.approvers[0]: `C0123ABCD` is neither a Slack user id",
        ),
        (
            "[roles.Ops]\nusers = [\"U024BE7LH\"]\n",
            "roles.Ops: role names are lower-case letters, digits, `-` and `_`",
        ),
        (
            "[roles.u024be7lh]\nusers = [\"U024BE7LH\"]\n",
            "roles.u024be7lh: `u024be7lh` reads like a Slack user id",
        ),
        (
            "[roles.ops]\n",
            "roles.ops: lists nobody: give `users`, `usergroups` or `tokens`",
        ),
        (
            "[roles.ops]\nusers = [\"alice\"]\n",
            "roles.ops.users[0]: `alice` is not a Slack user id",
        ),
        (
            "[roles.ops]\nusergroups = [\"U0123\"]\n",
            "roles.ops.usergroups[0]: `U0123` is not a Slack user group id",
        ),
        (
            "[roles.ops]\ntokens = [\"ci\"]\n",
            "roles.ops.tokens[0]: unknown API token `ci`",
        ),
        (
            "[roles.ops]\nusers = [\"U024BE7LH\"]\nteam = \"T1\"\n",
            "unknown field `team`",
        ),
        (
            "[agents.r.context]\nwindow_tokens = 0\n",
            "agents.r.context.window_tokens: must be at least 1",
        ),
        (
            "[agents.r.context]\nkeep_last_turns = 0\n",
            "agents.r.context.keep_last_turns: must be at least 1",
        ),
        (
            "[agents.r.context]\ncompact_at = 1.5\n",
            "agents.r.context.compact_at: must be a fraction of the window",
        ),
        (
            "[agents.r.context]\nsoft_trim_at = 0.6\n",
            "agents.r.context.soft_trim_at: (0.6) must not be above hard_clear_at (0.5)",
        ),
        (
            "[agents.r.context]\nhard_clear_at = 0.8\nsoft_trim_at = 0.2\n",
            "agents.r.context.hard_clear_at: (0.8) must not be above compact_at (0.75)",
        ),
        (
            "[agents.r.escalation]\nafter_tool_errors = 2\n",
            "agents.r.escalation.model: required when escalating",
        ),
        (
            "[agents.r.escalation]\nmodel = \"env-model\"\n",
            "agents.r.escalation.model: is the primary model `env-model` already",
        ),
        (
            "[agents.r.escalation]\nmodel = \"big\"\nafter_tool_errors = 0\n",
            "agents.r.escalation.after_tool_errors: must be at least 1",
        ),
        (
            "[budgets]\nworkspace_monthly_tokens = 0\n",
            "budgets.workspace_monthly_tokens: must be at least 1",
        ),
        (
            "[budgets]\nuser_monthly_tokens = 0\n",
            "budgets.user_monthly_tokens: must be at least 1",
        ),
        (
            "[schedules]\nmax_per_user = 0\n",
            "schedules.max_per_user: must be at least 1",
        ),
        (
            "[schedules]\nmax_per_team = 0\n",
            "schedules.max_per_team: must be at least 1",
        ),
        ("[schedules]\nmin_interval = \"soon\"\n", "not a duration"),
        ("[schedules]\nmax_schedules = 3\n", "max_schedules"),
    ];
    for (text, expected) in cases {
        let e = err(text);
        assert!(
            e.contains(expected),
            "for\n{text}expected `{expected}` in:\n{e}"
        );
    }
}

#[test]
fn delegation_is_checked() {
    assert_err(
        "[agents.a]\ndelegates = [\"ghost\"]\n",
        "agents.a.delegates[0]: no agent named `ghost`",
    );
    assert_err(
        "[agents.a]\ntools = [\"http_request\"]\ndelegates = [\"default\"]\n",
        "agents.a.delegates: the agent cannot delegate: `delegate` is not among its tools",
    );
    assert_err(
        "[agents.a]\ndelegates = [\"a\"]\n",
        "agents.a.delegates: delegation cycle: a → a",
    );
    assert_err(
        "[agents.a]\ndelegates = [\"b\"]\n[agents.b]\ndelegates = [\"c\"]\n[agents.c]\ndelegates = [\"a\"]\n",
        "agents.a.delegates: delegation cycle: a → b → c → a",
    );
    // Without the delegate tool in the deployment, nobody can delegate.
    let e = AgentsSource::new("f", "[agents.a]\n[agents.b]\ndelegates = [\"a\"]\n", ".")
        .load(&base(), &["http_request"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("agents.b.delegates: the agent cannot delegate"),
        "{e}"
    );
    // A diamond is no cycle.
    let cfg = load(
        "[agents.a]\ndelegates = [\"b\", \"c\"]\n[agents.b]\ndelegates = [\"d\"]\n[agents.c]\ndelegates = [\"d\"]\n[agents.d]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.agents.get("a").unwrap().delegates, ["b", "c"]);
}

#[test]
fn all_problems_are_reported_and_inherited_ones_once() {
    let e = load(
        "[defaults.context]\nsoft_trim_at = 0.9\n[defaults.limits]\nmax_steps = 0\n[agents.a]\n[agents.b]\n[agents.c.limits]\nmax_segments = 0\n",
    )
    .unwrap_err();
    let problems = e.problems();
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "defaults.limits.max_steps",
            "agents.c.limits.max_segments",
            "defaults.context.soft_trim_at"
        ],
        "{e}"
    );
    assert!(
        e.to_string().starts_with("baton.toml: 3 problems:\n  "),
        "{e}"
    );
}

#[test]
fn the_file_is_found_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let none = |_: &str| None::<String>;
    assert!(AgentsSource::locate(none, cwd).unwrap().is_none());

    std::fs::write(cwd.join("baton.toml"), "[agents.x]\n").unwrap();
    let s = AgentsSource::locate(none, cwd).unwrap().unwrap();
    assert!(s.origin().ends_with("baton.toml"), "{}", s.origin());
    assert!(s.load(&base(), KNOWN).unwrap().agents.get("x").is_some());

    std::fs::create_dir(cwd.join("conf")).unwrap();
    std::fs::write(
        cwd.join("conf/agents.toml"),
        "[agents.y]\nsystem_prompt_file = \"y.md\"\n",
    )
    .unwrap();
    std::fs::write(cwd.join("conf/y.md"), "why").unwrap();
    let by_path = |n: &str| (n == AGENTS_FILE_ENV).then(|| "conf/agents.toml".to_owned());
    let s = AgentsSource::locate(by_path, cwd).unwrap().unwrap();
    assert_eq!(
        s.load(&base(), KNOWN)
            .unwrap()
            .agents
            .get("y")
            .unwrap()
            .system_prompt,
        "why"
    );

    let inline = |n: &str| (n == AGENTS_TOML_ENV).then(|| "[agents.z]\n".to_owned());
    let s = AgentsSource::locate(inline, cwd).unwrap().unwrap();
    assert_eq!(s.origin(), AGENTS_TOML_ENV);
    assert!(s.load(&base(), KNOWN).unwrap().agents.get("z").is_some());

    let both = |_: &str| Some("x".to_owned());
    assert!(matches!(
        AgentsSource::locate(both, cwd),
        Err(ConfigFileError::BothSet)
    ));

    let missing = |n: &str| (n == AGENTS_FILE_ENV).then(|| "nope.toml".to_owned());
    let e = AgentsSource::locate(missing, cwd).unwrap_err();
    assert!(
        matches!(e, ConfigFileError::Read { .. }) && e.to_string().contains("nope.toml"),
        "{e}"
    );

    // Errors from inline content name the variable.
    let bad =
        |n: &str| (n == AGENTS_TOML_ENV).then(|| "[agents.z.limits]\nmax_steps = 0\n".to_owned());
    let e = AgentsSource::locate(bad, cwd)
        .unwrap()
        .unwrap()
        .load(&base(), KNOWN)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "BATON_AGENTS_TOML: agents.z.limits.max_steps: must be at least 1"
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
    assert_eq!(parse_duration(" 2h "), Ok(Duration::from_secs(7200)));
    assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    for bad in ["", "90", "s", "1.5h", "2 hours", "1x", "-1s", "1h 30m"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
    }
    assert!(parse_duration("0m")
        .unwrap_err()
        .contains("longer than zero"));
    assert!(parse_duration("99999999999999999999d").is_err());
    assert!(parse_duration("999999999999999d")
        .unwrap_err()
        .contains("too long"));
}

#[test]
fn default_approval_rules() {
    // By default each tool decides for its own calls.
    let rules = ApprovalRules::default();
    for declared in [true, false] {
        assert_eq!(
            rules.requires_approval("http_request", &json!({"method": "POST"}), declared),
            declared
        );
    }
    // Rules, once given, decide alone.
    let rules = ApprovalRules {
        require: Some(vec![ApprovalRule::parse("http_request:DELETE").unwrap()]),
        ..ApprovalRules::default()
    };
    for (tool, args, declared, needed) in [
        ("http_request", json!({"method": "delete"}), false, true),
        ("http_request", json!({"method": "POST"}), true, false),
        ("current_time", json!({}), true, false),
    ] {
        assert_eq!(
            rules.requires_approval(tool, &args, declared),
            needed,
            "{tool} {args}"
        );
    }
    let rules = ApprovalRules::default();
    assert!(rules.may_decide("U1", Some("U1"), &[]));
    assert!(!rules.may_decide("U2", Some("U1"), &[]));
    assert!(!rules.may_decide("U2", None, &[]));
    let rules = ApprovalRules {
        approvers: vec!["U2".into(), "oncall".into()],
        ..rules
    };
    assert!(rules.may_decide("U2", Some("U1"), &[]));
    assert!(rules.names_roles());
    // A role named among the approvers lets its people decide; another
    // role does not.
    assert!(rules.may_decide("U3", Some("U1"), &["oncall".into()]));
    assert!(!rules.may_decide("U3", Some("U1"), &["sales".into()]));
    assert!(!rules.may_decide("U3", None, &[]));
}

#[test]
fn approval_rule_forms() {
    let any = ApprovalRule::parse("*").unwrap();
    assert!(any.matches("current_time", &json!({})));
    let all_http = ApprovalRule::parse("http_request").unwrap();
    assert!(all_http.matches("http_request", &json!({"method": "GET"})));
    let get = ApprovalRule::parse("http_request:get").unwrap();
    assert_eq!(get.to_string(), "http_request:GET");
    assert!(get.matches("http_request", &json!({})));
    assert!(!get.matches("http_request", &json!({"method": "POST"})));
    let cfg = load("[agents.r.approval]\nrequire = [\"*\", \"delegate\"]\n").unwrap();
    let r = cfg.agents.get("r").unwrap();
    assert!(r.approval.requires_approval("remember", &json!({}), false));
}

#[test]
fn errors_do_not_echo_prompt_text_beyond_the_offending_value() {
    // A parse error quotes the offending value, not the rest of the file.
    let e = err("[agents.r]\nsystem_prompt = \"secret instructions\"\nmodel = 5\n");
    assert!(!e.contains("secret instructions"), "{e}");
}

// ------------------------------------------------------------ http tools

const TICKET_TOOL: &str = r#"
[http_tools.create_ticket]
description = "Open a ticket in the tracker"
method = "POST"
url = "https://tracker.example.com/api/tickets"
headers = { Authorization = "Bearer ${TRACKER_TOKEN}" }
parameters = { type = "object", properties = { title = { type = "string" } }, required = ["title"] }
"#;

#[test]
fn http_tools_are_declared_and_enabled_by_name() {
    let text = format!(
        "{TICKET_TOOL}\n[agents.default]\ntools = [\"current_time\", \"create_ticket\"]\n\n\
         [agents.other]\nsystem_prompt = \"x\"\n\n[agents.default.approval]\nrequire = [\"create_ticket\"]\n"
    );
    let c = load(&text).unwrap();
    assert_eq!(c.http_tools.len(), 1);
    let t = &c.http_tools[0];
    assert_eq!(t.name, "create_ticket");
    assert_eq!(t.description, "Open a ticket in the tracker");
    assert_eq!(t.method, "POST");
    assert_eq!(t.url, "https://tracker.example.com/api/tickets");
    assert_eq!(
        t.headers.get("Authorization").map(String::as_str),
        Some("Bearer ${TRACKER_TOKEN}"),
        "references are resolved later, by the runtime"
    );
    assert_eq!(
        t.parameters,
        json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]})
    );
    assert_eq!(t.timeout, Duration::from_secs(30));
    let default = c.agents.get("default").unwrap();
    assert!(default.allows_tool("create_ticket"));
    assert_eq!(
        default.approval.require,
        Some(vec![ApprovalRule::parse("create_ticket").unwrap()])
    );
    // An agent without a `tools` list keeps the built-ins, not the
    // declared tools: those are enabled by naming them.
    let other = c.agents.get("other").unwrap();
    assert!(other.allows_tool("http_request"));
    assert!(!other.allows_tool("create_ticket"));
}

#[test]
fn http_tool_defaults_and_timeout() {
    let c = load(
        "[http_tools.weather]\ndescription = \"Weather\"\nmethod = \"get\"\n\
         url = \"https://api.example.com/weather?key=${WEATHER_KEY}\"\ntimeout = \"5s\"\n",
    )
    .unwrap();
    let t = &c.http_tools[0];
    assert_eq!(t.method, "GET");
    assert_eq!(t.timeout, Duration::from_secs(5));
    assert_eq!(t.parameters, json!({"type": "object", "properties": {}}));
    assert!(t.headers.is_empty());
    // No agent names it: without a tools list, the agents keep the built-ins.
    assert!(!c.agents.get("default").unwrap().allows_tool("weather"));
}

#[test]
fn bad_http_tool_declarations_name_the_key() {
    let tool = |body: &str| format!("[http_tools.t]\n{body}\n");
    let ok = "description = \"d\"\nmethod = \"POST\"\nurl = \"https://x.example/a\"";
    // Each bad configuration, and the key its error names.
    let cases: Vec<(String, &str)> = vec![
        (tool(&format!("{ok}\nbody = \"x\"")), "http_tools.t.body: unknown field `body`"),
        (
            tool("description = \"d\"\nmethod = \"FETCH\"\nurl = \"https://x.example/\""),
            "http_tools.t.method: unknown HTTP method `FETCH`",
        ),
        (
            tool("description = \"d\"\nurl = \"https://x.example/\""),
            "http_tools.t.method: required",
        ),
        (
            tool("description = \"d\"\nmethod = \"GET\"\nurl = \"ftp://x.example/\""),
            "http_tools.t.url: must be an http:// or https:// URL",
        ),
        (
            tool("description = \"d\"\nmethod = \"GET\"\nurl = \"not a url\""),
            "http_tools.t.url: not a URL",
        ),
        (
            tool("description = \"d\"\nmethod = \"GET\""),
            "http_tools.t.url: required",
        ),
        (
            tool("description = \"d\"\nmethod = \"GET\"\nurl = \"https://x.example/${OPEN\""),
            "http_tools.t.url: `${` without a closing `}`",
        ),
        (
            tool("method = \"GET\"\nurl = \"https://x.example/\""),
            "http_tools.t.description: required",
        ),
        (
            tool(&format!("{ok}\nparameters = {{ type = \"string\" }}")),
            "http_tools.t.parameters: must be a JSON Schema of an object",
        ),
        (
            tool(&format!("{ok}\nparameters = \"object\"")),
            "http_tools.t.parameters: must be a JSON Schema of an object",
        ),
        (
            tool(&format!("{ok}\nheaders = {{ \"Bad Name\" = \"x\" }}")),
            "http_tools.t.headers.Bad Name: not a valid HTTP header name",
        ),
        (
            tool(&format!("{ok}\nheaders = {{ Idempotency-Key = \"x\" }}")),
            "http_tools.t.headers.Idempotency-Key: set by Baton",
        ),
        (
            tool(&format!("{ok}\nheaders = {{ X-Key = \"${{A-B}}\" }}")),
            "http_tools.t.headers.X-Key: `${A-B}` is not a variable reference",
        ),
        (
            tool(&format!("{ok}\ntimeout = \"soon\"")),
            "http_tools.t.timeout",
        ),
        (
            format!("[http_tools.http_request]\n{ok}\n"),
            "http_tools.http_request: `http_request` is the name of a built-in tool",
        ),
        (
            format!("[http_tools.\"bad.name\"]\n{ok}\n"),
            "http_tools.bad.name: tool names are letters, digits",
        ),
        (
            format!("[http_tools.{}]\n{ok}\n", "a".repeat(65)),
            "tool names are letters, digits, `_` and `-` (1 to 64 characters)",
        ),
        (
            format!("{TICKET_TOOL}\n[agents.default]\ntools = [\"create_tiket\"]\n"),
            "agents.default.tools[0]: unknown tool `create_tiket`; known tools: create_ticket, current_time, delegate, http_request, recall, remember",
        ),
    ];
    for (text, expected) in cases {
        assert_err(&text, expected);
    }
}

/// The TOML blocks of docs/tools.md load (with a prompt-less file).
#[test]
fn every_toml_block_in_the_tools_doc_loads() {
    const TOOLS_DOC: &str = include_str!("../../../../docs/tools.md");
    let mut n = 0;
    let mut current: Option<String> = None;
    for line in TOOLS_DOC.lines() {
        match &mut current {
            None if line.trim() == "```toml" => current = Some(String::new()),
            Some(b) if line.trim() == "```" => {
                if let Err(e) = load(b) {
                    panic!("docs/tools.md block does not load: {e}\n{b}");
                }
                n += 1;
                current = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    assert!(n >= 1, "docs/tools.md has its example");
}

mod judgment;

#[test]
fn roles_are_declared_and_may_be_named_as_approvers() {
    let c = load(
        "[roles.oncall]\nusergroups = [\"S0614TZR7\"]\nusers = [\"U0G9QF9C6\"]\n\
         [roles.ci]\ntokens = [\"default\"]\n\
         [defaults.approval]\napprovers = [\"oncall\", \"U024BE7LH\"]\n\
         [agents.r.approval]\napprovers = [\"ci\"]\n",
    )
    .unwrap();
    let roles = &c.settings.roles;
    assert!(roles.contains("oncall") && roles.contains("ci") && !roles.contains("ops"));
    let oncall = roles.iter().find(|r| r.name == "oncall").unwrap();
    assert_eq!(oncall.usergroups, ["S0614TZR7"]);
    assert_eq!(oncall.users, ["U0G9QF9C6"]);
    assert_eq!(
        roles.static_roles(&baton_core::Person::api_default()),
        ["ci"]
    );
    assert_eq!(
        c.agents.resolve("default").approval.approvers,
        ["oncall", "U024BE7LH"]
    );
    assert_eq!(c.agents.resolve("r").approval.approvers, ["ci"]);
    // A role not declared is refused, named.
    assert_err(
        "[defaults.approval]\napprovers = [\"oncall\"]\n",
        "defaults.approval.approvers[0]: `oncall` is neither a Slack user id",
    );
}

#[test]
fn expose_names_the_surfaces_and_refuses_others() {
    let c = load(
        "[agents.default]\nexpose = [\"a2a\", \"mcp\", \"mcp\"]\n[agents.quiet]\nmodel = \"m\"\n",
    )
    .expect("loads");
    let exposed = &c.agents.get("default").expect("default").expose;
    assert!(exposed.mcp() && exposed.a2a());
    let quiet = &c.agents.get("quiet").expect("quiet").expose;
    assert!(!quiet.mcp() && !quiet.a2a(), "not exposed unless asked");
    assert_err("[agents.default]\nexpose = [\"smtp\"]\n", "expose");
}
