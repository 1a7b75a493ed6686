//! Baton's ingest handler: the HTTP routes of `docs/api.md`.
//!
//! One implementation serves the `ingest` Lambda (API Gateway HTTP API) and
//! `baton dev`: both turn their request into an `http::Request<Bytes>` and
//! call [`Ingest::handle`]. Every input is treated as hostile until
//! verified; a refused request gets a 4xx with `{"error": "..."}` and
//! changes nothing.

mod a2a;
mod approvals;
mod auth;
mod body;
mod callbacks;
mod commands;
pub mod connect;
mod connections;
mod console;
mod event_stream;
mod fork;
mod listing;
mod mcp_origins;
#[cfg(feature = "mcp-server")]
mod mcp_server;
mod new_message;
mod rate;
mod requesters;
mod response;
mod routes;
mod schedules;
mod sent_files;
mod slack;
mod slash;
mod sse;
mod stopping;
mod submission;
mod surfaces;
mod tasks;
mod threads;
mod trace;
pub mod watch;

pub use auth::ApiToken;
pub use body::{Body, Delivery};
pub use mcp_origins::{McpOrigins, OriginError};
pub use response::ApiError;
pub use routes::route_table;

use baton_core::{TaskStore, WorkQueue};
use baton_settings::Agents;
use bytes::Bytes;
use std::sync::Arc;

/// Largest request body accepted (Slack's payloads are far smaller).
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Largest body of `POST /tasks`, which may carry files
/// (`attachments`, base64-encoded): 15 MiB.
pub const MAX_TASK_BODY_BYTES: usize = 15 * 1024 * 1024;

/// Slack app settings the ingest side needs.
#[derive(Clone)]
pub struct SlackIngest {
    pub signing_secret: baton_slack::signature::SigningSecret,
    /// The bot's own user id, so its own messages are never taken as input.
    pub bot_user_id: Option<String>,
}

/// The ingest handler and what it writes to.
#[derive(Clone)]
pub struct Ingest {
    store: TaskStore,
    queue: Arc<dyn WorkQueue>,
    agents: Agents,
    api_token: Option<ApiToken>,
    slack: Option<SlackIngest>,
    /// The schedule routes' service ([`Ingest::with_scheduler`]); without
    /// it they answer 501.
    schedules: Option<baton_schedule::ScheduleService>,
    /// What the input guard does with input that looks like prompt
    /// injection ([`Ingest::with_input_guard`]); off by default here.
    input_guard: baton_settings::InputGuardMode,
    /// Which agent serves a Slack message ([`Ingest::with_routes`]);
    /// without routes, `default`.
    routes: baton_settings::Routes,
    /// New tasks one person may start per hour
    /// ([`Ingest::with_tasks_per_hour`]); unlimited without it.
    rate: Option<rate::TaskRate>,
    /// Slack user ids and role names of those who may stop any task
    /// ([`Ingest::with_admins`]).
    admins: Arc<[String]>,
    /// Which roles a person has ([`Ingest::with_roles`]); without it,
    /// none.
    roles: Arc<dyn baton_core::Roles>,
    /// Where a refused Slack user is told why ([`Ingest::with_notices`]);
    /// without it the refusal is only logged.
    notices: Option<Arc<dyn baton_core::Notices>>,
    /// The largest file a task is given ([`Ingest::with_max_file_bytes`]).
    max_file_bytes: u64,
    /// Whether `POST /tasks` may name the `user` a task acts for
    /// ([`Ingest::with_api_may_name_user`]); refused by default.
    api_may_name_user: bool,
    /// The browser origins `/mcp` answers ([`Ingest::with_mcp_origins`]);
    /// none by default: only requests without `Origin`.
    mcp_origins: McpOrigins,
    /// Where created tasks are counted ([`Ingest::with_metrics`]).
    metrics: Arc<dyn baton_core::Metrics>,
    /// Sets up new assistant threads ([`Ingest::with_thread_setup`]).
    thread_setup: Option<Arc<baton_slack::assistant::SlackThreadSetup>>,
    /// Where the span of each created task goes
    /// ([`Ingest::with_span_export`]); without it, none is made.
    span_export: Option<Arc<dyn baton_core::SpanExport>>,
    /// Display names of Slack requesters, for the status and the console
    /// ([`Ingest::with_people`]); without it they are shown by id.
    people: Option<Arc<dyn baton_core::People>>,
    /// Per-person OAuth connections ([`Ingest::with_connections`]);
    /// without it the connection routes and `disconnect` say they are not
    /// available.
    connections: Option<baton_core::store::connections::ConnectionStore>,
    /// The flows behind `GET /connect/{state}` and `GET /oauth/callback`
    /// ([`Ingest::with_connector`]); without it (or the store) they
    /// answer 404.
    connector: Option<connect::Flows>,
}

impl Ingest {
    /// Without an API token the task routes answer 401 to everyone; without
    /// Slack settings the Slack routes answer 404.
    pub fn new(
        store: TaskStore,
        queue: Arc<dyn WorkQueue>,
        agents: Agents,
        api_token: Option<ApiToken>,
        slack: Option<SlackIngest>,
    ) -> Self {
        Ingest {
            store,
            queue,
            agents,
            api_token,
            slack,
            schedules: None,
            input_guard: baton_settings::InputGuardMode::Off,
            routes: baton_settings::Routes::default(),
            rate: None,
            admins: Arc::from(Vec::new()),
            roles: Arc::new(baton_core::NoRoles),
            notices: None,
            max_file_bytes: baton_core::attachment::DEFAULT_MAX_FILE_BYTES,
            api_may_name_user: false,
            mcp_origins: McpOrigins::default(),
            metrics: Arc::new(baton_core::NoMetrics),
            thread_setup: None,
            span_export: None,
            people: None,
            connections: None,
            connector: None,
        }
    }

    /// Serves the Connect routes (`GET /connect/{state}`,
    /// `GET /oauth/callback`) with `connector`'s flows, over the store of
    /// [`Ingest::with_connections`]. Every URL of a flow is under the
    /// connector's public URL (`BATON_PUBLIC_URL`; on AWS the stack's),
    /// never a request's `Host`.
    pub fn with_connector(mut self, connector: Arc<baton_connect::Connector>) -> Self {
        let sign_in = self.connector.take().and_then(|f| f.sign_in);
        self.connector = Some(connect::Flows { connector, sign_in });
        self
    }

    /// Asks a browser that opens a Slack person's Connect link to Sign in
    /// with Slack, and refuses anyone but the link's person
    /// (`SLACK_CLIENT_ID`, `SLACK_CLIENT_SECRET`); without it, the browser
    /// is shown a confirmation page naming the person. Call after
    /// [`Ingest::with_connector`].
    pub fn with_sign_in_with_slack(
        mut self,
        sign_in: Arc<baton_slack::openid::SignInWithSlack>,
    ) -> Self {
        if let Some(flows) = &mut self.connector {
            flows.sign_in = Some(sign_in);
        }
        self
    }

    /// Keeps per-person OAuth connections in `store` (built once per
    /// process by the runtime): `GET/DELETE /connections`, `disconnect`,
    /// the Connect routes.
    pub fn with_connections(
        mut self,
        store: baton_core::store::connections::ConnectionStore,
    ) -> Self {
        self.connections = Some(store);
        self
    }

    /// Exports a span for each task it creates (`baton.ingest`, from the
    /// request's receipt to the task being queued) to `export`, in the
    /// task's trace, before answering.
    pub fn with_span_export(mut self, export: Arc<dyn baton_core::SpanExport>) -> Self {
        self.span_export = Some(export);
        self
    }

    /// Offers the agent's suggested prompts in new assistant threads
    /// (`assistant_thread_started`); without it they are not offered.
    pub fn with_thread_setup(
        mut self,
        setup: Arc<baton_slack::assistant::SlackThreadSetup>,
    ) -> Self {
        self.thread_setup = Some(setup);
        self
    }

    /// The largest file given with a task that is kept for the model
    /// (`BATON_MAX_FILE_BYTES`, default 10 MB); a larger one is named to
    /// the model and refused in the answer.
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// Lets the API token name the `user` of `POST /tasks`, whose
    /// per-person connections the task then uses (`[connection]
    /// api_may_name_user`, #24): whoever holds the token may act as anyone
    /// who connected, so it is off unless the operator says so.
    pub fn with_api_may_name_user(mut self, allowed: bool) -> Self {
        self.api_may_name_user = allowed;
        self
    }

    /// The browser origins `/mcp` answers besides requests without an
    /// `Origin` ([`McpOrigins`]): any other is refused with 403.
    pub fn with_mcp_origins(mut self, origins: McpOrigins) -> Self {
        self.mcp_origins = origins;
        self
    }

    /// Counts the tasks it creates (`TasksCreated`, per agent) in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<dyn baton_core::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The deployment's admins (`BATON_ADMINS`, Slack user ids and role
    /// names): besides a task's requester and its agent's approvers, they
    /// may stop any task from Slack.
    pub fn with_admins(mut self, admins: Vec<String>) -> Self {
        self.admins = Arc::from(admins);
        self
    }

    /// Looks up people's roles with `roles`: a role named among an agent's
    /// approvers or the admins stands for its people.
    pub fn with_roles(mut self, roles: Arc<dyn baton_core::Roles>) -> Self {
        self.roles = roles;
        self
    }

    /// Tells Slack users, in a note only they see, why a `stop` of theirs
    /// was refused.
    pub fn with_people(mut self, people: Arc<dyn baton_core::People>) -> Self {
        self.people = Some(people);
        self
    }

    pub fn with_notices(mut self, notices: Arc<dyn baton_core::Notices>) -> Self {
        self.notices = Some(notices);
        self
    }

    /// Slack messages go to the agent of the first route that matches
    /// their workspace and channel (the agents file's `[[routes]]`), else
    /// to `default`. `POST /tasks` names its agent itself.
    pub fn with_routes(mut self, routes: baton_settings::Routes) -> Self {
        self.routes = routes;
        self
    }

    /// Refuses a person's new task once they started `per_hour` in the
    /// current hour (`[limits] tasks_per_hour`; the HTTP API is one).
    pub fn with_tasks_per_hour(mut self, per_hour: Option<u32>) -> Self {
        self.rate = per_hour.map(|n| rate::TaskRate::new(self.store.table().clone(), n));
        self
    }

    /// Screens every user input (HTTP and Slack, new tasks and messages to
    /// running ones) with the input guard in `mode`.
    pub fn with_input_guard(mut self, mode: baton_settings::InputGuardMode) -> Self {
        self.input_guard = mode;
        self
    }

    /// Answers one request for a caller that can only send a whole body
    /// (API Gateway's buffered integration): a streamed answer is
    /// collected, and ends within [`Delivery::BUFFERED`]'s limit.
    pub async fn handle(&self, request: http::Request<Bytes>) -> http::Response<Bytes> {
        let (parts, body) = self.serve(request, Delivery::BUFFERED).await.into_parts();
        http::Response::from_parts(parts, body.collect().await)
    }

    /// Answers one request; a streaming route's body comes as a
    /// [`Body::Stream`] when `delivery` can stream it.
    #[tracing::instrument(skip_all, fields(method = %request.method(), path = %request.uri().path()))]
    pub async fn serve(
        &self,
        request: http::Request<Bytes>,
        delivery: Delivery,
    ) -> http::Response<Body> {
        let response =
            match trace::timed(self, routes::route_request(self, request, delivery)).await {
                Ok(r) => r,
                Err(e) => body::full(e.into_response()),
            };
        tracing::info!(status = response.status().as_u16(), "answered");
        response
    }
}
