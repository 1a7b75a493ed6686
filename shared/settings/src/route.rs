//! Routes: which agent serves a Slack message, by workspace and channel —
//! the `[[routes]]` of the agents file (`docs/configuration.md`). The first
//! route that matches a message names its agent; a message no route
//! matches goes to [`DEFAULT_AGENT`]. Routes are for Slack only: `POST
//! /tasks` names its agent itself.

/// The agent that serves a message no route matches.
pub const DEFAULT_AGENT: &str = "default";

/// The `channel` of a route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteChannel {
    /// `"dm"`: any direct message with the bot.
    Dm,
    /// One conversation, by its Slack id (`C…`, `G…`, `D…`).
    Id(String),
}

impl RouteChannel {
    /// How a route names direct messages.
    pub const DM: &'static str = "dm";

    /// `"dm"` or a Slack channel id; `None` for anything else.
    pub fn parse(text: &str) -> Option<RouteChannel> {
        if text == Self::DM {
            Some(RouteChannel::Dm)
        } else if valid_slack_channel_id(text) {
            Some(RouteChannel::Id(text.to_owned()))
        } else {
            None
        }
    }

    fn matches(&self, channel: &str, is_dm: bool) -> bool {
        match self {
            RouteChannel::Dm => is_dm,
            RouteChannel::Id(id) => id == channel,
        }
    }

    /// Whether every conversation `other` matches, this matches too.
    fn covers(&self, other: &RouteChannel) -> bool {
        match (self, other) {
            // A `D…` id is a direct-message conversation.
            (RouteChannel::Dm, RouteChannel::Id(id)) => id.starts_with('D'),
            _ => self == other,
        }
    }
}

/// One `[[routes]]` entry: messages in `team` (any when `None`) and
/// `channel` (any when `None`) go to `agent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// A Slack workspace id (`T…`).
    pub team: Option<String>,
    pub channel: Option<RouteChannel>,
    /// The name of a defined agent (checked when the file is loaded).
    pub agent: String,
}

impl Route {
    /// Whether a message in workspace `team`, conversation `channel`
    /// (a direct message with the bot when `is_dm`) is this route's.
    pub fn matches(&self, team: &str, channel: &str, is_dm: bool) -> bool {
        self.team.as_deref().is_none_or(|t| t == team)
            && self
                .channel
                .as_ref()
                .is_none_or(|c| c.matches(channel, is_dm))
    }

    /// Whether `earlier`, listed before this route, matches every message
    /// this one does, so that this one is never used.
    pub fn is_shadowed_by(&self, earlier: &Route) -> bool {
        let team = match (&earlier.team, &self.team) {
            (None, _) => true,
            (Some(e), Some(t)) => e == t,
            (Some(_), None) => false,
        };
        let channel = match (&earlier.channel, &self.channel) {
            (None, _) => true,
            (Some(e), Some(c)) => e.covers(c),
            (Some(_), None) => false,
        };
        team && channel
    }
}

/// The routes of a deployment, in the file's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes(Vec<Route>);

impl Routes {
    pub fn new(routes: Vec<Route>) -> Self {
        Routes(routes)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.0.iter()
    }

    /// The agent that serves a Slack message in workspace `team`,
    /// conversation `channel` (a direct message with the bot when
    /// `is_dm`): the first matching route's, else [`DEFAULT_AGENT`].
    pub fn agent_for(&self, team: &str, channel: &str, is_dm: bool) -> &str {
        self.0
            .iter()
            .find(|r| r.matches(team, channel, is_dm))
            .map_or(DEFAULT_AGENT, |r| r.agent.as_str())
    }
}

/// Upper-case letters and digits after one of `prefixes`, 3 to 32 in all
/// (like Slack's ids).
fn valid_slack_id(id: &str, prefixes: &[char]) -> bool {
    (3..=32).contains(&id.len())
        && id.starts_with(prefixes)
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// Slack conversation ids: `C…` (channel), `G…` (private channel or group
/// DM), `D…` (direct message).
pub fn valid_slack_channel_id(id: &str) -> bool {
    valid_slack_id(id, &['C', 'G', 'D'])
}

/// Slack workspace (team) ids: `T…`.
pub fn valid_slack_team_id(id: &str) -> bool {
    valid_slack_id(id, &['T'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(team: Option<&str>, channel: Option<&str>, agent: &str) -> Route {
        Route {
            team: team.map(str::to_owned),
            channel: channel.map(|c| RouteChannel::parse(c).expect(c)),
            agent: agent.to_owned(),
        }
    }

    #[test]
    fn the_first_matching_route_picks_the_agent() {
        let routes = Routes::new(vec![
            route(Some("T0A"), Some("C0OPS"), "oncall"),
            route(None, Some("C0OPS"), "ops"),
            route(None, Some("dm"), "assistant"),
            route(Some("T0B"), None, "team-b"),
        ]);
        assert_eq!(routes.agent_for("T0A", "C0OPS", false), "oncall");
        assert_eq!(routes.agent_for("T0B", "C0OPS", false), "ops");
        assert_eq!(routes.agent_for("T0A", "D0ME", true), "assistant");
        assert_eq!(routes.agent_for("T0B", "D0ME", true), "assistant");
        assert_eq!(routes.agent_for("T0B", "C0OTHER", false), "team-b");
        assert_eq!(routes.agent_for("T0A", "C0OTHER", false), DEFAULT_AGENT);
        assert_eq!(
            Routes::default().agent_for("T0A", "C0OPS", false),
            "default"
        );
    }

    #[test]
    fn channels_are_ids_or_dm() {
        assert_eq!(RouteChannel::parse("dm"), Some(RouteChannel::Dm));
        for id in ["C024BE91L", "G0PRIVATE", "D0DIRECT"] {
            assert_eq!(RouteChannel::parse(id), Some(RouteChannel::Id(id.into())));
        }
        for bad in [
            "",
            "DM",
            "im",
            "#general",
            "c024be91l",
            "U024BE7LH",
            "C",
            "C0 X",
        ] {
            assert_eq!(RouteChannel::parse(bad), None, "{bad}");
        }
        assert!(valid_slack_team_id("T061EG9R6"));
        assert!(!valid_slack_team_id("E061EG9R6") && !valid_slack_team_id("T"));
    }

    #[test]
    fn a_route_after_a_broader_one_is_shadowed() {
        let any = route(None, None, "a");
        let ops = route(None, Some("C0OPS"), "a");
        let ops_in_a = route(Some("T0A"), Some("C0OPS"), "a");
        let dm = route(None, Some("dm"), "a");
        let one_dm = route(None, Some("D0ME"), "a");
        let team_a = route(Some("T0A"), None, "a");
        assert!(ops.is_shadowed_by(&any) && dm.is_shadowed_by(&any));
        assert!(ops_in_a.is_shadowed_by(&ops) && ops_in_a.is_shadowed_by(&team_a));
        assert!(ops.is_shadowed_by(&ops.clone()));
        assert!(one_dm.is_shadowed_by(&dm));
        assert!(!ops.is_shadowed_by(&ops_in_a) && !team_a.is_shadowed_by(&ops_in_a));
        assert!(!dm.is_shadowed_by(&one_dm) && !ops.is_shadowed_by(&dm));
        assert!(!any.is_shadowed_by(&team_a));
    }
}
