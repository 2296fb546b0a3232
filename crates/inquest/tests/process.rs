//! The real `inquest` binary as a separate OS process: graceful shutdown on
//! SIGTERM, and the embedded PostgreSQL default (created on first start,
//! reused after, stopped on shutdown).

use std::{
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::Duration,
};

use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn inquest() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inquest"));
    // The suite's DATABASE_URL must not leak into a server that is meant
    // to use its embedded default.
    cmd.env_remove("DATABASE_URL")
        .env_remove("INQUEST_DATABASE_URL");
    cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
    cmd
}

/// Waits until the server accepts connections (or exits).
async fn wait_listening(child: &mut Child, port: u16) {
    for _ in 0..1200 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("server exited before listening: {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("server never listened on {port}");
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn client(port: u16) -> InvestigationsClient<tonic::transport::Channel> {
    InvestigationsClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap()
}

#[tokio::test]
async fn sigterm_finishes_and_exits_zero() {
    let (_, url) = inquest_tests::fresh_database().await;
    let port = free_port();
    let mut child = inquest()
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--database-url",
            &url,
        ])
        .spawn()
        .unwrap();
    wait_listening(&mut child, port).await;
    let mut c = client(port).await;
    c.create_incident(pb::CreateIncidentRequest {
        title: "before shutdown".into(),
        description: String::new(),
    })
    .await
    .unwrap();
    sigterm(&child);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status}");
}

#[tokio::test]
async fn embedded_default_is_created_reused_and_stopped() {
    let dir = tempfile::Builder::new()
        .prefix("inquest-embedded-")
        .tempdir_in("/tmp")
        .unwrap();
    let data_dir = dir.path().to_str().unwrap().to_owned();
    let mut incident_id = String::new();
    for round in 0..2 {
        let port = free_port();
        let mut child = inquest()
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
                &data_dir,
            ])
            .spawn()
            .unwrap();
        wait_listening(&mut child, port).await;
        let mut c = client(port).await;
        if round == 0 {
            incident_id = c
                .create_incident(pb::CreateIncidentRequest {
                    title: "kept across restarts".into(),
                    description: String::new(),
                })
                .await
                .unwrap()
                .into_inner()
                .id;
        }
        // The second start reuses the cluster the first one created.
        let s = c
            .start_session(pb::StartSessionRequest {
                incident_id: incident_id.clone(),
                message: format!("round {round}"),
                idempotency_key: String::new(),
            })
            .await;
        assert!(s.is_ok(), "round {round}: {s:?}");
        sigterm(&child);
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "exit status {status}");
        // Stopped with the server: postmaster.pid is gone.
        assert!(
            !dir.path().join("pgdata/postmaster.pid").exists(),
            "embedded PostgreSQL still running after shutdown"
        );
    }
}

/// A message stored while no agent could take it (here: a server with no
/// provider) is picked up when a server with an agent starts.
#[tokio::test]
async fn a_session_left_pending_starts_when_a_server_with_an_agent_starts() {
    let (_, url) = inquest_tests::fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"text": "Nothing is wrong; the alert was a test."}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("inquest.toml"),
        "[[providers]]\nkind = \"script\"\nscript = \"script.json\"\n",
    )
    .unwrap();

    // No provider: the session is stored and stays pending.
    let port = free_port();
    let mut first = inquest()
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--database-url",
            &url,
        ])
        .spawn()
        .unwrap();
    wait_listening(&mut first, port).await;
    let mut c = client(port).await;
    let incident = c
        .create_incident(pb::CreateIncidentRequest {
            title: "left pending".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let session = c
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "is anything wrong?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(session.status(), pb::SessionStatus::Pending);
    sigterm(&first);
    assert!(
        tokio::task::spawn_blocking(move || first.wait())
            .await
            .unwrap()
            .unwrap()
            .success()
    );

    // A server with an agent picks it up at start.
    let port = free_port();
    let mut second = inquest()
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--database-url",
            &url,
            "--config",
        ])
        .arg(dir.path().join("inquest.toml"))
        .spawn()
        .unwrap();
    wait_listening(&mut second, port).await;
    let mut c = client(port).await;
    let mut status = pb::SessionStatus::Pending;
    for _ in 0..600 {
        let s = c
            .get_session(pb::GetSessionRequest {
                session_id: session.id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        status = s.status();
        if status == pb::SessionStatus::Completed {
            assert_eq!(s.exit_reason, "completed");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, pb::SessionStatus::Completed);
    sigterm(&second);
    assert!(
        tokio::task::spawn_blocking(move || second.wait())
            .await
            .unwrap()
            .unwrap()
            .success()
    );
}
