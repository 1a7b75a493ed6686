//! The [`Checker`] every part of the file is checked with (it gathers
//! the problems, each at its field path), and the checks of single values
//! more than one part makes.

use super::Problem;
use crate::http_tool::{parse_template, TemplatePart};
use std::path::Path;

pub(super) struct Checker<'a> {
    pub(super) problems: Vec<Problem>,
    pub(super) known_tools: &'a [&'a str],
    /// Names of the file's `[http_tools]`, which agents may list too.
    pub(super) declared_tools: Vec<String>,
    /// Names of the file's `[mcp]` servers (`mcp:NAME` in `tools`).
    pub(super) mcp_servers: Vec<String>,
    /// Names of the file's `[modules]` (an agent's `modules`).
    pub(super) declared_modules: Vec<String>,
    /// Names of the file's `[roles]` (in `approvers`).
    pub(super) declared_roles: Vec<String>,
    pub(super) base_dir: &'a Path,
}

/// Agent names appear in `POST /tasks` and in `delegate` calls.
pub(super) fn valid_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Slack user ids: `U…` or `W…` (Enterprise Grid), upper-case letters and
/// digits.
pub(super) fn valid_slack_user_id(id: &str) -> bool {
    (3..=32).contains(&id.len())
        && (id.starts_with('U') || id.starts_with('W'))
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

pub(super) fn valid_model(m: &str) -> bool {
    !m.trim().is_empty() && !m.chars().any(char::is_whitespace)
}

/// A declared URL: `${NAME}` references well formed, and with each one
/// replaced by a placeholder, an absolute http(s) URL with a host.
pub(super) fn check_url_template(url: &str) -> Result<(), String> {
    let parts = parse_template(url)?;
    let sample: String = parts
        .iter()
        .map(|p| match p {
            TemplatePart::Text(t) => t.as_str(),
            TemplatePart::Var(_) => "x",
        })
        .collect();
    let parsed = url::Url::parse(&sample).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "must be an http:// or https:// URL, not {}:",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    Ok(())
}

impl Checker<'_> {
    pub(super) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            message: message.into(),
        });
    }

    pub(super) fn at_least<T: PartialOrd + Copy + From<u8>>(
        &mut self,
        path: String,
        value: Option<T>,
        min: u8,
    ) {
        if value.is_some_and(|v| v < T::from(min)) {
            self.add(path, format!("must be at least {min}"));
        }
    }
}
