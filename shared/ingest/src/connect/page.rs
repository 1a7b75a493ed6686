//! What the Connect routes answer a browser: small pages that escape all
//! they show, redirects that set the flow's cookie, and the cookie itself.

use crate::response::{Answer, ApiError};
use baton_core::html::escape;
use baton_core::store::connections::ConnectRefused;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

/// A state as minted (32 random bytes, base64url) or near it; anything
/// else is no state.
pub(super) fn well_formed(state: &str) -> bool {
    (16..=128).contains(&state.len())
        && state
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The cookie of the flow of `state_hash`: one per flow, so two flows in
/// one browser do not overwrite each other's.
pub(super) fn cookie_name(state_hash: &str) -> String {
    format!("baton_connect_{}", &state_hash[..16.min(state_hash.len())])
}

/// The value of cookie `name` in `headers`.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The parameters of a query a browser brought back (`/oauth/callback`,
/// Sign in with Slack's return); an unreadable query has none.
pub(super) struct Query(Vec<(String, String)>);

impl Query {
    pub(super) fn parse(query: Option<&str>) -> Self {
        Query(serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default())
    }

    /// The first value of `name`.
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A page of `title` and `body`, HTML that is escaped by its maker.
fn html(status: StatusCode, title: &str, body_html: &str) -> Response<Bytes> {
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <meta name=\"viewport\" content=\"width=device-width\"></head>\
         <body style=\"font-family:sans-serif;max-width:32em;margin:3em auto\">\
         <h1>{t}</h1>{body_html}</body></html>\n",
        t = escape(title),
    );
    let mut r = Response::new(Bytes::from(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // No script, no frame: a page that asks for a click is not framed.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// A small page; `title` and `message` are escaped here.
pub(super) fn page(status: StatusCode, title: &str, message: &str) -> Response<Bytes> {
    html(status, title, &format!("<p>{}</p>", escape(message)))
}

/// The weaker check (no Sign in with Slack): a page naming whose
/// connection this is, and a button that posts `token` back to this URL.
pub(super) fn confirm_page(provider: &str, whom: &str, token: &str) -> Response<Bytes> {
    let body = format!(
        "<p>This connects your <b>{p}</b> account for <b>{w}</b>. Baton will then act \
         as <b>{w}</b> with it.</p>\
         <p>If that is not you, close this page: someone else's link would make \
         them act with your account.</p>\
         <form method=\"post\"><input type=\"hidden\" name=\"confirm\" value=\"{t}\">\
         <button type=\"submit\">I am {w}: connect {p}</button></form>",
        p = escape(provider),
        w = escape(whom),
        t = escape(token),
    );
    html(StatusCode::OK, &format!("Connect {provider}"), &body)
}

pub(super) fn refused(message: &str) -> Answer {
    Ok(page(
        StatusCode::BAD_REQUEST,
        "This connection link does not work",
        message,
    ))
}

pub(super) fn refusal(r: ConnectRefused) -> Answer {
    let why = match r {
        ConnectRefused::Unknown => "This connection link is not known.",
        ConnectRefused::Used => "This connection link was used already.",
        ConnectRefused::Expired => "This connection link has expired.",
        ConnectRefused::Foreign => {
            "This connection was started in another browser; open the Connect link again here."
        }
    };
    refused(&format!("{why} Ask Baton again for a new Connect button."))
}

/// The refusal of a browser whose person is not the link's.
pub(super) fn someone_else() -> Answer {
    Ok(page(
        StatusCode::FORBIDDEN,
        "This Connect link belongs to someone else",
        "You are signed in to Slack as someone other than the person this link was made for, \
         so nothing was connected. To connect your own account, ask Baton yourself: you will \
         get a Connect button of your own.",
    ))
}

pub(super) fn unavailable(e: impl std::fmt::Display) -> Answer {
    tracing::error!(error = %e, "connection store failure");
    Ok(page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again in a moment",
        "Baton could not reach its store; reload this page shortly.",
    ))
}

/// A redirect to `location` (`status`: 302 after a GET, 303 after the
/// confirmation's POST), setting `cookie` if given.
pub(super) fn redirect(
    status: StatusCode,
    location: &str,
    cookie: Option<&str>,
) -> Result<Response<Bytes>, ApiError> {
    let mut r = Response::new(Bytes::new());
    *r.status_mut() = status;
    let h = r.headers_mut();
    for (name, value) in [
        (header::LOCATION, location),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        h.insert(
            name,
            HeaderValue::from_str(value).map_err(ApiError::unavailable)?,
        );
    }
    if let Some(c) = cookie {
        h.insert(
            header::SET_COOKIE,
            HeaderValue::from_str(c).map_err(ApiError::unavailable)?,
        );
    }
    Ok(r)
}

/// Sets `cookie` on a page.
pub(super) fn with_cookie(
    mut page: Response<Bytes>,
    cookie: &str,
) -> Result<Response<Bytes>, ApiError> {
    page.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(cookie).map_err(ApiError::unavailable)?,
    );
    Ok(page)
}
