//! The failover chain: retries, backoff, timeouts, sticky failover and
//! building from config.

use std::time::Duration;

use inquest_agent::{
    ChainCursor, ConfigError, ProviderChain, ProviderConfig, ProviderError, ProviderKind,
};
use inquest_testkit::fake::{Behaviour, FakeProvider, FakeReply, Flavor};

use crate::support::{request, user};

/// A config entry for a fake; tiny backoff so tests do not wait.
fn entry(fake: &FakeProvider, name: &str, max_retries: u32) -> ProviderConfig {
    let kind = match fake.base_url().ends_with("/v1") {
        true => ProviderKind::OpenAi,
        false => ProviderKind::Anthropic,
    };
    ProviderConfig {
        name: Some(name.into()),
        model: Some("m".into()),
        base_url: Some(fake.base_url()),
        api_key_env: Some("TEST_KEY".into()),
        timeout: Some(Duration::from_secs(20)),
        max_retries: Some(max_retries),
        backoff: Some(Duration::from_millis(1)),
        ..ProviderConfig::new(kind)
    }
}

fn chain(entries: &[ProviderConfig]) -> ProviderChain {
    ProviderChain::from_config_with_env(entries, |_| Some("k".into())).expect("chain builds")
}

#[tokio::test]
async fn rate_limit_and_server_error_are_retried_then_answered() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    fake.fail(1, 429)
        .fail(1, 500)
        .reply(FakeReply::text("found it"));
    let chain = chain(&[entry(&fake, "primary", 2)]);
    let transcript = vec![user("q")];
    let mut cursor = ChainCursor::new();
    let answered = chain
        .complete(&mut cursor, &request(&transcript, &[]))
        .await
        .unwrap();
    assert_eq!(answered.completion.text, "found it");
    assert_eq!(answered.provider, "primary");
    assert_eq!(answered.attempts, 3);
    assert_eq!(fake.request_count(), 3);
}

#[tokio::test]
async fn failover_is_sticky_within_a_burst_and_reset_asks_the_first_again() {
    let first = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    first.fail(3, 500);
    let chain = chain(&[entry(&first, "first", 2), entry(&second, "second", 2)]);
    let transcript = vec![user("q")];
    let req = request(&transcript, &[]);
    let mut cursor = ChainCursor::new();

    let answered = chain.complete(&mut cursor, &req).await.unwrap();
    assert_eq!(
        (answered.provider_index, answered.provider.as_str()),
        (1, "second")
    );
    assert_eq!(answered.attempts, 4);
    assert_eq!(first.request_count(), 3);
    assert_eq!(cursor.position(), 1);

    // Same burst: the failed provider is not asked again.
    let answered = chain.complete(&mut cursor, &req).await.unwrap();
    assert_eq!(answered.provider, "second");
    assert_eq!(first.request_count(), 3);
    assert_eq!(second.request_count(), 2);

    // Next burst: the first provider (healthy again) answers.
    cursor.reset();
    let answered = chain.complete(&mut cursor, &req).await.unwrap();
    assert_eq!(answered.provider, "first");
    assert_eq!(first.request_count(), 4);
    assert_eq!(second.request_count(), 2);
}

#[tokio::test]
async fn fatal_error_is_not_retried_but_fails_over() {
    let first = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    first.fail(1, 401);
    let chain = chain(&[entry(&first, "first", 5), entry(&second, "second", 5)]);
    let transcript = vec![user("q")];
    let answered = chain
        .complete(&mut ChainCursor::new(), &request(&transcript, &[]))
        .await
        .unwrap();
    assert_eq!(answered.provider, "second");
    assert_eq!(first.request_count(), 1);
}

#[tokio::test]
async fn every_provider_failing_reports_each_failure() {
    let first = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    first.fail(2, 503);
    second.fail(1, 400);
    let chain = chain(&[entry(&first, "first", 1), entry(&second, "second", 1)]);
    let transcript = vec![user("q")];
    let mut cursor = ChainCursor::new();
    let err = chain
        .complete(&mut cursor, &request(&transcript, &[]))
        .await
        .unwrap_err();
    let seen: Vec<(&str, u32, Option<u16>)> = err
        .failures
        .iter()
        .map(|f| (f.provider.as_str(), f.attempts, f.error.status()))
        .collect();
    assert_eq!(seen, [("first", 2, Some(503)), ("second", 1, Some(400))]);
    assert_eq!(err.last_error().and_then(ProviderError::status), Some(400));
    assert!(err.to_string().contains("every provider failed"));
    assert_eq!(cursor.position(), 1);
}

#[tokio::test]
async fn a_hung_request_times_out_as_retryable_and_is_retried() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    fake.push(Behaviour::Hang);
    let mut config = entry(&fake, "slow", 0);
    config.timeout = Some(Duration::from_millis(300));

    // No retries: the timeout surfaces, and it is retryable.
    let no_retry = chain(std::slice::from_ref(&config));
    let transcript = vec![user("q")];
    let req = request(&transcript, &[]);
    let err = no_retry
        .complete(&mut ChainCursor::new(), &req)
        .await
        .unwrap_err();
    let error = err.last_error().unwrap();
    assert!(matches!(error, ProviderError::Timeout(_)), "{error:?}");
    assert!(error.is_retryable());

    // With a retry, the next attempt answers.
    fake.push(Behaviour::Hang)
        .reply(FakeReply::text("late but fine"));
    config.max_retries = Some(1);
    let answered = chain(&[config])
        .complete(&mut ChainCursor::new(), &req)
        .await
        .unwrap();
    assert_eq!(answered.completion.text, "late but fine");
    assert_eq!(answered.attempts, 2);
    assert_eq!(fake.request_count(), 3);
}

#[tokio::test]
async fn chain_config_is_validated_and_keys_come_from_the_environment() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let config = entry(&fake, "primary", 1);
    let missing = ProviderChain::from_config_with_env(std::slice::from_ref(&config), |_| None);
    assert!(
        matches!(missing, Err(ConfigError::MissingApiKey { ref env, .. }) if env == "TEST_KEY")
    );
    assert!(matches!(
        ProviderChain::from_config_with_env(&[], |_| None),
        Err(ConfigError::NoProviders)
    ));
    let mut bad = config.clone();
    bad.max_retries = Some(1000);
    let err = ProviderChain::from_config_with_env(&[bad], |_| Some("k".into())).err();
    assert!(err.is_some_and(|e| e.to_string().contains("providers[0] (primary)")));

    let mut unnamed = config;
    unnamed.name = None;
    let ok = ProviderChain::from_config_with_env(&[unnamed], |v| {
        (v == "TEST_KEY").then(|| "from-env".to_owned())
    })
    .unwrap();
    assert_eq!(ok.names().collect::<Vec<_>>(), ["anthropic:m"]);
    let transcript = vec![user("q")];
    ok.complete(&mut ChainCursor::new(), &request(&transcript, &[]))
        .await
        .unwrap();
    assert_eq!(fake.requests()[0].header("x-api-key"), Some("from-env"));
}

/// A provider's standard "too long" answer, in either flavour, is typed
/// with the limit it names, neither retried nor failed over: the cursor
/// stays, so the loop can compact and ask the same provider again.
#[tokio::test]
async fn too_long_is_typed_and_neither_retried_nor_failed_over() {
    for flavor in [Flavor::OpenAi, Flavor::Anthropic] {
        let first = FakeProvider::start(flavor)
            .await
            .unwrap()
            .with_context_window(50);
        let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
        let chain = chain(&[entry(&first, "first", 2), entry(&second, "second", 2)]);
        let transcript = vec![user(&"evidence ".repeat(100))];
        let mut cursor = ChainCursor::new();
        let err = chain
            .complete(&mut cursor, &request(&transcript, &[]))
            .await
            .unwrap_err();
        let (index, limit, requested) = err.context_too_long().expect("typed as too long");
        assert_eq!((index, limit), (0, Some(50)), "{flavor:?}");
        assert!(
            requested.is_some_and(|r| r > 50),
            "{flavor:?}: {requested:?}"
        );
        assert!(matches!(
            err.last_error(),
            Some(ProviderError::ContextTooLong { .. })
        ));
        assert_eq!(first.request_count(), 1, "not retried");
        assert_eq!(first.too_long_count(), 1);
        assert_eq!(second.request_count(), 0, "not failed over");
        assert_eq!(cursor.position(), 0);
    }
}
