//! The `inquest` binary the process tests spawn carries the crash points:
//! `cargo test` builds it with `inquest-agent/failpoints` (the dev-dependency
//! in this crate's Cargo.toml). Without them `serve` refuses
//! `INQUEST_FAILPOINTS`, and every crash test would fail at its first server
//! start; this test names the cause directly.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

#[test]
fn the_tested_binary_arms_failpoints() {
    // The point is armed "off" (never fires) and the database is a closed
    // port: only the arming, which comes before any connection, matters.
    let mut child = Command::new(env!("CARGO_BIN_EXE_inquest"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            "postgres://nobody@127.0.0.1:1/none",
        ])
        .env_remove("INQUEST_CONFIG")
        .env("INQUEST_FAILPOINTS", "lease-renew=off")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let armed = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains("failpoints armed: [\"lease-renew\"]") => break true,
            Ok(line) => seen.push(line),
            // The stream closed (the process exited) or nothing for a minute.
            Err(_) => break false,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        armed,
        "`inquest serve` did not arm INQUEST_FAILPOINTS; was it built without the \
         `failpoints` feature? stderr:\n{}",
        seen.join("\n")
    );
}
