//! End to end, one binary: the real `baton` binary (`baton dev`, the CLI)
//! and the Lambda binaries under a local Lambda Runtime API, against a mock
//! LLM server speaking the providers' wire formats, a fake Slack Web API and
//! moto; plus the crate-layering check over `cargo metadata`.

/// Each scenario on both backends: `on_both_backends!(a, b)` makes the
/// tests `embedded::a`, `aws::a`, ... calling `a(Backend::Embedded)` and
/// `a(Backend::Aws)` (each file brings its `Backend` into scope).
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $name() {
                    super::$name(super::Backend::Embedded).await;
                }
            )*
        }
        mod aws {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $name() {
                    super::$name(super::Backend::Aws).await;
                }
            )*
        }
    };
}

mod a2a;
mod always_approvals;
mod ask_user;
mod attachments;
mod callbacks;
mod common;
mod runtime_api;

mod capacity;
mod cli;
mod commands;
mod configuration;
mod connections;
mod connections_cli;
mod console;
mod conversation_summaries;
mod conversations;
mod egress;
mod evals;
mod evals_export;
mod event_stream;
mod first_hour;
mod fork_cli;
mod forks;
mod hostile_input;
mod http_tools;
mod impersonation;
mod judgment;
mod lambda_functions;
mod layers;
mod local_stack;
mod long_conversations;
mod loop_recovery;
mod lost_wakes;
mod mcp_server;
mod mcp_tools;
mod memory_scope;
mod metrics;
mod new_messages;
mod otel_export;
mod pinned_model;
mod policies;
mod request_guards;
mod roles;
mod routes;
mod schedule_limits;
mod send_file;
mod slack_files;
mod slack_surfaces;
mod slack_threads;
mod steering_files;
mod stop_permissions;
mod streaming;
mod task_listing;
mod template;
/// The WebDriver client of the console test.
mod webdriver;
