//! Size limits of tool output, and the pure helpers that apply them: a
//! char-boundary cut that leaves a visible marker, binary detection and
//! escaping, and a line reader that never holds more than its cap.
//!
//! Every cut leaves a marker in the text saying what was cut and how much:
//! `…[cut by inquest: 1234567 more bytes of tool result over
//! limits.max_tool_result_bytes = 65536]`.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Default of `[limits] max_tool_result_bytes`: the longest tool result
/// text kept (MCP and the built-in file tools).
pub const DEFAULT_MAX_TOOL_RESULT_BYTES: usize = 64 * 1024;
/// Default of `[limits] max_mcp_stderr_line_bytes`.
pub const DEFAULT_MAX_MCP_STDERR_LINE_BYTES: usize = 4 * 1024;
/// Largest accepted `max_tool_result_bytes` (a typo guard; the transport
/// ceiling is four times it).
pub const MAX_TOOL_RESULT_BYTES_LIMIT: usize = 16 * 1024 * 1024;
/// Largest accepted `max_mcp_stderr_line_bytes`.
pub const MAX_STDERR_LINE_BYTES_LIMIT: usize = 1024 * 1024;
/// How much of a binary file is shown, escaped.
pub const BINARY_PREFIX_BYTES: usize = 256;
/// How much of a file decides whether it is binary.
pub const SNIFF_BYTES: usize = 8 * 1024;

/// The caps tools run under (from the server's `[limits]` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Longest tool result text kept; the rest is cut with a marker.
    pub max_result_bytes: usize,
    /// Longest MCP server stderr line kept; the rest is dropped unread
    /// into memory, and the log says how much.
    pub max_stderr_line_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            max_result_bytes: DEFAULT_MAX_TOOL_RESULT_BYTES,
            max_stderr_line_bytes: DEFAULT_MAX_MCP_STDERR_LINE_BYTES,
        }
    }
}

impl ToolLimits {
    /// The most bytes of one MCP stdio message (one JSON-RPC line) held in
    /// memory: four times the result cap (JSON escaping and a server's
    /// `structuredContent` copy can make the message several times the
    /// text) plus 64 KiB of envelope. A longer message is read on and
    /// discarded past this point, and its kept prefix is answered as a cut
    /// result (`mcp/stdio.rs`).
    pub fn message_ceiling(&self) -> usize {
        self.max_result_bytes
            .saturating_mul(4)
            .saturating_add(64 * 1024)
    }

    /// What a tool result marker names.
    pub fn result_what(&self) -> String {
        format!(
            "tool result over limits.max_tool_result_bytes = {}",
            self.max_result_bytes
        )
    }
}

pub use inquest_core::cap::{cut_lines, floor_char_boundary, marker};

/// Whether the first bytes of a file (up to [`SNIFF_BYTES`]) are binary.
///
/// The rule: binary when they hold a NUL byte, or when more than one in
/// ten of them are not text: bytes of invalid UTF-8, or control characters
/// other than tab, newline, carriage return, form feed and escape. An
/// incomplete character at the very end (the sniff cut it) is not invalid.
/// Text with the odd invalid byte (a Latin-1 name in a UTF-8 log) is text,
/// decoded lossily.
pub fn is_binary(head: &[u8]) -> bool {
    if head.contains(&0) {
        return true;
    }
    let mut suspicious = 0usize;
    let mut rest = head;
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                suspicious += controls(valid);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                // Checked by from_utf8 up to here.
                suspicious += controls(std::str::from_utf8(valid).unwrap_or_default());
                match e.error_len() {
                    Some(bad) => {
                        suspicious += bad;
                        rest = &after[bad..];
                    }
                    None => break,
                }
            }
        }
    }
    suspicious * 10 > head.len()
}

fn controls(text: &str) -> usize {
    text.chars()
        .filter(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c' | '\x1b'))
        .count()
}

/// `bytes` as ASCII text: printable ASCII as is, `\\`, `\n`, `\r`, `\t`,
/// and every other byte as `\xNN`.
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// What a binary file is shown as: its size and an escaped prefix.
pub fn describe_binary(total: u64, head: &[u8]) -> String {
    let shown = &head[..head.len().min(BINARY_PREFIX_BYTES)];
    format!(
        "binary file, {total} bytes; first {} bytes escaped: {}",
        shown.len(),
        escape_bytes(shown)
    )
}

/// One line read by [`read_line_capped`]: `kept` holds its first bytes (at
/// most the cap, without the newline); `total` is its full length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRead {
    pub total: u64,
    /// Whether a newline ended it (`false`: the stream ended).
    pub terminated: bool,
}

impl LineRead {
    /// Bytes of the line that were not kept.
    pub fn dropped(&self, kept: &[u8]) -> u64 {
        self.total - kept.len() as u64
    }
}

/// Reads one `\n`-terminated line, keeping at most `cap` bytes of it in
/// `kept` (cleared first; the newline is not kept) and reading the rest of
/// the line to discard it: memory never holds more than `cap` bytes plus
/// the reader's buffer, however long the line. `None` at the end of the
/// stream. A `\r` before the newline is kept (callers trim it).
pub async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    cap: usize,
    kept: &mut Vec<u8>,
) -> std::io::Result<Option<LineRead>> {
    kept.clear();
    let mut total: u64 = 0;
    loop {
        let (consumed, done) = {
            let available = reader.fill_buf().await?;
            if available.is_empty() {
                return Ok((total > 0).then_some(LineRead {
                    total,
                    terminated: false,
                }));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let content = newline.unwrap_or(available.len());
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&available[..content.min(room)]);
            total += content as u64;
            (newline.map_or(content, |n| n + 1), newline.is_some())
        };
        reader.consume(consumed);
        if done {
            return Ok(Some(LineRead {
                total,
                terminated: true,
            }));
        }
    }
}

/// The synchronous twin of [`read_line_capped`], for the file tools.
pub fn read_line_capped_sync<R: std::io::BufRead>(
    reader: &mut R,
    cap: usize,
    kept: &mut Vec<u8>,
) -> std::io::Result<Option<LineRead>> {
    kept.clear();
    let mut total: u64 = 0;
    loop {
        let (consumed, done) = {
            let available = match reader.fill_buf() {
                Ok(available) => available,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok((total > 0).then_some(LineRead {
                    total,
                    terminated: false,
                }));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let content = newline.unwrap_or(available.len());
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&available[..content.min(room)]);
            total += content as u64;
            (newline.map_or(content, |n| n + 1), newline.is_some())
        };
        reader.consume(consumed);
        if done {
            return Ok(Some(LineRead {
                total,
                terminated: true,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_short_text_and_marks_long_text_on_a_char_boundary() {
        assert!(matches!(
            cut_lines("short", 5, 0, "x"),
            std::borrow::Cow::Borrowed("short")
        ));
        let text = "é".repeat(10); // 20 bytes
        let cut = cut_lines(&text, 5, 0, "tool result");
        assert_eq!(
            cut, "éé\n…[cut by inquest: 16 more bytes of tool result]",
            "5 bytes fall inside the third é"
        );
        assert_eq!(
            cut_lines("abc\ndef", 4, 0, "w"),
            "abc\n…[cut by inquest: 3 more bytes of w]"
        );
        assert_eq!(
            cut_lines("abc", 0, 0, "w"),
            "…[cut by inquest: 3 more bytes of w]"
        );
        // Bytes a transport dropped count, and are marked even when the
        // text that arrived fits.
        assert_eq!(
            cut_lines("abc", 10, 7, "w"),
            "abc\n…[cut by inquest: 7 more bytes of w]"
        );
        assert_eq!(
            cut_lines("abcdef", 2, 7, "w"),
            "ab\n…[cut by inquest: 11 more bytes of w]"
        );
        let limits = ToolLimits::default();
        assert_eq!(
            marker(1234567, &limits.result_what()),
            "…[cut by inquest: 1234567 more bytes of tool result over \
             limits.max_tool_result_bytes = 65536]"
        );
        assert_eq!(limits.message_ceiling(), 4 * 65536 + 65536);
    }

    #[test]
    fn binary_rule() {
        assert!(!is_binary(b""));
        assert!(!is_binary(
            b"12:00 ERROR pool exhausted\n\tat x\r\n\x1b[31mred\x1b[0m"
        ));
        assert!(is_binary(b"log line\n\0\0\0\0"), "NUL padding");
        assert!(is_binary(b"\x89PNG\r\n\x1a\n\x01\x02\x03\x04"));
        // One Latin-1 byte in a text line: text (decoded lossily).
        let mut latin = b"user Jos\xe9 logged in, the session lasted a while\n".to_vec();
        assert!(!is_binary(&latin));
        latin.extend(std::iter::repeat_n(0xffu8, 20));
        assert!(is_binary(&latin), "mostly invalid UTF-8");
        // A multi-byte char cut by the sniff is not invalid.
        let cut = "aé".as_bytes();
        assert!(!is_binary(&cut[..2]));
        assert!(!is_binary("ünïcödé text".as_bytes()));
    }

    #[test]
    fn escaping_and_binary_description() {
        assert_eq!(
            escape_bytes(b"a\\b\n\r\t\0\x7f\xff~ "),
            "a\\\\b\\n\\r\\t\\x00\\x7f\\xff~ "
        );
        let head: Vec<u8> = (0..=255u8).chain(0..10).collect();
        let shown = describe_binary(4096, &head);
        assert!(shown.starts_with("binary file, 4096 bytes; first 256 bytes escaped: \\x00\\x01"));
        assert!(shown.ends_with("\\xfe\\xff"), "{shown}");
    }

    #[tokio::test]
    async fn a_ten_megabyte_line_is_read_through_keeping_only_the_cap() {
        let mut data = vec![b'x'; 10 * 1024 * 1024];
        data.extend_from_slice(b"\nnext line\r\nlast");
        let mut reader = tokio::io::BufReader::with_capacity(8192, &data[..]);
        let mut kept = Vec::new();
        let first = read_line_capped(&mut reader, 4096, &mut kept)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.total, 10 * 1024 * 1024);
        assert!(first.terminated);
        assert_eq!(kept.len(), 4096);
        assert!(kept.capacity() < 3 * 8192, "never held the whole line");
        assert_eq!(first.dropped(&kept), 10 * 1024 * 1024 - 4096);
        let next = read_line_capped(&mut reader, 4096, &mut kept)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((kept.as_slice(), next.total), (&b"next line\r"[..], 10));
        let last = read_line_capped(&mut reader, 4096, &mut kept)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((kept.as_slice(), last.terminated), (&b"last"[..], false));
        assert_eq!(
            read_line_capped(&mut reader, 4096, &mut kept)
                .await
                .unwrap(),
            None
        );
    }

    #[test]
    fn the_sync_reader_matches() {
        let mut data = vec![b'y'; 3 * 1024 * 1024];
        data.extend_from_slice(b"\n\nz");
        let mut reader = std::io::BufReader::with_capacity(4096, &data[..]);
        let mut kept = Vec::new();
        let first = read_line_capped_sync(&mut reader, 100, &mut kept)
            .unwrap()
            .unwrap();
        assert_eq!((kept.len(), first.total), (100, 3 * 1024 * 1024));
        let empty = read_line_capped_sync(&mut reader, 100, &mut kept)
            .unwrap()
            .unwrap();
        assert_eq!((kept.len(), empty.total, empty.terminated), (0, 0, true));
        let z = read_line_capped_sync(&mut reader, 100, &mut kept)
            .unwrap()
            .unwrap();
        assert_eq!((kept.as_slice(), z.terminated), (&b"z"[..], false));
        assert_eq!(
            read_line_capped_sync(&mut reader, 100, &mut kept).unwrap(),
            None
        );
    }
}
