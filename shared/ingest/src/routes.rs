//! Dispatch by method and path, from one table: a path the table knows
//! under other methods is a 405 that lists them (`Allow`), any other an
//! honest 404.

use crate::auth::check_bearer;
use crate::body::{full, Body, Delivery};
use crate::response::{json, ApiError};
use crate::{Ingest, MAX_BODY_BYTES, MAX_TASK_BODY_BYTES};
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, StatusCode};
use serde_json::json;

/// What answers a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handler {
    Healthz,
    Console,
    ConsoleFile,
    SlackEvents,
    SlackInteractivity,
    SlackCommands,
    SubmitTask,
    ListTasks,
    GetTask,
    CancelTask,
    ForkTask,
    TaskEvents,
    TaskStream,
    TaskTrace,
    TaskFile,
    DecideApproval,
    CreateSchedule,
    ListSchedules,
    GetSchedule,
    DeleteSchedule,
    Mcp,
    A2aDefaultCard,
    A2aAgentCard,
    A2aRpc,
    CallBack,
    ListConnections,
    RevokeConnection,
    ConnectStart,
    ConnectConfirm,
    ConnectSignedIn,
    ConnectCallback,
    ClientMetadata,
}

/// One route: its method, its path (`{…}` matches one segment), whether
/// it needs the bearer token, and its handler.
struct Route {
    method: Method,
    path: &'static str,
    bearer: bool,
    handler: Handler,
}

const fn route(method: Method, path: &'static str, bearer: bool, handler: Handler) -> Route {
    Route {
        method,
        path,
        bearer,
        handler,
    }
}

/// Every route's method and path, as the table holds them: what a
/// deployment must route to the handler (the SAM template's test checks
/// each has an API event).
pub fn route_table() -> impl Iterator<Item = (&'static str, &'static str)> {
    ROUTES.iter().map(|r| (r.method.as_str(), r.path))
}

/// Every route of the ingest (docs/api.md).
static ROUTES: &[Route] = &[
    route(Method::GET, "/healthz", false, Handler::Healthz),
    // The web console's static files hold no data, so need no token.
    route(Method::GET, "/console", false, Handler::Console),
    route(Method::GET, "/console/{file}", false, Handler::ConsoleFile),
    // Slack's requests carry Slack's signature instead.
    route(Method::POST, "/slack/events", false, Handler::SlackEvents),
    route(
        Method::POST,
        "/slack/interactivity",
        false,
        Handler::SlackInteractivity,
    ),
    route(
        Method::POST,
        "/slack/commands",
        false,
        Handler::SlackCommands,
    ),
    route(Method::POST, "/tasks", true, Handler::SubmitTask),
    route(Method::GET, "/tasks", true, Handler::ListTasks),
    route(Method::GET, "/tasks/{id}", true, Handler::GetTask),
    route(
        Method::POST,
        "/tasks/{id}/cancel",
        true,
        Handler::CancelTask,
    ),
    route(Method::POST, "/tasks/{id}/fork", true, Handler::ForkTask),
    route(Method::GET, "/tasks/{id}/events", true, Handler::TaskEvents),
    route(Method::GET, "/tasks/{id}/stream", true, Handler::TaskStream),
    route(Method::GET, "/tasks/{id}/trace", true, Handler::TaskTrace),
    route(
        Method::GET,
        "/tasks/{id}/files/{name}",
        true,
        Handler::TaskFile,
    ),
    route(
        Method::POST,
        "/tasks/{id}/approvals/{approval}",
        true,
        Handler::DecideApproval,
    ),
    route(Method::POST, "/schedules", true, Handler::CreateSchedule),
    route(Method::GET, "/schedules", true, Handler::ListSchedules),
    route(Method::GET, "/schedules/{id}", true, Handler::GetSchedule),
    route(
        Method::DELETE,
        "/schedules/{id}",
        true,
        Handler::DeleteSchedule,
    ),
    // The MCP server checks the bearer itself: its 401 says
    // `WWW-Authenticate: Bearer`, as MCP clients expect.
    route(Method::POST, "/mcp", false, Handler::Mcp),
    // A2A (docs/integrations.md#a2a-clients): the cards are public.
    route(
        Method::GET,
        "/.well-known/agent-card.json",
        false,
        Handler::A2aDefaultCard,
    ),
    route(
        Method::GET,
        "/a2a/{agent}/.well-known/agent-card.json",
        false,
        Handler::A2aAgentCard,
    ),
    route(Method::POST, "/a2a/{agent}", true, Handler::A2aRpc),
    // The token is the capability (`wait_for_callback`): no bearer.
    route(Method::POST, "/callbacks/{token}", false, Handler::CallBack),
    route(Method::GET, "/connections", true, Handler::ListConnections),
    route(
        Method::DELETE,
        "/connections/{person}/{provider}",
        true,
        Handler::RevokeConnection,
    ),
    // Per-person connections (docs/connections.md): the Connect link's
    // `state` is the capability, the callback is the provider's redirect.
    route(
        Method::GET,
        "/connect/{state}",
        false,
        Handler::ConnectStart,
    ),
    // The confirmation page's button (no Sign in with Slack), and Slack's
    // answer to Sign in with Slack: who is in the browser.
    route(
        Method::POST,
        "/connect/{state}",
        false,
        Handler::ConnectConfirm,
    ),
    route(
        Method::GET,
        crate::connect::SIGNED_IN_PATH,
        false,
        Handler::ConnectSignedIn,
    ),
    route(
        Method::GET,
        "/oauth/callback",
        false,
        Handler::ConnectCallback,
    ),
    route(
        Method::GET,
        "/oauth/client-metadata.json",
        false,
        Handler::ClientMetadata,
    ),
];

/// The `{…}` segments of `segments` if they fit `pattern`.
fn captures<'a>(pattern: &str, segments: &[&'a str]) -> Option<Vec<&'a str>> {
    let parts: Vec<&str> = pattern.split('/').skip(1).collect();
    if parts.len() != segments.len() {
        return None;
    }
    let mut out = Vec::new();
    for (p, s) in parts.iter().zip(segments) {
        if p.starts_with('{') {
            out.push(*s);
        } else if p != s {
            return None;
        }
    }
    Some(out)
}

/// What the table says of a request: its route and captures, or the
/// methods the path takes (empty: no such path).
enum Found<'a> {
    Route(&'static Route, Vec<&'a str>),
    OtherMethods(Vec<&'static Method>),
}

fn find<'a>(method: &Method, segments: &[&'a str]) -> Found<'a> {
    let mut allowed = Vec::new();
    for r in ROUTES {
        if let Some(caps) = captures(r.path, segments) {
            if r.method == *method {
                return Found::Route(r, caps);
            }
            allowed.push(&r.method);
        }
    }
    Found::OtherMethods(allowed)
}

/// A route's answer, whole or streamed.
pub(crate) type Reply = Result<http::Response<Body>, ApiError>;

pub(crate) async fn route_request(
    ingest: &Ingest,
    request: Request<Bytes>,
    delivery: Delivery,
) -> Reply {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let method = &parts.method;
    let (route, caps) = match find(method, &segments) {
        Found::Route(r, caps) => (r, caps),
        Found::OtherMethods(allowed) if !allowed.is_empty() => {
            let list: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
            let mut answer = ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!(
                    "{method} is not allowed on {path} (allowed: {})",
                    list.join(", ")
                ),
            )
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&list.join(", ")) {
                answer.headers_mut().insert(header::ALLOW, v);
            }
            return Ok(full(answer));
        }
        Found::OtherMethods(_) => {
            return Err(ApiError::not_found(format!(
                "no route for {method} {}",
                parts.uri.path()
            )))
        }
    };
    // Tasks may come with files; every other route takes small bodies.
    // An A2A message may carry files as a task does.
    let limit = if matches!(route.handler, Handler::SubmitTask | Handler::A2aRpc) {
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
    if route.bearer {
        check_bearer(ingest.api_token.as_ref(), headers)?;
    }
    let cap = |i: usize| caps.get(i).copied().unwrap_or_default();
    match route.handler {
        Handler::Healthz => Ok(full(json(StatusCode::OK, &json!({"ok": true})))),
        Handler::Console => crate::console::serve(None, parts.uri.path(), headers).map(full),
        Handler::ConsoleFile => {
            crate::console::serve(Some(cap(0)), parts.uri.path(), headers).map(full)
        }
        Handler::SlackEvents => ingest.slack_events(headers, &body).await.map(full),
        Handler::SlackInteractivity => ingest.slack_interactivity(headers, &body).await.map(full),
        Handler::SlackCommands => ingest.slack_command(headers, &body).await.map(full),
        Handler::SubmitTask => ingest.submit_task(headers, &body).await.map(full),
        Handler::ListTasks => ingest.list_tasks(query).await.map(full),
        Handler::GetTask => ingest.get_task(cap(0)).await.map(full),
        Handler::CancelTask => ingest.cancel_task(cap(0)).await.map(full),
        Handler::ForkTask => ingest.fork_task(cap(0), headers, &body).await.map(full),
        Handler::TaskEvents => ingest.task_events(cap(0), query).await.map(full),
        Handler::TaskStream => ingest.task_stream(cap(0), headers, query, delivery).await,
        Handler::TaskTrace => ingest.task_trace(cap(0)).await.map(full),
        Handler::TaskFile => ingest.task_file(cap(0), cap(1)).await.map(full),
        Handler::DecideApproval => ingest
            .decide_approval(cap(0), cap(1), headers, &body)
            .await
            .map(full),
        Handler::CreateSchedule => ingest.create_schedule(headers, &body).await.map(full),
        Handler::ListSchedules => ingest.list_schedules().await.map(full),
        Handler::GetSchedule => ingest.get_schedule(cap(0)).await.map(full),
        Handler::DeleteSchedule => ingest.delete_schedule(cap(0)).await.map(full),
        #[cfg(feature = "mcp-server")]
        Handler::Mcp => {
            let mut request = Request::new(body.clone());
            *request.method_mut() = parts.method.clone();
            *request.uri_mut() = parts.uri.clone();
            *request.headers_mut() = parts.headers.clone();
            ingest.mcp(request, delivery).await
        }
        // The ingest Lambda: on AWS the `mcp` function serves `/mcp`.
        #[cfg(not(feature = "mcp-server"))]
        Handler::Mcp => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "`/mcp` is not served by this function: the deployment's `mcp` function serves it",
        )),
        Handler::A2aDefaultCard => ingest.a2a_card("default", headers).map(full),
        Handler::A2aAgentCard => ingest.a2a_card(cap(0), headers).map(full),
        Handler::A2aRpc => ingest.a2a_rpc(cap(0), headers, &body, delivery).await,
        Handler::CallBack => ingest.call_back(cap(0), headers, &body).await.map(full),
        Handler::ListConnections => ingest.list_connections(query).await.map(full),
        Handler::RevokeConnection => ingest.revoke_connection(cap(0), cap(1)).await.map(full),
        Handler::ConnectStart => ingest.connect_start(cap(0)).await.map(full),
        Handler::ConnectConfirm => ingest
            .connect_confirm(cap(0), headers, &body)
            .await
            .map(full),
        Handler::ConnectSignedIn => ingest.connect_signed_in(query, headers).await.map(full),
        Handler::ConnectCallback => ingest.connect_callback(query, headers).await.map(full),
        Handler::ClientMetadata => ingest.client_metadata().map(full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(path: &str) -> Vec<&str> {
        path.split('/').skip(1).collect()
    }

    #[test]
    fn every_path_is_found_with_its_captures_or_its_methods() {
        let Found::Route(r, caps) = find(&Method::POST, &segments("/tasks/t1/approvals/a9")) else {
            panic!("a route");
        };
        assert_eq!(
            (r.handler, caps),
            (Handler::DecideApproval, vec!["t1", "a9"])
        );
        let Found::OtherMethods(allowed) = find(&Method::PUT, &segments("/tasks")) else {
            panic!("a 405");
        };
        assert_eq!(allowed, vec![&Method::POST, &Method::GET]);
        let Found::OtherMethods(allowed) = find(&Method::GET, &segments("/tasks/t1/cancel")) else {
            panic!("a 405");
        };
        assert_eq!(allowed, vec![&Method::POST]);
        let Found::OtherMethods(none) = find(&Method::GET, &segments("/nope")) else {
            panic!("a 404");
        };
        assert!(none.is_empty());
        // A path longer than any route's is no route at all.
        assert!(matches!(
            find(&Method::GET, &segments("/tasks/t1/events/x")),
            Found::OtherMethods(v) if v.is_empty()
        ));
    }

    #[test]
    fn every_route_is_reachable_and_no_two_collide() {
        for (i, r) in ROUTES.iter().enumerate() {
            let path = r
                .path
                .replace("{id}", "x")
                .replace("{approval}", "y")
                .replace("{file}", "z")
                .replace("{name}", "n")
                .replace("{agent}", "a")
                .replace("{token}", "k")
                .replace("{person}", "p")
                .replace("{provider}", "q")
                .replace("{state}", "s");
            match find(&r.method, &segments(&path)) {
                Found::Route(found, _) => assert!(std::ptr::eq(found, r), "route {i} is shadowed"),
                Found::OtherMethods(_) => panic!("route {i} is not found"),
            }
        }
    }
}
