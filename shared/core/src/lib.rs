//! Baton's domain: tasks, their store, and the ports (small traits) that
//! every backend implements.
//!
//! Nothing here talks to the network or the disk. The agent loop
//! (`baton-agent`) and the ingest handler (`baton-ingest`) are written against
//! these types; `baton-embedded` and `baton-aws` implement the ports.
//!
//! | where | what |
//! | --- | --- |
//! | [`task`] | the task record ([`Task`]: status, origin, limits, what it waits for, and the rules every stored task keeps, [`Task::check`]), its `lease`, its `transcript`, and what happens to it: `approval`, `question` (`ask_user`), `feedback`, `attachment`, `recap` |
//! | [`store`] | persistence: the `table` port, the task store (`TaskStore`, `StoreError`), the task `listing`, `retention`, the `memory` facts and the usage `ledger` |
//! | [`ports`] | the ports: `llm`, `tool`, `queue`, `blob`, `reply`, `notice`, `people`, `thread` (a thread's earlier messages), `trace` (span export), `metric` |
//! | [`clock`], [`ids`] | instants and task ids |
//! | [`wake`] | the work-queue messages |
//! | [`egress`], [`input_guard`] | where an agent's `http_request` may go; screening untrusted text |
//! | [`html`] | text made safe for HTML |
//! | [`token`] | secret tokens: the hash stored of one, comparison in constant time |
//! | [`tool_names`] | the built-in tools' names, which the settings check and the tools and the loop use |
//!
//! Every module is also reachable at the crate root by its own name
//! (`baton_core::question`, `baton_core::listing`, ...), and the types the
//! rest of the workspace uses most are re-exported here. No module depends
//! on another that depends back on it but the one pair
//! `baton_module_graph::ALLOWED` names (`tests/module_graph.rs`).
//!
//! ```
//! use baton_core::{TaskId, Task, TaskStatus, Origin, Limits};
//! let task = Task::new(TaskId::generate(), "default", Origin::Http, None, Limits::default(), 0);
//! assert_eq!(task.status(), TaskStatus::Queued);
//! ```

pub mod clock;
pub mod egress;
pub mod host;
pub mod html;
pub mod ids;
pub mod input_guard;
pub mod ports;
pub mod store;
pub mod task;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod token;
pub mod tool_names;
pub mod wake;

// The paths of before the grouping (`baton_core::question`, ...), which
// the rest of the workspace uses.
pub use ports::{
    blob, llm, metric, notice, people, queue, reply, roles, thread, tool, trace, upload,
};
pub use store::{ledger, listing, memory, retention, sent_files, table};
pub use task::{
    always, approval, attachment, author, callback, connection, feedback, fork, judgment, lease,
    question, recap, sent_file, transcript, turn, wait,
};

pub use blob::{BlobError, BlobStore};
pub use clock::{now_ms, rfc3339, Instant, Millis};
pub use ids::{IdError, TaskId};
pub use lease::{Lease, LeaseLost, LeaseSlot};
pub use ledger::{LedgerError, Month, Spend, UsageLedger, UsageScope};
pub use llm::{
    AttachmentContent, Completion, CompletionRequest, DeltaSink, LlmError, LlmProvider, Message,
    ToolCall, ToolChoice, ToolSpec, Usage,
};
pub use metric::{Measurement, Metric, Metrics, NoMetrics};
pub use notice::{NoticeError, Notices};
pub use people::People;
pub use queue::{Delivery, QueueError, WorkQueue};
pub use reply::{
    AnswerStream, Appended, NoReplies, PostKey, ReplyError, ReplySink, StreamedMessage, TaskPhase,
    ToolCallShown, ToolCallState,
};
pub use roles::{NoRoles, Person, RoleName, Roles, UsergroupMembers};
pub use store::{Claim, Created, StoreError, TaskStore};
pub use table::{Condition, Item, Key, Table, TableError, Write};
pub use task::{
    Actor, Approval, Author, CapacityScope, ChannelType, Child, ChildOutcome, Decision, ForkedFrom,
    InboxMessage, Limits, Origin, ParentLink, PostedMessage, Task, TaskStatus, ToolMode,
    UnreadThread, Verdict, WaitingFor,
};
pub use thread::{EarlierMessage, HistoryError, ThreadHistory};
pub use tool::{
    ListedTool, RemoteTools, Tool, ToolContext, ToolListing, ToolOutput, UnavailableServer,
};
pub use trace::{Span, SpanBatch, SpanExport, SpanRecorder};
pub use transcript::{Entry, EntryKind, NoteReason};
pub use wake::{ScheduleFire, Wake, WorkMessage};
