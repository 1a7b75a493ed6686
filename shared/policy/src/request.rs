//! One question to the policies, in Baton's terms, and its Cedar form.

use crate::check::Known;
use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request as CedarRequest,
    RestrictedExpression,
};
use chrono::{DateTime, Datelike, Timelike, Utc};
use serde_json::Value;
use std::collections::HashSet;
use std::str::FromStr;

/// Deeper arguments than this are given to Cedar as their JSON text.
const MAX_DEPTH: usize = 16;

/// Who the task serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// A Slack person: `Baton::User::"TEAM/USER"`.
    User {
        team: String,
        user: String,
        roles: Vec<String>,
    },
    /// The HTTP API, by token name: `Baton::Api::"default"`.
    Api { token: String, roles: Vec<String> },
}

/// What is asked for.
#[derive(Clone, Copy, Debug)]
pub enum Action<'a> {
    /// A tool call: the tool as the model names it, the agent calling it,
    /// its JSON arguments.
    CallTool {
        tool: &'a str,
        agent: &'a str,
        args: &'a Value,
    },
    /// A task of `agent` starting.
    StartTask { agent: &'a str },
}

/// Where the task came from; empty strings where there is none.
#[derive(Clone, Copy, Debug, Default)]
pub struct Origin<'a> {
    pub channel: &'a str,
    pub channel_type: &'a str,
    pub thread: &'a str,
}

/// One request: who, what, from where, when.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub principal: &'a Principal,
    pub action: Action<'a>,
    pub origin: Origin<'a>,
    pub now: DateTime<Utc>,
}

impl Request<'_> {
    /// The Cedar request and the entities it needs: the principal with its
    /// roles as parents. The actions have no parents, so they need none
    /// (copying the schema's action entities cost most of a decision).
    pub(crate) fn cedar(&self, known: &Known) -> Result<(CedarRequest, Entities), String> {
        let (principal, parents) = match self.principal {
            Principal::User { team, user, roles } => {
                (uid("User", &format!("{team}/{user}")), roles)
            }
            Principal::Api { token, roles } => (uid("Api", token), roles),
        };
        let parents: HashSet<EntityUid> = parents.iter().map(|r| uid("Role", r)).collect();
        let mut entities: Vec<Entity> = parents
            .iter()
            .map(|p| Entity::new_no_attrs(p.clone(), HashSet::new()))
            .collect();
        entities.push(Entity::new_no_attrs(principal.clone(), parents));
        let origin = RestrictedExpression::new_record([
            ("channel".to_owned(), string(self.origin.channel)),
            ("channel_type".to_owned(), string(self.origin.channel_type)),
            ("thread".to_owned(), string(self.origin.thread)),
        ])
        .map_err(|e| e.to_string())?;
        let now = self.now;
        let time = RestrictedExpression::new_record([
            (
                "unix".to_owned(),
                RestrictedExpression::new_long(now.timestamp()),
            ),
            ("hour".to_owned(), long(now.hour())),
            ("minute".to_owned(), long(now.minute())),
            (
                "weekday".to_owned(),
                long(now.weekday().number_from_monday()),
            ),
        ])
        .map_err(|e| e.to_string())?;
        let mut context = vec![("origin".to_owned(), origin), ("time".to_owned(), time)];
        let (action, resource) = match self.action {
            Action::CallTool { tool, agent, args } => {
                context.push(("args".to_owned(), args_record(args)?));
                context.push((
                    "agent".to_owned(),
                    RestrictedExpression::new_entity_uid(uid("Agent", agent)),
                ));
                ("call_tool", uid("Tool", &known.tool_id(tool)))
            }
            Action::StartTask { agent } => {
                let none = RestrictedExpression::new_record([]).map_err(|e| e.to_string())?;
                context.push(("args".to_owned(), none));
                ("start_task", uid("Agent", agent))
            }
        };
        let context = Context::from_pairs(context).map_err(|e| e.to_string())?;
        let request = CedarRequest::new(principal, uid("Action", action), resource, context, None)
            .map_err(|e| e.to_string())?;
        let entities = Entities::from_entities(entities, None).map_err(|e| e.to_string())?;
        Ok((request, entities))
    }
}

/// `Baton::KIND::"id"`. The type names are this crate's own and parse.
fn uid(kind: &str, id: &str) -> EntityUid {
    let ty = EntityTypeName::from_str(&format!("Baton::{kind}"))
        .unwrap_or_else(|_| unreachable!("Baton::{kind} is a valid type name"));
    EntityUid::from_type_name_and_id(ty, EntityId::new(id))
}

fn string(s: &str) -> RestrictedExpression {
    RestrictedExpression::new_string(s.to_owned())
}

fn long(n: u32) -> RestrictedExpression {
    RestrictedExpression::new_long(i64::from(n))
}

/// A call's arguments as a record: an object's members; anything else
/// (a string, a list) as `{value: …}`; `null` as `{}`.
fn args_record(args: &Value) -> Result<RestrictedExpression, String> {
    let fields: Vec<(String, RestrictedExpression)> = match args {
        Value::Object(map) => map
            .iter()
            .filter_map(|(k, v)| cedar_value(v, 1).map(|v| (k.clone(), v)))
            .collect(),
        Value::Null => Vec::new(),
        other => cedar_value(other, 1)
            .map(|v| ("value".to_owned(), v))
            .into_iter()
            .collect(),
    };
    RestrictedExpression::new_record(fields).map_err(|e| e.to_string())
}

/// A JSON value as Cedar holds it: whole numbers as `Long`, other numbers
/// (Cedar has no floats) as their text, `null` left out (`None`), lists
/// as sets, objects as records; deeper than [`MAX_DEPTH`], the JSON text.
fn cedar_value(v: &Value, depth: usize) -> Option<RestrictedExpression> {
    if depth > MAX_DEPTH {
        return Some(RestrictedExpression::new_string(v.to_string()));
    }
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => RestrictedExpression::new_long(i),
            None => RestrictedExpression::new_string(n.to_string()),
        },
        Value::String(s) => RestrictedExpression::new_string(s.clone()),
        Value::Array(items) => {
            RestrictedExpression::new_set(items.iter().filter_map(|i| cedar_value(i, depth + 1)))
        }
        Value::Object(map) => {
            let fields = map
                .iter()
                .filter_map(|(k, v)| cedar_value(v, depth + 1).map(|v| (k.clone(), v)));
            RestrictedExpression::new_record(fields)
                .unwrap_or_else(|_| RestrictedExpression::new_string(v.to_string()))
        }
    })
}
