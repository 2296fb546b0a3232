//! The wire contract of `inquest.v1`, shared by the server and every
//! client: the types and service stubs generated from `proto/inquest/v1`
//! ([`v1`]), the descriptor set server reflection serves, the table of the
//! service's methods generated from it ([`rpc::Rpc`]: name, path, required
//! role), the ErrorInfo reasons clients branch on ([`reason`]), and
//! [`EncodedWatchEvent`] (a watch event encoded once, so the server sends
//! the same bytes to every watcher of a session).
//!
//! Must not depend on any other Inquest crate: the CLI links this and
//! nothing of the server. Start at `proto/inquest/v1/investigations.proto`.

use std::sync::Arc;

use prost::{
    Message,
    bytes::{Buf, BufMut, Bytes},
    encoding::{DecodeContext, WireType},
};

pub mod reason;

#[allow(clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("inquest.v1");
}

/// The server stubs with `WatchSession` streaming [`EncodedWatchEvent`]s
/// (the wire is the same: clients decode them as `v1::WatchEvent`). The
/// server implements `encoded::investigations_server::Investigations`;
/// clients use `v1::investigations_client`.
#[allow(clippy::all, clippy::pedantic)]
pub mod encoded {
    include!(concat!(env!("OUT_DIR"), "/encoded/inquest.v1.rs"));
}

/// The one table of the service's methods, generated from the descriptor
/// set: [`rpc::Rpc`].
#[allow(clippy::all, clippy::pedantic)]
pub mod rpc {
    include!(concat!(env!("OUT_DIR"), "/rpc.rs"));
}

/// Encoded `FileDescriptorSet` of every inquest proto, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/inquest_descriptor.bin"));

/// A `v1::WatchEvent` already encoded to protobuf. Encoding it writes the
/// bytes as they are, so one event fanned out to many watchers is encoded
/// once, and each watcher's share of the work is a copy into its HTTP/2
/// stream. Cloning shares the bytes.
#[derive(Clone, Default)]
pub struct EncodedWatchEvent(Wire);

/// Where an encoded event's bytes live.
#[derive(Clone)]
enum Wire {
    Owned(Bytes),
    /// Kept by their owner (a live turn, shared by all its watchers):
    /// handing a watcher the owner's reference it already holds costs no
    /// reference count of its own.
    Shared(Arc<dyn AsRef<[u8]> + Send + Sync>),
}

impl Default for Wire {
    fn default() -> Self {
        Self::Owned(Bytes::new())
    }
}

impl EncodedWatchEvent {
    /// Encodes `event` once.
    pub fn new(event: &v1::WatchEvent) -> Self {
        Self(Wire::Owned(Bytes::from(event.encode_to_vec())))
    }

    /// The encoded bytes (a `v1::WatchEvent`).
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Wire::Owned(bytes) => bytes,
            Wire::Shared(owner) => (**owner).as_ref(),
        }
    }

    /// The bytes, to keep and hand back to [`EncodedWatchEvent::from_encoded`].
    pub fn into_bytes(self) -> Bytes {
        match self.0 {
            Wire::Owned(bytes) => bytes,
            Wire::Shared(owner) => Bytes::copy_from_slice((*owner).as_ref()),
        }
    }

    /// Bytes that came from [`EncodedWatchEvent::into_bytes`] (a cache of
    /// the encoding). They are not checked: anything else would reach the
    /// client as a message it cannot decode.
    pub fn from_encoded(bytes: Bytes) -> Self {
        Self(Wire::Owned(bytes))
    }

    /// Bytes that came from [`EncodedWatchEvent::into_bytes`], kept by
    /// `owner` (unchecked, as with [`EncodedWatchEvent::from_encoded`]).
    pub fn from_shared(owner: Arc<dyn AsRef<[u8]> + Send + Sync>) -> Self {
        Self(Wire::Shared(owner))
    }

    /// Decodes the event back (tests and diagnostics).
    pub fn decode_event(&self) -> Result<v1::WatchEvent, prost::DecodeError> {
        v1::WatchEvent::decode(self.as_slice())
    }
}

impl PartialEq for EncodedWatchEvent {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for EncodedWatchEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.decode_event() {
            Ok(event) => f.debug_tuple("EncodedWatchEvent").field(&event).finish(),
            Err(_) => f
                .debug_tuple("EncodedWatchEvent")
                .field(&self.as_slice().len())
                .finish(),
        }
    }
}

impl Message for EncodedWatchEvent {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(self.as_slice());
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
        self.as_slice().len()
    }

    fn clear(&mut self) {
        self.0 = Wire::default();
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
        assert_eq!(decoded.as_slice(), bytes.as_slice());
    }

    #[test]
    fn shared_bytes_encode_and_compare_as_owned_ones() {
        let owned = EncodedWatchEvent::new(&event());
        let shared: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(event().encode_to_vec());
        let shared = EncodedWatchEvent::from_shared(shared);
        assert_eq!(shared, owned);
        assert_eq!(shared.encode_to_vec(), owned.encode_to_vec());
        assert_eq!(shared.encoded_len(), owned.encoded_len());
        assert_eq!(shared.decode_event().unwrap(), event());
        assert_eq!(shared.clone().into_bytes(), owned.into_bytes());
    }
}
