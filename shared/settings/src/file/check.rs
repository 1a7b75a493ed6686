//! Checking the agents file: every problem, named by its field path.

use super::build::{build, named};
use super::checker::{
    check_url_template, valid_agent_name, valid_model, valid_slack_user_id, Checker,
};
use super::duration::DurationSpec;
use super::schema::*;
use crate::agent::{AgentConfig, Agents};
use crate::approval::*;
use crate::deployment::*;
use crate::http_tool::{
    parse_template, valid_header_name, valid_tool_name, HttpToolDecl, TemplatePart,
    DEFAULT_HTTP_TOOL_TIMEOUT,
};
use crate::price::{unpriced_models, ModelPrice};
use std::collections::{BTreeMap, BTreeSet};

// ----------------------------------------------------------------- checking

/// Whether a declared tool may not set `header` (lowercase): the HTTP
/// client frames the request itself, and Baton sends the `Idempotency-Key`.
fn reserved_header(header: &str) -> bool {
    baton_core::tool::CLIENT_MANAGED_HEADERS.contains(&header) || header == "idempotency-key"
}

impl Checker<'_> {
    fn check_tool(&mut self, path: String, name: &str) {
        if let Some(server) = crate::mcp::server_of_entry(name) {
            if !self.mcp_servers.iter().any(|s| s == server) {
                let declared = if self.mcp_servers.is_empty() {
                    "none is declared; add an [mcp.NAME] table".to_owned()
                } else {
                    format!("declared: {}", self.mcp_servers.join(", "))
                };
                self.add(path, format!("unknown MCP server `{server}`; {declared}"));
            }
            return;
        }
        if !self.known_tools.contains(&name) && !self.declared_tools.iter().any(|d| d == name) {
            let mut known: Vec<&str> = self.known_tools.to_vec();
            known.extend(self.declared_tools.iter().map(String::as_str));
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
        let hosts = spec
            .http_request
            .as_ref()
            .and_then(|h| h.allow_hosts.as_ref());
        for (i, pattern) in hosts.into_iter().flatten().enumerate() {
            if let Err(why) = baton_core::egress::HostPattern::parse(pattern) {
                self.add(format!("{at}.http_request.allow_hosts[{i}]"), why);
            }
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
        self.check_judgment(at, spec);
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
        if let Some(s) = &spec.slack {
            self.check_slack(&format!("{at}.slack"), s);
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
        self.at_least(format!("{at}.loop_window"), l.loop_window, 2);
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
                // An MCP server's tools are listed at run time: a rule may
                // name one (`SERVER__TOOL`) of a declared server.
                Ok(rule) if self.names_mcp_tool(&rule.tool) => {}
                Ok(rule) if rule.tool != ApprovalRule::ANY_TOOL => {
                    self.check_tool(format!("{at}.require[{i}]"), &rule.tool)
                }
                Ok(_) => {}
            }
        }
        for (i, u) in a.approvers.iter().flatten().enumerate() {
            if !valid_slack_user_id(u) && !self.declared_roles.contains(u) {
                self.add(
                    format!("{at}.approvers[{i}]"),
                    super::roles::not_an_approver(u),
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
                "no model: set `model` here, in [defaults], `[models].default` or BATON_LLM_MODEL"
                    .to_owned(),
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
    pub(super) fn resolve(
        &mut self,
        mut file: FileSpec,
        base: &AgentConfig,
    ) -> Option<AgentsConfig> {
        self.declared_tools = file.http_tools.keys().cloned().collect();
        self.mcp_servers = file.mcp.keys().cloned().collect();
        self.declared_modules = file.modules.keys().cloned().collect();
        self.declared_roles = file.roles.keys().cloned().collect();
        let roles = self.check_roles(&file.roles);
        let http_tools = self.check_http_tools(&file.http_tools, &file.oauth);
        let mcp_servers = self.check_mcp_servers(&file.mcp);
        let oauth_providers = self.check_oauth_providers(&file.oauth, &file.mcp);
        let connection = self.check_connection(&file.connection);
        let modules = self.check_modules(&file.modules);
        self.check_models("models", &file.models);
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
        let (person_budgets, limits) = self.check_capacity(&file.budgets, &file.limits);

        self.at_least(
            "schedules.max_per_user".to_owned(),
            file.schedules.max_per_user,
            1,
        );
        self.at_least(
            "schedules.max_per_team".to_owned(),
            file.schedules.max_per_team,
            1,
        );

        let prices = self.check_prices(&file.prices);

        // The template every agent starts from: environment + [models] +
        // [defaults], with the file's prices over the built-in ones.
        let mut tiered = base.clone();
        super::judgment::apply_models(&mut tiered, &file.models);
        let mut template = build(&tiered, &file.defaults, &modules);
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
            let agent = named(build(&template, spec, &modules), name);
            for (field, message) in self.cross_check(&agent) {
                if !inherited.iter().any(|(f, m)| *f == field && *m == message) {
                    self.add(format!("{at}.{field}"), message);
                }
            }
            agents.insert(name.clone(), (at, agent));
        }
        self.check_delegation(&agents);
        self.check_cost_priced(
            person_budgets.first_cost_key.as_deref(),
            agents.iter().map(|(name, (_, a))| (name.as_str(), a)),
        );
        let names: Vec<&str> = agents.keys().map(String::as_str).collect();
        let routes = self.check_routes(&file.routes, &names);
        let policy = self.read_policy(&file.policy);

        let default = agents.remove("default").map(|(_, a)| a).unwrap_or(template);
        let settings = GlobalSettings {
            guard: GuardSettings {
                input_guard: file.guard.input_guard.unwrap_or_default(),
            },
            budgets: BudgetSettings {
                workspace_monthly_tokens: file.budgets.workspace_monthly_tokens,
                user_monthly_tokens: file.budgets.user_monthly_tokens,
                users: person_budgets.users,
                roles: person_budgets.roles,
                workspace_monthly_cost_micros: person_budgets.workspace_cost_micros,
                user_monthly_cost_micros: person_budgets.user_cost_micros,
                users_cost_micros: person_budgets.users_cost_micros,
                roles_cost_micros: person_budgets.roles_cost_micros,
            },
            limits,
            schedules: {
                let d = ScheduleSettings::default();
                ScheduleSettings {
                    max_per_user: file.schedules.max_per_user.unwrap_or(d.max_per_user),
                    max_per_team: file.schedules.max_per_team.unwrap_or(d.max_per_team),
                    min_interval: file
                        .schedules
                        .min_interval
                        .as_ref()
                        .map_or(d.min_interval, |DurationSpec(m)| *m),
                }
            },
            routes,
            roles,
            connection,
        };
        let mut default = default;
        let mut others: Vec<AgentConfig> = agents.into_values().map(|(_, a)| a).collect();
        if !self.declared_tools.is_empty() || !self.mcp_servers.is_empty() {
            // A declared tool or server is enabled by naming it: an agent
            // without a `tools` list gets the built-in tools only.
            let builtins: Vec<String> = self.known_tools.iter().map(|t| (*t).to_owned()).collect();
            for a in std::iter::once(&mut default).chain(others.iter_mut()) {
                if a.tools.is_none() {
                    a.tools = Some(builtins.clone());
                }
            }
        }
        self.problems.is_empty().then(|| AgentsConfig {
            agents: Agents::new(default, others),
            settings,
            http_tools,
            mcp_servers,
            oauth_providers,
            policy,
        })
    }

    /// `[policy]`: one of `file` or `text`, the file read now so a missing
    /// one is a start-up error like any other.
    fn read_policy(&mut self, spec: &PolicySpec) -> Option<PolicySource> {
        match (&spec.file, &spec.text) {
            (Some(_), Some(_)) => {
                self.add("policy", "give `file` or `text`, not both");
                None
            }
            (Some(file), None) => {
                let path = self.base_dir.join(file);
                match std::fs::read_to_string(&path) {
                    Ok(text) => Some(PolicySource {
                        origin: path.display().to_string(),
                        text,
                    }),
                    Err(e) => {
                        self.add(
                            "policy.file",
                            format!("cannot read {}: {e}", path.display()),
                        );
                        None
                    }
                }
            }
            (None, Some(text)) => Some(PolicySource {
                origin: "policy.text".to_owned(),
                text: text.clone(),
            }),
            (None, None) => None,
        }
    }

    /// The `[http_tools]` tables: names, methods, URLs, headers, the
    /// parameters' schema (its shape; the tools crate compiles it), and the
    /// syntax of `${NAME}` references (resolved later, by the runtime).
    fn check_http_tools(
        &mut self,
        tools: &BTreeMap<String, HttpToolSpec>,
        providers: &BTreeMap<String, super::connection::OAuthSpec>,
    ) -> Vec<HttpToolDecl> {
        let mut out = Vec::with_capacity(tools.len());
        for (name, spec) in tools {
            let at = format!("http_tools.{name}");
            let before = self.problems.len();
            if !valid_tool_name(name) {
                self.add(
                    &at,
                    "tool names are letters, digits, `_` and `-` (1 to 64 characters)",
                );
            } else if self.known_tools.contains(&name.as_str()) {
                self.add(&at, format!("`{name}` is the name of a built-in tool"));
            }
            let description = match spec.description.as_deref().map(str::trim) {
                None => {
                    self.add(
                        format!("{at}.description"),
                        "required: what the tool does, for the model",
                    );
                    String::new()
                }
                Some("") => {
                    self.add(format!("{at}.description"), "must not be empty");
                    String::new()
                }
                Some(d) => d.to_owned(),
            };
            let method = match spec.method.as_deref().map(str::trim) {
                None => {
                    self.add(
                        format!("{at}.method"),
                        format!("required: one of {}", HTTP_METHODS.join(", ")),
                    );
                    String::new()
                }
                Some(m) if HTTP_METHODS.contains(&m.to_ascii_uppercase().as_str()) => {
                    m.to_ascii_uppercase()
                }
                Some(m) => {
                    self.add(
                        format!("{at}.method"),
                        format!(
                            "unknown HTTP method `{m}`; expected one of {}",
                            HTTP_METHODS.join(", ")
                        ),
                    );
                    String::new()
                }
            };
            let url = match spec.url.as_deref().map(str::trim) {
                None => {
                    self.add(format!("{at}.url"), "required: an http:// or https:// URL");
                    String::new()
                }
                Some(u) => {
                    if let Err(m) = check_url_template(u) {
                        self.add(format!("{at}.url"), m);
                    }
                    u.to_owned()
                }
            };
            self.check_headers(&at, &spec.headers, reserved_header);
            let auth = self.check_http_tool_auth(&at, spec.auth.as_ref(), &spec.headers, providers);
            let parameters = match &spec.parameters {
                None => serde_json::json!({"type": "object", "properties": {}}),
                Some(p) => match serde_json::to_value(p) {
                    Ok(v @ serde_json::Value::Object(_))
                        if v.get("type") == Some(&serde_json::json!("object")) =>
                    {
                        v
                    }
                    Ok(_) => {
                        self.add(
                            format!("{at}.parameters"),
                            "must be a JSON Schema of an object: a table with type = \"object\"",
                        );
                        serde_json::Value::Null
                    }
                    Err(e) => {
                        self.add(format!("{at}.parameters"), format!("cannot be JSON: {e}"));
                        serde_json::Value::Null
                    }
                },
            };
            let timeout = spec
                .timeout
                .map_or(DEFAULT_HTTP_TOOL_TIMEOUT, |DurationSpec(d)| d);
            if self.problems.len() == before {
                out.push(HttpToolDecl {
                    name: name.clone(),
                    description,
                    method,
                    url,
                    headers: spec.headers.clone(),
                    parameters,
                    timeout,
                    auth,
                });
            }
        }
        out
    }

    /// `headers` of a declared tool or server at `at`: valid names, none
    /// that `reserved` says Baton or the client sets, well-formed `${NAME}`
    /// references and no control characters.
    pub(super) fn check_headers(
        &mut self,
        at: &str,
        headers: &BTreeMap<String, String>,
        reserved: fn(&str) -> bool,
    ) {
        for (header, value) in headers {
            let path = format!("{at}.headers.{header}");
            if !valid_header_name(header) {
                self.add(&path, "not a valid HTTP header name");
            } else if reserved(&header.to_ascii_lowercase()) {
                self.add(
                    &path,
                    "set by Baton or the HTTP client; it cannot be declared",
                );
            }
            match parse_template(value) {
                Err(m) => self.add(&path, m),
                Ok(parts) => {
                    let literal: String = parts
                        .iter()
                        .map(|p| match p {
                            TemplatePart::Text(t) => t.as_str(),
                            TemplatePart::Var(_) => "x",
                        })
                        .collect();
                    if literal.chars().any(|c| c.is_control()) {
                        self.add(&path, "header values cannot hold control characters");
                    }
                }
            }
        }
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
