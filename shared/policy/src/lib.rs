//! Tool policies in Cedar (docs/policies.md): the agents file's `[policy]`
//! set, checked at start-up against Baton's schema and the tools and
//! agents it names, then asked before every tool call and task start.
//!
//! Only the worker side links this crate: the ingest Lambda never decides
//! a call (tests/e2e/layers.rs).

mod check;
mod request;

pub use check::{Known, PolicyError};
pub use request::{Action, Origin, Principal, Request};

use cedar_policy::{Authorizer, Decision, PolicyId, PolicySet, Schema};
use std::str::FromStr;

/// Baton's Cedar schema: the entity types, actions and contexts a policy
/// may use. Published in docs/policies.md.
pub const SCHEMA: &str = include_str!("baton.cedarschema");

/// The annotation that makes a `permit` ask a human first.
pub const APPROVAL_ANNOTATION: &str = "approval";

/// What the policies say about one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A `permit` allows it, none requiring approval.
    Allow,
    /// Allowed once a human approves: the named `permit` has
    /// `@approval("required")`.
    Approval { policy: String },
    /// The named `forbid` applies.
    Forbid { policy: String },
    /// No policy permits it (Cedar denies by default).
    NoPermit,
}

impl Verdict {
    /// The refusal the model or the requester reads; `None` when allowed.
    pub fn refusal(&self, what: &str) -> Option<String> {
        match self {
            Verdict::Allow | Verdict::Approval { .. } => None,
            Verdict::Forbid { policy } => {
                Some(format!("refused by policy `{policy}`: {what} is forbidden"))
            }
            Verdict::NoPermit => Some(format!(
                "refused: no policy permits {what} (policies deny by default)"
            )),
        }
    }
}

/// A checked policy set, ready to decide.
pub struct Policies {
    set: PolicySet,
    authorizer: Authorizer,
    known: Known,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("policies", &self.set.num_of_policies())
            .finish()
    }
}

impl Policies {
    /// Parses `text` (from `origin`, for errors), validates it against
    /// [`SCHEMA`] and checks that every tool and agent it names is
    /// `known`. The error names the policy (its `@id`, else its place).
    pub fn load(origin: &str, text: &str, known: Known) -> Result<Self, PolicyError> {
        let set = check::parse(origin, text)?;
        let schema = schema();
        check::validate(origin, text, &set, &schema)?;
        check::names(origin, &set, &known)?;
        Ok(Policies {
            set,
            authorizer: Authorizer::new(),
            known,
        })
    }

    /// How many policies the set has.
    pub fn len(&self) -> usize {
        self.set.num_of_policies()
    }

    /// Whether the set is empty (then nothing is permitted).
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The Cedar id of the tool the model calls `name`: `mcp:SERVER__TOOL`
    /// for a tool of a declared MCP server, `http:NAME` for a declared
    /// HTTP tool, the name itself for a built-in or a binary's own tool.
    pub fn tool_id(&self, name: &str) -> String {
        self.known.tool_id(name)
    }

    /// The decision for `request`. A policy whose condition cannot be
    /// evaluated (an attribute the call does not have) does not apply.
    pub fn decide(&self, request: &Request<'_>) -> Verdict {
        let (req, entities) = match request.cedar(&self.known) {
            Ok(r) => r,
            // Only an argument record Cedar cannot hold gets here (the
            // ids are plain strings): refuse rather than guess.
            Err(_) => return Verdict::NoPermit,
        };
        let response = self.authorizer.is_authorized(&req, &self.set, &entities);
        let reasons: Vec<&PolicyId> = response.diagnostics().reason().collect();
        match response.decision() {
            Decision::Deny => match reasons.first() {
                Some(id) => Verdict::Forbid {
                    policy: self.name_of(id),
                },
                None => Verdict::NoPermit,
            },
            Decision::Allow => {
                let asking = reasons
                    .iter()
                    .find(|id| self.set.annotation(id, APPROVAL_ANNOTATION) == Some("required"));
                match asking {
                    Some(id) => Verdict::Approval {
                        policy: self.name_of(id),
                    },
                    None => Verdict::Allow,
                }
            }
        }
    }

    /// A policy's `@id`, else Cedar's own id (`policy0`: the first).
    fn name_of(&self, id: &PolicyId) -> String {
        check::name_of(&self.set, id)
    }
}

/// The schema, parsed: it is part of this crate, so a failure is a bug
/// caught by the unit tests.
fn schema() -> Schema {
    #[allow(clippy::expect_used)]
    Schema::from_str(SCHEMA).expect("Baton's Cedar schema parses")
}

#[cfg(test)]
mod tests;
