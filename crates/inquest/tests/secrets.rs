//! Secrets planted where an operator puts them (a provider key, a token in
//! an MCP URL and header, the database password) never appear in the
//! server's logs, in stored turns or in what the API answers, after runs
//! that fail in ways that quote them: a provider that echoes the key in its
//! 401, an MCP server that cannot be reached at its tokened URL.

mod support;

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{Behaviour, FakeProvider, Flavor};
use support::{Server, all_turns, create_incident, free_port, settled, start_session};

/// The URL with a password in it: the suite's own when it has one (the
/// throwaway cluster's), else one added (the dev cluster trusts).
fn with_password(url: &str) -> (String, String) {
    let rest = url.strip_prefix("postgres://").expect("a postgres:// URL");
    let (userinfo, host) = rest.split_once('@').expect("a user in the URL");
    match userinfo.split_once(':') {
        Some((_, password)) => (url.to_owned(), password.to_owned()),
        None => {
            let password = format!("dbpw-{}", uuid::Uuid::new_v4().simple());
            (format!("postgres://{userinfo}:{password}@{host}"), password)
        }
    }
}

#[tokio::test]
async fn planted_secrets_never_reach_logs_turns_or_answers() {
    let key = format!("sk-test-{}", uuid::Uuid::new_v4().simple());
    let token = format!("mcp-{}", uuid::Uuid::new_v4().simple());
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let (url, db_password) = with_password(&url);

    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    for _ in 0..4 {
        fake.push(Behaviour::Raw(
            401,
            format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {key}. You can find your API key at https://example/keys.","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
            ),
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("inquest-secrets-")
        .tempdir_in("/tmp")
        .unwrap();
    let dead = free_port();
    let mcp = serde_json::json!({"mcpServers": {"k8s": {
        "url": format!("http://127.0.0.1:{dead}/mcp?token=${{MCP_TOKEN}}"),
        "headers": {"Authorization": "Bearer ${MCP_TOKEN}"},
    }}});
    std::fs::write(dir.path().join("mcp.json"), mcp.to_string()).unwrap();
    let provider = format!(
        "[[providers]]\nkind = \"openai\"\nname = \"fake\"\nmodel = \"fake-model\"\n\
         base_url = \"{}\"\napi_key_env = \"INQ_TEST_KEY\"\nmax_retries = 0\n",
        fake.base_url()
    );
    // First run: the only MCP server is unreachable at its tokened URL,
    // so the burst ends before any model call. Second run: the provider
    // alone, answering 401 with the key in its message.
    let with_mcp = dir.path().join("with-mcp.toml");
    std::fs::write(
        &with_mcp,
        format!(
            "{provider}\n[mcp]\nconfig = \"{}\"\n",
            dir.path().join("mcp.json").display()
        ),
    )
    .unwrap();
    // The second run also delivers events to a dead webhook whose URL
    // quotes its own secret, so every failed attempt's logged error does.
    let webhook_secret = format!(
        "whsec_{}",
        uuid::Uuid::new_v4().simple().to_string().to_uppercase()
    );
    let provider_only = dir.path().join("provider.toml");
    std::fs::write(
        &provider_only,
        format!(
            "{provider}\n[[events.webhooks]]\nname = \"dead\"\n\
             url = \"http://127.0.0.1:{dead}/hook?s={webhook_secret}\"\n\
             secret_env = \"INQ_TEST_WEBHOOK\"\n"
        ),
    )
    .unwrap();
    let env = [
        ("INQ_TEST_KEY", key.as_str()),
        ("MCP_TOKEN", token.as_str()),
        ("INQ_TEST_WEBHOOK", webhook_secret.as_str()),
        ("RUST_LOG", "debug"),
    ];
    let server = Server::start_with(
        "secrets",
        &[
            "--database-url",
            &url,
            "--config",
            with_mcp.to_str().unwrap(),
        ],
        &env,
    )
    .await;
    let mut c = server.client().await;
    let incident = create_incident(&mut c, "secrets").await;
    let session = start_session(&mut c, &incident.id, "look").await.unwrap();
    let first = settled(&mut c, &session.id).await;
    assert_eq!(first.exit_reason, "tool_servers_unavailable", "{first:?}");
    let mut logs = server.stop_and_read_logs().await;

    let server = Server::start_with(
        "secrets-2",
        &[
            "--database-url",
            &url,
            "--config",
            provider_only.to_str().unwrap(),
        ],
        &env,
    )
    .await;
    let mut c = server.client().await;
    c.send_message(pb::SendMessageRequest {
        session_id: session.id.clone(),
        message: "again".into(),
        idempotency_key: String::new(),
        if_running: 0,
    })
    .await
    .unwrap();
    let s = settled(&mut c, &session.id).await;
    assert_eq!(s.exit_reason, "provider_failed", "{s:?}");
    assert!(
        fake.request_count() > 0,
        "the provider was called with the key"
    );
    let sent = fake.requests()[0]
        .header("authorization")
        .unwrap_or_default()
        .to_owned();
    assert!(sent.contains(&key), "the key really was sent: {sent}");

    let turns = all_turns(&mut c, &session.id).await;
    let report = c
        .get_report(pb::GetReportRequest {
            session_id: session.id.clone(),
            ..Default::default()
        })
        .await
        .map(|r| format!("{:?}", r.into_inner()))
        .unwrap_or_else(|s| s.message().to_owned());
    // An answer that is an error quoting what it was given: an id that is
    // the key. Its message must not carry it.
    let refused = c
        .get_session(pb::GetSessionRequest {
            session_id: key.clone(),
        })
        .await
        .expect_err("the key is no session id");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let refused = refused.message().to_owned();
    assert!(refused.contains("[redacted]"), "{refused}");
    // Events of the second run were attempted (and failed) at least once.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    logs.extend(server.stop_and_read_logs().await);
    assert!(
        logs.iter().any(|l| l.contains("webhook delivery failed")),
        "the dead webhook was attempted"
    );
    let logs = logs.join("\n");
    assert!(
        logs.contains("[redacted]"),
        "the failures quoted a secret somewhere, and it was hidden"
    );
    for (what, text) in [
        ("logs", logs.as_str()),
        ("turns", &format!("{turns:?}")),
        ("session", &format!("{s:?} {first:?}")),
        ("report", &report),
        ("refusal", &refused),
    ] {
        for (name, secret) in [
            ("key", &key),
            ("token", &token),
            ("db password", &db_password),
            ("webhook secret", &webhook_secret),
        ] {
            assert!(
                !text.contains(secret.as_str()),
                "the {name} is in the {what}"
            );
        }
    }
}
