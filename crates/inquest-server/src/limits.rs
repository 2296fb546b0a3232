//! The API's size bounds and watch caps, and the
//! transport layer that makes oversized and undecodable requests answer
//! `INVALID_ARGUMENT`.
//!
//! Sizes, all in `[limits]` (see `config.rs`):
//! - `max_request_bytes` (4 MiB): the largest request message. Checked on
//!   the gRPC frame's length prefix *before* its body is read, by
//!   [`Limited`] (below).
//! - `max_response_bytes` (3.5 MiB, at most 4 MiB): the largest ListTurns
//!   page, and the largest any one turn is shown as, in ListTurns and in a
//!   WatchSession message (`convert::turn_within`). 4 MiB is the default
//!   receive limit of gRPC clients (tonic, grpc-go, grpc-java, grpcio), so
//!   no response exceeds what a default client accepts.
//! - `max_notice_bytes` (16 KiB): the largest stored notice (`resume.rs`).
//!
//! The largest turn the server stores is bounded by the content caps
//! ([`content_caps`]) plus [`TURN_OVERHEAD_BYTES`]; [`validate`] refuses a
//! configuration where that could exceed `max_response_bytes`, so the cut
//! at read time is a safety net for rows stored before the caps existed
//! (and for tool-call arguments, which no cap bounds yet), never the rule.

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use tonic::{
    Code, Status,
    codegen::{Service, http},
    server::NamedService,
};

use crate::config::LimitsConfig;
pub use crate::config::limits::{
    DEFAULT_CLIENT_LIMIT, DEFAULT_MAX_NOTICE_BYTES, DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES, MIN_RESPONSE_BYTES, REQUEST_OVERHEAD_BYTES, TURN_OVERHEAD_BYTES,
    content_caps, worst_case_turn_bytes,
};

/// The API's bounds, read once from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiLimits {
    pub max_request_bytes: usize,
    pub max_response_bytes: usize,
    pub max_notice_bytes: usize,
    pub max_watch_streams: usize,
    pub max_watch_streams_per_session: usize,
}

impl ApiLimits {
    pub fn from_config(c: &LimitsConfig) -> Self {
        Self {
            max_request_bytes: c.max_request_bytes,
            max_response_bytes: c.max_response_bytes,
            max_notice_bytes: c.max_notice_bytes,
            max_watch_streams: c.max_watch_streams,
            max_watch_streams_per_session: c.max_watch_streams_per_session,
        }
    }
}

impl Default for ApiLimits {
    fn default() -> Self {
        Self::from_config(&LimitsConfig::default())
    }
}

/// Wraps a generated gRPC server so that requests the transport cannot
/// take answer `INVALID_ARGUMENT`, as the API promises, instead of tonic's
/// `OUT_OF_RANGE` (too large) and `INTERNAL` (undecodable, e.g. a string
/// field that is not UTF-8):
///
/// - Size: the request body is read through [`FrameLimit`], which parses
///   each gRPC frame's 5-byte header (flag, big-endian length) as it
///   passes and, for a frame longer than `max_request_bytes`, ends the
///   body with an `INVALID_ARGUMENT` status instead of handing the frame
///   on. tonic's decoder passes a status found in a body error through
///   unchanged (`Status::from_error` downcasts it), so the call answers
///   with it, and the frame is never buffered. This is decided by our own
///   check on the wire, never by reading tonic's message text, so the
///   watch cursor's OUT_OF_RANGE (`inquest-head-seq`) cannot be mistaken
///   for it. tonic's own limit is set to the same value as a backstop.
/// - Decoding: prost's decode errors reach tonic as `INTERNAL` with the
///   text of `prost::DecodeError` ("failed to decode Protobuf message:
///   ..."), in a trailers-only response (the handler never ran; tonic puts
///   the `Status` in the response's extensions). Only that response is
///   rewritten: no handler of ours answers INTERNAL with that text (ours
///   say "internal error"). `tests/api/limits.rs` pins both on the socket,
///   so a tonic or prost upgrade that changes them fails loudly.
#[derive(Debug, Clone)]
pub struct Limited<S> {
    inner: S,
    max_request_bytes: usize,
}

impl<S> Limited<S> {
    pub fn new(inner: S, max_request_bytes: usize) -> Self {
        Self {
            inner,
            max_request_bytes,
        }
    }
}

impl<S: NamedService> NamedService for Limited<S> {
    const NAME: &'static str = S::NAME;
}

/// What prost's `DecodeError` says first; tonic-prost sends it as INTERNAL.
const PROST_DECODE_ERROR: &str = "failed to decode Protobuf message";

impl<S> Service<http::Request<tonic::body::Body>> for Limited<S>
where
    S: Service<
            http::Request<FrameLimit<tonic::body::Body>>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        >,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let limit = self.max_request_bytes;
        let call = self
            .inner
            .call(request.map(|body| FrameLimit::new(body, limit)));
        Box::pin(async move {
            let response = call.await?;
            let undecodable = response
                .extensions()
                .get::<Status>()
                .filter(|s| {
                    s.code() == Code::Internal && s.message().starts_with(PROST_DECODE_ERROR)
                })
                .map(|s| s.message().to_owned());
            Ok(match undecodable {
                Some(detail) => crate::reason::status(
                    Code::InvalidArgument,
                    crate::reason::Reason::MalformedRequest,
                    format!("the request is not a valid message of this API: {detail}"),
                    Vec::new(),
                )
                .into_http(),
                None => response,
            })
        })
    }
}

/// The status a frame over the limit ends its request with.
pub fn oversized(len: usize, limit: usize) -> Status {
    use crate::reason::{Reason, key};
    crate::reason::status(
        Code::InvalidArgument,
        Reason::LimitExceeded,
        format!(
            "request message is {len} bytes, over the server's limit of {limit} bytes \
             (limits.max_request_bytes)"
        ),
        vec![
            (key::LIMIT, "limits.max_request_bytes".to_owned()),
            (key::VALUE, limit.to_string()),
        ],
    )
}

/// Reads gRPC frame headers as they pass (see [`Limited`]). A pure state
/// machine over the bytes, so a header split across DATA frames is seen
/// whole.
#[derive(Debug, Clone, Default)]
struct FrameHeaders {
    header: [u8; 5],
    /// Header bytes seen of the current frame (0..5).
    have: usize,
    /// Body bytes of the current frame still to pass.
    body_left: usize,
}

impl FrameHeaders {
    /// Feeds `chunk`; `Err(len)` at the first frame longer than `limit`.
    fn feed(&mut self, mut chunk: &[u8], limit: usize) -> Result<(), usize> {
        while !chunk.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(chunk.len());
                self.body_left -= n;
                chunk = &chunk[n..];
                continue;
            }
            self.header[self.have] = chunk[0];
            self.have += 1;
            chunk = &chunk[1..];
            if self.have == self.header.len() {
                self.have = 0;
                let [_, a, b, c, d] = self.header;
                let len = u32::from_be_bytes([a, b, c, d]) as usize;
                if len > limit {
                    return Err(len);
                }
                self.body_left = len;
            }
        }
        Ok(())
    }
}

/// A request body that ends with [`oversized`] at the first gRPC frame
/// over its limit, before any of that frame's body is passed on.
pub struct FrameLimit<B> {
    inner: B,
    limit: usize,
    headers: FrameHeaders,
    /// Set once the limit tripped: the body is over.
    tripped: bool,
}

impl<B> FrameLimit<B> {
    fn new(inner: B, limit: usize) -> Self {
        Self {
            inner,
            limit,
            headers: FrameHeaders::default(),
            tripped: false,
        }
    }
}

impl<B> Body for FrameLimit<B>
where
    B: Body<Data = Bytes, Error = Status> + Unpin,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.tripped {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            let limit = self.limit;
            let chunk = data.chunk();
            if let Err(len) = self.headers.feed(chunk, limit) {
                self.tripped = true;
                return Poll::Ready(Some(Err(oversized(len, limit))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.tripped || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::limits::validate;

    fn frame(len: u32) -> Vec<u8> {
        let mut f = vec![0];
        f.extend_from_slice(&len.to_be_bytes());
        f.extend(std::iter::repeat_n(7u8, len as usize));
        f
    }

    #[test]
    fn frames_within_the_limit_pass_in_any_split() {
        let mut wire = frame(10);
        wire.extend(frame(0));
        wire.extend(frame(100));
        for split in 1..wire.len() {
            let mut h = FrameHeaders::default();
            for chunk in wire.chunks(split) {
                assert_eq!(h.feed(chunk, 100), Ok(()), "split {split}");
            }
            assert_eq!((h.have, h.body_left), (0, 0));
        }
    }

    #[test]
    fn a_frame_over_the_limit_trips_at_its_header_in_any_split() {
        let mut wire = frame(3);
        wire.extend_from_slice(&[0, 0, 0, 0, 101]);
        for split in 1..wire.len() {
            let mut h = FrameHeaders::default();
            let tripped = wire.chunks(split).find_map(|c| h.feed(c, 100).err());
            assert_eq!(tripped, Some(101), "split {split}");
        }
    }

    #[test]
    fn the_defaults_are_valid_and_bad_values_are_refused() {
        let ok = LimitsConfig::default();
        validate(&ok).unwrap();
        let bad = [
            LimitsConfig {
                max_response_bytes: DEFAULT_CLIENT_LIMIT + 1,
                ..LimitsConfig::default()
            },
            LimitsConfig {
                max_message_bytes: DEFAULT_MAX_RESPONSE_BYTES,
                max_request_bytes: 8 * DEFAULT_MAX_RESPONSE_BYTES,
                ..LimitsConfig::default()
            },
            LimitsConfig {
                max_message_bytes: DEFAULT_MAX_REQUEST_BYTES,
                ..LimitsConfig::default()
            },
            LimitsConfig {
                max_watch_streams: 0,
                ..LimitsConfig::default()
            },
            LimitsConfig {
                max_watch_streams: 5,
                max_watch_streams_per_session: 6,
                ..LimitsConfig::default()
            },
            LimitsConfig {
                max_notice_bytes: 10,
                ..LimitsConfig::default()
            },
        ];
        for c in bad {
            assert!(validate(&c).is_err(), "{c:?}");
        }
    }

    #[test]
    fn the_worst_case_turn_names_its_cap() {
        let c = LimitsConfig {
            max_message_bytes: 1024 * 1024,
            ..LimitsConfig::default()
        };
        assert_eq!(
            worst_case_turn_bytes(&c),
            (
                1024 * 1024 + TURN_OVERHEAD_BYTES,
                "limits.max_message_bytes"
            )
        );
    }
}
