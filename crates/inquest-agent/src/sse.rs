//! A server-sent events parser (the WHATWG `text/event-stream` format),
//! pure: bytes in, events out, whatever the chunking.
//!
//! Lines end with LF, CRLF or CR; a line is decoded only once it is whole,
//! so a chunk cut inside a line or inside a UTF-8 sequence changes
//! nothing. `:` lines are comments; `event:` names the event; every
//! `data:` line is appended, joined with LF; `id:` and `retry:` are
//! ignored (nothing reconnects a model call). A blank line dispatches the
//! event, if it had data. A leading byte-order mark is skipped.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when none was given.
    pub event: String,
    /// The `data:` lines joined with LF.
    pub data: String,
}

/// Incremental parser state; see the module docs.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The previous chunk ended with CR: a LF opening this one belongs to it.
    after_cr: bool,
    /// Whether the first line (and its optional BOM) is still to come.
    started: bool,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk`; the events it completed come back in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..end]);
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.line_done(&line) {
                events.push(event);
            }
            let cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(rest);
        events
    }

    /// Bytes held for a line not yet ended (for callers that bound them).
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    fn line_done(&mut self, line: &[u8]) -> Option<SseEvent> {
        let mut line = String::from_utf8_lossy(line);
        if !self.started {
            self.started = true;
            if let Some(stripped) = line.strip_prefix('\u{feff}') {
                line = stripped.to_owned().into();
            }
        }
        if line.is_empty() {
            let event = self.event.take();
            let data = self.data.take()?;
            return Some(SseEvent {
                event: event
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "message".to_owned()),
                data,
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    fn all_at_once(text: &[u8]) -> Vec<SseEvent> {
        SseParser::new().push(text)
    }

    /// Every way of cutting `text` in two gives the same events.
    fn same_for_every_split(text: &[u8]) -> Vec<SseEvent> {
        let whole = all_at_once(text);
        for cut in 0..=text.len() {
            let mut p = SseParser::new();
            let mut got = p.push(&text[..cut]);
            got.extend(p.push(&text[cut..]));
            assert_eq!(got, whole, "cut at {cut}");
        }
        let mut p = SseParser::new();
        let bytewise: Vec<SseEvent> = text.iter().flat_map(|b| p.push(&[*b])).collect();
        assert_eq!(bytewise, whole, "byte by byte");
        whole
    }

    #[test]
    fn events_data_and_types() {
        let text = b"event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\n";
        assert_eq!(
            same_for_every_split(text),
            vec![ev("message_start", "{\"a\":1}"), ev("ping", "{}")]
        );
    }

    #[test]
    fn crlf_cr_comments_and_multi_line_data() {
        let text = b": keep-alive\r\n\r\ndata: one\r\ndata:two\r\n\r\nevent:x\rdata: a\r\rdata\n\n";
        assert_eq!(
            same_for_every_split(text),
            vec![ev("message", "one\ntwo"), ev("x", "a"), ev("message", "")]
        );
    }

    #[test]
    fn utf8_cut_mid_sequence_and_bom() {
        let text = "\u{feff}data: héllo → wörld\n\n".as_bytes();
        assert_eq!(
            same_for_every_split(text),
            vec![ev("message", "héllo → wörld")]
        );
    }

    #[test]
    fn no_dispatch_without_blank_line_or_data() {
        let mut p = SseParser::new();
        assert!(p.push(b"event: lonely\n\n").is_empty());
        assert!(p.push(b"data: [DONE]\n").is_empty());
        assert!(p.pending_bytes() > 0);
        assert_eq!(p.push(b"\n"), vec![ev("message", "[DONE]")]);
        assert!(p.push(b"id: 7\nretry: 10\n\n").is_empty());
    }
}
