//! `baton approve` / `baton deny`: a decision on a tool call waiting for
//! one (`POST /tasks/{id}/approvals/{approval_id}`).

use super::{Api, ApiArgs, HttpError};
use anyhow::bail;
use serde_json::{json, Value};

/// Sends the decision and prints how it came out; a 404 or 409 becomes a
/// sentence saying what it means.
pub(crate) async fn run_decision(
    args: ApiArgs,
    task_id: &str,
    approval_id: &str,
    approve: bool,
) -> anyhow::Result<()> {
    let api = Api::new(&args)?;
    let path = format!(
        "/tasks/{}/approvals/{}",
        super::percent_encode(task_id),
        super::percent_encode(approval_id)
    );
    let answer = api
        .call(
            reqwest::Method::POST,
            &path,
            Some(json!({ "approve": approve })),
            None,
        )
        .await;
    match answer {
        Ok(v) => {
            println!("{}", describe(&v));
            Ok(())
        }
        Err(e) => match e.downcast_ref::<HttpError>() {
            Some(h) if h.status == 404 => bail!(
                "task {task_id} has no approval {approval_id} waiting ({})",
                h.message
            ),
            Some(h) if h.status == 409 => bail!("not decided again: {}", h.message),
            _ => Err(e),
        },
    }
}

fn describe(v: &Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or("?").to_owned();
    format!(
        "{} {} of task {}: the task is now {}",
        s("decision"),
        s("approval_id"),
        s("task_id"),
        s("status")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_outcome_in_a_sentence() {
        let v = serde_json::json!({"task_id": "t1", "approval_id": "ap-1-c",
            "decision": "approved", "status": "running"});
        assert_eq!(
            super::describe(&v),
            "approved ap-1-c of task t1: the task is now running"
        );
    }
}
