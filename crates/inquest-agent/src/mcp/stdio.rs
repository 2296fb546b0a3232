//! The stdio transport with a bounded message size.
//!
//! rmcp reads one JSON-RPC message per line of the child's stdout. Its own
//! reader caps a line (16 MiB) but silently drops a longer one, so the call
//! it answered waits for its timeout. Here the child's stdout goes through
//! a pump first ([`pump`]) that holds at most
//! [`ToolLimits::message_ceiling`] bytes of one line: a line within the
//! ceiling is passed on as is; of a longer one the pump keeps the prefix,
//! reads the rest of the line and discards it (the server is never blocked,
//! memory never grows with the message), and hands rmcp a rewritten
//! message instead ([`shrink_message`]): the same response id, the result
//! as far as the prefix held it (closed into valid JSON, content blocks cut
//! off mid-way dropped), and a marker block saying how long the message was
//! ([`CUT_META_KEY`]). `content::render` turns that into the stored text
//! with the cut marker. A message whose prefix has no id (a server that
//! writes `id` after `result`) cannot be answered and is dropped with a
//! warning: that call ends at its timeout.
//!
//! Because the child's stdout is no longer rmcp's, this module starts and
//! stops the child itself, the way rmcp's `TokioChildProcess` does: own
//! process group, kill on drop, and on close stdin closed, then SIGTERM,
//! then SIGKILL.

use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::{
    RoleClient,
    model::ContentBlock,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::{Transport, async_rw::AsyncRwTransport},
};
use serde_json::{Map, Value, json};
use tokio::{
    io::{AsyncWriteExt, BufReader, DuplexStream},
    process::{ChildStderr, ChildStdin, ChildStdout},
};

use crate::limit::{ToolLimits, read_line_capped};

/// The `_meta` key of the marker block the pump adds to a cut result.
pub(crate) const CUT_META_KEY: &str = "inquest/cut";
/// How long the child gets after stdin closes, and again after SIGTERM.
const EXIT_WAIT: Duration = Duration::from_secs(3);
/// The pipe between the pump and rmcp.
const PIPE_BYTES: usize = 64 * 1024;

/// A child MCP server whose stdout is read through the bounded pump.
pub(crate) struct BoundedChild {
    child: ChildGuard,
    transport: AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>,
}

/// Kills the child (its whole process group) when dropped unless it exited.
struct ChildGuard(Option<Box<dyn ChildWrapper>>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // `kill` also reaps it (no zombie); a runtime is needed for that.
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    if let Err(e) = Box::into_pin(child.kill()).await {
                        tracing::warn!(error = %e, "killing an MCP server failed");
                    }
                });
            } else if let Err(e) = child.start_kill() {
                tracing::warn!(error = %e, "killing an MCP server failed");
            }
        }
    }
}

impl BoundedChild {
    /// Spawns `command` with piped stdio and starts the pump for `server`.
    /// Returns the child's stderr for the caller to read.
    pub(crate) fn spawn(
        mut command: CommandWrap,
        server: &str,
        limits: ToolLimits,
    ) -> std::io::Result<(Self, Option<ChildStderr>)> {
        command
            .command_mut()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn()?;
        let stdin = child.stdin().take();
        let stdout = child.stdout().take();
        let stderr = child.stderr().take();
        let guard = ChildGuard(Some(child));
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(std::io::Error::other("the child's stdio was not piped"));
        };
        let (to_rmcp, from_pump) = tokio::io::duplex(PIPE_BYTES);
        tokio::spawn(pump(server.to_owned(), stdout, to_rmcp, limits));
        // A rewritten message is at most the ceiling plus closing brackets
        // and the marker; rmcp's own line cap only has to let it through.
        let line_cap = limits.message_ceiling().saturating_mul(2);
        let transport =
            AsyncRwTransport::new_client(from_pump, stdin).with_max_line_length(line_cap);
        Ok((
            BoundedChild {
                child: guard,
                transport,
            },
            stderr,
        ))
    }

    pub(crate) fn id(&self) -> Option<u32> {
        self.child.0.as_ref()?.id()
    }

    /// The MCP stdio shutdown: close stdin and wait; SIGTERM and wait;
    /// kill.
    async fn shutdown(&mut self) -> std::io::Result<()> {
        self.transport.close().await?;
        let Some(child) = self.child.0.as_mut() else {
            return Ok(());
        };
        if exited(child).await {
            self.child.0 = None;
            return Ok(());
        }
        #[cfg(unix)]
        {
            let term = tokio::signal::unix::SignalKind::terminate().as_raw_value();
            match child.signal(term) {
                Ok(()) => {
                    if exited(child).await {
                        self.child.0 = None;
                        return Ok(());
                    }
                }
                Err(e) => tracing::warn!(error = %e, "sending SIGTERM to an MCP server failed"),
            }
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child.0 = None;
        killed
    }
}

async fn exited(child: &mut Box<dyn ChildWrapper>) -> bool {
    matches!(
        tokio::time::timeout(EXIT_WAIT, child.wait()).await,
        Ok(Ok(_))
    )
}

impl Transport<RoleClient> for BoundedChild {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

/// Copies the child's stdout to rmcp one line at a time, holding at most
/// the message ceiling of a line; longer lines are rewritten by
/// [`shrink_message`] (or dropped when that cannot answer them). Ends when
/// stdout ends or rmcp stops reading.
async fn pump(server: String, stdout: ChildStdout, mut out: DuplexStream, limits: ToolLimits) {
    let ceiling = limits.message_ceiling();
    let mut reader = BufReader::with_capacity(PIPE_BYTES, stdout);
    let mut line = Vec::new();
    loop {
        let read = match read_line_capped(&mut reader, ceiling, &mut line).await {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "reading an MCP server's stdout failed");
                return;
            }
        };
        let dropped = read.dropped(&line);
        if dropped > 0 {
            let total = read.total;
            match shrink_message(&line, total) {
                Some(message) => {
                    tracing::warn!(
                        server = %server, message_bytes = total, kept_bytes = line.len(),
                        "an MCP message was over the ceiling; its result is cut"
                    );
                    line = message;
                }
                None => {
                    tracing::warn!(
                        server = %server, message_bytes = total, kept_bytes = line.len(),
                        "an MCP message over the ceiling had no id in its first bytes; dropped"
                    );
                    continue;
                }
            }
        }
        line.push(b'\n');
        if out.write_all(&line).await.is_err() {
            return;
        }
    }
}

/// The message to hand rmcp in place of an over-long line of which only
/// `prefix` was kept (`total` bytes long in all). `None` when the prefix
/// cannot be answered: no JSON-RPC id in it, or a request or notification
/// from the server (those are dropped).
pub(crate) fn shrink_message(prefix: &[u8], total: u64) -> Option<Vec<u8>> {
    let prefix = prefix.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(prefix);
    let closed = close_json_prefix(prefix)?;
    let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(&closed) else {
        return None;
    };
    let id = message.remove("id")?;
    if message.contains_key("method") || !(id.is_number() || id.is_string()) {
        return None;
    }
    let cut = json!({"message_bytes": total, "kept_bytes": prefix.len()});
    let body = match message.remove("result") {
        Some(Value::Object(result)) => {
            json!({"jsonrpc": "2.0", "id": id, "result": cut_result(result, cut)})
        }
        _ => {
            let text = format!(
                "the MCP server's answer was {total} bytes, over Inquest's ceiling for one \
                 message (4 × limits.max_tool_result_bytes + 64 KiB); it was not read"
            );
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": text}})
        }
    };
    serde_json::to_vec(&body).ok()
}

/// A call result cut short: whole content blocks only, the partial
/// `structuredContent` left out when there is content, and the marker
/// block last.
fn cut_result(mut result: Map<String, Value>, cut: Value) -> Value {
    let mut blocks: Vec<Value> = match result.remove("content") {
        Some(Value::Array(mut blocks)) => {
            // The block the cut went through may have lost its `type`
            // (the Python SDK writes `text` first): text it is, then.
            if let Some(Value::Object(last)) = blocks.last_mut()
                && !last.contains_key("type")
                && last.get("text").is_some_and(Value::is_string)
            {
                last.insert("type".into(), Value::String("text".into()));
            }
            blocks
                .into_iter()
                .filter(|b| serde_json::from_value::<ContentBlock>(b.clone()).is_ok())
                .collect()
        }
        _ => Vec::new(),
    };
    if !blocks.is_empty() {
        result.remove("structuredContent");
    }
    blocks.push(json!({"type": "text", "text": "", "_meta": {CUT_META_KEY: cut}}));
    result.insert("content".into(), Value::Array(blocks));
    // A `_meta` or `isError` the prefix cut mid-way was closed into
    // something else; only a boolean `isError` is kept.
    if result.get("isError").is_some_and(|v| !v.is_boolean()) {
        result.remove("isError");
    }
    if result.get("_meta").is_some_and(|v| !v.is_object()) {
        result.remove("_meta");
    }
    Value::Object(result)
}

/// Closes a cut JSON text into valid JSON: it is cut back to the last point
/// after which closing brackets (and a quote, inside a string value) make
/// it whole — after a complete value, right after an opening bracket, or
/// after a whole character of a string value — and closed there. A cut
/// inside a key, a number or a literal goes back to the value before it.
/// `None` when no such point exists (not JSON, or not a container).
pub(crate) fn close_json_prefix(bytes: &[u8]) -> Option<Vec<u8>> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
    if !matches!(first, b'{' | b'[') {
        return None;
    }
    let mut scan = PrefixScan::default();
    let mut i = 0;
    while i < bytes.len() {
        i = if scan.in_string {
            scan.string_byte(bytes[i], i)?;
            i + 1
        } else {
            scan.structural(bytes, i)?
        };
    }
    scan.close(bytes)
}

/// A point a cut JSON text can be closed at.
#[derive(Clone, Copy)]
struct Safe {
    end: usize,
    depth: usize,
    in_string: bool,
}

/// [`close_json_prefix`]'s scan: where it is in the text, and the last
/// point seen that the text can be closed at.
#[derive(Default)]
struct PrefixScan {
    stack: Vec<u8>,
    safe: Option<Safe>,
    // After `{` or `,` in an object the next string is a key.
    expect_key: bool,
    in_string: bool,
    is_key: bool,
    escape: bool,
    hex_left: u8,
    hex: u32,
    // A `\\uD8xx` escape was read and its low half has not come yet.
    pending_high: bool,
}

impl PrefixScan {
    /// Records `end` (at the current depth) as the last safe point.
    fn safe_at(&mut self, end: usize, in_string: bool) {
        self.safe = Some(Safe {
            end,
            depth: self.stack.len(),
            in_string,
        });
    }

    /// Takes byte `b`, at `i`, of a string (a key or a value). `None`:
    /// not JSON.
    fn string_byte(&mut self, b: u8, i: usize) -> Option<()> {
        // The string can end before a byte that starts a character.
        if !self.is_key
            && !self.escape
            && self.hex_left == 0
            && !self.pending_high
            && b & 0xC0 != 0x80
        {
            self.safe_at(i, true);
        }
        if self.hex_left > 0 {
            self.hex = self.hex * 16 + char::from(b).to_digit(16)?;
            self.hex_left -= 1;
            if self.hex_left == 0 {
                // Never between the halves of a surrogate pair.
                self.pending_high = (0xD800..0xDC00).contains(&self.hex);
                if !self.pending_high && !self.is_key {
                    self.safe_at(i + 1, true);
                }
            }
        } else if self.escape {
            self.escape = false;
            if b == b'u' {
                self.hex_left = 4;
                self.hex = 0;
            } else {
                self.pending_high = false;
                if !self.is_key {
                    self.safe_at(i + 1, true);
                }
            }
        } else if b == b'\\' {
            self.escape = true;
        } else if b == b'"' {
            self.in_string = false;
            self.pending_high = false;
            if !self.is_key {
                self.safe_at(i + 1, false);
            }
        } else {
            self.pending_high = false;
            if b < 0x80 && !self.is_key {
                self.safe_at(i + 1, true);
            }
        }
        Some(())
    }

    /// Takes the byte at `i`, outside strings (with the rest of a number
    /// or literal it starts), and returns where the next byte to take is.
    /// `None`: not JSON.
    fn structural(&mut self, bytes: &[u8], mut i: usize) -> Option<usize> {
        let b = bytes[i];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'{' | b'[' => {
                self.stack.push(b);
                self.expect_key = b == b'{';
                self.safe_at(i + 1, false);
            }
            b'}' | b']' => {
                let open = self.stack.pop()?;
                if (open, b) != (b'{', b'}') && (open, b) != (b'[', b']') {
                    return None;
                }
                self.expect_key = false;
                self.safe_at(i + 1, false);
            }
            b'"' => {
                self.in_string = true;
                self.is_key = self.expect_key;
                self.expect_key = false;
                if !self.is_key {
                    self.safe_at(i + 1, true);
                }
            }
            b':' => self.expect_key = false,
            b',' => self.expect_key = self.stack.last() == Some(&b'{'),
            _ => {
                // A number or literal: complete only once something follows.
                let start = i;
                while i < bytes.len()
                    && !matches!(
                        bytes[i],
                        b' ' | b'\t' | b'\n' | b'\r' | b',' | b'}' | b']' | b':'
                    )
                {
                    i += 1;
                }
                if i < bytes.len() && i > start {
                    self.safe_at(i, false);
                }
                return Some(i);
            }
        }
        Some(i + 1)
    }

    /// The text cut back to the last safe point and closed there. `None`
    /// when there is none.
    fn close(self, bytes: &[u8]) -> Option<Vec<u8>> {
        let safe = self.safe?;
        if safe.depth == 0 && safe.in_string {
            return None;
        }
        let mut out = Vec::with_capacity(safe.end + safe.depth + 1);
        out.extend_from_slice(&bytes[..safe.end]);
        if safe.in_string {
            out.push(b'"');
        }
        for open in self.stack.get(..safe.depth)?.iter().rev() {
            out.push(if *open == b'{' { b'}' } else { b']' });
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(text: &str) -> String {
        String::from_utf8(close_json_prefix(text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn a_cut_json_text_is_closed_at_its_last_whole_point() {
        for (cut, want) in [
            (r#"{"a":"xyz"#, r#"{"a":"xyz"}"#),
            (r#"{"a":["x","y"#, r#"{"a":["x","y"]}"#),
            (r#"{"a":1,"b"#, r#"{"a":1}"#),
            (r#"{"a":1,"b":"#, r#"{"a":1}"#),
            (r#"{"a":12"#, "{}"),
            (r#"{"a":{"#, r#"{"a":{}}"#),
            (r#"{"a":"x\"#, r#"{"a":"x"}"#),
            (r#"{"a":"x\n"#, r#"{"a":"x\n"}"#),
            (r#"{"a":"x\u00"#, r#"{"a":"x"}"#),
            (r#"{"a":"x\ud83d\ude00"#, r#"{"a":"x\ud83d\ude00"}"#),
            (r#"{"a":"x\ud83d\ude0"#, r#"{"a":"x"}"#),
            (r#"{"a":true,"#, r#"{"a":true}"#),
            ("[1, [2, [3", "[1, [2, []]]"),
        ] {
            let got = closed(cut);
            assert_eq!(got, want, "{cut}");
            serde_json::from_str::<Value>(&got).unwrap();
        }
        // A multi-byte character cut in the middle is left out.
        let text = "{\"a\":\"é";
        let bytes = &text.as_bytes()[..text.len() - 1];
        assert_eq!(close_json_prefix(bytes).unwrap(), b"{\"a\":\"\"}");
        assert!(close_json_prefix(b"not json").is_none());
        assert!(close_json_prefix(b"\"just a string").is_none());
        assert!(close_json_prefix(b"{]").is_none());
    }

    #[test]
    fn an_over_long_result_becomes_its_prefix_and_a_marker_block() {
        // In the order the Python SDK writes it (`json!` would sort keys):
        // `text` before `type`.
        let text = "x".repeat(1000);
        let full = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"text":"head","type":"text"}},{{"text":"{text}","type":"text"}}],"structuredContent":{{"result":"{text}"}},"isError":false}}}}"#
        );
        let prefix = &full.as_bytes()[..300];
        let shrunk: Value =
            serde_json::from_slice(&shrink_message(prefix, 5_000_000).unwrap()).unwrap();
        assert_eq!(shrunk["id"], 7);
        let content = shrunk["result"]["content"].as_array().unwrap();
        assert_eq!(content.len(), 3);
        assert_eq!(content[0]["text"], "head");
        let kept = content[1]["text"].as_str().unwrap();
        assert!(
            kept.len() > 200 && kept.bytes().all(|b| b == b'x'),
            "{kept}"
        );
        assert_eq!(
            content[2]["_meta"][CUT_META_KEY]["message_bytes"],
            5_000_000
        );
        assert_eq!(content[2]["_meta"][CUT_META_KEY]["kept_bytes"], 300);
        // It is a result rmcp can read.
        serde_json::from_value::<rmcp::model::CallToolResult>(shrunk["result"].clone()).unwrap();

        // A block cut before its required fields is left out.
        let image = r#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"t"},{"type":"image","data":"AAAA"#;
        let shrunk: Value =
            serde_json::from_slice(&shrink_message(image.as_bytes(), 9).unwrap()).unwrap();
        assert_eq!(shrunk["id"], "a");
        assert_eq!(shrunk["result"]["content"].as_array().unwrap().len(), 2);

        // An error or something else without a result: an error answer.
        let error = r#"{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"xxxx"#;
        let shrunk: Value =
            serde_json::from_slice(&shrink_message(error.as_bytes(), 9).unwrap()).unwrap();
        assert_eq!(shrunk["error"]["code"], -32603);
        assert!(
            shrunk["error"]["message"]
                .as_str()
                .unwrap()
                .contains("9 bytes")
        );

        // No id in the prefix, or a message from the server: nothing to answer.
        assert!(
            shrink_message(
                br#"{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"xx"#,
                9
            )
            .is_none()
        );
        assert!(
            shrink_message(
                br#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"x":"yy"#,
                9
            )
            .is_none()
        );
        assert!(shrink_message(b"\0\0\0\0", 9).is_none());
    }
}
