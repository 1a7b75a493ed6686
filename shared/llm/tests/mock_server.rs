//! The three HTTP providers against the mock server, over real HTTP and
//! their own wire formats: the scripted engine drives a multi-step tool
//! conversation, and `#fail_first` proves retries work end to end.

use baton_core::{CompletionRequest, LlmError, LlmProvider, Message, ToolCall, ToolSpec};
use baton_llm::mock::MockLlmServer;
use baton_llm::{build_provider, AwsCredentials, LlmConfig, RetryPolicy, Secret};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_millis(5),
    }
}

/// One config per wire format; without `key`, the Bedrock one signs with
/// keys the server does not know.
fn configs(server: &MockLlmServer, key: Option<&str>) -> Vec<LlmConfig> {
    let aws = match key {
        Some(_) => MockLlmServer::bedrock_credentials(),
        None => AwsCredentials::from_keys("AKIDUNKNOWN0000", "not-the-mock-secret", None),
    };
    vec![
        LlmConfig::OpenAi {
            base_url: Some(server.openai_base_url()),
            api_key: key.map(Secret::new),
            model: "mock-gpt".into(),
            file_inputs: true,
        },
        LlmConfig::Anthropic {
            base_url: Some(server.anthropic_base_url()),
            api_key: key.map(Secret::new),
            model: "mock-claude".into(),
        },
        LlmConfig::Bedrock {
            region: "eu-central-1".into(),
            endpoint_url: Some(server.bedrock_endpoint_url()),
            model: "mock-bedrock.claude-v1:0".into(),
            credentials: aws,
        },
    ]
}

/// Runs the conversation like the agent loop: every tool call answered.
async fn run(provider: &Arc<dyn LlmProvider>, input: &str) -> (String, usize, String) {
    let mut request = CompletionRequest {
        model: String::new(),
        system: "You are a test.".into(),
        messages: vec![Message::User {
            content: input.into(),
        }],
        tools: vec![ToolSpec {
            name: "current_time".into(),
            description: "The current time".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        }],
        max_tokens: 512,
        tool_choice: baton_core::ToolChoice::Auto,
    };
    let mut turns = 0;
    loop {
        let c = provider.complete(&request).await.unwrap();
        turns += 1;
        assert!(c.usage.input_tokens > 0 && c.usage.output_tokens > 0);
        if c.tool_calls.is_empty() {
            return (c.content, turns, c.model);
        }
        request.messages.push(Message::Assistant {
            content: c.content.clone(),
            tool_calls: c.tool_calls.clone(),
        });
        for call in &c.tool_calls {
            request.messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: format!("12:0{turns} for {}", call.id),
                is_error: false,
            });
        }
    }
}

#[tokio::test]
async fn every_wire_format_round_trips_with_injected_failures() {
    let server = MockLlmServer::start().await;
    for (i, config) in configs(&server, Some("test-key-123456")).iter().enumerate() {
        let before = server.request_count();
        let provider = build_provider(config, fast_policy()).unwrap();
        // A distinct first message per provider: failures are per conversation.
        let input = format!("go #steps=3 #parallel=2 #fail_first=2 run{i}");
        let (answer, turns, model) = run(&provider, &input).await;
        assert_eq!(answer, "[scripted model] done after 3 steps");
        assert_eq!(turns, 3);
        assert!(model.starts_with("mock-"), "{model}");
        // Two injected failures, then one request per turn.
        assert_eq!(server.request_count() - before, 5, "{config:?}");
    }

    // The server decoded what the providers encoded: system, tools, and
    // tool results with their names recovered from the calls.
    let received = server.received();
    let last = received.last().unwrap();
    assert_eq!(last.system, "You are a test.");
    assert_eq!(last.tools[0].name, "current_time");
    assert_eq!(
        last.tools[0].input_schema,
        json!({"type": "object", "properties": {}})
    );
    // The model id went through the URL path, `:` and all.
    assert_eq!(last.model, "mock-bedrock.claude-v1:0");
    let tool_results: Vec<_> = last
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, call_id, .. } => Some((name.as_str(), call_id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        tool_results,
        [
            ("current_time", "call_1_0"),
            ("current_time", "call_1_1"),
            ("current_time", "call_2_0"),
            ("current_time", "call_2_1")
        ]
    );
}

#[tokio::test]
async fn tool_directive_quotes_the_result_over_every_format() {
    let server = MockLlmServer::start().await;
    for config in configs(&server, Some("test-key-123456")) {
        let provider = build_provider(&config, fast_policy()).unwrap();
        let (answer, turns, _) =
            run(&provider, r#"#tool=current_time #args={"timezone":"UTC"}"#).await;
        assert_eq!(turns, 2);
        assert_eq!(
            answer,
            "[scripted model] tool current_time said: 12:01 for call_1_0"
        );
        let (answer, _, _) = run(&provider, "#reply=NO_REPLY").await;
        assert_eq!(answer, "NO_REPLY");
    }
}

#[tokio::test]
async fn missing_key_is_rejected_with_401_and_unknown_aws_keys_with_403() {
    let server = MockLlmServer::start().await;
    for config in configs(&server, None) {
        let expected = match config {
            LlmConfig::Bedrock { .. } => 403,
            _ => 401,
        };
        let provider = build_provider(&config, fast_policy()).unwrap();
        let request = CompletionRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![Message::User {
                content: "hi".into(),
            }],
            tools: vec![],
            max_tokens: 10,
            tool_choice: baton_core::ToolChoice::Auto,
        };
        match provider.complete(&request).await {
            Err(LlmError::Rejected { status, .. }) if status == expected => {}
            other => panic!("expected {expected}, got {other:?}"),
        }
    }
    // Not retried: one request per provider.
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn failures_beyond_the_retries_surface() {
    let server = MockLlmServer::start().await;
    let policy = RetryPolicy {
        max_attempts: 2,
        ..fast_policy()
    };
    let config = &configs(&server, Some("test-key-123456"))[1];
    let provider = build_provider(config, policy).unwrap();
    let request = CompletionRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![Message::User {
            content: "#fail_first=3 hi".into(),
        }],
        tools: vec![],
        max_tokens: 10,
        tool_choice: baton_core::ToolChoice::Auto,
    };
    let err = provider.complete(&request).await.unwrap_err();
    assert!(matches!(err, LlmError::Overloaded { .. }), "{err:?}");
    // The next call uses up the third failure, then succeeds.
    let c = provider.complete(&request).await.unwrap();
    assert_eq!(c.content, "[scripted model] You said: #fail_first=3 hi");
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn bedrock_throttling_is_retried_until_the_policy_gives_up() {
    let server = MockLlmServer::start().await;
    let policy = RetryPolicy {
        max_attempts: 2,
        ..fast_policy()
    };
    let config = &configs(&server, Some("k"))[2];
    let provider = build_provider(config, policy).unwrap();
    let request = CompletionRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![Message::User {
            content: "#fail_first=3 hi".into(),
        }],
        tools: vec![],
        max_tokens: 10,
        tool_choice: baton_core::ToolChoice::Auto,
    };
    let err = provider.complete(&request).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::RateLimited {
            retry_after: Some(Duration::ZERO)
        }
    );
    let c = provider.complete(&request).await.unwrap();
    assert_eq!(c.content, "[scripted model] You said: #fail_first=3 hi");
    assert_eq!(c.model, "mock-bedrock.claude-v1:0");
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn each_format_reports_a_context_overflow_by_its_type() {
    let server = MockLlmServer::start().await;
    for config in configs(&server, Some("test-key-123456")) {
        let provider = build_provider(&config, fast_policy()).unwrap();
        for (directive, overflow) in [("#overflow_first=1", true), ("#reject_first=1", false)] {
            let request = CompletionRequest {
                model: String::new(),
                system: String::new(),
                messages: vec![Message::User {
                    content: format!("{directive} {config:?}"),
                }],
                tools: vec![],
                max_tokens: 10,
                tool_choice: baton_core::ToolChoice::Auto,
            };
            let err = provider.complete(&request).await.unwrap_err();
            assert_eq!(err.is_context_overflow(), overflow, "{config:?}: {err:?}");
            assert!(
                matches!(
                    err,
                    LlmError::Rejected { status: 400, .. }
                        | LlmError::ContextOverflow { status: 400, .. }
                ),
                "{err:?}"
            );
            // Refusals are final: the next call of the conversation answers.
            assert!(provider.complete(&request).await.is_ok());
        }
    }
}

#[tokio::test]
async fn a_request_without_tools_tells_its_tool_turns_as_text() {
    // The closing summary: no tools offered, tool calls in the history.
    // (The mock refuses tool blocks without a toolConfig, as Converse does.)
    let server = MockLlmServer::start().await;
    for config in configs(&server, Some("test-key-123456")) {
        let provider = build_provider(&config, fast_policy()).unwrap();
        let call = ToolCall {
            id: "call_1_0".into(),
            name: "current_time".into(),
            arguments: json!({"timezone": "UTC"}),
        };
        let request = CompletionRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![
                Message::User {
                    content: "#steps=3".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call],
                },
                Message::Tool {
                    call_id: "call_1_0".into(),
                    name: "current_time".into(),
                    content: "12:00".into(),
                    is_error: false,
                },
                Message::User {
                    content: "Stop. Do not call any tools.".into(),
                },
            ],
            tools: vec![],
            max_tokens: 10,
            tool_choice: baton_core::ToolChoice::Auto,
        };
        let c = provider.complete(&request).await.unwrap();
        assert_eq!(
            c.content, "[scripted model] summary after 1 turns",
            "{config:?}"
        );
        let received = server.received().pop().unwrap();
        assert!(
            received.messages.iter().all(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls.is_empty(),
                Message::Tool { .. } => false,
                Message::User { .. } | Message::Attachment { .. } => true,
            }),
            "{config:?}: {received:?}"
        );
        let text = format!("{:?}", received.messages);
        assert!(
            text.contains(r#"[called tool current_time with {\"timezone\":\"UTC\"}]"#)
                && text.contains("[result of current_time: 12:00]"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn server_stops_on_drop() {
    let server = MockLlmServer::start().await;
    let addr = server.addr();
    drop(server);
    // Give the graceful shutdown a moment to close the listener.
    let mut refused = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "mock server still accepts connections after drop");
}

/// Attached files reach each provider in its own wire format and come back
/// out of the mock: text as a labelled text block, an image as an image
/// block, a PDF as a document block (a `file` part on OpenAI, named when
/// file inputs are off), an unreadable file named with why.
#[tokio::test]
async fn attachments_travel_in_each_wire_format() {
    use baton_core::AttachmentContent;
    let server = MockLlmServer::start().await;
    let mut all = configs(&server, Some("test-key-123456"));
    all.push(LlmConfig::OpenAi {
        base_url: Some(server.openai_base_url()),
        api_key: Some(Secret::new("test-key-123456")),
        model: "mock-gpt".into(),
        file_inputs: false,
    });
    for config in all {
        let provider = build_provider(&config, fast_policy()).unwrap();
        let attachment = |name: &str, media_type: &str, content| Message::Attachment {
            name: name.into(),
            media_type: media_type.into(),
            content,
        };
        let request = CompletionRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![
                Message::User {
                    content: "look at these".into(),
                },
                attachment(
                    "notes.txt",
                    "text/plain",
                    AttachmentContent::Text {
                        text: "the widget count is 42".into(),
                    },
                ),
                attachment(
                    "dot.png",
                    "image/png",
                    AttachmentContent::Image {
                        data_base64: "iVBORw0KGgo=".into(),
                    },
                ),
                attachment(
                    "q3 report.pdf",
                    "application/pdf",
                    AttachmentContent::Document {
                        data_base64: "JVBERi0=".into(),
                    },
                ),
                attachment(
                    "a.zip",
                    "application/zip",
                    AttachmentContent::Unreadable {
                        reason: "unsupported".into(),
                    },
                ),
            ],
            tools: vec![],
            max_tokens: 10,
            tool_choice: baton_core::ToolChoice::Auto,
        };
        provider.complete(&request).await.unwrap();
        let received = server.received().pop().unwrap();
        let text = format!("{:?}", received.messages);
        assert!(
            text.contains("[file notes.txt]\\nthe widget count is 42"),
            "{config:?}: {text}"
        );
        assert!(
            text.contains(
                "[file a.zip (application/zip) is attached, but cannot be read: unsupported]"
            ),
            "{config:?}: {text}"
        );
        let image = received.messages.iter().find_map(|m| match m {
            Message::Attachment {
                media_type,
                content: AttachmentContent::Image { data_base64 },
                ..
            } => Some((media_type.as_str(), data_base64.as_str())),
            _ => None,
        });
        assert_eq!(image, Some(("image/png", "iVBORw0KGgo=")), "{config:?}");
        let document = received.messages.iter().find_map(|m| match m {
            Message::Attachment {
                name,
                content: AttachmentContent::Document { data_base64 },
                ..
            } => Some((name.as_str(), data_base64.as_str())),
            _ => None,
        });
        match config {
            LlmConfig::OpenAi {
                file_inputs: true, ..
            } => assert_eq!(document, Some(("q3 report.pdf", "JVBERi0="))),
            LlmConfig::OpenAi { .. } => {
                assert_eq!(document, None);
                assert!(text.contains("[file q3 report.pdf (application/pdf) is attached, but this model cannot read files of this kind]"), "{text}");
            }
            LlmConfig::Anthropic { .. } => {
                assert_eq!(document, Some(("q3 report.pdf", "JVBERi0=")))
            }
            _ => assert_eq!(document, Some(("q3 report-pdf", "JVBERi0="))),
        }
    }
}
