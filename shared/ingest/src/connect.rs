//! `GET /connect/{state}` and `GET /oauth/callback`: a person connecting
//! their account (issue #24, docs/connections.md). No bearer: the `state`
//! of a Connect link is the capability, found by its hash. Before the
//! browser is sent to the provider it must show that its person is the
//! link's ([`identity`]: Sign in with Slack, or a confirmation page); the
//! flow is bound to the browser by a cookie and claimed once at the
//! callback (released again if the code exchange fails, so the link works
//! until it expires). Every refusal is a page that changes nothing; the
//! pages escape whatever they show, and the callback shows nothing it was
//! given unless its `state` is this browser's flow.
//!
//! Every URL of a flow is under the deployment's configured public URL
//! (`BATON_PUBLIC_URL`; on AWS the stack's), never a request's `Host`.

mod identity;
mod page;

use crate::response::{Answer, ApiError};
use crate::Ingest;
use baton_connect::{browser_secret, ConnectError, Connector};
use baton_core::connection::ConnectRequest;
use baton_core::store::connections::{
    ConnectFlow, ConnectRefused, ConnectionError, ConnectionStore, PendingConnect, PutCondition,
};
use baton_core::token::{constant_time_eq, hash_token};
use baton_core::{Instant, StoreError, TaskStatus, Wake};
use baton_slack::openid::SignInWithSlack;
use http::{HeaderMap, StatusCode};
use page::{cookie, cookie_name, page, refusal, refused, unavailable, well_formed, Query};
use secrecy::ExposeSecret;
use std::sync::Arc;
use std::time::Duration;

pub use identity::SIGNED_IN_PATH;

/// How long a flow started at `/connect` may take to come back.
pub const FLOW_EXPIRES_AFTER: Duration = Duration::from_secs(10 * 60);

/// The deployment's flows, under its configured public URL, and Sign in
/// with Slack when the Slack app is set up for it.
#[derive(Clone)]
pub struct Flows {
    pub(crate) connector: Arc<Connector>,
    pub(crate) sign_in: Option<Arc<SignInWithSlack>>,
}

/// What the connect routes need: the store of connections and the flows.
struct ConnectRoutes<'a> {
    store: &'a ConnectionStore,
    flows: &'a Flows,
}

impl ConnectRoutes<'_> {
    fn connector(&self) -> &Connector {
        &self.flows.connector
    }

    /// `Set-Cookie` of the flow of `state_hash` holding `secret`.
    fn cookie(&self, state_hash: &str, secret: &str) -> String {
        let secure = self.connector().redirect_url().scheme() == "https";
        format!(
            "{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}",
            cookie_name(state_hash),
            secret,
            FLOW_EXPIRES_AFTER.as_secs(),
            if secure { "; Secure" } else { "" }
        )
    }

    /// The pending request of a link's `state`, if it may still be used,
    /// with the state's hash (what the store keys it by).
    async fn usable(&self, state: &str, now: Instant) -> Result<(String, PendingConnect), Answer> {
        if !well_formed(state) {
            return Err(refusal(ConnectRefused::Unknown));
        }
        let state_hash = hash_token(state);
        let pending = match self.store.connect_request(&state_hash).await {
            Ok(Some(p)) => p,
            Ok(None) => return Err(refusal(ConnectRefused::Unknown)),
            Err(e) => return Err(unavailable(e)),
        };
        if pending.used_at.is_some() {
            return Err(refusal(ConnectRefused::Used));
        }
        if pending.request.expires_at <= now {
            return Err(refusal(ConnectRefused::Expired));
        }
        Ok((state_hash, pending))
    }

    /// The browser showed it is the link's person's: starts the flow
    /// bound to it (`browser`, its cookie's hash) and sends it to the
    /// provider.
    async fn start_flow(
        &self,
        state: &str,
        request: &ConnectRequest,
        browser: String,
        status: StatusCode,
        set_cookie: Option<&str>,
        now: Instant,
    ) -> Answer {
        let provider = request.provider.clone();
        let authorization = match self.connector().start(&provider, state).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(provider, error = %e, "cannot start a connection flow");
                return Ok(page(
                    StatusCode::BAD_GATEWAY,
                    &format!("Cannot connect {provider} right now"),
                    &e.to_string(),
                ));
            }
        };
        let flow = ConnectFlow {
            pkce_verifier: authorization.pkce_verifier,
            browser,
            flow_expires_at: now
                .saturating_add(FLOW_EXPIRES_AFTER)
                .capped(Some(request.expires_at)),
        };
        match self
            .store
            .start_connect_flow(&hash_token(state), flow, now)
            .await
        {
            Ok(_) => {}
            Err(ConnectionError::Refused(r)) => return refusal(r),
            Err(e) => return unavailable(e),
        }
        tracing::info!(task_id = %request.task_id, provider, "connection flow started");
        page::redirect(status, authorization.url.as_str(), set_cookie)
    }
}

/// Why a connected task could not be woken (it finds its tokens anyway
/// when it next runs).
#[derive(Debug, thiserror::Error)]
enum WakeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] baton_core::QueueError),
}

/// The hash of this browser's cookie for the flow of `state_hash` (empty
/// without one: matches no flow).
fn browser_of(headers: &HeaderMap, state_hash: &str) -> String {
    cookie(headers, &cookie_name(state_hash))
        .map(hash_token)
        .unwrap_or_default()
}

impl Ingest {
    fn connect_routes(&self) -> Result<ConnectRoutes<'_>, ApiError> {
        let (Some(store), Some(flows)) = (&self.connections, &self.connector) else {
            return Err(ApiError::not_found(
                baton_core::store::connections::NOT_CONFIGURED,
            ));
        };
        Ok(ConnectRoutes { store, flows })
    }

    /// `GET /oauth/callback?code&state`: finishes the flow, once.
    pub(crate) async fn connect_callback(
        &self,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Answer {
        let routes = self.connect_routes()?;
        let params = Query::parse(query);
        let now = Instant::now();
        // Nothing the request carries is shown unless its state is a flow
        // this browser started.
        let (hash, pending) = match routes
            .usable(params.get("state").unwrap_or_default(), now)
            .await
        {
            Ok(found) => found,
            Err(answer) => return answer,
        };
        let browser = browser_of(headers, &hash);
        let ours = pending
            .browser
            .as_deref()
            .is_some_and(|b| constant_time_eq(b.as_bytes(), browser.as_bytes()));
        if !ours {
            return refusal(ConnectRefused::Foreign);
        }
        if let Some(error) = params.get("error") {
            let description = params.get("error_description").unwrap_or_default();
            return refused(&format!(
                "The provider did not connect your account: {}{}{}. Open the Connect link again to retry.",
                error.chars().take(100).collect::<String>(),
                if description.is_empty() { "" } else { ": " },
                description.chars().take(300).collect::<String>()
            ));
        }
        let Some(code) = params.get("code").filter(|c| !c.is_empty()) else {
            return refused("The provider sent no authorization code.");
        };
        let claimed = match routes.store.claim_connect(&hash, &browser, now).await {
            Ok(c) => c,
            Err(ConnectionError::Refused(r)) => return refusal(r),
            Err(e) => return unavailable(e),
        };
        let request = claimed.request;
        let provider = request.provider.clone();
        let tokens = match routes
            .connector()
            .exchange(&provider, code, &claimed.pkce_verifier)
            .await
        {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(provider, error = %e, "code exchange failed");
                // Nothing was connected: the link works again until it
                // expires.
                if let Err(e) = routes.store.release_connect(&hash).await {
                    tracing::error!(provider, error = %e, "cannot release a failed connect claim");
                }
                let status = match e {
                    ConnectError::Refused { .. } => StatusCode::BAD_REQUEST,
                    _ => StatusCode::BAD_GATEWAY,
                };
                return Ok(page(
                    status,
                    &format!("{provider} was not connected"),
                    &format!(
                        "{e}. Open the Connect link again to retry (it works until it expires), \
                         or ask Baton again for a new one."
                    ),
                ));
            }
        };
        if let Err(e) = routes
            .store
            .put(
                &request.person,
                &provider,
                &tokens,
                PutCondition::Replace,
                now,
            )
            .await
        {
            return unavailable(e);
        }
        tracing::info!(task_id = %request.task_id, provider, "connection made");
        if let Err(e) = self.wake_connected(&request).await {
            // The tokens are kept: the task finds them when it next runs.
            tracing::error!(task_id = %request.task_id, error = %e, "cannot wake the connected task");
        }
        Ok(page(
            StatusCode::OK,
            &format!("Connected {provider}"),
            &format!("Connected {provider} \u{2014} you can close this tab."),
        ))
    }

    /// Lifts the task's wait for this connection and wakes it, as a
    /// delivered callback does.
    async fn wake_connected(&self, request: &ConnectRequest) -> Result<(), WakeError> {
        let (task, _) = self
            .store
            .update(&request.task_id, None, |t| {
                Ok(baton_core::wait::connection::lift(t, &request.provider))
            })
            .await?;
        if task.status() == TaskStatus::Queued {
            self.queue
                .send(
                    &Wake::new(task.id.clone(), "connection").to_body(),
                    Duration::ZERO,
                )
                .await?;
        }
        Ok(())
    }

    /// `GET /oauth/client-metadata.json`: Baton's Client ID Metadata
    /// Document (its URL is Baton's client id at servers that take one).
    pub(crate) fn client_metadata(&self) -> Answer {
        let routes = self.connect_routes()?;
        let doc = routes
            .connector()
            .client_metadata()
            .ok_or_else(|| ApiError::not_found("no client metadata without an https public URL"))?;
        Ok(crate::response::json(StatusCode::OK, &doc))
    }
}

/// A fresh random secret, its hash kept and itself given to the browser.
fn fresh() -> (String, String) {
    let secret = browser_secret();
    let plain = secret.expose_secret().to_owned();
    (hash_token(&plain), plain)
}

#[cfg(test)]
mod tests;
