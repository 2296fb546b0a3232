//! The web console in a real browser: Debian's headless
//! Chromium, driven over WebDriver (`webdriver.rs`), loads the console from
//! an in-process server (the harness) with the fake model provider, a real
//! MCP server where a tool must run, or the test driver where the test
//! needs the turns at its own pace. Every step saves a screenshot under
//! `target/console-screenshots/`.
//!
//! Chromium or chromedriver missing fails every browser test (`cargo xtask
//! test` installs them). Also here: gRPC-Web on the wire without a browser
//! (`grpc_web.rs`), the same service behind the same layers.

mod a11y;
mod approval;
mod auth;
mod fork;
mod grpc_web;
mod held;
mod incident;
mod links;
mod live;
mod long;
mod markdown;
mod queue;
mod reconnect;
mod streaming;
mod support;
mod waiting;
mod webdriver;
