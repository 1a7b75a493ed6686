//! The ports: the small traits Baton is written against, which the
//! backends (`baton-embedded`, `baton-aws`), the providers (`baton-llm`),
//! Slack (`baton-slack`) and the tools (`baton-tools`) implement. Nothing
//! here talks to the network or the disk.
//!
//! | module | port |
//! | --- | --- |
//! | `llm` | `LlmProvider`, with the messages a model sees |
//! | `tool` | `Tool`, `RemoteTools` (MCP servers) |
//! | `queue` | `WorkQueue` |
//! | `blob` | `BlobStore` |
//! | `upload` | `FileUploads`: files sent into a chat thread |
//! | `reply` | `ReplySink`: answers and progress posted to a chat |
//! | `notice` | `Notices`: ephemeral notes to one person |
//! | `people` | `People`: display names |
//! | `roles` | `Roles`: who has which roles; `UsergroupMembers` |
//! | `thread` | `ThreadHistory`: a chat thread's earlier messages |
//! | `trace` | `SpanExport`, with the spans a task records |
//! | `metric` | `Metrics`, and what is measured |
//!
//! The `Table` port lives with the stores ([`crate::store`]), the
//! `ApprovalPrompts` port with approvals ([`crate::task::approval`]).

pub mod blob;
pub mod llm;
pub mod metric;
pub mod notice;
pub mod people;
pub mod queue;
pub mod reply;
pub mod roles;
pub mod thread;
pub mod tool;
pub mod trace;
pub mod upload;
