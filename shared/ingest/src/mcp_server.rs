//! `/mcp`: Baton's agents as an MCP server over streamable HTTP
//! (docs/integrations.md#mcp-clients).
//!
//! rmcp's server side answers the protocol, in its stateless mode: the
//! `2026-07-28` protocol has no sessions, and a client of an earlier one
//! still gets its `initialize` answered, only without a session id, so
//! each of its requests stands alone. Nothing lives in the process
//! between requests — a tool call's task and its answer are in the task
//! store — so on Lambda any instance answers any request; no session
//! store is needed.

mod handler;
mod outcome;

use crate::auth::check_bearer;
use crate::body::full;
use crate::routes::Reply;
use crate::ApiError;
use crate::{Body, Delivery, Ingest};
use bytes::Bytes;
use futures::StreamExt;
use http::{header, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use std::time::Duration;

/// The longest a tool call waits for its task's answer before answering
/// with the task: when the answer is buffered (API Gateway ends a request
/// at 30 s), and when it is streamed, progress reaching the client as it
/// comes (MCP clients commonly give up on a call after a minute).
const MAX_WAIT_BUFFERED: Duration = Duration::from_secs(20);
const MAX_WAIT_STREAMED: Duration = Duration::from_secs(50);
/// What a call leaves of the caller's limit for answering.
const MARGIN: Duration = Duration::from_secs(5);

/// How long a tool call may wait for its task under `delivery`.
fn wait_for(delivery: Delivery) -> Duration {
    let cap = if delivery.streaming {
        MAX_WAIT_STREAMED
    } else {
        MAX_WAIT_BUFFERED
    };
    delivery.within.saturating_sub(MARGIN).min(cap)
}

impl Ingest {
    /// One MCP request: its `Origin` (a browser's must be allowed, before
    /// anything else: [`crate::McpOrigins`]), the bearer (a 401 says
    /// `WWW-Authenticate: Bearer`, which MCP clients look for), then
    /// rmcp's stateless server.
    pub(crate) async fn mcp(&self, request: Request<Bytes>, delivery: Delivery) -> Reply {
        self.mcp_waiting(request, delivery.streaming, wait_for(delivery))
            .await
    }

    /// [`Ingest::mcp`] with tool calls waiting for their task at most
    /// `wait`; the answer streams when `streaming`.
    async fn mcp_waiting(&self, request: Request<Bytes>, streaming: bool, wait: Duration) -> Reply {
        // Checked here rather than by rmcp's own Origin check, which runs
        // only after the bearer (it is inside the service).
        if !self.mcp_origins.allows(request.headers()) {
            let refused = ApiError::new(
                StatusCode::FORBIDDEN,
                "this Origin may not call /mcp (BATON_MCP_ALLOWED_ORIGINS lists those that may)",
            );
            return Ok(full(refused.into_response()));
        }
        if let Err(e) = check_bearer(self.api_token.as_ref(), request.headers()) {
            let mut answer = e.into_response();
            answer
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Ok(full(answer));
        }
        let server = handler::McpServer {
            ingest: self.clone(),
            wait,
        };
        // The bearer is the guard here, so any Host may call (API Gateway
        // and function URLs have their own names); rmcp's default allows
        // only loopback, against DNS rebinding of unauthenticated servers.
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_retry(None)
            .disable_allowed_hosts();
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let (mut parts, body) = request.into_parts();
        // rmcp wants a host to check, even when any host may call; a
        // request handed over without one (a test, an odd proxy) gets a
        // placeholder rather than a 400.
        if parts.uri.authority().is_none() && !parts.headers.contains_key(header::HOST) {
            parts
                .headers
                .insert(header::HOST, HeaderValue::from_static("localhost"));
        }
        let response = service
            .handle(Request::from_parts(parts, Full::new(body)))
            .await;
        let (parts, body) = response.into_parts();
        let body = if streaming {
            let chunks = body.into_data_stream().map(|chunk| match chunk {
                Ok(bytes) => bytes,
                Err(never) => match never {},
            });
            Body::Stream(chunks.boxed())
        } else {
            match body.collect().await {
                Ok(collected) => Body::Full(collected.to_bytes()),
                Err(never) => match never {},
            }
        };
        Ok(http::Response::from_parts(parts, body))
    }
}

#[cfg(test)]
mod tests;
