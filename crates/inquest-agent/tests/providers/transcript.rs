//! A transcript rebuilt by `inquest_core::rebuild_messages` (synthetic
//! results included) is accepted by both fakes; the same stored turns
//! without the repairs are rejected, as the real APIs would.

use inquest_agent::Provider;
use inquest_testkit::fake::{FakeProvider, Flavor};

use crate::support::{
    anthropic, openai, rebuilt_transcript, request, tools, unrepaired_transcript,
};

#[tokio::test]
async fn rebuilt_transcript_is_accepted_by_both_providers() {
    let a = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let o = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let tools = tools();
    let transcript = rebuilt_transcript();
    let req = request(&transcript, &tools);
    anthropic(&a).complete(&req).await.unwrap();
    openai(&o).complete(&req).await.unwrap();
}

#[tokio::test]
async fn unrepaired_transcript_is_rejected_by_both_providers_as_fatal() {
    let a = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let o = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let tools = tools();
    let transcript = unrepaired_transcript();
    let req = request(&transcript, &tools);
    for err in [
        anthropic(&a).complete(&req).await.unwrap_err(),
        openai(&o).complete(&req).await.unwrap_err(),
    ] {
        assert_eq!(err.status(), Some(400), "{err}");
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("c2"), "{err}");
    }
}
