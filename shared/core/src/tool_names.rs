//! The built-in tools' names, in one place both sides of a deployment see:
//! the tools and the agent loop name their tools with these, and the
//! settings check an agents file's `tools` against [`BUILT_IN`] without
//! linking the tools themselves (the ingest Lambda checks the agents file
//! too, and links no tool, provider or loop).

/// `http_request`: any public URL (the SSRF guard decides).
pub const HTTP_REQUEST: &str = "http_request";
/// `current_time`: the time in a time zone.
pub const CURRENT_TIME: &str = "current_time";
/// `sleep`: the task waits at zero compute.
pub const SLEEP: &str = "sleep";
/// `ask_user`: a question for the requester.
pub const ASK_USER: &str = crate::question::ASK_USER;
/// `wait_for_callback`: a one-time URL that resumes the task.
pub const WAIT_FOR_CALLBACK: &str = crate::callback::WAIT_FOR_CALLBACK;
/// `schedule_create`: a schedule of the requester's.
pub const SCHEDULE_CREATE: &str = "schedule_create";
/// `schedule_list`: the requester's schedules.
pub const SCHEDULE_LIST: &str = "schedule_list";
/// `schedule_delete`: one of them, gone.
pub const SCHEDULE_DELETE: &str = "schedule_delete";
/// `remember`: a fact kept for later tasks.
pub const REMEMBER: &str = "remember";
/// `recall`: the facts kept.
pub const RECALL: &str = "recall";
/// `forget`: a fact let go.
pub const FORGET: &str = "forget";
/// `delegate`: child tasks.
pub const DELEGATE: &str = "delegate";
/// `send_file`: a file for the requester (Slack thread or HTTP client).
pub const SEND_FILE: &str = "send_file";

/// Every built-in tool: the names an agents file may give an agent's
/// `tools` besides its declared HTTP tools, its MCP servers' tools and a
/// binary's own tools.
pub const BUILT_IN: &[&str] = &[
    HTTP_REQUEST,
    CURRENT_TIME,
    SLEEP,
    ASK_USER,
    WAIT_FOR_CALLBACK,
    SCHEDULE_CREATE,
    SCHEDULE_LIST,
    SCHEDULE_DELETE,
    REMEMBER,
    RECALL,
    FORGET,
    DELEGATE,
    SEND_FILE,
];
