//! Compiles `proto/inquest/v1/*.proto` with protox (pure Rust, so no `protoc`
//! is needed anywhere) and writes the descriptor set that server reflection
//! serves.

use std::{env, fs, path::PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let mut files = Vec::new();
    for entry in fs::read_dir(root.join("inquest/v1"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "proto") {
            println!("cargo:rerun-if-changed={}", path.display());
            files.push(path);
        }
    }
    files.sort();
    let fds = protox::compile(&files, [&root])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("inquest_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().compile_fds(fds.clone())?;

    // The server side again, with one difference: `WatchSession` streams
    // `crate::EncodedWatchEvent` (bytes encoded once, sent to every watcher
    // as they are) instead of `WatchEvent`. Messages are not generated
    // again: every other type resolves to `crate::v1`.
    let mut services_only = fds;
    for file in &mut services_only.file {
        file.message_type.clear();
        file.enum_type.clear();
    }
    let encoded = out.join("encoded");
    fs::create_dir_all(&encoded)?;
    tonic_prost_build::configure()
        .build_client(false)
        .out_dir(&encoded)
        .extern_path(".inquest.v1", "crate::v1")
        .extern_path(".inquest.v1.WatchEvent", "crate::EncodedWatchEvent")
        .compile_fds(services_only)?;
    Ok(())
}
