//! A tool result's content blocks as the text a model is shown.

use rmcp::model::{ContentBlock, ResourceContents};
use serde_json::Value;

/// Longest result text kept; the rest is cut with a note saying so.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// Joins text blocks with newlines; other blocks become a short
/// placeholder (`[image image/png 1234 bytes]`); an embedded text
/// resource is shown with its URI. With no content blocks, the structured
/// content (if any) is shown as JSON. The result is capped at
/// [`MAX_RESULT_BYTES`].
pub fn render(blocks: &[ContentBlock], structured: Option<&Value>) -> String {
    let mut parts: Vec<String> = blocks.iter().map(block).collect();
    if parts.is_empty()
        && let Some(value) = structured
    {
        parts.push(value.to_string());
    }
    cap(parts.join("\n"))
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

fn cap(text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let mut cut = MAX_RESULT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[output truncated: the tool returned {} bytes; the first {cut} are shown]",
        &text[..cut],
        text.len()
    )
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
            render(&b, None),
            "CPU at 97%\n[image image/png 8 bytes]\n[audio audio/wav 3 bytes]\n\
             [resource file:///a.log]\nline\n\
             [resource file:///b.bin application/octet-stream 2 bytes]\n\
             [resource link file:///c (c)]"
        );
        assert_eq!(render(&[], Some(&json!({"ok": true}))), r#"{"ok":true}"#);
        assert_eq!(render(&[], None), "");
    }

    #[test]
    fn large_output_is_cut_on_a_char_boundary() {
        let text = "é".repeat(MAX_RESULT_BYTES);
        let shown = render(&blocks(json!([{"type": "text", "text": text}])), None);
        assert!(shown.len() < MAX_RESULT_BYTES + 100);
        assert!(shown.contains(&format!("returned {} bytes", 2 * MAX_RESULT_BYTES)));
        assert_eq!(base64_len("iVBORw0KGgo="), 8);
        assert_eq!(base64_len("AAE"), 2);
    }
}
