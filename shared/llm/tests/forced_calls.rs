//! Forced tool calls over real HTTP: each provider sends the forced
//! choice in its wire format, whole and streamed, and the mock server
//! reads it back and answers with a call of that tool, its arguments from
//! the conversation's directive (in order, for an array), the default
//! without one, text for `garbage`.

use baton_core::{
    Completion, CompletionRequest, DeltaSink, LlmProvider, Message, ToolChoice, ToolSpec,
};
use baton_llm::mock::MockLlmServer;
use baton_llm::{build_provider, LlmConfig, RetryPolicy, Secret};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const KEY: &str = "test-key-forced-123456";

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

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} decision"),
        input_schema: json!({"type": "object"}),
    }
}

/// A request forcing `tool`, over the conversation `messages`.
fn forcing(tool: &str, messages: &[&str]) -> CompletionRequest {
    CompletionRequest {
        model: String::new(),
        system: format!("Decide: call {tool}."),
        messages: messages
            .iter()
            .map(|m| Message::User {
                content: (*m).into(),
            })
            .collect(),
        tools: ["route", "plan", "supervise", "verdict"]
            .into_iter()
            .map(spec)
            .collect(),
        max_tokens: 256,
        tool_choice: ToolChoice::tool(tool),
    }
}

#[derive(Default)]
struct Text(Mutex<String>);

impl DeltaSink for Text {
    fn text(&self, delta: &str) {
        self.0.lock().unwrap().push_str(delta);
    }
    fn restart(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// `request` answered whole and streamed, checked to be the same answer.
async fn both_ways(provider: &Arc<dyn LlmProvider>, request: &CompletionRequest) -> Completion {
    let whole = provider.complete(request).await.unwrap();
    let sink = Text::default();
    let streamed = provider.complete_streaming(request, &sink).await.unwrap();
    assert_eq!(streamed, whole);
    assert_eq!(*sink.0.lock().unwrap(), whole.content);
    whole
}

/// The one call of a forced answer: its name and arguments.
fn the_call(c: &Completion) -> (&str, &Value) {
    assert!(c.content.is_empty(), "{c:?}");
    assert_eq!(c.tool_calls.len(), 1, "{c:?}");
    (&c.tool_calls[0].name, &c.tool_calls[0].arguments)
}

#[tokio::test]
async fn forced_calls_are_answered_per_directive_in_every_wire_format() {
    let server = MockLlmServer::start().await;
    for (i, config) in configs(&server).iter().enumerate() {
        let provider = build_provider(config, RetryPolicy::default()).unwrap();
        // Distinct directives per format: the mock counts calls per directive.
        let first = format!(
            r#"Find the numbers, run {i}. #route={{"tier": "strong", "modules": ["sql"], "needs_plan": true}} #verdict=garbage #supervise=[{{"action": "note", "note": "run {i}"}}, {{"action": "stop"}}] #steps=3"#
        );

        let route = both_ways(&provider, &forcing("route", &[&first])).await;
        assert_eq!(
            the_call(&route),
            (
                "route",
                &json!({"tier": "strong", "modules": ["sql"], "needs_plan": true})
            ),
            "{config:?}"
        );
        assert_eq!(
            route.stop_reason.as_deref().map(|r| r.contains("tool")),
            Some(true)
        );

        // No #plan directive: the default plan.
        let plan = both_ways(&provider, &forcing("plan", &[&first])).await;
        assert_eq!(
            the_call(&plan),
            (
                "plan",
                &json!({"steps": [{"title": "Do the task", "done_when": "the answer is given"}]})
            )
        );

        // Garbage: text, no call.
        let verdict = both_ways(&provider, &forcing("verdict", &[&first])).await;
        assert!(verdict.tool_calls.is_empty(), "{verdict:?}");
        assert!(
            verdict.content.starts_with("[scripted model] "),
            "{verdict:?}"
        );

        // The array, in order; the same request again is the same call.
        let early = forcing("supervise", &[&first, "step 1 done"]);
        let note = both_ways(&provider, &early).await;
        assert_eq!(
            the_call(&note).1,
            &json!({"action": "note", "note": format!("run {i}")})
        );
        let later = forcing("supervise", &[&first, "step 1 done", "step 2 done"]);
        assert_eq!(
            the_call(&both_ways(&provider, &later).await).1,
            &json!({"action": "stop"})
        );
        assert_eq!(
            the_call(&both_ways(&provider, &early).await).1,
            the_call(&note).1
        );
    }

    // The server read the forced choice back from every format.
    let received = server.received();
    assert_eq!(received.len(), 3 * 2 * 6);
    let forced: Vec<Option<&str>> = received.iter().map(|r| r.tool_choice.forced()).collect();
    let per_format = [
        "route",
        "route",
        "plan",
        "plan",
        "verdict",
        "verdict",
        "supervise",
        "supervise",
        "supervise",
        "supervise",
        "supervise",
        "supervise",
    ];
    for format in forced.chunks(per_format.len()) {
        assert_eq!(format, per_format.map(Some));
    }
    assert_eq!(server.streamed().iter().filter(|s| **s).count(), 18);
}

#[tokio::test]
async fn forced_calls_leave_the_conversation_s_turns_alone() {
    // A forced call between the turns of a #steps conversation changes
    // nothing of it: its answer is not an assistant message.
    let server = MockLlmServer::start().await;
    let config = &configs(&server)[1];
    let provider = build_provider(config, RetryPolicy::default()).unwrap();
    let mut request = CompletionRequest {
        tools: vec![spec("current_time"), spec("supervise")],
        tool_choice: ToolChoice::Auto,
        ..forcing("supervise", &["#steps=2 go"])
    };
    let mut turns = 0;
    loop {
        let forced = provider
            .complete(&CompletionRequest {
                tool_choice: ToolChoice::tool("supervise"),
                ..request.clone()
            })
            .await
            .unwrap();
        assert_eq!(
            the_call(&forced),
            ("supervise", &json!({"action": "continue"}))
        );
        let c = provider.complete(&request).await.unwrap();
        turns += 1;
        if c.tool_calls.is_empty() {
            assert_eq!(c.content, "[scripted model] done after 2 steps");
            break;
        }
        request.messages.push(Message::Assistant {
            content: c.content.clone(),
            tool_calls: c.tool_calls.clone(),
        });
        request.messages.push(Message::Tool {
            call_id: c.tool_calls[0].id.clone(),
            name: c.tool_calls[0].name.clone(),
            content: "12:00".into(),
            is_error: false,
        });
    }
    assert_eq!(turns, 2);
}

#[tokio::test]
async fn a_held_answer_waits_and_holds_only_its_kind() {
    // The next `supervise` call is held; the test sees it arrive and can
    // kill its caller mid-call. Other calls are answered meanwhile.
    let server = MockLlmServer::start().await;
    server.hold_next(Some("supervise"), std::time::Duration::from_secs(600));
    let provider = build_provider(&configs(&server)[0], RetryPolicy::default()).unwrap();
    let held = {
        let provider = provider.clone();
        tokio::spawn(async move {
            provider
                .complete(&forcing("supervise", &["#steps=2 go"]))
                .await
        })
    };
    while server.received().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // An ordinary step and another forced tool are not held.
    let step = CompletionRequest {
        tool_choice: ToolChoice::Auto,
        ..forcing("supervise", &["#steps=2 go"])
    };
    assert_eq!(provider.complete(&step).await.unwrap().tool_calls.len(), 1);
    let verdict = provider
        .complete(&forcing("verdict", &["#steps=2 go"]))
        .await
        .unwrap();
    assert_eq!(the_call(&verdict).0, "verdict");
    assert!(!held.is_finished(), "the held call is still in flight");
    held.abort();
    // The hold was used: the same call again is answered.
    let again = provider
        .complete(&forcing("supervise", &["#steps=2 go"]))
        .await
        .unwrap();
    assert_eq!(the_call(&again).0, "supervise");
    assert_eq!(server.received().len(), 4);
}
