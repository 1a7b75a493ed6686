//! One case on one model, as a task of the API: submitted (or, with
//! `--replay`, forked from its source task with recorded tools), followed
//! until it ends, read (status and events), then checked and judged.

use super::case::LoadedCase;
use super::check::{run_checks, summarize, CheckResult, Outcome};
use super::judge::{self, Judge};
use crate::client::{percent_encode, Api};
use reqwest::Method;
use serde::Serialize;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// What every task of a run shares.
pub(crate) struct Runner {
    pub(crate) api: Api,
    /// The API's base URL, for the links to the tasks.
    pub(crate) base: String,
    pub(crate) agent: Option<String>,
    pub(crate) replay: bool,
    pub(crate) judge: Option<Judge>,
    /// How long one task may take before the run cancels it.
    pub(crate) timeout: Duration,
}

/// One case on one model, run and scored.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RunResult {
    pub(crate) model: String,
    pub(crate) passed: bool,
    pub(crate) score: f64,
    pub(crate) checks: Vec<CheckResult>,
    /// The judge's reason, when the case has a judge.
    pub(crate) judge_reason: Option<String>,
    /// The console's page of the task.
    pub(crate) link: Option<String>,
    #[serde(flatten)]
    pub(crate) outcome: Outcome,
}

/// How often a running task's status is read.
const POLL_EVERY: Duration = Duration::from_millis(200);

impl Runner {
    /// Runs `case` on `model` (`None`: the agent's). Never fails: what
    /// goes wrong (the API refusing the case, say) fails the case.
    pub(crate) async fn run(
        &self,
        case: &LoadedCase,
        model: Option<&str>,
        label: &str,
    ) -> RunResult {
        let started = Instant::now();
        let outcome = match self.execute(case, model, started).await {
            Ok(o) => o,
            Err(e) => Outcome {
                status: "error".into(),
                error: Some(crate::describe(&e)),
                latency_ms: started.elapsed().as_millis() as u64,
                ..Outcome::default()
            },
        };
        let mut checks = run_checks(case, &outcome);
        let mut judge_reason = None;
        if let Some(rubric) = &case.case.expect.judge {
            let result = match (&self.judge, outcome.status.as_str()) {
                (Some(j), "succeeded") => {
                    let answer = outcome.answer.as_deref().unwrap_or("");
                    let reference = case.case.reference.as_deref();
                    let grade = j.grade(&case.case.input, rubric, answer, reference).await;
                    judge::check(&grade)
                }
                (Some(_), _) => CheckResult::new("judge", false, "no answer to grade"),
                (None, _) => CheckResult::new("judge", false, "no judge model"),
            };
            judge_reason = Some(result.detail.clone());
            checks.push(result);
        }
        let (passed, score) = summarize(&checks);
        let link = (!outcome.task_id.is_empty())
            .then(|| format!("{}/console#/tasks/{}", self.base, outcome.task_id));
        RunResult {
            model: label.to_owned(),
            passed,
            score,
            checks,
            judge_reason,
            link,
            outcome,
        }
    }

    async fn execute(
        &self,
        case: &LoadedCase,
        model: Option<&str>,
        started: Instant,
    ) -> anyhow::Result<Outcome> {
        let (path, body) = self.request(case, model)?;
        let created = self.api.call(Method::POST, &path, Some(body), None).await?;
        let id = created["task_id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("the API answered without a task_id"))?
            .to_owned();
        let status_path = format!("/tasks/{}", percent_encode(&id));
        let status = loop {
            let s = self.api.call(Method::GET, &status_path, None, None).await?;
            if matches!(
                s["status"].as_str(),
                Some("succeeded" | "failed" | "cancelled")
            ) {
                break s;
            }
            if started.elapsed() > self.timeout {
                let cancel = format!("{status_path}/cancel");
                let _ = self.api.call(Method::POST, &cancel, None, None).await;
                let mut o = outcome(&id, &s, Vec::new(), started);
                o.error = Some(format!("still {} after {:?}", o.status, self.timeout));
                o.status = "timed out".into();
                return Ok(o);
            }
            tokio::time::sleep(POLL_EVERY).await;
        };
        let tools = self.tools_called(&status_path).await?;
        Ok(outcome(&id, &status, tools, started))
    }

    /// The route and body that start `case`: `POST /tasks`, or with
    /// `--replay` a recorded fork of its source task from step 0.
    fn request(&self, case: &LoadedCase, model: Option<&str>) -> anyhow::Result<(String, Value)> {
        let mut body = if self.replay {
            json!({"from_step": 0, "tools": "recorded"})
        } else {
            json!({"input": case.case.input})
        };
        if !self.replay && !case.case.attachments.is_empty() {
            body["attachments"] = Value::Array(case.case.attachments.clone());
        }
        if let Some(a) = &self.agent {
            body["agent"] = a.as_str().into();
        }
        if let Some(m) = model {
            body["model"] = m.into();
        }
        let path = match (&case.case.task_id, self.replay) {
            (Some(t), true) => format!("/tasks/{}/fork", percent_encode(t)),
            (None, true) => anyhow::bail!("case {} has no task_id to replay", case.id),
            (_, false) => "/tasks".to_owned(),
        };
        Ok((path, body))
    }

    /// The names of the tools the model called, from the task's
    /// `assistant_message` events, page by page.
    async fn tools_called(&self, status_path: &str) -> anyhow::Result<Vec<String>> {
        let mut names = Vec::new();
        let mut after: Option<u64> = None;
        loop {
            let q = after.map(|n| format!("?after={n}")).unwrap_or_default();
            let path = format!("{status_path}/events{q}");
            let page = self.api.call(Method::GET, &path, None, None).await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            let Some(last) = events.last().and_then(|e| e["seq"].as_u64()) else {
                return Ok(names);
            };
            if after.is_some_and(|a| last <= a) {
                return Ok(names);
            }
            after = Some(last);
            for e in events.iter().filter(|e| e["type"] == "assistant_message") {
                let calls = e["tool_calls"].as_array().into_iter().flatten();
                names.extend(calls.filter_map(|c| c["name"].as_str().map(str::to_owned)));
            }
        }
    }
}

/// The outcome a task's status JSON tells.
fn outcome(id: &str, s: &Value, tools_called: Vec<String>, started: Instant) -> Outcome {
    let text = |k: &str| s[k].as_str().filter(|t| !t.is_empty()).map(str::to_owned);
    Outcome {
        task_id: id.to_owned(),
        status: s["status"].as_str().unwrap_or("?").to_owned(),
        answer: text("result"),
        error: text("error"),
        steps: s["steps"].as_u64().unwrap_or(0),
        tools_called,
        input_tokens: s["usage"]["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: s["usage"]["output_tokens"].as_u64().unwrap_or(0),
        cost_usd: s["cost_usd"].as_f64(),
        latency_ms: latency_ms(s).unwrap_or(started.elapsed().as_millis() as u64),
    }
}

/// From the task's creation to its last update: the task's own time, not
/// the run's polling.
fn latency_ms(s: &Value) -> Option<u64> {
    let at = |k: &str| chrono::DateTime::parse_from_rfc3339(s[k].as_str()?).ok();
    let ms = (at("updated_at")? - at("created_at")?).num_milliseconds();
    u64::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_is_read_from_the_status() {
        let s = json!({"status": "succeeded", "result": "hi", "error": null, "steps": 3,
            "usage": {"input_tokens": 10, "output_tokens": 4}, "cost_usd": 0.5,
            "created_at": "2026-11-22T09:00:00.000Z", "updated_at": "2026-11-22T09:00:04.120Z"});
        let o = outcome("t1", &s, vec!["x".into()], Instant::now());
        assert_eq!(o.answer.as_deref(), Some("hi"));
        assert_eq!(o.error, None);
        assert_eq!((o.steps, o.input_tokens, o.output_tokens), (3, 10, 4));
        assert_eq!(o.cost_usd, Some(0.5));
        assert_eq!(o.latency_ms, 4120);
    }

    fn runner(replay: bool) -> Runner {
        Runner {
            api: Api::for_test("http://x"),
            base: "http://x".into(),
            agent: Some("support".into()),
            replay,
            judge: None,
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_case_is_submitted_or_forked_from_step_0_with_recorded_tools() {
        let line = r#"{"id": "c", "input": "q", "task_id": "t/1", "attachments": [{"name": "a"}]}"#;
        let case = crate::eval::case::parse(line, "c").unwrap().remove(0);
        let (path, body) = runner(false).request(&case, Some("m2")).unwrap();
        assert_eq!(path, "/tasks");
        assert_eq!(
            body,
            json!({"input": "q", "attachments": [{"name": "a"}], "agent": "support", "model": "m2"})
        );
        let (path, body) = runner(true).request(&case, None).unwrap();
        assert_eq!(path, "/tasks/t%2F1/fork");
        assert_eq!(
            body,
            json!({"from_step": 0, "tools": "recorded", "agent": "support"})
        );
    }
}
