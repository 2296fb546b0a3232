//! The `inquest.v1` wire types and service stubs, generated from
//! `proto/inquest/v1`. Nothing here but generated code and the descriptor
//! set that server reflection serves.

#![allow(clippy::all, clippy::pedantic)]

pub mod v1 {
    tonic::include_proto!("inquest.v1");
}

/// Encoded `FileDescriptorSet` of every inquest proto, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/inquest_descriptor.bin"));
