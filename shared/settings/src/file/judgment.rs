//! The keys of how an agent thinks (issue #22; [`crate::judgment`]): the
//! `[models]` and `[modules.NAME]` tables, and the agent keys `models`,
//! `router`, `modules`, `plan`, `supervise` and `quality_gate` — checked,
//! and laid over an agent. As written, they are in `schema`.

use super::checker::{valid_agent_name, valid_model, Checker};
use super::duration::DurationSpec;
use super::schema::{AgentSpec, ModelsSpec, ModuleSpec, SuperviseSpec};
use crate::agent::AgentConfig;
use crate::judgment::{PromptModule, Supervision};
use std::collections::BTreeMap;

const MODEL_ID: &str = "must be a model id: not empty, no spaces";

impl Checker<'_> {
    /// `[AT]` of tiers (`models`, `defaults.models`, `agents.NAME.models`):
    /// each a model id.
    pub(super) fn check_models(&mut self, at: &str, m: &ModelsSpec) {
        for (tier, model) in [
            ("fast", &m.fast),
            ("default", &m.default),
            ("strong", &m.strong),
        ] {
            if model.as_deref().is_some_and(|m| !valid_model(m)) {
                self.add(format!("{at}.{tier}"), MODEL_ID);
            }
        }
    }

    /// The judgment keys of one agent table: its tiers (and `model`
    /// agreeing with `models.default`, which names the same tier), its
    /// modules declared and listed once, its supervision cadence.
    pub(super) fn check_judgment(&mut self, at: &str, spec: &AgentSpec) {
        if let Some(models) = &spec.models {
            self.check_models(&format!("{at}.models"), models);
            if let (Some(model), Some(default)) = (&spec.model, &models.default) {
                if model != default {
                    self.add(
                        format!("{at}.models.default"),
                        format!(
                            "`{default}` differs from `model` (`{model}`) in the same table: \
                             both name the default tier; set one of them"
                        ),
                    );
                }
            }
        }
        let mut seen = Vec::new();
        for (i, name) in spec.modules.iter().flatten().enumerate() {
            let path = format!("{at}.modules[{i}]");
            if seen.contains(&name) {
                self.add(path, format!("`{name}` is listed twice"));
            } else if !self.declared_modules.contains(name) {
                let declared = if self.declared_modules.is_empty() {
                    "none is declared; add a [modules.NAME] table".to_owned()
                } else {
                    format!("declared: {}", self.declared_modules.join(", "))
                };
                self.add(path, format!("unknown module `{name}`; {declared}"));
            }
            seen.push(name);
        }
        if let Some(SuperviseSpec::Cadence(c)) = &spec.supervise {
            self.at_least(format!("{at}.supervise.every_steps"), c.every_steps, 1);
        }
    }

    /// The `[modules]` tables: names, a description, exactly one of
    /// `prompt` and `prompt_file` (read relative to the agents file, like
    /// `system_prompt_file`: [`Checker::prompt_text`]), never empty. The
    /// good ones, by name.
    pub(super) fn check_modules(
        &mut self,
        modules: &BTreeMap<String, ModuleSpec>,
    ) -> BTreeMap<String, PromptModule> {
        let mut out = BTreeMap::new();
        for (name, spec) in modules {
            let at = format!("modules.{name}");
            let before = self.problems.len();
            if !valid_agent_name(name) {
                self.add(
                    &at,
                    "module names are lower-case letters, digits, `-` and `_` (at most 64)",
                );
            }
            let description = match spec.description.as_deref().map(str::trim) {
                None => {
                    self.add(
                        format!("{at}.description"),
                        "required: what the module is for, for the router to choose by",
                    );
                    String::new()
                }
                Some("") => {
                    self.add(format!("{at}.description"), "must not be empty");
                    String::new()
                }
                Some(d) => d.to_owned(),
            };
            let (inline, file) = (spec.prompt.as_deref(), spec.prompt_file.as_deref());
            let prompt = self.prompt_text(&at, "prompt", inline, file, true);
            if self.problems.len() == before {
                out.insert(
                    name.clone(),
                    PromptModule {
                        name: name.clone(),
                        description,
                        prompt: prompt.unwrap_or_default(),
                    },
                );
            }
        }
        out
    }
}

/// `base` with the tiers of `models` laid over it: the layer of the
/// file's `[models]`, and of an agent table's `models`.
pub(super) fn apply_models(a: &mut AgentConfig, models: &ModelsSpec) {
    if let Some(v) = &models.default {
        a.model = v.clone();
    }
    if let Some(v) = &models.fast {
        a.tiers.fast = Some(v.clone());
    }
    if let Some(v) = &models.strong {
        a.tiers.strong = Some(v.clone());
    }
}

/// What a checked agent table sets of the judgment keys, laid over `a`.
/// `modules` are the declared ones; `modules` lists replace whole, the
/// `supervise` table merges key by key.
pub(super) fn apply(
    a: &mut AgentConfig,
    spec: &AgentSpec,
    modules: &BTreeMap<String, PromptModule>,
) {
    if let Some(m) = &spec.models {
        apply_models(a, m);
    }
    if let Some(v) = spec.router {
        a.router = v;
    }
    if let Some(v) = spec.plan {
        a.plan = v;
    }
    if let Some(v) = spec.quality_gate {
        a.quality_gate = v;
    }
    if let Some(names) = &spec.modules {
        a.modules = names
            .iter()
            .filter_map(|n| modules.get(n).cloned())
            .collect();
    }
    match &spec.supervise {
        None => {}
        Some(SuperviseSpec::Switch(false)) => a.supervision = Supervision::Off,
        // On again: the cadence inherited, or the default one.
        Some(SuperviseSpec::Switch(true)) => {
            a.supervision = Supervision::On(a.supervision.cadence().unwrap_or_default());
        }
        Some(SuperviseSpec::Cadence(c)) => {
            let mut cadence = a.supervision.cadence().unwrap_or_default();
            if let Some(v) = c.every_steps {
                cadence.every_steps = v;
            }
            if let Some(DurationSpec(d)) = c.every {
                cadence.every = d;
            }
            a.supervision = Supervision::On(cadence);
        }
    }
}
