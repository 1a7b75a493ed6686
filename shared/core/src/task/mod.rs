//! The task: the record the store keeps of one run of an agent, and
//! everything that belongs to it.
//!
//! | module | what |
//! | --- | --- |
//! | `record` | the [`Task`] record and its parts: status, origin, limits, what it waits for, approvals, children, questions, votes, pending files, the streamed answer |
//! | `author` | who wrote a message and whom a task acts for, as facts: `Author`, `Actor`, `InboxMessage` |
//! | `lease` | the task's `LeaseSlot`: which worker may write it now |
//! | `parts` | the parts of a task's record: `Source`, `Budget`, `Conversation`, `Waits`, `Answer`, `Fork` |
//! | `lifecycle` | the task's status, wait and lease, changed only by its transitions (`start`, `wait`, `wake`, `admit`, `requeue`, `finish`) |
//! | `transcript` | the task's append-only log (`Entry`, `EntryKind`) |
//! | `approval` | approval ids, decisions, expiry: pure task transitions; the `ApprovalPrompts` port |
//! | `question` | `ask_user` questions and their replies |
//! | `callback` | `wait_for_callback` callbacks: tokens, delivery, expiry |
//! | `connection` | per-person OAuth connections: whose, pending Connect links, the `Credentials` and `Sealer` ports |
//! | `feedback` | votes on an answer, one per person |
//! | `attachment` | files a task's input carried |
//! | `sent_file` | files a task sends out: safe names, what is kept of them |
//! | `recap` | a conversation's earlier turns, carried into its next task |
//! | `judgment` | the agent's decisions about its own work: tiers, plans, supervision, verdicts |
//! | `fork` | a new task from a step of another: what of its transcript is copied |
//! | `wait` | what a waiting task waits for: one module per kind, its data and rules (when a wake is due, when it is over) |

pub mod always;
pub mod approval;
pub mod attachment;
pub mod author;
pub mod callback;
pub mod connection;
pub mod feedback;
pub mod fork;
pub mod judgment;
pub mod lease;
pub mod lifecycle;
pub mod parts;
pub mod question;
pub mod recap;
pub mod record;
pub mod sent_file;
pub mod transcript;
pub mod turn;
pub mod wait;

pub use author::{Actor, Author, InboxMessage};
pub use parts::{
    attributed, Approval, ChannelType, Child, ChildOutcome, Decision, ForkedFrom, Limits, Origin,
    ParentLink, PostedMessage, TaskStatus, ToolMode, UnreadThread, Verdict, API_DECIDER,
    SLACK_THREAD_PREFIX,
};
pub use record::{Invariant, Task};
pub use wait::{CapacityScope, WaitingFor};
