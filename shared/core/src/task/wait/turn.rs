//! `on_new_message = "queue"` (or `"interrupt"`): a `queued` task behind
//! the conversation's task that was ahead of it when its message came; it
//! starts, in order of arrival, once the tasks ahead of it ended
//! ([`crate::turn`]). Its admission decides at each wake.

use serde::{Deserialize, Serialize};

/// The task ahead of this one on its conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub behind: crate::TaskId,
}
