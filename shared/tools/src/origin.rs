//! Who a tool call serves: the origin of its task, read from the store.
//!
//! Tools that keep per-user state (schedules, memory) learn who is asking
//! this way rather than from their arguments, which the model controls.

use baton_core::{Origin, TaskStore, ToolContext};

/// Whom the task `ctx` serves: its origin, with the author of the message
/// being answered as the user; the error is text for the model.
pub(crate) async fn task_origin(tasks: &TaskStore, ctx: &ToolContext) -> Result<Origin, String> {
    match tasks.get(&ctx.task_id).await {
        // Whoever's message is being answered (`Task::serving`).
        Ok(Some(t)) => Ok(t.serving()),
        Ok(None) => Err("this task is not in the store".into()),
        Err(e) => Err(format!("could not read the task: {e}")),
    }
}
