//! Building agents from checked specs.

use super::duration::DurationSpec;
use super::schema::*;
use crate::agent::AgentConfig;
use crate::approval::ApprovalRule;
use crate::context::Escalation;
use crate::judgment::PromptModule;
use std::collections::BTreeMap;

pub(super) fn named(mut a: AgentConfig, name: &str) -> AgentConfig {
    a.name = name.to_owned();
    a
}

/// `base` with what `spec` sets laid over it. `spec` has been checked, and
/// its prompt file read; `modules` are the file's declared prompt modules.
pub(super) fn build(
    base: &AgentConfig,
    spec: &AgentSpec,
    modules: &BTreeMap<String, PromptModule>,
) -> AgentConfig {
    let mut a = base.clone();
    super::judgment::apply(&mut a, spec, modules);
    if let Some(v) = &spec.description {
        a.description = Some(v.trim().to_owned());
    }
    if let Some(v) = &spec.model {
        a.model = v.clone();
    }
    if let Some(v) = &spec.fallback_models {
        a.fallback_models = v.clone();
    }
    if let Some(v) = spec.on_new_message {
        a.on_new_message = v;
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
    if let Some(v) = spec.stream {
        a.stream = v;
    }
    if let Some(v) = &spec.expose {
        a.expose = crate::agent::Exposure::new(v.iter().copied());
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
            a.deadline_after = Some(d);
        }
        if let Some(v) = l.max_cost_usd {
            a.max_cost_usd = Some(v);
        }
        if let Some(v) = l.max_identical_calls {
            a.max_identical_calls = v;
        }
        if let Some(v) = l.loop_window {
            a.loop_window = v;
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
    if let Some(s) = &spec.slack {
        super::slack::apply(&mut a.slack, s);
    }
    if let Some(h) = &spec.http_request {
        if let Some(hosts) = &h.allow_hosts {
            a.http_request.allow_hosts = Some(baton_core::egress::AllowedHosts(
                hosts
                    .iter()
                    .filter_map(|p| baton_core::egress::HostPattern::parse(p).ok())
                    .collect(),
            ));
        }
        if let Some(v) = h.approve_new_hosts {
            a.http_request.approve_new_hosts = v;
        }
    }
    if let Some(DurationSpec(d)) = spec.ask_user.as_ref().and_then(|q| q.expires_after) {
        a.ask_user_expires_after = d;
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
