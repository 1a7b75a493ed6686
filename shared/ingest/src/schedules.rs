//! The schedule routes: `POST /schedules`, `GET /schedules`,
//! `GET /schedules/{id}`, `DELETE /schedules/{id}`.
//!
//! Expressions are validated with `baton-schedule` exactly as EventBridge
//! Scheduler reads them; a refused one gets a 400 saying why. Creating and
//! deleting keep the record and the scheduler plan consistent
//! ([`baton_schedule::ScheduleService`]).

use crate::response::{json, json_body, Answer, ApiError};
use crate::Ingest;
use baton_core::Instant;
use baton_schedule::new_schedule_id;
use baton_schedule::validate::{new_schedule, validate, validate_content, API_OWNER};
use baton_schedule::{parse_schedule_id, ScheduleService};
use baton_schedule::{ScheduleError, ScheduleKind, ScheduleTarget, SchedulerError};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetBody {
    slack_channel: String,
    #[serde(default)]
    thread_ts: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    expression: String,
    #[serde(default)]
    timezone: Option<String>,
    input: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    target: Option<TargetBody>,
    #[serde(default)]
    agent: Option<String>,
}

fn parse_sid(raw: &str) -> Result<String, ApiError> {
    parse_schedule_id(raw).ok_or_else(|| {
        let shown: String = raw.chars().take(80).collect();
        ApiError::bad_request(format!("`{shown}` is not a schedule id"))
    })
}

fn store_error(e: ScheduleError) -> ApiError {
    match e {
        ScheduleError::NotFound(id) => ApiError::not_found(format!("no schedule {id}")),
        ScheduleError::Forbidden(m) => ApiError::new(StatusCode::FORBIDDEN, m),
        ScheduleError::Scheduler(SchedulerError::Invalid(m)) => ApiError::bad_request(m),
        e => ApiError::unavailable(e),
    }
}

impl Ingest {
    /// Enables the schedule routes over `service`.
    pub fn with_scheduler(mut self, service: ScheduleService) -> Self {
        self.schedules = Some(service);
        self
    }

    fn schedules(&self) -> Result<&ScheduleService, ApiError> {
        self.schedules.as_ref().ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_IMPLEMENTED,
                "schedules are not enabled on this deployment (no scheduler is configured)",
            )
        })
    }

    pub(crate) async fn create_schedule(&self, headers: &HeaderMap, body: &Bytes) -> Answer {
        let service = self.schedules()?;
        let req: CreateBody = json_body(headers, body)?;
        let kind = match req.kind.as_deref() {
            None | Some("task") => ScheduleKind::Task,
            Some("heartbeat") => ScheduleKind::Heartbeat,
            Some(other) => {
                let shown: String = other.chars().take(40).collect();
                return Err(ApiError::bad_request(format!(
                    "`kind` must be \"task\" or \"heartbeat\", not \"{shown}\""
                )));
            }
        };
        let agent = req.agent.unwrap_or_else(|| "default".to_owned());
        if self.agents.get(&agent).is_none() {
            return Err(ApiError::bad_request(format!("unknown agent `{agent}`")));
        }
        let target = req.target.map(|t| ScheduleTarget {
            slack_channel: t.slack_channel,
            thread_ts: t.thread_ts,
        });
        let now = Instant::now();
        let spec = validate(&req.expression, req.timezone.as_deref(), now)
            .map_err(ApiError::bad_request)?;
        validate_content(&req.input, target.as_ref()).map_err(ApiError::bad_request)?;
        let record = new_schedule(
            new_schedule_id(),
            &spec,
            req.input,
            kind,
            target,
            API_OWNER.to_owned(),
            agent,
            now,
        );
        let created = service.create(record).await.map_err(store_error)?;
        tracing::info!(schedule_id = %created.id, expression = %created.expression, "schedule created");
        Ok(json(StatusCode::CREATED, &created.to_json()))
    }

    pub(crate) async fn list_schedules(&self) -> Answer {
        let service = self.schedules()?;
        let all = service.store().list().await.map_err(store_error)?;
        let schedules: Vec<_> = all.iter().map(|s| s.to_json()).collect();
        Ok(json(StatusCode::OK, &json!({ "schedules": schedules })))
    }

    pub(crate) async fn get_schedule(&self, raw_id: &str) -> Answer {
        let service = self.schedules()?;
        let id = parse_sid(raw_id)?;
        let s = service
            .store()
            .get(&id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| ApiError::not_found(format!("no schedule {id}")))?;
        Ok(json(StatusCode::OK, &s.to_json()))
    }

    pub(crate) async fn delete_schedule(&self, raw_id: &str) -> Answer {
        let service = self.schedules()?;
        let id = parse_sid(raw_id)?;
        // The bearer-token API acts as an admin.
        let s = service
            .delete(&id, API_OWNER, true)
            .await
            .map_err(store_error)?;
        tracing::info!(schedule_id = %s.id, "schedule deleted");
        Ok(json(
            StatusCode::OK,
            &json!({"schedule_id": s.id, "deleted": true}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::{ApiToken, Ingest};
    use baton_core::TaskStore;
    use baton_embedded::{EmbeddedBackend, EmbeddedScheduler, QueueConfig};
    use baton_schedule::{ScheduleService, ScheduleStore};
    use baton_settings::{AgentConfig, Agents};
    use bytes::Bytes;
    use serde_json::{json, Value};
    use std::sync::Arc;

    const TOKEN: &str = "test-token-0123456789";

    struct Rig {
        _dir: tempfile::TempDir,
        ingest: Ingest,
        scheduler: Arc<EmbeddedScheduler>,
    }

    fn rig(with_scheduler: bool) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path(), QueueConfig::default()).unwrap();
        let store = TaskStore::new(b.table.clone(), b.blobs.clone());
        let scheduler = Arc::new(EmbeddedScheduler::new(b.table.clone(), b.queue.clone()));
        let agents = Agents::new(AgentConfig::new("default", "scripted"), Vec::new());
        let mut ingest = Ingest::new(
            store,
            b.queue.clone(),
            agents,
            Some(ApiToken::parse(TOKEN).unwrap()),
            None,
        );
        if with_scheduler {
            let service =
                ScheduleService::new(ScheduleStore::new(b.table.clone()), scheduler.clone());
            ingest = ingest.with_scheduler(service);
        }
        Rig {
            _dir: dir,
            ingest,
            scheduler,
        }
    }

    async fn call(ingest: &Ingest, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {TOKEN}"));
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let resp = ingest.handle(req.body(bytes).unwrap()).await;
        let status = resp.status().as_u16();
        (
            status,
            serde_json::from_slice(resp.body()).unwrap_or(Value::Null),
        )
    }

    async fn refused(ingest: &Ingest, body: Value) -> String {
        let (status, v) = call(ingest, "POST", "/schedules", Some(body)).await;
        assert_eq!(status, 400, "{v}");
        v["error"].as_str().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn refuses_bad_schedules_saying_why() {
        let r = rig(true);
        let base =
            json!({"expression": "rate(5 minutes)", "timezone": "Europe/Berlin", "input": "x"});
        let with = |k: &str, v: Value| {
            let mut b = base.clone();
            b[k] = v;
            b
        };
        let e = refused(&r.ingest, with("expression", json!("cron(0 9 * * MON *)"))).await;
        assert!(
            e.contains("day-of-month and day-of-week cannot both be specified"),
            "{e}"
        );
        let e = refused(&r.ingest, with("expression", json!("cron(0 9 * *)"))).await;
        assert!(e.starts_with("invalid `expression`"), "{e}");
        let e = refused(&r.ingest, with("expression", json!("rate(0 minutes)"))).await;
        assert!(e.starts_with("invalid `expression`"), "{e}");
        let e = refused(
            &r.ingest,
            with("expression", json!("at(2001-01-01T09:00:00)")),
        )
        .await;
        assert!(e.contains("in the past"), "{e}");
        let e = refused(&r.ingest, with("timezone", json!("Mars/Olympus_Mons"))).await;
        assert!(e.starts_with("invalid `timezone`"), "{e}");
        let e = refused(&r.ingest, with("kind", json!("nag"))).await;
        assert!(e.contains("`kind` must be"), "{e}");
        let e = refused(&r.ingest, with("input", json!("  "))).await;
        assert!(e.contains("`input`"), "{e}");
        let e = refused(&r.ingest, with("target", json!({"slack_channel": "#ops"}))).await;
        assert!(e.contains("slack_channel"), "{e}");
        let e = refused(&r.ingest, with("surprise", json!(1))).await;
        assert!(e.contains("unknown field"), "{e}");
        let e = refused(&r.ingest, with("agent", json!("nobody"))).await;
        assert!(e.contains("unknown agent"), "{e}");
        let (_, listed) = call(&r.ingest, "GET", "/schedules", None).await;
        assert_eq!(listed["schedules"], json!([]), "nothing written");
    }

    #[tokio::test]
    async fn create_list_get_delete() {
        let r = rig(true);
        let body = json!({
            "expression": "cron(0 9 ? * mon-fri *)", "timezone": "Europe/Berlin",
            "input": "summarise the open incidents", "kind": "heartbeat",
            "target": {"slack_channel": "C123", "thread_ts": null}
        });
        let (status, created) = call(&r.ingest, "POST", "/schedules", Some(body)).await;
        assert_eq!(status, 201, "{created}");
        let id = created["schedule_id"].as_str().unwrap().to_owned();
        assert_eq!(created["expression"], "cron(0 9 ? * MON-FRI *)");
        assert_eq!(created["state"], "active");
        assert!(created["next_fire_at"].is_string());
        assert_eq!(created["last_fired_at"], Value::Null);
        assert_eq!(created["last_task_id"], Value::Null);
        assert!(r.scheduler.exists(&id).await.unwrap(), "plan written");

        let (status, listed) = call(&r.ingest, "GET", "/schedules", None).await;
        assert_eq!(status, 200);
        assert_eq!(listed["schedules"][0]["schedule_id"], id.as_str());
        let (status, got) = call(&r.ingest, "GET", &format!("/schedules/{id}"), None).await;
        assert_eq!(status, 200);
        assert_eq!(got["kind"], "heartbeat");
        assert_eq!(got["target"]["slack_channel"], "C123");

        let (status, _) = call(&r.ingest, "DELETE", &format!("/schedules/{id}"), None).await;
        assert_eq!(status, 200);
        assert!(!r.scheduler.exists(&id).await.unwrap(), "plan deleted");
        let (status, _) = call(&r.ingest, "GET", &format!("/schedules/{id}"), None).await;
        assert_eq!(status, 404);
        let (status, _) = call(&r.ingest, "DELETE", &format!("/schedules/{id}"), None).await;
        assert_eq!(status, 404);
        let (status, v) = call(&r.ingest, "GET", "/schedules/not-an-id", None).await;
        assert_eq!(status, 400, "{v}");
        let (status, _) = call(&r.ingest, "PUT", "/schedules", None).await;
        assert_eq!(status, 405);
    }

    #[tokio::test]
    async fn without_a_scheduler_the_routes_say_so() {
        let r = rig(false);
        let (status, v) = call(&r.ingest, "GET", "/schedules", None).await;
        assert_eq!(status, 501, "{v}");
        assert!(v["error"].as_str().unwrap().contains("not enabled"));
    }
}
