//! The agents file: agents configured in a TOML file (`docs/configuration.md`).
//!
//! The file is found, in this order: the whole content in
//! `BATON_AGENTS_TOML` (for Lambda, where the environment is the easiest
//! place to put it); a path in `BATON_AGENTS_FILE`; `baton.toml` in the
//! working directory if present. Without any, the agents come from the
//! environment alone.
//!
//! Settings are layered: built-in defaults, then the environment (the `base`
//! agent given to [`AgentsSource::load`]: `BATON_LLM_MODEL`,
//! `BATON_MAX_STEPS`, ...), then the file's `[defaults]`, then the agent's
//! own `[agents.NAME]` table; the deployment's `[models]` (tiers) come
//! between the environment and `[defaults]`. Nested tables (`limits`,
//! `approval`, `context`, `escalation`, `models`, `supervise`) merge key
//! by key; lists replace whole.
//!
//! Everything is checked once, at start: unknown keys, wrong types, values
//! out of range, unknown tool names, unreadable prompt files, approvers that
//! are not Slack user ids, delegation cycles. Every error names the field,
//! e.g. `agents.researcher.limits.max_steps: must be at least 1`, and all
//! problems are reported together.

mod build;
mod capacity;
mod check;
mod checker;
mod connection;
mod duration;
mod judgment;
mod mcp;
mod prompts;
mod roles;
mod routes;
mod schema;
mod slack;
#[cfg(test)]
mod tests;

use crate::agent::AgentConfig;
use crate::deployment::AgentsConfig;
use checker::Checker;
pub use duration::parse_duration;
use schema::parse_file;
use std::fmt;
use std::path::{Path, PathBuf};

/// Environment variable holding the path of the agents file.
pub const AGENTS_FILE_ENV: &str = "BATON_AGENTS_FILE";
/// Environment variable holding the agents file's whole content.
pub const AGENTS_TOML_ENV: &str = "BATON_AGENTS_TOML";
/// The file looked for in the working directory when neither variable is set.
pub const DEFAULT_AGENTS_FILE: &str = "baton.toml";

// -------------------------------------------------------------------- errors

/// One thing wrong with the file, at a dotted field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// E.g. `agents.researcher.limits.max_steps`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why the agents file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("set {AGENTS_FILE_ENV} or {AGENTS_TOML_ENV}, not both")]
    BothSet,
    #[error("cannot read {}: {error}", .path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Not TOML, or not the schema (unknown key, wrong type).
    #[error("{}", render_parse(.origin, *.line, .path.as_deref(), .message))]
    Parse {
        /// The file's path, or `BATON_AGENTS_TOML`.
        origin: String,
        /// 1-based line and column, when known.
        line: Option<(usize, usize)>,
        path: Option<String>,
        message: String,
    },
    /// Parsed, but some values are not acceptable.
    #[error("{}", render_invalid(.origin, .problems))]
    Invalid {
        origin: String,
        problems: Vec<Problem>,
    },
}

fn render_parse(
    origin: &str,
    line: Option<(usize, usize)>,
    path: Option<&str>,
    message: &str,
) -> String {
    let mut s = origin.to_owned();
    if let Some((l, c)) = line {
        s.push_str(&format!(":{l}:{c}"));
    }
    s.push_str(": ");
    if let Some(p) = path {
        s.push_str(p);
        s.push_str(": ");
    }
    s.push_str(message);
    s
}

fn render_invalid(origin: &str, problems: &[Problem]) -> String {
    match problems {
        [one] => format!("{origin}: {one}"),
        many => {
            let mut s = format!("{origin}: {} problems:", many.len());
            for p in many {
                s.push_str("\n  ");
                s.push_str(&p.to_string());
            }
            s
        }
    }
}

impl ConfigFileError {
    /// The field-level problems (one for a parse error).
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            ConfigFileError::Invalid { problems, .. } => problems.clone(),
            ConfigFileError::Parse { path, message, .. } => {
                vec![Problem {
                    path: path.clone().unwrap_or_default(),
                    message: message.clone(),
                }]
            }
            _ => Vec::new(),
        }
    }
}

// -------------------------------------------------------------------- source

/// The agents file's text and where it came from.
#[derive(Clone, Debug)]
pub struct AgentsSource {
    origin: String,
    text: String,
    /// `system_prompt_file` paths are relative to this.
    base_dir: PathBuf,
}

impl AgentsSource {
    /// A file's content given directly; `origin` names it in errors.
    pub fn new(
        origin: impl Into<String>,
        text: impl Into<String>,
        base_dir: impl Into<PathBuf>,
    ) -> Self {
        AgentsSource {
            origin: origin.into(),
            text: text.into(),
            base_dir: base_dir.into(),
        }
    }

    /// Reads the file at `path`; prompt files are relative to its directory.
    pub fn read(path: &Path) -> Result<Self, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigFileError::Read {
            path: path.to_owned(),
            error,
        })?;
        let base_dir = path.parent().map(Path::to_owned).unwrap_or_default();
        Ok(AgentsSource {
            origin: path.display().to_string(),
            text,
            base_dir,
        })
    }

    /// Finds the file as the module docs say, looking variables up with
    /// `var` and resolving relative paths against `cwd`. `None`: no file.
    pub fn locate(
        var: impl Fn(&str) -> Option<String>,
        cwd: &Path,
    ) -> Result<Option<Self>, ConfigFileError> {
        let inline = var(AGENTS_TOML_ENV).filter(|v| !v.trim().is_empty());
        let path = var(AGENTS_FILE_ENV)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty());
        match (inline, path) {
            (Some(_), Some(_)) => Err(ConfigFileError::BothSet),
            (Some(text), None) => Ok(Some(AgentsSource::new(AGENTS_TOML_ENV, text, cwd))),
            (None, Some(p)) => AgentsSource::read(&cwd.join(p)).map(Some),
            (None, None) => {
                let p = cwd.join(DEFAULT_AGENTS_FILE);
                if p.is_file() {
                    AgentsSource::read(&p).map(Some)
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// Where the text came from (a path, or `BATON_AGENTS_TOML`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Parses and checks the file and builds the agents over `base` (the
    /// agent the environment alone would give). `known_tools` are the
    /// names tools may be referred to by.
    pub fn load(
        &self,
        base: &AgentConfig,
        known_tools: &[&str],
    ) -> Result<AgentsConfig, ConfigFileError> {
        let spec = parse_file(&self.origin, &self.text)?;
        let mut checker = Checker {
            problems: Vec::new(),
            known_tools,
            declared_tools: Vec::new(),
            mcp_servers: Vec::new(),
            declared_modules: Vec::new(),
            declared_roles: Vec::new(),
            base_dir: &self.base_dir,
        };
        let result = checker.resolve(spec, base);
        if checker.problems.is_empty() {
            if let Some(config) = result {
                return Ok(config);
            }
        }
        Err(ConfigFileError::Invalid {
            origin: self.origin.clone(),
            problems: checker.problems,
        })
    }
}
