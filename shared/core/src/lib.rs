//! Baton's domain: tasks, leases, transcripts, wake messages, and the ports
//! (small traits) that every backend implements.
//!
//! Nothing here talks to the network or the disk. The agent loop
//! (`baton-agent`) and the ingest handler (`baton-ingest`) are written against
//! these types; `baton-embedded` and `baton-aws` implement the ports.
//!
//! ```
//! use baton_core::{TaskId, Task, TaskStatus, Origin, Limits};
//! let task = Task::new(TaskId::generate(), "default", Origin::Http, None, Limits::default(), 0);
//! assert_eq!(task.status, TaskStatus::Queued);
//! ```

pub mod approval;
pub mod attachment;
pub mod blob;
pub mod clock;
pub mod egress;
pub mod feedback;
pub mod ids;
pub mod input_guard;
pub mod lease;
pub mod ledger;
pub mod listing;
pub mod llm;
pub mod memory;
pub mod metric;
pub mod notice;
pub mod people;
pub mod question;
pub mod queue;
pub mod recap;
pub mod reply;
pub mod retention;
pub mod store;
pub mod table;
pub mod task;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tool;
pub mod tool_names;
pub mod trace;
pub mod transcript;
pub mod wake;

pub use blob::{BlobError, BlobStore};
pub use clock::{now_ms, rfc3339, Instant, Millis};
pub use ids::{IdError, TaskId};
pub use lease::{Lease, LeaseLost, LeaseSlot};
pub use ledger::{LedgerError, Month, UsageLedger, UsageScope};
pub use llm::{
    AttachmentContent, Completion, CompletionRequest, DeltaSink, LlmError, LlmProvider, Message,
    ToolCall, ToolSpec, Usage,
};
pub use metric::{Measurement, Metric, Metrics, NoMetrics};
pub use notice::{NoticeError, Notices};
pub use people::People;
pub use queue::{Delivery, QueueError, WorkQueue};
pub use reply::{
    AnswerStream, Appended, NoReplies, PostKey, ReplyError, ReplySink, StreamedMessage, TaskPhase,
};
pub use store::{Claim, Created, StoreError, TaskStore};
pub use table::{Condition, Item, Key, Table, TableError, Write};
pub use task::{
    Approval, ChannelType, Child, ChildOutcome, Decision, Limits, Origin, ParentLink,
    PostedMessage, Task, TaskStatus, Verdict, WaitingFor,
};
pub use tool::{
    ListedTool, RemoteTools, Tool, ToolContext, ToolListing, ToolOutput, UnavailableServer,
};
pub use trace::{Span, SpanBatch, SpanExport, SpanRecorder};
pub use transcript::{Entry, EntryKind, NoteReason};
pub use wake::{ScheduleFire, Wake, WorkMessage};
