//! `GET /tasks?status=&agent=&thread=&q=&feedback=&since=&limit=&cursor=`:
//! the tasks, newest first, a page at a time, from the store's listing
//! index ([`baton_core::listing`]). `q` searches the first line of each
//! task's input (and its id, agent and Slack requester) over the same
//! bounded pages as the other filters; `feedback` keeps rated answers
//! (`up`, `down`, `any`); `since` (RFC 3339) ends the listing at the first
//! task created before it.

use crate::response::{json, Answer, ApiError};
use crate::Ingest;
use baton_core::listing::{Cursor, FeedbackFilter, TaskFilter, DEFAULT_PAGE, MAX_PAGE};
use baton_core::{Instant, TaskStatus};
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

const STATUSES: [TaskStatus; 6] = [
    TaskStatus::Queued,
    TaskStatus::Running,
    TaskStatus::Waiting,
    TaskStatus::Succeeded,
    TaskStatus::Failed,
    TaskStatus::Cancelled,
];

/// The longest search text (`q`).
const MAX_SEARCH_CHARS: usize = 200;

/// A listing request, checked.
#[derive(Debug, PartialEq)]
struct ListQuery {
    filter: TaskFilter,
    limit: usize,
    cursor: Option<Cursor>,
}

/// Shown in errors: at most 40 characters of what the client sent.
fn shown(value: &str) -> String {
    value.chars().take(40).collect()
}

fn parse_query(query: Option<&str>) -> Result<ListQuery, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    let mut q = ListQuery {
        filter: TaskFilter::default(),
        limit: DEFAULT_PAGE,
        cursor: None,
    };
    let mut seen: Vec<&str> = Vec::new();
    for (name, value) in &pairs {
        let name = name.as_str();
        if !matches!(
            name,
            "status" | "agent" | "thread" | "q" | "feedback" | "since" | "limit" | "cursor"
        ) {
            return Err(ApiError::bad_request(format!(
                "unknown query parameter `{}` (known: status, agent, thread, q, feedback, \
                 since, limit, cursor)",
                shown(name)
            )));
        }
        if seen.contains(&name) {
            return Err(ApiError::bad_request(format!("`{name}` is given twice")));
        }
        seen.push(name);
        if value.is_empty() {
            return Err(ApiError::bad_request(format!("`{name}` must not be empty")));
        }
        match name {
            "status" => {
                let status = STATUSES
                    .into_iter()
                    .find(|s| s.as_str() == value)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "`status` must be one of queued, running, waiting, succeeded, \
                             failed, cancelled, not `{}`",
                            shown(value)
                        ))
                    })?;
                q.filter.status = Some(status);
            }
            "agent" => q.filter.agent = Some(value.clone()),
            "thread" => q.filter.thread = Some(value.clone()),
            "q" => {
                let text = value.trim();
                if text.is_empty() || text.chars().count() > MAX_SEARCH_CHARS {
                    return Err(ApiError::bad_request(format!(
                        "`q` must be 1 to {MAX_SEARCH_CHARS} characters besides spaces"
                    )));
                }
                q.filter.text = Some(text.to_owned());
            }
            "feedback" => {
                q.filter.feedback = Some(FeedbackFilter::parse(value).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "`feedback` must be up, down or any, not `{}`",
                        shown(value)
                    ))
                })?);
            }
            "since" => {
                let at = Instant::deserialize(serde_json::Value::from(value.as_str())).map_err(
                    |_| {
                        ApiError::bad_request(format!(
                            "`since` must be an RFC 3339 instant (2026-11-01T00:00:00Z), not `{}`",
                            shown(value)
                        ))
                    },
                )?;
                q.filter.since = Some(at);
            }
            "limit" => {
                q.limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "`limit` must be a whole number from 1 to {MAX_PAGE}"
                        ))
                    })?;
            }
            _ => {
                q.cursor = Some(Cursor::decode(value).map_err(|_| {
                    ApiError::bad_request(
                        "`cursor` is malformed: pass the `next_cursor` of the previous page",
                    )
                })?);
            }
        }
    }
    Ok(q)
}

impl Ingest {
    pub(crate) async fn list_tasks(&self, query: Option<&str>) -> Answer {
        let q = parse_query(query)?;
        let page = self
            .store
            .list_tasks(&q.filter, q.limit, q.cursor.as_ref())
            .await
            .map_err(ApiError::unavailable)?;
        let mut tasks: Vec<_> = page.tasks.iter().map(|t| t.status_json()).collect();
        self.name_requesters(&page.tasks, &mut tasks).await;
        Ok(json(
            StatusCode::OK,
            &json!({
                "tasks": tasks,
                "next_cursor": page.next.map(|c| c.encode()),
            }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(query: &str) -> String {
        match parse_query(Some(query)) {
            Ok(q) => panic!("{query} accepted: {q:?}"),
            Err(e) => {
                assert_eq!(e.status, StatusCode::BAD_REQUEST);
                e.message
            }
        }
    }

    #[test]
    fn a_query_is_read_and_checked() {
        let q = parse_query(None).unwrap();
        assert_eq!(q.limit, DEFAULT_PAGE);
        assert_eq!(q.filter, TaskFilter::default());
        let q = parse_query(Some("status=waiting&agent=ops&thread=chat%201&limit=100")).unwrap();
        assert_eq!(q.filter.status, Some(TaskStatus::Waiting));
        assert_eq!(q.filter.agent.as_deref(), Some("ops"));
        assert_eq!(q.filter.thread.as_deref(), Some("chat 1"));
        assert_eq!(q.limit, 100);

        assert!(refused("status=done").contains("`status`"));
        for bad in ["limit=0", "limit=101", "limit=-1", "limit=ten"] {
            assert!(refused(bad).contains("`limit`"), "{bad}");
        }
        assert!(refused("cursor=abc").contains("`cursor`"));
        assert!(refused("agent=").contains("`agent` must not be empty"));
        assert!(refused("thread=").contains("`thread`"));
        assert!(refused("sort=asc").contains("unknown query parameter `sort`"));
        assert!(refused("agent=a&agent=b").contains("twice"));
        let q = parse_query(Some("q=%20Deploy%20billing%20")).unwrap();
        assert_eq!(q.filter.text.as_deref(), Some("Deploy billing"));
        assert!(refused("q=%20%20").contains("`q`"));
        assert!(refused(&format!("q={}", "x".repeat(201))).contains("`q`"));
        let q = parse_query(Some("feedback=down&since=2026-11-01T00%3A00%3A00Z")).unwrap();
        assert_eq!(q.filter.feedback, Some(FeedbackFilter::Down));
        assert_eq!(
            q.filter.since.map(|i| i.to_string()).as_deref(),
            Some("2026-11-01T00:00:00.000Z")
        );
        assert!(refused("feedback=yes").contains("`feedback` must be up, down or any"));
        for bad in ["since=30d", "since=yesterday", "since=2026-13-01T00:00:00Z"] {
            assert!(refused(bad).contains("`since`"), "{bad}");
        }
    }
}
