//! Persistence: the [`Table`](table::Table) port every backend implements,
//! and the stores written over it.
//!
//! | module | what |
//! | --- | --- |
//! | `table` | the `Table` port: versioned items, indexes, TTL, all-or-nothing writes |
//! | `error` | `StoreError` |
//! | `tasks` | `TaskStore`: tasks, transcripts, dedupe keys and threads, with the conditions that make the execution protocol safe |
//! | `listing` | the task listing (`GET /tasks`): its index keys, cursors, filters |
//! | `retention` | when finished tasks and their transcripts expire |
//! | `memory` | the facts store |
//! | `ledger` | monthly usage counters |
//! | `callbacks` | the lookup items of `wait_for_callback` tokens |
//! | `connections` | per-person OAuth tokens (sealed), Connect links, registered OAuth clients |
//! | `sent_files` | what is kept of the files tasks send (`send_file`) |

pub mod callbacks;
pub mod connections;
pub mod error;
pub mod ledger;
pub mod listing;
pub mod memory;
pub mod retention;
pub mod sent_files;
pub mod table;
pub mod tasks;

pub use error::StoreError;
pub use tasks::{
    active_index, Claim, Created, TaskStore, Thread, DEDUPE_TTL_SECS, DEFAULT_ACTIVE_SHARDS,
    DEFAULT_OFFLOAD_THRESHOLD, LEGACY_ACTIVE_INDEX, MAX_ACTIVE_SHARDS,
};
