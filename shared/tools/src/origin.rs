//! Who a tool call serves: the origin of its task, read from the store.
//!
//! Tools that keep per-user state (schedules, memory) learn who is asking
//! this way rather than from their arguments, which the model controls.

use baton_core::{Origin, TaskStore, ToolContext};

/// Where the task `ctx` runs and for whom: its origin, whose user is the
/// author of the message that started its turn ([`baton_core::Task::actor`]);
/// the error is text for the model.
pub(crate) async fn task_origin(tasks: &TaskStore, ctx: &ToolContext) -> Result<Origin, String> {
    match tasks.get(&ctx.task_id).await {
        Ok(Some(t)) => Ok(t.source.origin),
        Ok(None) => Err("this task is not in the store".into()),
        Err(e) => Err(format!("could not read the task: {e}")),
    }
}
