//! The `[[routes]]` entries: which agent serves Slack messages where.

use super::checker::Checker;
use crate::route::{valid_slack_team_id, Route, RouteChannel, Routes};
use serde::Deserialize;

/// `[[routes]]`: Slack messages in `team` and `channel` (either may be
/// left out) go to `agent`. The key names are a contract
/// (docs/configuration.md).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteSpec {
    pub(super) team: Option<String>,
    pub(super) channel: Option<String>,
    pub(super) agent: Option<String>,
}

impl Checker<'_> {
    /// The routes, each naming one of `agents` (the defined agents'
    /// names, `default` among them), a Slack team id and a channel id or
    /// `"dm"`; a route an earlier one always takes first is refused too.
    pub(super) fn check_routes(&mut self, specs: &[RouteSpec], agents: &[&str]) -> Routes {
        // With their index in the file, for messages.
        let mut routes: Vec<(usize, Route)> = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter().enumerate() {
            let at = format!("routes[{i}]");
            let before = self.problems.len();
            let agent = match spec.agent.as_deref().map(str::trim) {
                None | Some("") => {
                    self.add(
                        format!("{at}.agent"),
                        format!(
                            "required: the agent to serve; agents: {}",
                            agents.join(", ")
                        ),
                    );
                    String::new()
                }
                Some(a) if !agents.contains(&a) => {
                    self.add(
                        format!("{at}.agent"),
                        format!("unknown agent `{a}`; agents: {}", agents.join(", ")),
                    );
                    String::new()
                }
                Some(a) => a.to_owned(),
            };
            let team = spec.team.as_deref().map(str::trim);
            if let Some(t) = team.filter(|t| !valid_slack_team_id(t)) {
                self.add(
                    format!("{at}.team"),
                    format!("`{t}` is not a Slack team id (like T061EG9R6)"),
                );
            }
            let channel = spec.channel.as_deref().map(str::trim).and_then(|c| {
                let parsed = RouteChannel::parse(c);
                if parsed.is_none() {
                    self.add(
                        format!("{at}.channel"),
                        format!(
                            "`{c}` is not a Slack channel id (like C024BE91L) or \"{}\"",
                            RouteChannel::DM
                        ),
                    );
                }
                parsed
            });
            if self.problems.len() != before {
                continue;
            }
            let route = Route {
                team: team.map(str::to_owned),
                channel,
                agent,
            };
            if let Some((j, _)) = routes.iter().find(|(_, r)| route.is_shadowed_by(r)) {
                self.add(
                    &at,
                    format!(
                        "never used: routes[{j}] comes first and matches every message this one does"
                    ),
                );
                continue;
            }
            routes.push((i, route));
        }
        Routes::new(routes.into_iter().map(|(_, r)| r).collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::file::AgentsSource;
    use crate::route::{RouteChannel, DEFAULT_AGENT};
    use crate::AgentConfig;

    fn load(text: &str) -> Result<crate::AgentsConfig, String> {
        AgentsSource::new("baton.toml", text, "/nonexistent")
            .load(&AgentConfig::new("default", "m"), &["current_time"])
            .map_err(|e| e.to_string())
    }

    const AGENTS: &str = "[agents.researcher]\nsystem_prompt = \"r\"\n\n\
                          [agents.assistant]\nsystem_prompt = \"a\"\n";

    #[test]
    fn routes_are_read_in_order() {
        let text = format!(
            "{AGENTS}\n[[routes]]\nteam = \"T0A\"\nchannel = \"C0RESEARCH\"\nagent = \"researcher\"\n\n\
             [[routes]]\nchannel = \"dm\"\nagent = \"assistant\"\n\n\
             [[routes]]\nteam = \"T0B\"\nagent = \"default\"\n"
        );
        let c = load(&text).unwrap();
        let routes: Vec<_> = c.settings.routes.iter().cloned().collect();
        assert_eq!(routes.len(), 3);
        assert_eq!(routes[0].team.as_deref(), Some("T0A"));
        assert_eq!(
            routes[0].channel,
            Some(RouteChannel::Id("C0RESEARCH".into()))
        );
        assert_eq!(routes[1].channel, Some(RouteChannel::Dm));
        assert_eq!(
            (routes[2].team.as_deref(), &routes[2].channel),
            (Some("T0B"), &None)
        );
        let r = &c.settings.routes;
        assert_eq!(r.agent_for("T0A", "C0RESEARCH", false), "researcher");
        assert_eq!(r.agent_for("T0C", "D0X", true), "assistant");
        assert_eq!(r.agent_for("T0C", "C0RESEARCH", false), DEFAULT_AGENT);
        // Without routes, everything goes to `default`.
        assert!(load(AGENTS).unwrap().settings.routes.is_empty());
    }

    #[test]
    fn bad_routes_name_the_key() {
        let cases: Vec<(String, &str)> = vec![
            (
                format!("{AGENTS}[[routes]]\nchannel = \"C0X\"\nagent = \"writer\"\n"),
                "routes[0].agent: unknown agent `writer`; agents: assistant, default, researcher",
            ),
            (
                "[[routes]]\nchannel = \"C0X\"\n".into(),
                "routes[0].agent: required: the agent to serve; agents: default",
            ),
            (
                "[[routes]]\nchannel = \"#general\"\nagent = \"default\"\n".into(),
                "routes[0].channel: `#general` is not a Slack channel id (like C024BE91L) or \"dm\"",
            ),
            (
                "[[routes]]\nchannel = \"DM\"\nagent = \"default\"\n".into(),
                "routes[0].channel: `DM` is not a Slack channel id",
            ),
            (
                "[[routes]]\nteam = \"acme\"\nagent = \"default\"\n".into(),
                "routes[0].team: `acme` is not a Slack team id (like T061EG9R6)",
            ),
            (
                "[[routes]]\nchanel = \"C0X\"\nagent = \"default\"\n".into(),
                "routes[0].chanel: unknown field `chanel`",
            ),
            (
                "[[routes]]\nchannel = \"C0X\"\nagent = \"default\"\n\
                 [[routes]]\nteam = \"T0A\"\nchannel = \"C0X\"\nagent = \"default\"\n"
                    .into(),
                "routes[1]: never used: routes[0] comes first",
            ),
            (
                "[[routes]]\nchannel = \"dm\"\nagent = \"default\"\n\
                 [[routes]]\nchannel = \"C0X\"\nagent = \"default\"\n\
                 [[routes]]\nchannel = \"D0X\"\nagent = \"default\"\n"
                    .into(),
                "routes[2]: never used: routes[0] comes first",
            ),
            ("[routes]\nagent = \"default\"\n".into(), "routes: invalid type"),
        ];
        for (text, expected) in cases {
            let e = load(&text).map(|_| ()).expect_err(&text);
            assert!(e.contains(expected), "expected `{expected}` in:\n{e}");
        }
    }
}
