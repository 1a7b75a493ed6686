//! Dispatch by method and path.

use crate::auth::check_bearer;
use crate::response::{json, Answer, ApiError};
use crate::{Ingest, MAX_BODY_BYTES, MAX_TASK_BODY_BYTES};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use serde_json::json;

pub(crate) async fn route(ingest: &Ingest, request: Request<Bytes>) -> Answer {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let method = &parts.method;
    // Tasks may come with files; every other route takes small bodies.
    let limit = if method == Method::POST && segments == ["tasks"] {
        MAX_TASK_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    };
    if body.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than {limit} bytes"),
        ));
    }
    let headers = &parts.headers;
    let query = parts.uri.query();
    let authed = || check_bearer(ingest.api_token.as_ref(), headers);
    match (method, segments.as_slice()) {
        (&Method::GET, ["healthz"]) => Ok(json(StatusCode::OK, &json!({"ok": true}))),
        // The web console's static files: no data in them, so no token.
        (&Method::GET, ["console"]) => crate::console::serve(None, parts.uri.path(), headers),
        (&Method::GET, ["console", file]) => {
            crate::console::serve(Some(file), parts.uri.path(), headers)
        }
        (&Method::POST, ["slack", "events"]) => ingest.slack_events(headers, &body).await,
        (&Method::POST, ["slack", "interactivity"]) => {
            ingest.slack_interactivity(headers, &body).await
        }
        (&Method::POST, ["tasks"]) => {
            authed()?;
            ingest.submit_task(headers, &body).await
        }
        (&Method::GET, ["tasks"]) => {
            authed()?;
            ingest.list_tasks(query).await
        }
        (&Method::GET, ["tasks", id]) => {
            authed()?;
            ingest.get_task(id).await
        }
        (&Method::POST, ["tasks", id, "cancel"]) => {
            authed()?;
            ingest.cancel_task(id).await
        }
        (&Method::GET, ["tasks", id, "events"]) => {
            authed()?;
            ingest.task_events(id, query).await
        }
        (&Method::GET, ["tasks", id, "trace"]) => {
            authed()?;
            ingest.task_trace(id).await
        }
        (&Method::POST, ["tasks", id, "approvals", approval]) => {
            authed()?;
            ingest.decide_approval(id, approval, headers, &body).await
        }
        (&Method::POST, ["schedules"]) => {
            authed()?;
            ingest.create_schedule(headers, &body).await
        }
        (&Method::GET, ["schedules"]) => {
            authed()?;
            ingest.list_schedules().await
        }
        (&Method::GET, ["schedules", id]) => {
            authed()?;
            ingest.get_schedule(id).await
        }
        (&Method::DELETE, ["schedules", id]) => {
            authed()?;
            ingest.delete_schedule(id).await
        }
        (_, ["schedules"]) | (_, ["schedules", _]) => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not allowed on {path}"),
        )),
        (_, ["healthz"])
        | (_, ["console"])
        | (_, ["console", _])
        | (_, ["slack", "events"])
        | (_, ["slack", "interactivity"])
        | (_, ["tasks"])
        | (_, ["tasks", _])
        | (_, ["tasks", _, "cancel" | "events" | "trace"])
        | (_, ["tasks", _, "approvals", _]) => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not allowed on {path}"),
        )),
        _ => Err(ApiError::not_found(format!(
            "no route for {method} {}",
            parts.uri.path()
        ))),
    }
}
