//! Raw HTTP/2 frames, for the tests and benches that act as a hostile peer
//! (a client library would never break the rules they need broken).

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame types used here.
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const SETTINGS: u8 = 0x4;
pub const GOAWAY: u8 = 0x7;
/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// One frame: its 9-byte header and `payload` (at most 16 KiB, the
/// default maximum frame size).
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len().min(16 * 1024)).unwrap_or(0);
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(&payload[..payload.len().min(16 * 1024)]);
    f
}

/// The preface and an empty SETTINGS frame: a connection that has
/// started HTTP/2.
pub fn opening() -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    out
}

/// A health Watch request's headers, HPACK-encoded as literals without
/// indexing (the dynamic table is never touched, so every copy is the
/// same), for `authority`.
pub fn watch_headers(authority: &str) -> Vec<u8> {
    let literal = |prefix: &[u8], value: &str| {
        let mut b = prefix.to_vec();
        b.push(u8::try_from(value.len()).unwrap_or(u8::MAX));
        b.extend(value.as_bytes());
        b
    };
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.extend(literal(&[0x04], "/grpc.health.v1.Health/Watch")); // :path
    block.extend(literal(&[0x01], authority)); // :authority
    block.extend(literal(&[0x0f, 0x10], "application/grpc")); // content-type
    block.extend(literal(&[0x00, 0x02, b't', b'e'], "trailers"));
    block
}
