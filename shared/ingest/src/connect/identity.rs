//! Who is in the browser that opened a Connect link, before it is sent to
//! the provider: a link forwarded to someone else must not bind *their*
//! account to the link's person.
//!
//! - **Sign in with Slack** (a Slack person, and `SLACK_CLIENT_ID` /
//!   `SLACK_CLIENT_SECRET` set): `GET /connect/{state}` sends the browser
//!   to Slack's OpenID Connect authorize page (the link's workspace as the
//!   `team` hint, a fresh nonce, the state); Slack sends it back to
//!   [`SIGNED_IN_PATH`], whose code `openid.connect.token` exchanges for
//!   the signed-in user and workspace. Another person than the link's gets
//!   a page saying so, and nothing is stored; the link's person goes on to
//!   the provider.
//! - **Confirmation** (otherwise, and for people named over the HTTP API):
//!   a page names the person and workspace the connection is for, with a
//!   button that posts back (a form token and the flow's cookie, both
//!   checked). The weaker option: it tells an honest forwardee the link is
//!   not theirs, but cannot stop one who clicks anyway.

use super::page::{self, confirm_page, refusal, refused, someone_else, unavailable, Query};
use super::{browser_of, fresh, ConnectRoutes, FLOW_EXPIRES_AFTER};
use crate::response::Answer;
use crate::Ingest;
use baton_core::callback::hash_token;
use baton_core::connection::{PersonKey, API_WORKSPACE};
use baton_core::store::connections::{BrowserCheck, ConnectRefused, ConnectionError};
use baton_core::token::constant_time_eq;
use baton_core::Instant;
use baton_slack::openid::{SignInError, SignInWithSlack};
use http::{HeaderMap, StatusCode};

/// Where Slack sends the browser back after Sign in with Slack, under the
/// public URL (the redirect URL to register in the Slack app).
pub const SIGNED_IN_PATH: &str = "/connect/slack/signed-in";

/// How the browser shows it is the link's person's.
enum Check<'a> {
    SignIn(&'a SignInWithSlack),
    Confirm,
}

fn check_for<'a>(routes: &ConnectRoutes<'a>, person: &PersonKey) -> Check<'a> {
    match &routes.flows.sign_in {
        Some(s) if person.workspace != API_WORKSPACE => Check::SignIn(s),
        _ => Check::Confirm,
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Ingest {
    /// Who `person` is, as the confirmation page names them.
    async fn named(&self, person: &PersonKey) -> String {
        if person.workspace == API_WORKSPACE {
            return format!("{} (named by the HTTP API)", person.user);
        }
        let name = match &self.people {
            Some(p) => p.display_name(&person.workspace, &person.user).await,
            None => None,
        };
        match name {
            Some(n) => format!(
                "{n} (Slack user {} in workspace {})",
                person.user, person.workspace
            ),
            None => format!(
                "Slack user {} in workspace {}",
                person.user, person.workspace
            ),
        }
    }

    /// `GET /connect/{state}`: asks the browser to show it is the link's
    /// person's (Sign in with Slack, or the confirmation page).
    pub(crate) async fn connect_start(&self, state: &str) -> Answer {
        let routes = self.connect_routes()?;
        let now = Instant::now();
        let (hash, pending) = match routes.usable(state, now).await {
            Ok(found) => found,
            Err(answer) => return answer,
        };
        let request = pending.request;
        let (browser, cookie_secret) = fresh();
        let mode = check_for(&routes, &request.person);
        // Sign in: the nonce (it travels in the URL anyway); confirm: the
        // hash of the form's token.
        let (challenge, secret) = match mode {
            Check::SignIn(_) => {
                let (_, nonce) = fresh();
                (nonce.clone(), nonce)
            }
            Check::Confirm => fresh(),
        };
        let check = BrowserCheck {
            browser,
            challenge,
            expires_at: now
                .saturating_add(FLOW_EXPIRES_AFTER)
                .capped(Some(request.expires_at)),
        };
        match routes.store.begin_browser_check(&hash, check, now).await {
            Ok(_) => {}
            Err(ConnectionError::Refused(r)) => return refusal(r),
            Err(e) => return unavailable(e),
        }
        let cookie = routes.cookie(&hash, &cookie_secret);
        match mode {
            Check::SignIn(sign_in) => {
                let back = routes
                    .connector()
                    .url_of(SIGNED_IN_PATH)
                    .map_err(crate::response::ApiError::unavailable)?;
                let url =
                    sign_in.authorize_url(state, &secret, back.as_str(), &request.person.workspace);
                page::redirect(StatusCode::FOUND, url.as_str(), Some(&cookie))
            }
            Check::Confirm => {
                let whom = self.named(&request.person).await;
                page::with_cookie(confirm_page(&request.provider, &whom, &secret), &cookie)
            }
        }
    }

    /// `POST /connect/{state}` (`confirm=TOKEN`): the confirmation page's
    /// button, from the browser that was shown it.
    pub(crate) async fn connect_confirm(
        &self,
        state: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Answer {
        let routes = self.connect_routes()?;
        let now = Instant::now();
        let (hash, pending) = match routes.usable(state, now).await {
            Ok(found) => found,
            Err(answer) => return answer,
        };
        let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(body).unwrap_or_default();
        let token = fields
            .iter()
            .find(|(k, _)| k == "confirm")
            .map(|(_, v)| v.as_str())
            .unwrap_or_default();
        let browser = browser_of(headers, &hash);
        let confirmed = matches!(check_for(&routes, &pending.request.person), Check::Confirm)
            && pending.check.as_ref().is_some_and(|c| {
                constant_time_eq(c.browser.as_bytes(), browser.as_bytes())
                    && !token.is_empty()
                    && constant_time_eq(c.challenge.as_bytes(), hash_token(token).as_bytes())
                    && now < c.expires_at
            });
        if !confirmed {
            return refused(
                "This confirmation is not from the page Baton showed in this browser, or it \
                 has expired. Open the Connect link again.",
            );
        }
        routes
            .start_flow(
                state,
                &pending.request,
                browser,
                StatusCode::SEE_OTHER,
                None,
                now,
            )
            .await
    }

    /// `GET /connect/slack/signed-in?code&state`: Slack's answer to Sign in
    /// with Slack. The link's person goes on to the provider; anyone else
    /// is told the link is not theirs, and nothing changes.
    pub(crate) async fn connect_signed_in(
        &self,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Answer {
        let routes = self.connect_routes()?;
        let Some(sign_in) = routes.flows.sign_in.clone() else {
            return Err(crate::response::ApiError::not_found(
                "Sign in with Slack is not set up (SLACK_CLIENT_ID, SLACK_CLIENT_SECRET)",
            ));
        };
        let params = Query::parse(query);
        let now = Instant::now();
        let state = params.get("state").unwrap_or_default();
        let (hash, pending) = match routes.usable(state, now).await {
            Ok(found) => found,
            Err(answer) => return answer,
        };
        let browser = browser_of(headers, &hash);
        let Some(check) = pending.check.filter(|c| {
            constant_time_eq(c.browser.as_bytes(), browser.as_bytes()) && now < c.expires_at
        }) else {
            return refusal(ConnectRefused::Foreign);
        };
        let Some(code) = params.get("code").filter(|c| !c.is_empty()) else {
            return refused(
                "Slack did not sign you in, so nothing was connected. Open the Connect link again to retry.",
            );
        };
        let back = routes
            .connector()
            .url_of(SIGNED_IN_PATH)
            .map_err(crate::response::ApiError::unavailable)?;
        let request = pending.request;
        let who = match sign_in
            .exchange(code, back.as_str(), &check.challenge, now_secs())
            .await
        {
            Ok(who) => who,
            Err(e) => {
                tracing::warn!(task_id = %request.task_id, error = %e, "Sign in with Slack failed");
                let status = match e {
                    SignInError::Unreachable(_) => StatusCode::BAD_GATEWAY,
                    _ => StatusCode::BAD_REQUEST,
                };
                return Ok(page::page(
                    status,
                    "Slack could not confirm who you are",
                    &format!("{e}. Nothing was connected; open the Connect link again to retry."),
                ));
            }
        };
        if who.team_id != request.person.workspace || who.user_id != request.person.user {
            tracing::warn!(task_id = %request.task_id, provider = %request.provider,
                "a Connect link was opened by someone other than its person; refused");
            return someone_else();
        }
        routes
            .start_flow(state, &request, browser, StatusCode::FOUND, None, now)
            .await
    }
}
