//! Baton's built-in tools and the registry the agent loop calls them through.
//!
//! - [`HttpRequestTool`] (`http_request`): one HTTP(S) request. Only http and
//!   https; every address the host resolves to must be public (no private,
//!   loopback, link-local/metadata, CGNAT, multicast, documentation or
//!   reserved ranges, in IPv4 or any IPv6 form) unless the operator listed its
//!   `host:port` in `BATON_HTTP_ALLOW` ([`AllowList`]). The connection is
//!   pinned to the checked addresses, redirects of GET and HEAD (at most 5)
//!   are checked hop by hop (other methods follow none: the redirect is the
//!   result, the call having been approved for its URL), the body is cut at 256 KiB with a marker, and every request carries
//!   the call's `Idempotency-Key`. Only GET and HEAD calls are idempotent.
//! - [`CurrentTimeTool`] (`current_time`): the time in an IANA zone.
//! - [`MemoryTools`] (`remember`, `recall`, `forget`): facts kept per Slack
//!   workspace and per user in the task table (`baton_core::memory`).
//! - [`SendFileTool`] (`send_file`): a file into the task's Slack thread,
//!   or kept with the task for its HTTP client; exactly once across crashes.
//! - [`Toolset`]: name → tool, with [`Toolset::builtins`].
//! - [`ScheduleTools`] (`schedule_create`, `schedule_list`,
//!   `schedule_delete`).
//! - [`DeclaredHttpTool`]: an operator's `[http_tools.NAME]` from the agents
//!   file (docs/tools.md): arguments checked against its JSON Schema, sent
//!   with the call's `Idempotency-Key`, no SSRF refusal (the operator chose
//!   the host), and every secret value it was configured with scrubbed from
//!   what it returns.
//!
//! Tools never fail with a Rust error: bad arguments, refusals and transport
//! failures come back as [`baton_core::ToolOutput::error`] text that the
//! model can read and act on. Argument types derive their JSON Schema
//! (`schemars`), so the schema the model sees and the parser agree.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_tools::AllowListError> {
//! use baton_core::{TaskId, ToolContext};
//! use baton_tools::{AllowList, Toolset};
//!
//! let tools = Toolset::builtins(AllowList::parse("localhost:8080")?);
//! let ctx = ToolContext::new(TaskId::generate(), 1, "call_1");
//! if let Some(tool) = tools.get("current_time") {
//!     let out = tool.call(serde_json::json!({"timezone": "Europe/Berlin"}), &ctx).await;
//!     println!("{}", out.content);
//! }
//! # Ok(()) }
//! ```

mod args;
mod declared;
mod guard;
mod http;
mod mcp;
pub mod memory;
mod origin;
mod redact;
pub mod schedule;
pub mod send_file;
mod time;
mod toolset;

pub use args::{input_schema, parse_args};
pub use declared::{DeclaredHttpTool, DeclaredToolError, HttpToolDef};
pub use guard::{blocked_reason, AllowList, AllowListError, Refusal, ALLOW_ENV};
pub use http::{HttpConfig, HttpMethod, HttpRequestArgs, HttpRequestTool, HTTP_REQUEST};
pub use mcp::{McpServerDef, McpServers};
pub use memory::MemoryTools;
pub use redact::{is_sensitive_name, redact_url, Secrets, REDACTED};
pub use schedule::ScheduleTools;
pub use send_file::{SendFileArgs, SendFileTool, SEND_FILE};
pub use time::{CurrentTimeArgs, CurrentTimeTool, CURRENT_TIME};
pub use toolset::Toolset;
