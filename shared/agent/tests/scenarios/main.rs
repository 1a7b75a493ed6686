//! The agent crate's scenario tests, one binary: the worker over the
//! embedded backend (SQLite queue and table in a temp dir), driven the way
//! the worker Lambda's event source mapping drives it, with test doubles
//! for the model and Slack's Web API. [`harness`] builds every scenario's
//! worker.

mod harness;

mod approvals;
mod delegation;
mod guards;
mod memory_context;
mod metrics;
mod model_choice;
mod progress;
mod reaper;
mod schedules;
