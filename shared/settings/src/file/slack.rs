//! `[agents.NAME.slack]`: the agent's Slack surfaces (docs/configuration.md).

use super::checker::Checker;
use super::duration::DurationSpec;
use crate::slack::{
    AgentSlack, SuggestedPrompt, MAX_PROMPT_MESSAGE_CHARS, MAX_PROMPT_TITLE_CHARS,
    MAX_SUGGESTED_PROMPTS, MAX_THREAD_CONTEXT,
};
use serde::Deserialize;

/// `[agents.NAME.slack]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SlackSpec {
    pub(super) suggested_prompts: Option<Vec<PromptSpec>>,
    pub(super) prompts_title: Option<String>,
    pub(super) thread_context: Option<u32>,
    pub(super) ack_reaction: Option<String>,
    pub(super) progress_after: Option<DurationSpec>,
}

/// The longest reaction name Slack has (custom emoji names are at most
/// 100 characters).
const MAX_REACTION_CHARS: usize = 100;

/// `{title = "…", message = "…"}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PromptSpec {
    pub(super) title: Option<String>,
    pub(super) message: Option<String>,
}

impl Checker<'_> {
    /// Checks `[AT.slack]`: at most four prompts, each with a title and a
    /// message, within bounds.
    pub(super) fn check_slack(&mut self, at: &str, s: &SlackSpec) {
        let prompts = s.suggested_prompts.as_deref().unwrap_or_default();
        if prompts.len() > MAX_SUGGESTED_PROMPTS {
            self.add(
                format!("{at}.suggested_prompts"),
                format!(
                    "at most {MAX_SUGGESTED_PROMPTS} prompts (Slack shows no more), got {}",
                    prompts.len()
                ),
            );
        }
        for (i, p) in prompts.iter().enumerate() {
            let here = format!("{at}.suggested_prompts[{i}]");
            self.text(
                &format!("{here}.title"),
                p.title.as_deref(),
                MAX_PROMPT_TITLE_CHARS,
                true,
            );
            self.text(
                &format!("{here}.message"),
                p.message.as_deref(),
                MAX_PROMPT_MESSAGE_CHARS,
                true,
            );
        }
        self.text(
            &format!("{at}.prompts_title"),
            s.prompts_title.as_deref(),
            MAX_PROMPT_TITLE_CHARS,
            false,
        );
        if s.thread_context.is_some_and(|n| n > MAX_THREAD_CONTEXT) {
            self.add(
                format!("{at}.thread_context"),
                format!("at most {MAX_THREAD_CONTEXT} messages"),
            );
        }
        if let Some(name) = &s.ack_reaction {
            // A name as Slack spells it: lowercase letters, digits, `_`,
            // `-`, `+` and `'` (`+1`, `white_check_mark`), no colons.
            let fine = name.chars().count() <= MAX_REACTION_CHARS
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-+'".contains(c));
            if !fine {
                self.add(
                    format!("{at}.ack_reaction"),
                    "an emoji name such as \"eyes\" (no colons), or \"\" for no reactions",
                );
            }
        }
    }

    fn text(&mut self, path: &str, value: Option<&str>, max: usize, required: bool) {
        match value.map(str::trim) {
            None if required => self.add(path, "required"),
            None => {}
            Some("") => self.add(path, "must not be empty"),
            Some(v) if v.chars().count() > max => {
                self.add(path, format!("at most {max} characters"))
            }
            Some(_) => {}
        }
    }
}

/// `base` with what a checked `spec` sets laid over it (lists replace
/// whole, like the other lists of the file).
pub(super) fn apply(base: &mut AgentSlack, spec: &SlackSpec) {
    if let Some(list) = &spec.suggested_prompts {
        base.suggested_prompts = list
            .iter()
            .map(|p| SuggestedPrompt {
                title: p.title.as_deref().unwrap_or_default().trim().to_owned(),
                message: p.message.as_deref().unwrap_or_default().trim().to_owned(),
            })
            .collect();
    }
    if let Some(t) = &spec.prompts_title {
        base.prompts_title = Some(t.trim().to_owned());
    }
    if let Some(n) = spec.thread_context {
        base.thread_context = n;
    }
    if let Some(name) = &spec.ack_reaction {
        base.ack_reaction = Some(name.clone()).filter(|n| !n.is_empty());
    }
    if let Some(DurationSpec(d)) = spec.progress_after {
        base.progress_after = d;
    }
}

#[cfg(test)]
mod tests {
    use crate::{AgentConfig, AgentsSource, SuggestedPrompt};
    use std::path::Path;

    fn load(text: &str) -> Result<crate::AgentsConfig, crate::ConfigFileError> {
        AgentsSource::new("baton.toml", text, Path::new("/nonexistent"))
            .load(&AgentConfig::new("default", "m"), &[])
    }

    #[test]
    fn prompts_are_read_and_layered() {
        let c = load(
            r#"
[defaults.slack]
prompts_title = "Try"
suggested_prompts = [{ title = "Status", message = "What is the deploy status?" }]

[agents.quiet.slack]
suggested_prompts = []
"#,
        )
        .expect("valid");
        let d = &c.agents.resolve("default").slack;
        assert_eq!(d.prompts_title.as_deref(), Some("Try"));
        assert_eq!(
            d.suggested_prompts,
            [SuggestedPrompt {
                title: "Status".into(),
                message: "What is the deploy status?".into()
            }]
        );
        let q = &c.agents.resolve("quiet").slack;
        assert!(q.suggested_prompts.is_empty());
        assert_eq!(q.prompts_title.as_deref(), Some("Try"));
    }

    #[test]
    fn thread_and_progress_keys_are_read_and_layered() {
        let c = load(
            r#"
[defaults.slack]
thread_context = 20
progress_after = "30s"

[agents.quiet.slack]
ack_reaction = ""
thread_context = 0
"#,
        )
        .expect("valid");
        let d = &c.agents.resolve("default").slack;
        assert_eq!(d.thread_context, 20);
        assert_eq!(d.ack_reaction.as_deref(), Some("eyes"));
        assert_eq!(d.progress_after, std::time::Duration::from_secs(30));
        let q = &c.agents.resolve("quiet").slack;
        assert_eq!((q.thread_context, q.ack_reaction.as_deref()), (0, None));
        assert_eq!(q.progress_after, std::time::Duration::from_secs(30));
        let plain = load("").expect("valid");
        let p = &plain.agents.resolve("default").slack;
        assert_eq!(
            (p.thread_context, p.ack_reaction.as_deref()),
            (50, Some("eyes"))
        );
        assert_eq!(p.progress_after, std::time::Duration::from_secs(10));

        let e = load("[agents.a.slack]\nthread_context = 5000\nack_reaction = \":eyes:\"\n")
            .expect_err("invalid")
            .to_string();
        assert!(
            e.contains("agents.a.slack.thread_context: at most 200"),
            "{e}"
        );
        assert!(
            e.contains("agents.a.slack.ack_reaction: an emoji name"),
            "{e}"
        );
        let e = load("[agents.a.slack]\nprogress_after = \"0s\"\n").expect_err("zero");
        assert!(e.to_string().contains("progress_after"), "{e}");
    }

    #[test]
    fn bad_prompts_are_named_by_field() {
        let e = load(
            r#"
[agents.a.slack]
prompts_title = " "
suggested_prompts = [
  { title = "", message = "m" },
  { message = "m" },
  { title = "t", message = "m" },
  { title = "t", message = "m" },
  { title = "t", message = "m" },
]
"#,
        )
        .expect_err("invalid")
        .to_string();
        for want in [
            "agents.a.slack.suggested_prompts: at most 4 prompts",
            "agents.a.slack.suggested_prompts[0].title: must not be empty",
            "agents.a.slack.suggested_prompts[1].title: required",
            "agents.a.slack.prompts_title: must not be empty",
        ] {
            assert!(e.contains(want), "expected `{want}` in:\n{e}");
        }
        let e = load("[agents.a.slack]\nprompts = []\n").expect_err("unknown key");
        assert!(e.to_string().contains("unknown field `prompts`"), "{e}");
    }
}
