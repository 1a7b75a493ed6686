//! An MCP tool result as the text the model reads.

use crate::redact::Secrets;
use baton_core::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The result's content blocks as text, one after another; structured
/// content when there is no block; `isError` kept. Binary content is
/// named, not inlined.
pub(super) fn output(result: &CallToolResult, secrets: &Secrets) -> ToolOutput {
    let mut parts: Vec<String> = result.content.iter().map(block_text).collect();
    if parts.is_empty() {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    let text = secrets.scrub(&parts.join("\n"));
    if result.is_error.unwrap_or(false) {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!(
            "[image, {}, {} bytes of base64 not shown]",
            i.mime_type,
            i.data.len()
        ),
        ContentBlock::Audio(a) => format!(
            "[audio, {}, {} bytes of base64 not shown]",
            a.mime_type,
            a.data.len()
        ),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}, {}, {} bytes of base64 not shown]",
                mime_type.as_deref().unwrap_or("binary"),
                blob.len()
            ),
            other => serde_json::to_string(other).unwrap_or_default(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link {} ({})]", link.uri, link.name),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: serde_json::Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn blocks_become_text_and_errors_stay_errors() {
        let secrets = Secrets::new(vec!["s3cr3t-value".to_owned().into()]);
        let out = output(
            &result(json!({"content": [
                {"type": "text", "text": "3 issues match, token s3cr3t-value"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}}
            ]})),
            &secrets,
        );
        assert!(!out.is_error);
        assert_eq!(
            out.content,
            "3 issues match, token [redacted]\n[image, image/png, 8 bytes of base64 not shown]\n[resource file:///a.txt]\nhello"
        );
        let out = output(
            &result(
                json!({"content": [{"type": "text", "text": "no such issue"}], "isError": true}),
            ),
            &secrets,
        );
        assert!(out.is_error);
        assert_eq!(out.content, "no such issue");
        let out = output(
            &result(json!({"content": [], "structuredContent": {"n": 3}})),
            &secrets,
        );
        assert_eq!(out.content, r#"{"n":3}"#);
    }
}
