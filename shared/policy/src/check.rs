//! The start-up check of a policy set: it parses, it validates against
//! Baton's schema, every tool and agent it names exists, and every tool
//! it names is one a call can carry (a name the model can be shown, of a
//! tool some agent has).

use cedar_policy::{PolicyId, PolicySet, Schema, ValidationError, ValidationMode, Validator};
use std::collections::BTreeSet;
use std::str::FromStr;

/// Why a policy set refuses start-up: where, and which policy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct PolicyError {
    /// The policy file's path, or `policy.text`.
    pub origin: String,
    pub message: String,
}

/// What a policy may name: the deployment's tools and agents.
#[derive(Clone, Debug, Default)]
pub struct Known {
    /// Built-in tools and a binary's own tools, by name.
    pub tools: BTreeSet<String>,
    /// Declared HTTP tools (`[http_tools.NAME]`): `http:NAME` in Cedar.
    pub http_tools: BTreeSet<String>,
    /// MCP servers (`[mcp.NAME]`): their tools are `mcp:NAME__TOOL` in
    /// Cedar. Which tools a server has is known only once it is listed,
    /// so the check stops at the server.
    pub mcp_servers: BTreeSet<String>,
    pub agents: BTreeSet<String>,
    /// What the agents may call, as their `tools` lists name it: a tool
    /// by its name (a declared HTTP tool's too), an MCP server's tools as
    /// `mcp:SERVER`; the union over every agent. `None`: not checked.
    pub callable: Option<BTreeSet<String>>,
}

/// The longest tool name the model APIs take; a longer MCP tool's name is
/// cut to it.
const MAX_TOOL_NAME: usize = 64;

impl Known {
    pub(crate) fn tool_id(&self, name: &str) -> String {
        if self.http_tools.contains(name) {
            return format!("http:{name}");
        }
        if self.server_of(name).is_some() {
            return format!("mcp:{name}");
        }
        name.to_owned()
    }

    /// The declared server whose tool `SERVER__TOOL` is; the longest when
    /// several could be (`a___x`: `a_`'s `x` rather than `a`'s `_x`).
    fn server_of(&self, name: &str) -> Option<&str> {
        self.mcp_servers
            .iter()
            .filter(|s| {
                name.strip_prefix(s.as_str())
                    .and_then(|rest| rest.strip_prefix("__"))
                    .is_some_and(|tool| !tool.is_empty())
            })
            .max_by_key(|s| s.len())
            .map(String::as_str)
    }

    /// Why no call can carry the `Baton::Tool` id of a tool that exists:
    /// the model is never shown that name (a character outside letters,
    /// digits, `_` and `-`, which an MCP tool's name has as `_`; more than
    /// 64 characters, which an MCP tool's name is cut to), or no agent has
    /// the tool. `None` if a call can.
    fn uncallable(&self, id: &str) -> Option<String> {
        let (name, entry) = if let Some(name) = id.strip_prefix("http:") {
            (name, name.to_owned())
        } else if let Some(name) = id.strip_prefix("mcp:") {
            (name, format!("mcp:{}", self.server_of(name)?))
        } else {
            (id, id.to_owned())
        };
        let shown = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if let Some(c) = name.chars().find(|c| !shown(*c)) {
            let as_shown: String = name
                .chars()
                .map(|c| if shown(c) { c } else { '_' })
                .take(MAX_TOOL_NAME)
                .collect();
            return Some(format!(
                "`{id}`: tool names the model sees are letters, digits, `_` and `-`, and \
                 `{c}` is not one (an MCP tool's name is shown with `_` for it: `{}{as_shown}`)",
                id.strip_suffix(name).unwrap_or_default(),
            ));
        }
        if name.chars().count() > MAX_TOOL_NAME {
            let cut: String = name.chars().take(MAX_TOOL_NAME).collect();
            return Some(format!(
                "`{id}`: tool names the model sees are at most {MAX_TOOL_NAME} characters \
                 (an MCP tool's longer name is cut: `{}{cut}`)",
                id.strip_suffix(name).unwrap_or_default(),
            ));
        }
        match &self.callable {
            Some(callable) if !callable.contains(&entry) => Some(format!(
                "`{id}`: no agent has it (an agent's `tools` would name `{entry}`)"
            )),
            _ => None,
        }
    }

    /// Why a `Baton::Tool` id is not one of the deployment's; `None` if
    /// it is.
    fn unknown_tool(&self, id: &str) -> Option<String> {
        if let Some(name) = id.strip_prefix("http:") {
            return (!self.http_tools.contains(name))
                .then(|| format!("no declared HTTP tool `{name}` ([http_tools.{name}])"));
        }
        if let Some(name) = id.strip_prefix("mcp:") {
            return self.server_of(name).is_none().then(|| {
                format!("`{name}` is not SERVER__TOOL of a declared MCP server ([mcp.SERVER])")
            });
        }
        (!self.tools.contains(id)).then(|| {
            format!(
                "no tool `{id}` (built-in and a binary's own tools by name, \
                 declared HTTP tools as `http:NAME`, MCP tools as `mcp:SERVER__TOOL`)"
            )
        })
    }
}

pub(crate) fn parse(origin: &str, text: &str) -> Result<PolicySet, PolicyError> {
    PolicySet::from_str(text).map_err(|e| PolicyError {
        origin: origin.to_owned(),
        message: format!("{}: does not parse: {e}", place(text, &e)),
    })
}

/// Validation in Cedar's strict mode, except for reading `context.args`:
/// a call's arguments are whatever its tool takes, so the schema gives
/// `args` no attributes and reading one is allowed (a policy that reads
/// one a call lacks does not apply to it: docs/policies.md).
pub(crate) fn validate(
    origin: &str,
    text: &str,
    set: &PolicySet,
    schema: &Schema,
) -> Result<(), PolicyError> {
    let validator = Validator::new(schema.clone());
    let result = validator.validate(set, ValidationMode::Strict);
    let wrong: Vec<&ValidationError> = result
        .validation_errors()
        .filter(|e| !reads_args(e))
        .collect();
    let Some(first) = wrong.first() else {
        return Ok(());
    };
    let mut message = format!(
        "policy `{}` ({}) does not validate against Baton's schema: {first}",
        name_of(set, first.policy_id()),
        place(text, *first),
    );
    if wrong.len() > 1 {
        message.push_str(&format!(" (and {} more problems)", wrong.len() - 1));
    }
    Err(PolicyError {
        origin: origin.to_owned(),
        message,
    })
}

/// Whether `e` is only an attribute of `context.args` the schema cannot
/// know. Cedar says so in its message (the error's fields are private):
/// "attribute `args.priority` in context for …"; a unit test holds this.
fn reads_args(e: &ValidationError) -> bool {
    matches!(e, ValidationError::UnsafeAttributeAccess(_)) && {
        let text = e.to_string();
        text.contains("`args.") && text.contains("in context for")
    }
}

/// Every `Baton::Tool` and `Baton::Agent` a policy names must exist.
pub(crate) fn names(origin: &str, set: &PolicySet, known: &Known) -> Result<(), PolicyError> {
    for policy in set.policies() {
        for uid in policy.entity_literals() {
            let ty = uid.type_name().to_string();
            let id = uid.id().unescaped().to_owned();
            let problem = match ty.as_str() {
                "Baton::Tool" => known
                    .unknown_tool(&id)
                    .map(|p| format!("names an unknown tool: {p}"))
                    .or_else(|| {
                        known
                            .uncallable(&id)
                            .map(|p| format!("names a tool no call can carry: {p}"))
                    }),
                "Baton::Agent" => (!known.agents.contains(&id))
                    .then(|| format!("names an unknown agent: no agent `{id}` in the agents file")),
                _ => None,
            };
            if let Some(problem) = problem {
                return Err(PolicyError {
                    origin: origin.to_owned(),
                    message: format!("policy `{}` {problem}", name_of(set, policy.id())),
                });
            }
        }
    }
    Ok(())
}

/// A policy's `@id` annotation, else Cedar's id for it (`policy0` is the
/// first in the text).
pub(crate) fn name_of(set: &PolicySet, id: &PolicyId) -> String {
    set.annotation(id, "id")
        .map_or_else(|| id.to_string(), str::to_owned)
}

/// `line L, column C` of a diagnostic's first label in `text`.
fn place(text: &str, d: &dyn miette::Diagnostic) -> String {
    let Some(offset) = d.labels().and_then(|mut l| l.next()).map(|l| l.offset()) else {
        return "at an unknown place".to_owned();
    };
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}")
}
