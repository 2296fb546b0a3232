//! Provider adapters, the failover chain and the script provider, over real
//! HTTP on loopback against the fakes in `inquest_testkit::fake`.

mod anthropic;
mod chain;
mod openai;
mod script;
mod stable;
mod streaming;
mod support;
mod transcript;
