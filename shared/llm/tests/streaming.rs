//! The three HTTP providers streaming against the mock server, over real
//! HTTP and their own wire formats (server-sent events for OpenAI and
//! Anthropic, AWS event stream frames for Bedrock `ConverseStream`): the
//! text told as it comes adds up to the answer, which is the one
//! `complete` gives; broken streams and error events are mapped and
//! retried, the sink restarted.

use baton_core::{CompletionRequest, DeltaSink, LlmError, LlmProvider, Message, ToolSpec};
use baton_llm::mock::MockLlmServer;
use baton_llm::{
    build_provider, AnthropicProvider, BedrockProvider, LlmConfig, OpenAiProvider, RetryPolicy,
    Secret,
};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KEY: &str = "test-key-streaming-123456";

fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_millis(5),
    }
}

/// One config per wire format.
fn configs(server: &MockLlmServer) -> Vec<LlmConfig> {
    vec![
        LlmConfig::OpenAi {
            base_url: Some(server.openai_base_url()),
            api_key: Some(Secret::new(KEY)),
            model: "mock-gpt".into(),
            file_inputs: true,
        },
        LlmConfig::Anthropic {
            base_url: Some(server.anthropic_base_url()),
            api_key: Some(Secret::new(KEY)),
            model: "mock-claude".into(),
        },
        LlmConfig::Bedrock {
            region: "eu-central-1".into(),
            endpoint_url: Some(server.bedrock_endpoint_url()),
            model: "mock-bedrock.claude-v1:0".into(),
            credentials: MockLlmServer::bedrock_credentials(),
        },
    ]
}

fn ask(first: &str) -> CompletionRequest {
    CompletionRequest {
        model: String::new(),
        system: "You are a test.".into(),
        messages: vec![Message::User {
            content: first.into(),
        }],
        tools: vec![ToolSpec {
            name: "current_time".into(),
            description: "The current time".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        }],
        max_tokens: 512,
        tool_choice: baton_core::ToolChoice::Auto,
    }
}

/// What a sink was told, in order.
#[derive(Debug, Clone, PartialEq)]
enum Told {
    Text(String),
    Restart,
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Told>>);

impl Recorder {
    fn told(&self) -> Vec<Told> {
        self.0.lock().unwrap().clone()
    }

    /// The text since the last restart.
    fn text(&self) -> String {
        let told = self.told();
        let from = told
            .iter()
            .rposition(|t| *t == Told::Restart)
            .map_or(0, |i| i + 1);
        told[from..]
            .iter()
            .map(|t| match t {
                Told::Text(s) => s.as_str(),
                Told::Restart => "",
            })
            .collect()
    }

    fn pieces(&self) -> usize {
        self.told()
            .iter()
            .filter(|t| matches!(t, Told::Text(_)))
            .count()
    }

    fn restarts(&self) -> usize {
        self.told().iter().filter(|t| **t == Told::Restart).count()
    }
}

impl DeltaSink for Recorder {
    fn text(&self, delta: &str) {
        self.0.lock().unwrap().push(Told::Text(delta.to_owned()));
    }

    fn restart(&self) {
        self.0.lock().unwrap().push(Told::Restart);
    }
}

/// A reply long enough for several pieces, with characters of two,
/// three and four bytes.
const REPLY: &str = "Grüße aus Köln — 東京 too, and 😀🎉 at the end of a long-ish line.";

#[tokio::test]
async fn streamed_text_adds_up_to_the_answer_complete_gives() {
    let server = MockLlmServer::start().await;
    for (i, config) in configs(&server).iter().enumerate() {
        let provider = build_provider(config, fast_policy()).unwrap();
        let request = ask(&format!("run{i} #reply={REPLY}"));
        let whole = provider.complete(&request).await.unwrap();
        let sink = Recorder::default();
        let streamed = provider.complete_streaming(&request, &sink).await.unwrap();
        assert_eq!(streamed, whole, "{config:?}");
        assert_eq!(streamed.content, REPLY);
        assert_eq!(sink.text(), REPLY, "{config:?}");
        assert!(sink.pieces() >= 3, "{config:?}: {:?}", sink.told());
        assert_eq!(sink.restarts(), 0);
        assert!(streamed.usage.input_tokens > 0 && streamed.usage.output_tokens > 0);
        assert_eq!(streamed.stop_reason, whole.stop_reason);
    }
    // Each format's request asked to stream, or not, as sent.
    assert_eq!(server.streamed(), [false, true, false, true, false, true]);
    let received = server.received();
    assert_eq!(received[0], received[1]);
    assert_eq!(received[4], received[5]);
}

#[tokio::test]
async fn tool_calls_stream_intact_in_every_format() {
    let server = MockLlmServer::start().await;
    for config in configs(&server) {
        let provider = build_provider(&config, fast_policy()).unwrap();
        let mut request = ask("#steps=2 #parallel=3");
        let whole = provider.complete(&request).await.unwrap();
        let sink = Recorder::default();
        let streamed = provider.complete_streaming(&request, &sink).await.unwrap();
        assert_eq!(streamed, whole, "{config:?}");
        assert_eq!(streamed.tool_calls.len(), 3);
        assert_eq!(sink.told(), []);

        // Arguments with unicode and nesting, cut into many pieces.
        request.messages[0] = Message::User {
            content: r#"#tool=lookup #args={"q":"Grüße😀東京","n":[1,2,{"deep":true}],"s":"a\"b"}"#
                .into(),
        };
        let whole = provider.complete(&request).await.unwrap();
        let streamed = provider
            .complete_streaming(&request, &Recorder::default())
            .await
            .unwrap();
        assert_eq!(streamed, whole, "{config:?}");
        assert_eq!(
            streamed.tool_calls[0].arguments,
            json!({"q": "Grüße😀東京", "n": [1, 2, {"deep": true}], "s": "a\"b"})
        );
        assert_eq!(
            streamed.stop_reason.as_deref(),
            whole.stop_reason.as_deref()
        );
    }
}

#[tokio::test]
async fn a_broken_stream_is_retried_and_the_sink_restarted() {
    let server = MockLlmServer::start().await;
    for (i, config) in configs(&server).iter().enumerate() {
        let provider = build_provider(config, fast_policy()).unwrap();
        let before = server.request_count();
        let request = ask(&format!("run{i} #stream_fail_after=5 #reply={REPLY}"));
        let sink = Recorder::default();
        let c = provider.complete_streaming(&request, &sink).await.unwrap();
        assert_eq!(c.content, REPLY);
        assert_eq!(sink.text(), REPLY, "{config:?}");
        assert_eq!(sink.restarts(), 1, "{config:?}: {:?}", sink.told());
        // Some text came before the break (five events: the first pieces).
        assert!(matches!(sink.told()[0], Told::Text(_)), "{:?}", sink.told());
        assert_eq!(server.request_count() - before, 2);
    }
}

#[tokio::test]
async fn error_events_are_mapped_and_retried() {
    let server = MockLlmServer::start().await;
    for (i, config) in configs(&server).iter().enumerate() {
        // Without retries, the error as the provider's kind.
        let provider = build_provider(config, RetryPolicy::none()).unwrap();
        let request = ask(&format!("run{i} #stream_error_after=5 #reply={REPLY}"));
        let sink = Recorder::default();
        let err = provider
            .complete_streaming(&request, &sink)
            .await
            .unwrap_err();
        match config {
            LlmConfig::OpenAi { .. } => assert!(
                matches!(&err, LlmError::Server { status: 500, message, .. } if message.contains("#stream_error_after")),
                "{err:?}"
            ),
            _ => assert_eq!(err, LlmError::Overloaded { retry_after: None }),
        }
        assert!(err.is_retryable());
        assert!(!sink.text().is_empty() && REPLY.starts_with(&sink.text()));

        // With them, a restart and the whole answer (the error came once).
        let provider = build_provider(config, fast_policy()).unwrap();
        let request = ask(&format!("again{i} #stream_error_after=5 #reply={REPLY}"));
        let sink = Recorder::default();
        let c = provider.complete_streaming(&request, &sink).await.unwrap();
        assert_eq!((c.content.as_str(), sink.text().as_str()), (REPLY, REPLY));
        assert_eq!(sink.restarts(), 1);
    }
}

#[tokio::test]
async fn failures_before_the_stream_are_retried_without_a_restart() {
    let server = MockLlmServer::start().await;
    for (i, config) in configs(&server).iter().enumerate() {
        let provider = build_provider(config, fast_policy()).unwrap();
        let request = ask(&format!("run{i} #fail_first=2 hello"));
        let sink = Recorder::default();
        let c = provider.complete_streaming(&request, &sink).await.unwrap();
        assert_eq!(sink.text(), c.content);
        assert_eq!(sink.restarts(), 0, "{config:?}");
    }
    assert_eq!(server.request_count(), 9);
}

#[tokio::test]
async fn a_stalled_stream_times_out_between_pieces() {
    let server = MockLlmServer::start().await;
    let idle = Duration::from_millis(400);
    let providers: Vec<Arc<dyn LlmProvider>> = vec![
        Arc::new(
            OpenAiProvider::new(Some(&server.openai_base_url()), Some(Secret::new(KEY)), "m")
                .unwrap()
                .with_idle_timeout(idle),
        ),
        Arc::new(
            AnthropicProvider::new(
                Some(&server.anthropic_base_url()),
                Some(Secret::new(KEY)),
                "m",
            )
            .unwrap()
            .with_idle_timeout(idle),
        ),
        Arc::new(
            BedrockProvider::new(
                "eu-central-1",
                Some(&server.bedrock_endpoint_url()),
                MockLlmServer::bedrock_credentials(),
                "m",
            )
            .unwrap()
            .with_idle_timeout(idle),
        ),
    ];
    for provider in providers {
        // Pieces 30 ms apart stream fine; 2 s apart, the wait gives up.
        let sink = Recorder::default();
        let c = provider
            .complete_streaming(&ask(&format!("#chunk_ms=30 #reply={REPLY}")), &sink)
            .await
            .unwrap();
        assert_eq!(sink.text(), c.content);
        let sink = Recorder::default();
        let err = provider
            .complete_streaming(&ask(&format!("#chunk_ms=2000 #reply={REPLY}")), &sink)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LlmError::Transport(m) if m.contains("stalled")),
            "{}: {err:?}",
            provider.name()
        );
    }
}

#[tokio::test]
async fn the_scripted_model_streams_in_pieces() {
    let provider = build_provider(&LlmConfig::Scripted, fast_policy()).unwrap();
    let request = ask(&format!("#chunk_ms=0 #reply={REPLY}"));
    let sink = Recorder::default();
    let c = provider.complete_streaming(&request, &sink).await.unwrap();
    assert_eq!(c, provider.complete(&request).await.unwrap());
    assert_eq!(sink.text(), REPLY);
    assert!(sink.pieces() >= 3);
}
