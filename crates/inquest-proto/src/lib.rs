//! The `inquest.v1` wire types and service stubs, generated from
//! `proto/inquest/v1`, the descriptor set that server reflection serves,
//! and [`EncodedWatchEvent`]: a watch event encoded once, so the server
//! sends the same bytes to every watcher of a session.

#![allow(clippy::all, clippy::pedantic)]

use prost::{
    Message,
    bytes::{Buf, BufMut, Bytes},
    encoding::{DecodeContext, WireType},
};

pub mod v1 {
    tonic::include_proto!("inquest.v1");
}

/// The server stubs with `WatchSession` streaming [`EncodedWatchEvent`]s
/// (the wire is the same: clients decode them as `v1::WatchEvent`). The
/// server implements `encoded::investigations_server::Investigations`;
/// clients use `v1::investigations_client`.
pub mod encoded {
    include!(concat!(env!("OUT_DIR"), "/encoded/inquest.v1.rs"));
}

/// Encoded `FileDescriptorSet` of every inquest proto, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/inquest_descriptor.bin"));

/// A `v1::WatchEvent` already encoded to protobuf. Encoding it writes the
/// bytes as they are, so one event fanned out to many watchers is encoded
/// once, and each watcher's share of the work is a copy into its HTTP/2
/// stream. Cloning shares the bytes.
#[derive(Clone, Default, PartialEq)]
pub struct EncodedWatchEvent(Bytes);

impl EncodedWatchEvent {
    /// Encodes `event` once.
    pub fn new(event: &v1::WatchEvent) -> Self {
        Self(Bytes::from(event.encode_to_vec()))
    }

    /// The encoded bytes (a `v1::WatchEvent`).
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    /// The bytes, to keep and hand back to [`EncodedWatchEvent::from_encoded`].
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Bytes that came from [`EncodedWatchEvent::into_bytes`] (a cache of
    /// the encoding). They are not checked: anything else would reach the
    /// client as a message it cannot decode.
    pub fn from_encoded(bytes: Bytes) -> Self {
        Self(bytes)
    }

    /// Decodes the event back (tests and diagnostics).
    pub fn decode_event(&self) -> Result<v1::WatchEvent, prost::DecodeError> {
        v1::WatchEvent::decode(self.0.as_ref())
    }
}

impl std::fmt::Debug for EncodedWatchEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.decode_event() {
            Ok(event) => f.debug_tuple("EncodedWatchEvent").field(&event).finish(),
            Err(_) => f
                .debug_tuple("EncodedWatchEvent")
                .field(&self.0.len())
                .finish(),
        }
    }
}

impl Message for EncodedWatchEvent {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }

    /// Decoding is only for completeness (the server never decodes one):
    /// the field is merged into the decoded event, which is encoded again.
    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        let mut event = self.decode_event()?;
        event.merge_field(tag, wire_type, buf, ctx)?;
        *self = Self::new(&event);
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0 = Bytes::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> v1::WatchEvent {
        v1::WatchEvent {
            event: Some(v1::watch_event::Event::Heartbeat(v1::Heartbeat {
                head_seq: 42,
            })),
        }
    }

    #[test]
    fn encodes_to_the_same_bytes_as_the_event() {
        let encoded = EncodedWatchEvent::new(&event());
        assert_eq!(encoded.encode_to_vec(), event().encode_to_vec());
        assert_eq!(encoded.encoded_len(), event().encoded_len());
        // Length-delimited too (what the gRPC framing does not use, but a
        // nested use would).
        assert_eq!(
            encoded.encode_length_delimited_to_vec(),
            event().encode_length_delimited_to_vec()
        );
    }

    #[test]
    fn decodes_what_it_encodes() {
        let bytes = event().encode_to_vec();
        let decoded = EncodedWatchEvent::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.decode_event().unwrap(), event());
        assert_eq!(decoded.bytes().as_ref(), bytes.as_slice());
    }
}
