//! The tool port: what the agent loop needs of a tool.

use crate::ids::TaskId;
use crate::llm::ToolSpec;
use crate::task::connection::{CredentialError, Credentials, PersonKey};
pub use crate::task::transcript::{ListedTool, ToolListing, UnavailableServer};
use async_trait::async_trait;
use std::sync::Arc;

/// Headers the HTTP client frames a request with itself; neither the model
/// (`http_request`) nor a declared tool may set them, or the request's
/// framing could be desynchronised. Lowercase.
pub const CLIENT_MANAGED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

/// What a tool knows about the call it serves.
#[derive(Clone)]
pub struct ToolContext {
    pub task_id: TaskId,
    /// `task_id:step:tool_call_id`: stable across retries of the same call,
    /// so tools pass it downstream (the `Idempotency-Key` header of
    /// `http_request`) and a side effect repeated after a crash can be
    /// recognised by the receiver.
    pub idempotency_key: String,
    /// The only hosts an `http_request` of this agent may reach, every hop
    /// ([`crate::egress`]); `None`: any host the deployment allows.
    pub allowed_hosts: Option<crate::egress::AllowedHosts>,
    /// Whom the call is made for ([`crate::Task::acting_for`]): whose
    /// connections a per-person tool (`auth = "oauth"`) uses; `None` when
    /// the task acts for nobody.
    pub person: Option<PersonKey>,
    /// Where a per-person tool gets that person's bearer token; `None`
    /// where connections are not wired (tests, tools that need none).
    pub credentials: Option<Arc<dyn Credentials>>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("task_id", &self.task_id)
            .field("idempotency_key", &self.idempotency_key)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("person", &self.person)
            .field("credentials", &self.credentials.is_some())
            .finish()
    }
}

impl ToolContext {
    pub fn new(task_id: TaskId, step: u32, call_id: &str) -> Self {
        let idempotency_key = format!("{task_id}:{step}:{call_id}");
        ToolContext {
            task_id,
            idempotency_key,
            allowed_hosts: None,
            person: None,
            credentials: None,
        }
    }

    /// Makes the call for `person`, with `credentials` to reach their
    /// connections.
    pub fn acting_for(
        mut self,
        person: Option<PersonKey>,
        credentials: Option<Arc<dyn Credentials>>,
    ) -> Self {
        self.person = person;
        self.credentials = credentials;
        self
    }

    /// `person`'s bearer token for `provider`, or why there is none
    /// (nobody to act for, no connection, the vault down).
    pub async fn bearer(
        &self,
        provider: &str,
    ) -> Result<(PersonKey, secrecy::SecretString), CredentialError> {
        let person = self
            .person
            .clone()
            .ok_or_else(|| CredentialError::NoPerson {
                provider: provider.to_owned(),
            })?;
        let credentials = self.credentials.as_ref().ok_or_else(|| {
            CredentialError::Unavailable("connections are not set up here".into())
        })?;
        let token = credentials.bearer(&person, provider).await?;
        Ok((person, token))
    }

    /// Holds the call to the agent's `http_request.allow_hosts`.
    pub fn with_allowed_hosts(mut self, hosts: Option<crate::egress::AllowedHosts>) -> Self {
        self.allowed_hosts = hosts;
        self
    }
}

/// A tool's answer. Failures are answers too: the model reads them and may
/// try something else, so a tool reports them here rather than erroring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// The call could not be made because the person has no working
    /// connection to this provider: the loop does not write this output,
    /// it asks the person to connect and runs the call again once they
    /// did ([`ToolOutput::needs_connection`]).
    pub needs_connection: Option<String>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
            needs_connection: None,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
            needs_connection: None,
        }
    }

    /// The person must connect to `provider` first: the call waits for
    /// the connection and runs again ([`ToolOutput::needs_connection`]).
    pub fn needs_connection(provider: impl Into<String>) -> Self {
        let provider = provider.into();
        ToolOutput {
            content: format!("a connection to `{provider}` is needed"),
            is_error: true,
            needs_connection: Some(provider),
        }
    }

    /// What a per-person tool answers when it cannot get a token: a
    /// missing connection waits for one, anything else is an error the
    /// model reads (never a token).
    pub fn of_credential_error(e: &CredentialError) -> Self {
        match e {
            CredentialError::NotConnected { provider, .. } => {
                ToolOutput::needs_connection(provider.clone())
            }
            other => ToolOutput::error(other.to_string()),
        }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// Whether running this call twice is harmless. A tool that is not is
    /// never re-run after a crash interrupted it: it gets an "interrupted —
    /// may or may not have happened" result instead.
    /// Decided per call: `http_request` is idempotent for GET, not POST.
    fn idempotent(&self, arguments: &serde_json::Value) -> bool {
        let _ = arguments;
        true
    }

    /// Whether a call that is not [`idempotent`](Self::idempotent) may
    /// still be run again after a crash interrupted it, because the tool
    /// finds what the interrupted attempt did (by the call's
    /// [`ToolContext::idempotency_key`]) and finishes it instead of doing
    /// it twice (`send_file`). Such a call is still marked started before
    /// it runs, and never run in a one-write turn. Default: no.
    fn resumes_interrupted(&self, arguments: &serde_json::Value) -> bool {
        let _ = arguments;
        false
    }

    /// Whether this call should wait for a human's approval before it runs
    /// (a side effect someone should see first). The agent's approval rules,
    /// when it sets them, decide instead. Decided per call: `http_request`
    /// asks for anything but GET and HEAD.
    fn needs_approval(&self, arguments: &serde_json::Value) -> bool {
        let _ = arguments;
        false
    }

    /// [`Tool::needs_approval`] for a call made for a task from `origin`:
    /// a tool whose calls need approval only when a person in Slack asks
    /// (`schedule_create`) says so here. By default, the same for all.
    fn needs_approval_for(&self, arguments: &serde_json::Value, origin: &crate::Origin) -> bool {
        let _ = origin;
        self.needs_approval(arguments)
    }

    /// The arguments as this tool will take them: what its schema makes
    /// of them (defaults filled in, aliases resolved: `http_request`'s
    /// method upper-cased and its URL parsed). The agent loop decides a
    /// call on this form, shows it for approval and runs it, so what the
    /// policies check is what runs. Arguments the tool would reject are
    /// returned as they are (the call then fails with the tool's error).
    /// Applying it twice changes nothing more. By default, as given.
    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        arguments
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput;
}

/// The port to remote tool servers: list their tools when a task starts,
/// and make each listed tool callable in any later segment, by any
/// process, with no state from the one that listed it.
#[async_trait]
pub trait RemoteTools: Send + Sync {
    /// Lists the tools of `servers` now. Never fails: a server that cannot
    /// be listed is named in [`ToolListing::unavailable`].
    async fn list(&self, servers: &[&str]) -> ToolListing;

    /// Lists `servers` for `person` (#24): a per-person server
    /// (`auth = "oauth"`) is listed with their token from `credentials`;
    /// one they have not connected offers only its `{server}__connect`
    /// tool ([`ListedTool::is_connect`]); for nobody it is unavailable,
    /// saying why. By default, as [`RemoteTools::list`].
    async fn list_for(
        &self,
        servers: &[&str],
        person: Option<&PersonKey>,
        credentials: Option<Arc<dyn Credentials>>,
    ) -> ToolListing {
        let _ = (person, credentials);
        self.list(servers).await
    }

    /// The callable tool for one listed earlier; `None` when its server
    /// is no longer configured.
    fn tool(&self, listed: &ListedTool) -> Option<Arc<dyn Tool>>;
}

/// `text` with its middle cut out: its first `head` and last `tail`
/// characters kept, with `marker(cut, total)` between them (`cut`
/// characters of `total` left out), and how many were cut. Unchanged (and
/// 0) when it has no more than `head + tail` characters. Character-safe.
/// The one head-and-tail cut: tool results here, old tool results and
/// summarised messages in the agent's context.
pub fn cut_middle(
    text: &str,
    head: usize,
    tail: usize,
    marker: impl FnOnce(usize, usize) -> String,
) -> (String, usize) {
    let total = text.chars().count();
    if total <= head.saturating_add(tail) {
        return (text.to_owned(), 0);
    }
    let cut = total - head - tail;
    let head: String = text.chars().take(head).collect();
    let tail: String = text.chars().skip(total - tail).collect();
    (format!("{head}{}{tail}", marker(cut, total)), cut)
}

/// Cuts a tool result to `max_chars`, keeping its head and tail (the end
/// of an output often holds the error or the summary), with a marker the
/// model can read saying how much was cut. Returns the text and how many
/// characters were cut.
pub fn truncate(text: &str, max_chars: usize, tool: &str) -> (String, u64) {
    let tail_len = max_chars / 5;
    let (out, cut) = cut_middle(text, max_chars - tail_len, tail_len, |cut, total| {
        format!(
            "\n[OUTPUT TRUNCATED: {cut} of {total} characters from {tool} were cut here; ask for a narrower result if you need them]\n"
        )
    });
    (out, cut as u64)
}

#[cfg(test)]
mod tests {
    use super::{cut_middle, truncate};

    #[test]
    fn idempotency_key_names_task_step_and_call() {
        let id = crate::TaskId::generate();
        let ctx = super::ToolContext::new(id.clone(), 3, "call_9");
        assert_eq!(ctx.idempotency_key, format!("{id}:3:call_9"));
    }

    #[test]
    fn truncation_keeps_head_and_tail_and_says_how_much() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let (out, cut) = truncate(&text, 100, "http_request");
        assert_eq!(cut, 900);
        assert!(out.starts_with(&text[..80]));
        assert!(out.ends_with(&text[980..]));
        assert!(out.contains("900 of 1000 characters from http_request"));
        assert_eq!(truncate("short", 100, "t"), ("short".to_owned(), 0));
    }

    #[test]
    fn cut_middle_is_char_safe_and_names_the_cut() {
        let marker = |cut: usize, total: usize| format!("[{cut}/{total}]");
        let s = "é".repeat(10);
        assert_eq!(cut_middle(&s, 5, 5, marker), (s.clone(), 0));
        let (out, cut) = cut_middle(&"日".repeat(30), 4, 2, marker);
        assert_eq!((out.as_str(), cut), ("日日日日[24/30]日日", 24));
        assert_eq!(cut_middle("abc", usize::MAX, 1, marker).1, 0);
    }
}
