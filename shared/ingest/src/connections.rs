//! The operators' view of per-person OAuth connections:
//! `GET /connections[?user=W:U]` lists them (never a token) and
//! `DELETE /connections/{person}/{provider}` revokes one: its stored
//! tokens are deleted, so the person's next call that needs it asks them
//! to connect again. Bearer-authenticated like the task routes.

use crate::response::{json, Answer, ApiError};
use crate::Ingest;
use baton_core::connection::{ConnectionSummary, PersonKey};
use baton_core::rfc3339;
use baton_core::store::connections::{ConnectionStore, MAX_PAGE, NOT_CONFIGURED};
use http::StatusCode;
use serde_json::{json, Value};

/// Listing page size when none is asked for.
const DEFAULT_PAGE: usize = 50;
/// The longest workspace, user or provider name taken.
const MAX_NAME: usize = 128;

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+')
}

/// A provider's name as connections are keyed by (`[mcp.NAME]`,
/// `[oauth.NAME]`): letters, digits, `.`, `_`, `-`.
pub(crate) fn provider_name(raw: &str) -> Option<&str> {
    let ok = !raw.is_empty()
        && raw.len() <= MAX_NAME
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    ok.then_some(raw)
}

/// `W:U` (the colon may come percent-encoded, `%3A`), each part of
/// letters, digits and `._-@+`.
fn person(raw: &str) -> Option<PersonKey> {
    let text = raw.replace("%3A", ":").replace("%3a", ":");
    let p = PersonKey::parse(&text)?;
    let part_ok = |s: &str| s.len() <= MAX_NAME && s.chars().all(name_char);
    (part_ok(&p.workspace) && part_ok(&p.user)).then_some(p)
}

fn shown(raw: &str) -> String {
    raw.chars().take(80).collect()
}

fn store_error(e: impl std::fmt::Display) -> ApiError {
    ApiError::unavailable(e)
}

/// A connection as the API shows it.
pub(crate) fn summary_json(s: &ConnectionSummary) -> Value {
    let mut v = json!({
        "person": s.person.to_string(),
        "provider": s.provider,
        "connected_at": rfc3339(s.connected_at.millis()),
        "scopes": s.scopes,
    });
    if let Some(at) = s.refreshed_at {
        v["refreshed_at"] = json!(rfc3339(at.millis()));
    }
    if let Some(at) = s.expires_at {
        v["expires_at"] = json!(rfc3339(at.millis()));
    }
    v
}

struct ListQuery {
    user: Option<PersonKey>,
    limit: usize,
    cursor: Option<String>,
}

fn parse_query(query: Option<&str>) -> Result<ListQuery, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    let mut q = ListQuery {
        user: None,
        limit: DEFAULT_PAGE,
        cursor: None,
    };
    let mut seen: Vec<String> = Vec::new();
    for (name, value) in pairs {
        if seen.contains(&name) {
            return Err(ApiError::bad_request(format!(
                "`{}` is given twice",
                shown(&name)
            )));
        }
        match name.as_str() {
            "user" => {
                q.user = Some(person(&value).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "`user` must be WORKSPACE:USER (e.g. T123:U456 or api:alice), not `{}`",
                        shown(&value)
                    ))
                })?);
            }
            "limit" => {
                q.limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("`limit` must be from 1 to {MAX_PAGE}"))
                    })?;
            }
            "cursor" => {
                // A position in the listing: `{person}#{provider}`.
                let ok = value
                    .split_once('#')
                    .is_some_and(|(p, prov)| person(p).is_some() && provider_name(prov).is_some());
                if !ok {
                    return Err(ApiError::bad_request("malformed cursor"));
                }
                q.cursor = Some(value);
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter `{}` (known: user, limit, cursor)",
                    shown(other)
                )))
            }
        }
        seen.push(name);
    }
    if q.user.is_some() && q.cursor.is_some() {
        return Err(ApiError::bad_request(
            "`cursor` pages the listing of everyone; `user` lists one person's at once",
        ));
    }
    Ok(q)
}

impl Ingest {
    fn connection_store(&self) -> Result<&ConnectionStore, ApiError> {
        self.connections
            .as_ref()
            .ok_or_else(|| ApiError::new(StatusCode::NOT_IMPLEMENTED, NOT_CONFIGURED))
    }

    /// `GET /connections[?user=W:U&limit=N&cursor=C]`.
    pub(crate) async fn list_connections(&self, query: Option<&str>) -> Answer {
        let q = parse_query(query)?;
        let store = self.connection_store()?;
        let (list, next) = match &q.user {
            Some(p) => (store.list_for(p).await.map_err(store_error)?, None),
            None => {
                let page = store
                    .list_all(q.cursor.as_deref(), q.limit)
                    .await
                    .map_err(store_error)?;
                (page.connections, page.next)
            }
        };
        let connections: Vec<Value> = list.iter().map(summary_json).collect();
        let mut body = json!({ "connections": connections });
        if let Some(next) = next {
            body["next_cursor"] = json!(next);
        }
        Ok(json(StatusCode::OK, &body))
    }

    /// `DELETE /connections/{person}/{provider}`.
    pub(crate) async fn revoke_connection(&self, raw_person: &str, raw_provider: &str) -> Answer {
        let who = person(raw_person).ok_or_else(|| {
            ApiError::bad_request(format!(
                "`{}` is not a person (WORKSPACE:USER, e.g. T123:U456 or api:alice)",
                shown(raw_person)
            ))
        })?;
        let provider = provider_name(raw_provider).ok_or_else(|| {
            ApiError::bad_request(format!("`{}` is not a provider name", shown(raw_provider)))
        })?;
        let store = self.connection_store()?;
        if !store.delete(&who, provider).await.map_err(store_error)? {
            return Err(ApiError::not_found(format!(
                "{who} has no connection to `{provider}`"
            )));
        }
        tracing::info!(person = %who, provider, "connection revoked by an operator");
        Ok(json(
            StatusCode::OK,
            &json!({"revoked": true, "person": who.to_string(), "provider": provider}),
        ))
    }
}

#[cfg(test)]
mod tests;
