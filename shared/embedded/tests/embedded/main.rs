//! The embedded backend's tests, one binary: the SQLite table, queue and
//! file blobs, the task store over them, crash safety under `kill -9`, and
//! (ignored) throughput numbers.

mod blob;
mod crash;
mod ledger;
mod listing;
mod queue;
mod retention;
mod table;
mod task_store;
mod throughput;
