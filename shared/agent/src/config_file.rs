//! Agents configured in a TOML file (`docs/configuration.md`).
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
//! own `[agents.NAME]` table. Nested tables (`limits`, `approval`,
//! `context`, `escalation`) merge key by key; lists replace whole.
//!
//! Everything is checked once, at start: unknown keys, wrong types, values
//! out of range, unknown tool names, unreadable prompt files, approvers that
//! are not Slack user ids, delegation cycles. Every error names the field,
//! e.g. `agents.researcher.limits.max_steps: must be at least 1`, and all
//! problems are reported together.

use crate::agent::{AgentConfig, Agents};
use crate::spend::{unpriced_models, ModelPrice};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Environment variable holding the path of the agents file.
pub const AGENTS_FILE_ENV: &str = "BATON_AGENTS_FILE";
/// Environment variable holding the agents file's whole content.
pub const AGENTS_TOML_ENV: &str = "BATON_AGENTS_TOML";
/// The file looked for in the working directory when neither variable is set.
pub const DEFAULT_AGENTS_FILE: &str = "baton.toml";

/// The tool whose presence lets an agent start child tasks.
const DELEGATE_TOOL: &str = "delegate";
/// The tool whose calls may be qualified by HTTP method in approval rules.
const HTTP_TOOL: &str = "http_request";
/// The methods `http_request` supports.
const HTTP_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

// ------------------------------------------------------------------ settings

/// One approval rule: calls of `tool` (or of any tool, `*`), optionally only
/// those with the given HTTP `method`, wait for a human decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRule {
    /// A tool name, or [`ApprovalRule::ANY_TOOL`].
    pub tool: String,
    /// Upper-case HTTP method; only for `http_request`.
    pub method: Option<String>,
}

impl ApprovalRule {
    /// Matches every tool.
    pub const ANY_TOOL: &'static str = "*";

    /// Parses `tool` or `http_request:METHOD` (method case-insensitive).
    pub fn parse(rule: &str) -> Result<Self, String> {
        let rule = rule.trim();
        let (tool, method) = match rule.split_once(':') {
            Some((t, m)) => (t.trim(), Some(m.trim())),
            None => (rule, None),
        };
        if tool.is_empty() {
            return Err(
                "expected `TOOL` or `http_request:METHOD`, e.g. `http_request:POST`".into(),
            );
        }
        let method = match method {
            None => None,
            Some(m) => {
                if tool != HTTP_TOOL {
                    return Err(format!(
                        "only `{HTTP_TOOL}` takes a method; write `{tool}` alone"
                    ));
                }
                let upper = m.to_ascii_uppercase();
                if !HTTP_METHODS.contains(&upper.as_str()) {
                    return Err(format!(
                        "unknown HTTP method `{m}`; expected one of {}",
                        HTTP_METHODS.join(", ")
                    ));
                }
                Some(upper)
            }
        };
        Ok(ApprovalRule {
            tool: tool.to_owned(),
            method,
        })
    }

    /// Whether a call of `tool` with these arguments falls under the rule.
    /// `http_request` without a `method` argument is a GET, as in the tool.
    pub fn matches(&self, tool: &str, arguments: &serde_json::Value) -> bool {
        if self.tool != Self::ANY_TOOL && self.tool != tool {
            return false;
        }
        match &self.method {
            None => true,
            Some(m) => match arguments.get("method") {
                None | Some(serde_json::Value::Null) => m == "GET",
                Some(serde_json::Value::String(s)) => s.trim().eq_ignore_ascii_case(m),
                // Malformed: the tool will reject it, but never let it
                // slip past a rule on that account.
                Some(_) => true,
            },
        }
    }
}

impl fmt::Display for ApprovalRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.method {
            Some(m) => write!(f, "{}:{m}", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// Which tool calls wait for a human, who may decide, and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRules {
    /// `None`: each tool decides for its own calls
    /// ([`baton_core::Tool::needs_approval`]: `http_request` with any method
    /// but GET or HEAD). `Some`: a call matching any of these rules waits,
    /// and no other does (`Some(vec![])` turns approvals off).
    pub require: Option<Vec<ApprovalRule>>,
    /// Slack user ids who may decide besides the requester.
    pub approvers: Vec<String>,
    /// An undecided approval counts as denied after this long.
    pub expires_after: Duration,
}

impl Default for ApprovalRules {
    /// What the tools declare; the requester decides; one hour.
    fn default() -> Self {
        ApprovalRules {
            require: None,
            approvers: Vec::new(),
            expires_after: Duration::from_secs(3600),
        }
    }
}

impl ApprovalRules {
    /// Whether this call must wait for a decision; `declared` is what the
    /// tool itself says ([`baton_core::Tool::needs_approval`]).
    pub fn requires_approval(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        declared: bool,
    ) -> bool {
        match &self.require {
            None => declared,
            Some(rules) => rules.iter().any(|r| r.matches(tool, arguments)),
        }
    }

    /// Whether `user` may approve or deny a call the task of `requester`
    /// (its Slack user, if it has one) asked for.
    pub fn may_decide(&self, user: &str, requester: Option<&str>) -> bool {
        requester == Some(user) || self.approvers.iter().any(|a| a == user)
    }
}

/// The context pipeline's knobs (issue items 1 and 2).
#[derive(Clone, Debug, PartialEq)]
pub struct ContextSettings {
    /// The model's context window in tokens; `None`: the known window of the
    /// model, or a conservative guess.
    pub window_tokens: Option<u32>,
    /// Turns kept verbatim after the summary.
    pub keep_last_turns: u32,
    /// Fraction of the window past which long old tool results are trimmed
    /// to head and tail.
    pub soft_trim_at: f64,
    /// Fraction past which old tool results are cleared.
    pub hard_clear_at: f64,
    /// Fraction past which older turns are summarised.
    pub compact_at: f64,
    /// Tool results longer than this are what soft trimming shortens.
    pub trim_tool_results_over_chars: usize,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            window_tokens: None,
            keep_last_turns: 20,
            soft_trim_at: 0.30,
            hard_clear_at: 0.50,
            compact_at: 0.75,
            trim_tool_results_over_chars: 4000,
        }
    }
}

/// Switch to a stronger model after repeated tool errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Escalation {
    pub model: String,
    /// Consecutive failed tool calls that trigger the switch.
    pub after_tool_errors: u32,
}

/// What the input guard does with a message that looks like prompt
/// injection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputGuardMode {
    /// No check.
    Off,
    /// Record it in the logs and the trace only.
    Log,
    /// Also tell the model the message is untrusted (and the user, where
    /// the channel allows).
    #[default]
    Warn,
    /// Refuse the message: the task ends with an explanation.
    Block,
}

/// The `[guard]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuardSettings {
    pub input_guard: InputGuardMode,
}

/// The `[budgets]` table: monthly token budgets; `None` means unlimited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetSettings {
    pub workspace_monthly_tokens: Option<u64>,
    pub user_monthly_tokens: Option<u64>,
}

/// Settings of the deployment rather than of one agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GlobalSettings {
    pub guard: GuardSettings,
    pub budgets: BudgetSettings,
}

/// What a loaded configuration yields.
#[derive(Clone, Debug)]
pub struct AgentsConfig {
    pub agents: Agents,
    pub settings: GlobalSettings,
}

impl AgentsConfig {
    /// The configuration when there is no file: `base` as the only agent.
    pub fn from_base(base: AgentConfig) -> Self {
        AgentsConfig {
            agents: Agents::new(base, Vec::new()),
            settings: GlobalSettings::default(),
        }
    }
}

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

    /// [`AgentsSource::locate`] over the process environment and working
    /// directory.
    pub fn from_env() -> Result<Option<Self>, ConfigFileError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Self::locate(|name| std::env::var(name).ok(), &cwd)
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

// -------------------------------------------------------------------- schema

/// The file as written. Every table denies unknown keys, so a typo is an
/// error rather than a silently ignored setting.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    defaults: AgentSpec,
    #[serde(default)]
    agents: BTreeMap<String, AgentSpec>,
    #[serde(default)]
    guard: GuardSpec,
    #[serde(default)]
    budgets: BudgetSpec,
    /// Model prices, by model id.
    #[serde(default)]
    prices: BTreeMap<String, PriceSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentSpec {
    description: Option<String>,
    model: Option<String>,
    fallback_models: Option<Vec<String>>,
    system_prompt: Option<String>,
    system_prompt_file: Option<String>,
    tools: Option<Vec<String>>,
    delegates: Option<Vec<String>>,
    max_output_tokens: Option<u32>,
    max_tool_result_chars: Option<usize>,
    limits: Option<LimitsSpec>,
    approval: Option<ApprovalSpec>,
    context: Option<ContextSpec>,
    escalation: Option<EscalationSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsSpec {
    max_steps: Option<u32>,
    max_segments: Option<u32>,
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
    deadline: Option<DurationSpec>,
    max_tool_calls: Option<BTreeMap<String, u32>>,
    max_identical_calls: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalSpec {
    require: Option<Vec<String>>,
    approvers: Option<Vec<String>>,
    expires_after: Option<DurationSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextSpec {
    window_tokens: Option<u32>,
    keep_last_turns: Option<u32>,
    soft_trim_at: Option<f64>,
    hard_clear_at: Option<f64>,
    compact_at: Option<f64>,
    trim_tool_results_over_chars: Option<usize>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EscalationSpec {
    model: Option<String>,
    after_tool_errors: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GuardSpec {
    input_guard: Option<InputGuardMode>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetSpec {
    workspace_monthly_tokens: Option<u64>,
    user_monthly_tokens: Option<u64>,
}

/// `[prices."MODEL"]`: US dollars per million tokens.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceSpec {
    input_per_mtok: Option<f64>,
    output_per_mtok: Option<f64>,
}

/// A positive duration written as a string: `"90s"`, `"15m"`, `"2h"`,
/// `"1d"`, `"500ms"`, or a sum such as `"1h30m"`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct DurationSpec(Duration);

impl<'de> Deserialize<'de> for DurationSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"90s\", \"15m\", \"2h\" or \"1h30m\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationSpec, E> {
                parse_duration(v).map(DurationSpec).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// Parses a duration such as `"90s"`, `"15m"`, `"2h"`, `"1d"`, `"250ms"` or
/// `"1h30m"`. Zero is refused: every duration in the file is a limit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad =
        || format!("`{text}` is not a duration; write e.g. \"90s\", \"15m\", \"2h\" or \"1h30m\"");
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total_ms = n
            .checked_mul(unit_ms)
            .and_then(|v| total_ms.checked_add(v))
            .ok_or_else(|| format!("`{text}` is too long"))?;
    }
    if total_ms == 0 {
        return Err(format!("`{text}`: must be longer than zero"));
    }
    Ok(Duration::from_millis(total_ms))
}

/// Keys that belong in `limits` rather than directly in an agent table;
/// used to turn an "unknown field" error into a hint.
const LIMIT_KEYS: &[&str] = &[
    "max_steps",
    "max_segments",
    "max_tokens",
    "max_cost_usd",
    "deadline",
    "max_tool_calls",
    "max_identical_calls",
];

fn parse_file(origin: &str, text: &str) -> Result<FileSpec, ConfigFileError> {
    let de = toml::Deserializer::parse(text).map_err(|e| parse_error(origin, text, None, &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        parse_error(origin, text, Some(path), e.inner())
    })
}

fn parse_error(
    origin: &str,
    text: &str,
    path: Option<String>,
    e: &toml::de::Error,
) -> ConfigFileError {
    let line = e.span().map(|span| line_col(text, span.start));
    let mut message = e.message().trim().to_owned();
    let path = path.filter(|p| !p.is_empty() && p != ".");
    // A limit written directly in an agent table: say where it goes.
    if let Some(field) = message
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
        .map(str::to_owned)
    {
        let table = path.as_deref().and_then(|p| {
            p.strip_suffix(field.as_str())
                .and_then(|t| t.strip_suffix('.'))
                .map(str::to_owned)
        });
        if LIMIT_KEYS.contains(&field.as_str()) {
            if let Some(table) = table.filter(|t| is_agent_table(t)) {
                message.push_str(&format!(
                    " (limits go in a `limits` table: `[{table}.limits]`)"
                ));
            }
        }
    }
    ConfigFileError::Parse {
        origin: origin.to_owned(),
        line,
        path,
        message,
    }
}

/// `defaults` or `agents.NAME`.
fn is_agent_table(path: &str) -> bool {
    path == "defaults"
        || path
            .strip_prefix("agents.")
            .is_some_and(|n| !n.contains('.'))
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

// ----------------------------------------------------------------- checking

struct Checker<'a> {
    problems: Vec<Problem>,
    known_tools: &'a [&'a str],
    base_dir: &'a Path,
}

/// Agent names appear in `POST /tasks` and in `delegate` calls.
fn valid_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Slack user ids: `U…` or `W…` (Enterprise Grid), upper-case letters and
/// digits.
fn valid_slack_user_id(id: &str) -> bool {
    (3..=32).contains(&id.len())
        && (id.starts_with('U') || id.starts_with('W'))
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

fn valid_model(m: &str) -> bool {
    !m.trim().is_empty() && !m.chars().any(char::is_whitespace)
}

impl Checker<'_> {
    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            message: message.into(),
        });
    }

    fn at_least<T: PartialOrd + Copy + From<u8>>(
        &mut self,
        path: String,
        value: Option<T>,
        min: u8,
    ) {
        if value.is_some_and(|v| v < T::from(min)) {
            self.add(path, format!("must be at least {min}"));
        }
    }

    fn check_tool(&mut self, path: String, name: &str) {
        if !self.known_tools.contains(&name) {
            let mut known: Vec<&str> = self.known_tools.to_vec();
            known.sort_unstable();
            self.add(
                path,
                format!("unknown tool `{name}`; known tools: {}", known.join(", ")),
            );
        }
    }

    /// Checks what one table (`defaults` or `agents.NAME`) says, and
    /// replaces a `system_prompt_file` by the file's text.
    fn check_spec(&mut self, at: &str, spec: &mut AgentSpec, is_defaults: bool) {
        if is_defaults {
            if spec.description.is_some() {
                self.add(
                    format!("{at}.description"),
                    "describe each agent in its own table, not in [defaults]",
                );
            }
            if spec.delegates.is_some() {
                self.add(
                    format!("{at}.delegates"),
                    "name delegates in each agent's own table, not in [defaults]",
                );
            }
        }
        if spec
            .description
            .as_deref()
            .is_some_and(|d| d.trim().is_empty())
        {
            self.add(format!("{at}.description"), "must not be empty");
        }
        if let Some(m) = &spec.model {
            if !valid_model(m) {
                self.add(
                    format!("{at}.model"),
                    "must be a model id: not empty, no spaces",
                );
            }
        }
        if let Some(list) = &spec.fallback_models {
            let mut seen = BTreeSet::new();
            for (i, m) in list.iter().enumerate() {
                if !valid_model(m) {
                    self.add(
                        format!("{at}.fallback_models[{i}]"),
                        "must be a model id: not empty, no spaces",
                    );
                } else if !seen.insert(m.as_str()) {
                    self.add(
                        format!("{at}.fallback_models[{i}]"),
                        format!("`{m}` is listed twice"),
                    );
                }
            }
        }
        self.check_prompt(at, spec);
        if let Some(tools) = &spec.tools {
            let mut seen = BTreeSet::new();
            for (i, t) in tools.iter().enumerate() {
                self.check_tool(format!("{at}.tools[{i}]"), t);
                if !seen.insert(t.as_str()) {
                    self.add(format!("{at}.tools[{i}]"), format!("`{t}` is listed twice"));
                }
            }
        }
        if let Some(list) = &spec.delegates {
            for (i, d) in list.iter().enumerate() {
                if !valid_agent_name(d) {
                    self.add(
                        format!("{at}.delegates[{i}]"),
                        format!("`{d}` is not an agent name"),
                    );
                }
            }
        }
        self.at_least(format!("{at}.max_output_tokens"), spec.max_output_tokens, 1);
        self.at_least(
            format!("{at}.max_tool_result_chars"),
            spec.max_tool_result_chars,
            1,
        );
        if let Some(l) = &spec.limits {
            self.check_limits(&format!("{at}.limits"), l);
        }
        if let Some(a) = &spec.approval {
            self.check_approval(&format!("{at}.approval"), a);
        }
        if let Some(c) = &spec.context {
            self.check_context_values(&format!("{at}.context"), c);
        }
        if let Some(e) = &spec.escalation {
            if e.model.as_deref().is_some_and(|m| !valid_model(m)) {
                self.add(
                    format!("{at}.escalation.model"),
                    "must be a model id: not empty, no spaces",
                );
            }
            self.at_least(
                format!("{at}.escalation.after_tool_errors"),
                e.after_tool_errors,
                1,
            );
        }
    }

    fn check_prompt(&mut self, at: &str, spec: &mut AgentSpec) {
        match (&spec.system_prompt, spec.system_prompt_file.take()) {
            (Some(_), Some(_)) => {
                self.add(
                    format!("{at}.system_prompt_file"),
                    "set system_prompt or system_prompt_file, not both",
                );
            }
            (Some(p), None) => {
                if p.trim().is_empty() {
                    self.add(format!("{at}.system_prompt"), "must not be empty");
                }
            }
            (None, Some(file)) => {
                let path = self.base_dir.join(&file);
                match std::fs::read_to_string(&path) {
                    Ok(text) if text.trim().is_empty() => {
                        self.add(
                            format!("{at}.system_prompt_file"),
                            format!("{} is empty", path.display()),
                        );
                    }
                    Ok(text) => spec.system_prompt = Some(text),
                    Err(e) => {
                        self.add(
                            format!("{at}.system_prompt_file"),
                            format!("cannot read {}: {e}", path.display()),
                        );
                    }
                }
            }
            (None, None) => {}
        }
    }

    fn check_limits(&mut self, at: &str, l: &LimitsSpec) {
        self.at_least(format!("{at}.max_steps"), l.max_steps, 1);
        self.at_least(format!("{at}.max_segments"), l.max_segments, 1);
        self.at_least(format!("{at}.max_tokens"), l.max_tokens, 1);
        // Two identical calls can be a legitimate retry; one cannot repeat.
        self.at_least(
            format!("{at}.max_identical_calls"),
            l.max_identical_calls,
            2,
        );
        if let Some(c) = l.max_cost_usd {
            if !(c.is_finite() && c > 0.0) {
                self.add(
                    format!("{at}.max_cost_usd"),
                    "must be a positive amount of US dollars",
                );
            }
        }
        for (tool, cap) in l.max_tool_calls.iter().flatten() {
            self.check_tool(format!("{at}.max_tool_calls.{tool}"), tool);
            if *cap == 0 {
                self.add(
                    format!("{at}.max_tool_calls.{tool}"),
                    "must be at least 1 (to forbid a tool, leave it out of `tools`)",
                );
            }
        }
    }

    fn check_approval(&mut self, at: &str, a: &ApprovalSpec) {
        for (i, r) in a.require.iter().flatten().enumerate() {
            match ApprovalRule::parse(r) {
                Err(m) => self.add(format!("{at}.require[{i}]"), m),
                Ok(rule) if rule.tool != ApprovalRule::ANY_TOOL => {
                    self.check_tool(format!("{at}.require[{i}]"), &rule.tool)
                }
                Ok(_) => {}
            }
        }
        for (i, u) in a.approvers.iter().flatten().enumerate() {
            if !valid_slack_user_id(u) {
                self.add(
                    format!("{at}.approvers[{i}]"),
                    format!("`{u}` is not a Slack user id (like U024BE7LH)"),
                );
            }
        }
    }

    fn check_context_values(&mut self, at: &str, c: &ContextSpec) {
        self.at_least(format!("{at}.window_tokens"), c.window_tokens, 1);
        self.at_least(format!("{at}.keep_last_turns"), c.keep_last_turns, 1);
        self.at_least(
            format!("{at}.trim_tool_results_over_chars"),
            c.trim_tool_results_over_chars,
            1,
        );
        for (name, v) in [
            ("soft_trim_at", c.soft_trim_at),
            ("hard_clear_at", c.hard_clear_at),
            ("compact_at", c.compact_at),
        ] {
            if v.is_some_and(|v| !(v > 0.0 && v <= 1.0)) {
                self.add(
                    format!("{at}.{name}"),
                    "must be a fraction of the window, above 0 and at most 1",
                );
            }
        }
    }

    /// Rules between fields of a resolved agent. Returned rather than
    /// recorded, so that a fault inherited from `[defaults]` is reported
    /// once, at `defaults`, not again for every agent.
    fn cross_check(&self, a: &AgentConfig) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !valid_model(&a.model) {
            out.push((
                "model".to_owned(),
                "no model: set `model` here, in [defaults] or BATON_LLM_MODEL".to_owned(),
            ));
        }
        if a.fallback_models.contains(&a.model) {
            out.push((
                "fallback_models".to_owned(),
                format!("repeats the primary model `{}`", a.model),
            ));
        }
        if let Some(e) = &a.escalation {
            if e.model.is_empty() {
                out.push((
                    "escalation.model".to_owned(),
                    "required when escalating".to_owned(),
                ));
            } else if e.model == a.model {
                out.push((
                    "escalation.model".to_owned(),
                    format!("is the primary model `{}` already", a.model),
                ));
            }
        }
        if a.max_cost_usd.is_some() {
            // A budget that cannot be counted must not pass silently.
            let unpriced = unpriced_models(a);
            if !unpriced.is_empty() {
                let list: Vec<String> = unpriced.iter().map(|m| format!("`{m}`")).collect();
                out.push((
                    "limits.max_cost_usd".to_owned(),
                    format!(
                        "cannot be enforced: no price for {}; add a [prices.\"{}\"] table \
                         with input_per_mtok and output_per_mtok",
                        list.join(", "),
                        unpriced[0]
                    ),
                ));
            }
        }
        let c = &a.context;
        if c.soft_trim_at > c.hard_clear_at {
            out.push((
                "context.soft_trim_at".to_owned(),
                format!(
                    "({}) must not be above hard_clear_at ({})",
                    c.soft_trim_at, c.hard_clear_at
                ),
            ));
        }
        if c.hard_clear_at > c.compact_at {
            out.push((
                "context.hard_clear_at".to_owned(),
                format!(
                    "({}) must not be above compact_at ({})",
                    c.hard_clear_at, c.compact_at
                ),
            ));
        }
        out
    }

    /// Checks every table, merges the layers and builds the agents. `None`
    /// when a problem was recorded.
    fn resolve(&mut self, mut file: FileSpec, base: &AgentConfig) -> Option<AgentsConfig> {
        self.check_spec("defaults", &mut file.defaults, true);
        for (name, spec) in file.agents.iter_mut() {
            let at = format!("agents.{name}");
            if !valid_agent_name(name) {
                self.add(
                    &at,
                    "agent names are lower-case letters, digits, `-` and `_` (at most 64)",
                );
            }
            self.check_spec(&at, spec, false);
        }
        self.at_least(
            "budgets.workspace_monthly_tokens".to_owned(),
            file.budgets.workspace_monthly_tokens,
            1,
        );
        self.at_least(
            "budgets.user_monthly_tokens".to_owned(),
            file.budgets.user_monthly_tokens,
            1,
        );

        let prices = self.check_prices(&file.prices);

        // The template every agent starts from: environment + [defaults],
        // with the file's prices over the built-in ones.
        let mut template = build(base, &file.defaults);
        template.prices = template.prices.with(prices);
        let inherited = self.cross_check(&template);
        for (field, message) in &inherited {
            self.add(format!("defaults.{field}"), message.clone());
        }
        let mut agents: BTreeMap<String, (String, AgentConfig)> = BTreeMap::new();
        agents.insert(
            "default".to_owned(),
            ("defaults".to_owned(), named(template.clone(), "default")),
        );
        for (name, spec) in &file.agents {
            let at = format!("agents.{name}");
            let agent = named(build(&template, spec), name);
            for (field, message) in self.cross_check(&agent) {
                if !inherited.iter().any(|(f, m)| *f == field && *m == message) {
                    self.add(format!("{at}.{field}"), message);
                }
            }
            agents.insert(name.clone(), (at, agent));
        }
        self.check_delegation(&agents);

        let default = agents.remove("default").map(|(_, a)| a).unwrap_or(template);
        let settings = GlobalSettings {
            guard: GuardSettings {
                input_guard: file.guard.input_guard.unwrap_or_default(),
            },
            budgets: BudgetSettings {
                workspace_monthly_tokens: file.budgets.workspace_monthly_tokens,
                user_monthly_tokens: file.budgets.user_monthly_tokens,
            },
        };
        let others = agents.into_values().map(|(_, a)| a).collect();
        self.problems.is_empty().then(|| AgentsConfig {
            agents: Agents::new(default, others),
            settings,
        })
    }

    /// The `[prices]` table: every model id valid, both prices given, each
    /// a finite amount of 0 or more.
    fn check_prices(&mut self, prices: &BTreeMap<String, PriceSpec>) -> Vec<(String, ModelPrice)> {
        let mut out = Vec::with_capacity(prices.len());
        for (model, spec) in prices {
            let at = format!("prices.\"{model}\"");
            if !valid_model(model) {
                self.add(&at, "must be a model id (no spaces)");
            }
            let mut amount = |field: &str, v: Option<f64>| match v {
                None => {
                    self.add(
                        format!("{at}.{field}"),
                        "required (US dollars per million tokens)",
                    );
                    None
                }
                Some(v) if !(v.is_finite() && v >= 0.0) => {
                    self.add(
                        format!("{at}.{field}"),
                        "must be an amount of US dollars per million tokens, 0 or more",
                    );
                    None
                }
                Some(v) => Some(v),
            };
            let input = amount("input_per_mtok", spec.input_per_mtok);
            let output = amount("output_per_mtok", spec.output_per_mtok);
            if let (Some(input_per_mtok), Some(output_per_mtok)) = (input, output) {
                out.push((
                    model.clone(),
                    ModelPrice {
                        input_per_mtok,
                        output_per_mtok,
                    },
                ));
            }
        }
        out
    }

    /// Delegates must exist, the agent must have the `delegate` tool, and
    /// the graph must have no cycle (a child could otherwise start its own
    /// ancestor, without end).
    fn check_delegation(&mut self, agents: &BTreeMap<String, (String, AgentConfig)>) {
        for (at, a) in agents.values() {
            if a.delegates.is_empty() {
                continue;
            }
            if !self.known_tools.contains(&DELEGATE_TOOL) || !a.allows_tool(DELEGATE_TOOL) {
                self.add(
                    format!("{at}.delegates"),
                    format!("the agent cannot delegate: `{DELEGATE_TOOL}` is not among its tools"),
                );
            }
            for (i, d) in a.delegates.iter().enumerate() {
                if !agents.contains_key(d) {
                    self.add(
                        format!("{at}.delegates[{i}]"),
                        format!("no agent named `{d}`"),
                    );
                }
            }
        }
        self.check_cycles(agents);
    }

    /// Three-colour depth-first search over delegation edges; each back
    /// edge closes a cycle, reported at the agent where it starts.
    fn check_cycles(&mut self, agents: &BTreeMap<String, (String, AgentConfig)>) {
        #[derive(Clone, Copy, PartialEq)]
        enum Colour {
            OnPath,
            Done,
        }
        let mut colour: BTreeMap<&str, Colour> = BTreeMap::new();
        for start in agents.keys() {
            if colour.contains_key(start.as_str()) {
                continue;
            }
            colour.insert(start.as_str(), Colour::OnPath);
            let mut stack: Vec<(&str, usize)> = vec![(start.as_str(), 0)];
            while let Some((node, next)) = stack.last().copied() {
                let edges = agents
                    .get(node)
                    .map(|(_, a)| a.delegates.as_slice())
                    .unwrap_or_default();
                let Some(child) = edges.get(next) else {
                    colour.insert(node, Colour::Done);
                    stack.pop();
                    continue;
                };
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                let child = child.as_str();
                match colour.get(child) {
                    Some(Colour::Done) => {}
                    Some(Colour::OnPath) => {
                        let pos = stack.iter().position(|(n, _)| *n == child).unwrap_or(0);
                        let mut shown: Vec<&str> = stack[pos..].iter().map(|(n, _)| *n).collect();
                        shown.push(child);
                        let at = agents
                            .get(child)
                            .map(|(p, _)| p.clone())
                            .unwrap_or_default();
                        self.add(
                            format!("{at}.delegates"),
                            format!("delegation cycle: {}", shown.join(" → ")),
                        );
                    }
                    None if agents.contains_key(child) => {
                        colour.insert(child, Colour::OnPath);
                        stack.push((child, 0));
                    }
                    // Unknown names were reported above.
                    None => {}
                }
            }
        }
    }
}

fn named(mut a: AgentConfig, name: &str) -> AgentConfig {
    a.name = name.to_owned();
    a
}

/// `base` with what `spec` sets laid over it. `spec` has been checked, and
/// its prompt file read.
fn build(base: &AgentConfig, spec: &AgentSpec) -> AgentConfig {
    let mut a = base.clone();
    if let Some(v) = &spec.description {
        a.description = Some(v.trim().to_owned());
    }
    if let Some(v) = &spec.model {
        a.model = v.clone();
    }
    if let Some(v) = &spec.fallback_models {
        a.fallback_models = v.clone();
    }
    if let Some(v) = &spec.system_prompt {
        a.system_prompt = v.clone();
    }
    if let Some(v) = &spec.tools {
        a.tools = Some(v.clone());
    }
    if let Some(v) = &spec.delegates {
        a.delegates = v.clone();
    }
    if let Some(v) = spec.max_output_tokens {
        a.max_tokens = v;
    }
    if let Some(v) = spec.max_tool_result_chars {
        a.max_tool_result_chars = v;
    }
    if let Some(l) = &spec.limits {
        if let Some(v) = l.max_steps {
            a.limits.max_steps = v;
        }
        if let Some(v) = l.max_segments {
            a.limits.max_segments = v;
        }
        if let Some(v) = l.max_tokens {
            a.limits.max_tokens = v;
        }
        if let Some(DurationSpec(d)) = l.deadline {
            // Relative here; ingest adds the task's creation time.
            a.limits.deadline_at = Some(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        }
        if let Some(v) = l.max_cost_usd {
            a.max_cost_usd = Some(v);
        }
        if let Some(v) = l.max_identical_calls {
            a.max_identical_calls = v;
        }
        for (tool, cap) in l.max_tool_calls.iter().flatten() {
            a.tool_call_caps.insert(tool.clone(), *cap);
        }
    }
    if let Some(ap) = &spec.approval {
        if let Some(v) = &ap.require {
            a.approval.require = Some(
                v.iter()
                    .filter_map(|r| ApprovalRule::parse(r).ok())
                    .collect(),
            );
        }
        if let Some(v) = &ap.approvers {
            a.approval.approvers = v.clone();
        }
        if let Some(DurationSpec(d)) = ap.expires_after {
            a.approval.expires_after = d;
        }
    }
    if let Some(c) = &spec.context {
        let s = &mut a.context;
        if c.window_tokens.is_some() {
            s.window_tokens = c.window_tokens;
        }
        if let Some(v) = c.keep_last_turns {
            s.keep_last_turns = v;
        }
        if let Some(v) = c.soft_trim_at {
            s.soft_trim_at = v;
        }
        if let Some(v) = c.hard_clear_at {
            s.hard_clear_at = v;
        }
        if let Some(v) = c.compact_at {
            s.compact_at = v;
        }
        if let Some(v) = c.trim_tool_results_over_chars {
            s.trim_tool_results_over_chars = v;
        }
    }
    if let Some(e) = &spec.escalation {
        let prev = a.escalation.take();
        a.escalation = Some(Escalation {
            model: e
                .model
                .clone()
                .or_else(|| prev.as_ref().map(|p| p.model.clone()))
                .unwrap_or_default(),
            after_tool_errors: e
                .after_tool_errors
                .or(prev.map(|p| p.after_tool_errors))
                .unwrap_or(3),
        });
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KNOWN: &[&str] = &[
        "current_time",
        "http_request",
        "remember",
        "recall",
        "delegate",
    ];
    const DOCS: &str = include_str!("../../../docs/configuration.md");

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
        assert_eq!(d.limits.deadline_at, Some(2 * 3600 * 1000));
        assert_eq!(d.max_cost_usd, Some(2.0));
        assert_eq!(d.tool_call_caps.get("http_request"), Some(&20));
        assert_eq!(d.approval.approvers, ["U024BE7LH"]);
        assert_eq!(d.approval.expires_after, Duration::from_secs(3600));
        assert!(d
            .approval
            .requires_approval("http_request", &json!({"method": "POST"}), false));
        assert_eq!(d.context.window_tokens, Some(200_000));
        assert_eq!(d.context.keep_last_turns, 20);

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
        assert_eq!(r.limits.deadline_at, Some(15 * 60 * 1000));
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

        assert_eq!(cfg.settings.guard.input_guard, InputGuardMode::Warn);
        assert_eq!(
            cfg.settings.budgets.workspace_monthly_tokens,
            Some(5_000_000)
        );
        assert_eq!(cfg.settings.budgets.user_monthly_tokens, Some(500_000));
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
        let cfg =
            load("[prices.m]\ninput_per_mtok = 1\noutput_per_mtok = 1\n[agents.r]\n").unwrap();
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
                "agents.r.approval.approvers[0]: `alice` is not a Slack user id",
            ),
            (
                "[agents.r.approval]\napprovers = [\"C0123ABCD\"]\n",
                "agents.r.approval.approvers[0]: `C0123ABCD` is not a Slack user id",
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
        let bad = |n: &str| {
            (n == AGENTS_TOML_ENV).then(|| "[agents.z.limits]\nmax_steps = 0\n".to_owned())
        };
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
        assert!(rules.may_decide("U1", Some("U1")));
        assert!(!rules.may_decide("U2", Some("U1")));
        assert!(!rules.may_decide("U2", None));
        let rules = ApprovalRules {
            approvers: vec!["U2".into()],
            ..rules
        };
        assert!(rules.may_decide("U2", Some("U1")));
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
}
