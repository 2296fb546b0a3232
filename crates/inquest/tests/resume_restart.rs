//! Resume after a real process restart (issue 5): the `inquest` binary
//! runs a session against a fake provider, is stopped with SIGTERM, stays
//! down, and a NEW process on the same database takes the follow-up. The
//! fake (which rejects invalid transcripts like the real API) must receive
//! the whole history, and active time must leave the downtime out.

use std::{
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use inquest_agent::fake::{FakeProvider, FakeReply, Flavor};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};

type Client = InvestigationsClient<tonic::transport::Channel>;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `inquest serve` with `config` on `url`; returns once it listens.
async fn serve(config: &std::path::Path, url: &str, port: u16) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inquest"))
        .args([
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--database-url",
            url,
        ])
        .env_remove("DATABASE_URL")
        .env_remove("INQUEST_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    for _ in 0..1200 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return child;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("server exited before listening: {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server never listened on {port}");
}

async fn stop(child: Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut child = child;
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "exit status {exit}");
}

async fn settled(client: &mut Client, id: &str) -> pb::Session {
    for _ in 0..1000 {
        let s = client
            .get_session(pb::GetSessionRequest {
                session_id: id.into(),
            })
            .await
            .unwrap()
            .into_inner();
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {id} never settled");
}

#[tokio::test]
async fn follow_up_after_a_restart_sends_the_whole_history_and_skips_the_downtime() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("The pool is exhausted.").usage(100, 10));
    fake.reply(FakeReply::text("Report: pool exhaustion."));
    let dir = tempfile::Builder::new()
        .prefix("inquest-restart-")
        .tempdir_in("/tmp")
        .unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[[providers]]\nkind = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\n\
             max_retries = 0\ntimeout = \"30s\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    let (_, url) = inquest_tests::fresh_database().await;

    let port = free_port();
    let first = serve(&config, &url, port).await;
    let mut c = Client::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    let incident = c
        .create_incident(pb::CreateIncidentRequest {
            title: "checkout latency".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let session = c
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "why is checkout slow?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let s = settled(&mut c, &session.id).await;
    assert_eq!(s.exit_reason, "completed");
    let before_restart = fake.request_count();
    stop(first).await;

    // Down for a measurable while.
    let down = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let port = free_port();
    let second = serve(&config, &url, port).await;
    let downtime = down.elapsed();
    let mut c = Client::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    fake.reply(FakeReply::text("It recovered after the deploy.").usage(200, 10));
    let seq = c
        .send_message(pb::SendMessageRequest {
            session_id: session.id.clone(),
            message: "is it still slow?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .seq;
    let s = settled(&mut c, &session.id).await;
    assert_eq!(s.exit_reason, "awaiting_user", "{s:?}");

    // The resumed burst's first request: the whole, valid history.
    let requests = fake.requests();
    let resumed = &requests[before_restart];
    let messages = resumed.body["messages"].as_array().unwrap();
    let shown: Vec<(String, String)> = messages
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            ("user".to_owned(), "why is checkout slow?".to_owned()),
            ("assistant".to_owned(), "The pool is exhausted.".to_owned()),
            ("user".to_owned(), "is it still slow?".to_owned()),
        ]
    );
    assert_eq!(seq, 3);

    let report = c
        .get_report(pb::GetReportRequest {
            session_id: session.id.clone(),
            burst: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report.burst, 2);
    let active = Duration::from_millis(u64::try_from(report.active_time_ms).unwrap());
    assert!(
        active < downtime,
        "active time {active:?} must leave out the {downtime:?} the server was down"
    );
    assert!(report.input_tokens >= 300, "{report:?}");
    stop(second).await;
}
