//! The judgment keys of the agents file (issue #22): `[models]`,
//! `[modules.NAME]`, and the agent keys `models`, `router`, `modules`,
//! `plan`, `supervise`, `quality_gate`.

use super::*;
use crate::judgment::{Cadence, PlanMode, PromptModule, RouterMode, Supervision, Tier, Tiers};

fn agent(cfg: &AgentsConfig, name: &str) -> AgentConfig {
    cfg.agents.get(name).unwrap().clone()
}

fn tiers(fast: Option<&str>, strong: Option<&str>) -> Tiers {
    Tiers {
        fast: fast.map(Into::into),
        strong: strong.map(Into::into),
    }
}

#[test]
fn tiers_layer_models_then_defaults_then_the_agent() {
    let cfg = load(
        r#"
        [models]
        fast = "claude-haiku-4-5"
        default = "claude-sonnet-4-5"
        strong = "claude-opus-4-1"
        [defaults.models]
        strong = "claude-sonnet-5"
        [agents.own]
        model = "own-model"
        [agents.tiered.models]
        fast = "tiny"
        default = "mid"
        [agents.same]
        model = "m"
        models = { default = "m" }
        "#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = agent(&cfg, "default");
    // [models] over the environment, [defaults] over [models].
    assert_eq!(d.model, "claude-sonnet-4-5");
    assert_eq!(
        d.tiers,
        tiers(Some("claude-haiku-4-5"), Some("claude-sonnet-5"))
    );
    assert_eq!(d.tier_model(Tier::Fast), "claude-haiku-4-5");
    assert_eq!(d.tier_model(Tier::Default), "claude-sonnet-4-5");
    assert_eq!(d.tier_model(Tier::Strong), "claude-sonnet-5");
    // An agent's `model` is its default tier.
    let own = agent(&cfg, "own");
    assert_eq!(own.model, "own-model");
    assert_eq!(own.tier_model(Tier::Default), "own-model");
    assert_eq!(own.tiers, d.tiers);
    // Its `models` table merges key by key.
    let t = agent(&cfg, "tiered");
    assert_eq!(t.model, "mid");
    assert_eq!(t.tiers, tiers(Some("tiny"), Some("claude-sonnet-5")));
    assert_eq!(agent(&cfg, "same").model, "m");
}

#[test]
fn without_tiers_everything_is_the_default_model() {
    let cfg = load("[agents.a]\nmodel = \"only\"\n").unwrap();
    let a = agent(&cfg, "a");
    assert_eq!(a.tiers, Tiers::default());
    for tier in [Tier::Fast, Tier::Default, Tier::Strong] {
        assert_eq!(a.tier_model(tier), "only");
    }
    assert!(!a.routes(), "no fast tier, nothing to route with");
    // Strong falls back to the escalation model first.
    let cfg =
        load("[agents.a]\nmodel = \"only\"\n[agents.a.escalation]\nmodel = \"esc\"\n").unwrap();
    assert_eq!(agent(&cfg, "a").tier_model(Tier::Strong), "esc");
    // [models].default alone replaces the environment's model.
    let cfg = load("[models]\ndefault = \"file-model\"\n").unwrap();
    assert_eq!(agent(&cfg, "default").model, "file-model");
}

#[test]
fn model_and_models_default_in_one_table_must_agree() {
    assert_err(
        "[agents.a]\nmodel = \"x\"\n[agents.a.models]\ndefault = \"y\"\n",
        "agents.a.models.default: `y` differs from `model` (`x`) in the same table: both name the default tier; set one of them",
    );
    assert_err(
        "[defaults]\nmodel = \"x\"\nmodels = { default = \"y\" }\n",
        "defaults.models.default: `y` differs from `model` (`x`)",
    );
    // At different levels the later one wins, as everywhere.
    let cfg = load("[defaults]\nmodel = \"x\"\n[agents.a.models]\ndefault = \"y\"\n").unwrap();
    assert_eq!(agent(&cfg, "a").model, "y");
    let cfg = load("[models]\ndefault = \"x\"\n[agents.a]\nmodel = \"y\"\n").unwrap();
    assert_eq!(agent(&cfg, "a").model, "y");
    assert_eq!(agent(&cfg, "default").model, "x");
}

#[test]
fn tier_mistakes_name_the_key() {
    assert_err(
        "[models]\nfast = \"a b\"\n",
        "models.fast: must be a model id",
    );
    assert_err(
        "[agents.a.models]\nstrong = \"\"\n",
        "agents.a.models.strong: must be a model id",
    );
    assert_err(
        "[models]\nfastest = \"x\"\n",
        "models.fastest: unknown field `fastest`, expected one of `fast`, `default`, `strong`",
    );
    assert_err(
        "[agents.a.models]\nturbo = \"x\"\n",
        "agents.a.models.turbo: unknown field `turbo`",
    );
    assert_err(
        "[models]\nfast = 3\n",
        "models.fast: invalid type: integer `3`",
    );
}

#[test]
fn tiers_are_priced_like_the_model() {
    assert_err(
        r#"
        [models]
        fast = "tiny"
        [agents.a]
        model = "claude-haiku-4-5"
        [agents.a.limits]
        max_cost_usd = 1.0
        "#,
        "agents.a.limits.max_cost_usd: cannot be enforced: no price for `tiny`",
    );
    let priced = load(
        r#"
        [models]
        fast = "tiny"
        strong = "claude-sonnet-4-5"
        [prices.tiny]
        input_per_mtok = 0.1
        output_per_mtok = 0.4
        [agents.a]
        model = "claude-haiku-4-5"
        [agents.a.limits]
        max_cost_usd = 1.0
        "#,
    );
    assert!(priced.is_ok(), "{:?}", priced.err().map(|e| e.to_string()));
}

#[test]
fn the_router_is_auto_and_routes_with_a_fast_tier() {
    let cfg = load(
        r#"
        [models]
        fast = "quick"
        [agents.off]
        router = "off"
        [agents.on]
        router = "auto"
        "#,
    )
    .unwrap();
    let d = agent(&cfg, "default");
    assert_eq!(d.router, RouterMode::Auto);
    assert!(d.routes());
    assert!(!agent(&cfg, "off").routes());
    assert!(agent(&cfg, "on").routes());
    // Auto without a fast tier: effectively off.
    let cfg = load("[defaults]\nrouter = \"auto\"\n").unwrap();
    assert!(!agent(&cfg, "default").routes());
    assert_err(
        "[agents.a]\nrouter = \"sometimes\"\n",
        "agents.a.router: unknown variant `sometimes`, expected `auto` or `off`",
    );
}

#[test]
fn modules_are_declared_then_listed_by_agents() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sql.md"), "Write ANSI SQL.\n").unwrap();
    let cfg = load_in(
        dir.path(),
        r#"
        [modules.sql]
        description = "  Questions about the warehouse  "
        prompt_file = "sql.md"
        [modules.tone]
        description = "Replies to customers"
        prompt = "Be warm."
        [defaults]
        modules = ["tone", "sql"]
        [agents.writer]
        modules = ["tone"]
        [agents.plain]
        modules = []
        "#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let sql = PromptModule {
        name: "sql".into(),
        description: "Questions about the warehouse".into(),
        prompt: "Write ANSI SQL.\n".into(),
    };
    let tone = PromptModule {
        name: "tone".into(),
        description: "Replies to customers".into(),
        prompt: "Be warm.".into(),
    };
    // In the order listed; a list replaces the inherited one whole.
    assert_eq!(agent(&cfg, "default").modules, [tone.clone(), sql.clone()]);
    assert_eq!(agent(&cfg, "default").module("sql"), Some(&sql));
    assert_eq!(agent(&cfg, "writer").modules, [tone]);
    assert!(agent(&cfg, "plain").modules.is_empty());
    // Declared but listed by no agent: nobody has it.
    let cfg = load("[modules.x]\ndescription = \"d\"\nprompt = \"p\"\n").unwrap();
    assert!(agent(&cfg, "default").modules.is_empty());
}

#[test]
fn an_agent_names_declared_modules_once() {
    assert_err(
        "[agents.a]\nmodules = [\"sql\"]\n",
        "agents.a.modules[0]: unknown module `sql`; none is declared; add a [modules.NAME] table",
    );
    let e = err(r#"
        [modules.tone]
        description = "d"
        prompt = "p"
        [modules.sql]
        description = "d"
        prompt = "p"
        [defaults]
        modules = ["tone", "sq1", "tone"]
        "#);
    assert!(
        e.contains("defaults.modules[1]: unknown module `sq1`; declared: sql, tone"),
        "{e}"
    );
    assert!(
        e.contains("defaults.modules[2]: `tone` is listed twice"),
        "{e}"
    );
}

#[test]
fn module_mistakes_name_the_module() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blank.md"), "\n \n").unwrap();
    let e = load_in(
        dir.path(),
        r#"
        [modules.nodesc]
        prompt = "p"
        [modules.emptydesc]
        description = " "
        prompt = "p"
        [modules.both]
        description = "d"
        prompt = "p"
        prompt_file = "p.md"
        [modules.neither]
        description = "d"
        [modules.emptyprompt]
        description = "d"
        prompt = ""
        [modules.missing]
        description = "d"
        prompt_file = "missing.md"
        [modules.blank]
        description = "d"
        prompt_file = "blank.md"
        [modules.Bad-Name]
        description = "d"
        prompt = "p"
        "#,
    )
    .unwrap_err()
    .to_string();
    for expected in [
        "modules.nodesc.description: required: what the module is for, for the router to choose by",
        "modules.emptydesc.description: must not be empty",
        "modules.both.prompt_file: set prompt or prompt_file, not both",
        "modules.neither: required: `prompt` or `prompt_file`",
        "modules.emptyprompt.prompt: must not be empty",
        "modules.missing.prompt_file: cannot read ",
        "modules.blank.prompt_file: ",
        "modules.Bad-Name: module names are lower-case letters, digits, `-` and `_` (at most 64)",
    ] {
        assert!(e.contains(expected), "missing `{expected}` in:\n{e}");
    }
    assert!(e.contains("blank.md is empty"), "{e}");
    assert_err(
        "[modules.x]\ndescription = \"d\"\nprompt = \"p\"\ntext = \"t\"\n",
        "modules.x.text: unknown field `text`, expected one of `description`, `prompt`, `prompt_file`",
    );
}

#[test]
fn plan_is_auto_always_or_never() {
    let cfg = load(
        "[agents.always]\nplan = \"always\"\n[agents.never]\nplan = \"never\"\n[defaults]\nplan = \"auto\"\n",
    )
    .unwrap();
    assert_eq!(agent(&cfg, "default").plan, PlanMode::Auto);
    assert_eq!(agent(&cfg, "always").plan, PlanMode::Always);
    assert_eq!(agent(&cfg, "never").plan, PlanMode::Never);
    assert_eq!(agent(&load("").unwrap(), "default").plan, PlanMode::Auto);
    assert_err(
        "[agents.a]\nplan = \"sometimes\"\n",
        "agents.a.plan: unknown variant `sometimes`, expected one of `auto`, `always`, `never`",
    );
}

fn every(steps: u32, secs: u64) -> Supervision {
    Supervision::On(Cadence {
        every_steps: steps,
        every: Duration::from_secs(secs),
    })
}

#[test]
fn supervision_is_on_off_or_a_cadence_merged_key_by_key() {
    let cfg = load(
        r#"
        [defaults.supervise]
        every_steps = 3
        [agents.off]
        supervise = false
        [agents.slower]
        supervise = { every = "10m" }
        [agents.on]
        supervise = true
        "#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(agent(&cfg, "default").supervision, every(3, 120));
    assert_eq!(agent(&cfg, "off").supervision, Supervision::Off);
    assert_eq!(agent(&cfg, "off").supervision.cadence(), None);
    assert_eq!(agent(&cfg, "slower").supervision, every(3, 600));
    assert_eq!(agent(&cfg, "on").supervision, every(3, 120));
    assert_eq!(
        agent(&load("").unwrap(), "default").supervision,
        every(5, 120)
    );
    // Off in [defaults], on again in an agent: its own cadence over the
    // built-in one.
    let cfg = load(
        "[defaults]\nsupervise = false\n[agents.a]\nsupervise = true\n[agents.b.supervise]\nevery = \"1m\"\n",
    )
    .unwrap();
    assert_eq!(agent(&cfg, "default").supervision, Supervision::Off);
    assert_eq!(agent(&cfg, "a").supervision, every(5, 120));
    assert_eq!(agent(&cfg, "b").supervision, every(5, 60));
}

#[test]
fn supervision_mistakes_name_the_key() {
    assert_err(
        "[agents.a.supervise]\nevery_steps = 0\n",
        "agents.a.supervise.every_steps: must be at least 1",
    );
    assert_err(
        "[agents.a.supervise]\nevery = \"0s\"\n",
        "agents.a.supervise.every: `0s`: must be longer than zero",
    );
    assert_err(
        "[agents.a.supervise]\nevery = \"often\"\n",
        "agents.a.supervise.every: `often` is not a duration",
    );
    assert_err(
        "[agents.a.supervise]\nevery_step = 2\n",
        "agents.a.supervise.every_step: unknown field `every_step`, expected `every_steps` or `every`",
    );
    assert_err(
        "[agents.a]\nsupervise = \"yes\"\n",
        "agents.a.supervise: invalid type: string \"yes\", expected false, true, or a table with `every_steps` and `every`",
    );
}

#[test]
fn the_quality_gate_is_on_unless_turned_off() {
    let cfg =
        load("[defaults]\nquality_gate = false\n[agents.a]\nquality_gate = true\n[agents.b]\n")
            .unwrap();
    assert!(!agent(&cfg, "default").quality_gate);
    assert!(agent(&cfg, "a").quality_gate);
    assert!(!agent(&cfg, "b").quality_gate);
    assert!(agent(&load("").unwrap(), "default").quality_gate);
    assert_err(
        "[agents.a]\nquality_gate = \"no\"\n",
        "agents.a.quality_gate: invalid type: string \"no\", expected a boolean",
    );
}
