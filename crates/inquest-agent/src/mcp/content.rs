//! A tool result's content blocks as the text a model is shown.

use rmcp::model::{ContentBlock, ResourceContents};
use serde_json::Value;

use super::stdio::CUT_META_KEY;
use crate::limit::{self, ToolLimits};

/// The default longest result text kept (`[limits] max_tool_result_bytes`);
/// the rest is cut with a marker saying so.
pub const MAX_RESULT_BYTES: usize = limit::DEFAULT_MAX_TOOL_RESULT_BYTES;

/// Joins text blocks with newlines; other blocks become a short
/// placeholder (`[image image/png 1234 bytes]`); an embedded text
/// resource is shown with its URI. With no content blocks, the structured
/// content (if any) is shown as JSON. The result is cut at
/// `limits.max_result_bytes` with a marker; when the stdio transport
/// stopped reading an over-long message (its marker block, see
/// `mcp/stdio.rs`), the bytes it did not read count in the marker too.
pub fn render(blocks: &[ContentBlock], structured: Option<&Value>, limits: &ToolLimits) -> String {
    let mut not_read: u64 = 0;
    let mut parts: Vec<String> = Vec::with_capacity(blocks.len());
    for b in blocks {
        match transport_cut(b) {
            Some(bytes) => not_read += bytes,
            None => parts.push(block(b)),
        }
    }
    if parts.is_empty()
        && let Some(value) = structured
    {
        parts.push(value.to_string());
    }
    let text = parts.join("\n");
    limit::cut_lines(
        &text,
        limits.max_result_bytes,
        not_read,
        &limits.result_what(),
    )
    .into_owned()
}

/// The bytes of the MCP message the transport did not read, when `block`
/// is the marker block it left.
fn transport_cut(block: &ContentBlock) -> Option<u64> {
    let ContentBlock::Text(text) = block else {
        return None;
    };
    let cut = text.meta.as_ref()?.0.get(CUT_META_KEY)?;
    let total = cut.get("message_bytes")?.as_u64()?;
    let kept = cut.get("kept_bytes")?.as_u64()?;
    Some(total.saturating_sub(kept))
}

fn block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!(
                "[image {} {} bytes]",
                image.mime_type,
                base64_len(&image.data)
            )
        }
        ContentBlock::Audio(audio) => {
            format!(
                "[audio {} {} bytes]",
                audio.mime_type,
                base64_len(&audio.data)
            )
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri} {} {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                base64_len(blob)
            ),
            _ => "[resource]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link {} ({})]", link.uri, link.name),
        _ => "[unsupported content block]".to_owned(),
    }
}

/// Decoded size of base64 text, without decoding it.
fn base64_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3 + (data.len() % 4).saturating_sub(1)).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocks(value: Value) -> Vec<ContentBlock> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_joined_and_other_blocks_summarized() {
        let b = blocks(json!([
            {"type": "text", "text": "CPU at 97%"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.log", "text": "line"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAE="}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
        ]));
        assert_eq!(
            render(&b, None, &ToolLimits::default()),
            "CPU at 97%\n[image image/png 8 bytes]\n[audio audio/wav 3 bytes]\n\
             [resource file:///a.log]\nline\n\
             [resource file:///b.bin application/octet-stream 2 bytes]\n\
             [resource link file:///c (c)]"
        );
        let limits = ToolLimits::default();
        assert_eq!(
            render(&[], Some(&json!({"ok": true})), &limits),
            r#"{"ok":true}"#
        );
        assert_eq!(render(&[], None, &limits), "");
    }

    #[test]
    fn large_output_is_cut_on_a_char_boundary_with_a_marker() {
        let limits = ToolLimits {
            max_result_bytes: 101,
            ..ToolLimits::default()
        };
        let text = "é".repeat(100);
        let shown = render(
            &blocks(json!([{"type": "text", "text": text}])),
            None,
            &limits,
        );
        assert_eq!(
            shown,
            format!(
                "{}\n…[cut by inquest: 100 more bytes of tool result over \
                 limits.max_tool_result_bytes = 101]",
                "é".repeat(50)
            )
        );
        assert_eq!(base64_len("iVBORw0KGgo="), 8);
        assert_eq!(base64_len("AAE"), 2);
    }

    #[test]
    fn the_transport_marker_block_counts_what_was_not_read() {
        let limits = ToolLimits {
            max_result_bytes: 10,
            ..ToolLimits::default()
        };
        let cut = json!({"message_bytes": 5000, "kept_bytes": 1000});
        let b = blocks(json!([
            {"type": "text", "text": "x".repeat(30)},
            {"type": "text", "text": "", "_meta": {CUT_META_KEY: cut}},
        ]));
        // 20 bytes of text cut here, 4000 bytes of the message never read.
        assert_eq!(
            render(&b, None, &limits),
            "xxxxxxxxxx\n…[cut by inquest: 4020 more bytes of tool result over \
             limits.max_tool_result_bytes = 10]"
        );
        // Short text that arrived whole is still marked when the rest of
        // the message was not read.
        let b = blocks(json!([
            {"type": "text", "text": "ok"},
            {"type": "text", "text": "", "_meta": {CUT_META_KEY: cut}},
        ]));
        assert!(
            render(&b, Some(&json!({"x": 1})), &limits)
                .starts_with("ok\n…[cut by inquest: 4000 more")
        );
    }
}
