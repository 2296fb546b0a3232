//! What a caller with no credentials can hold on the gRPC port: idle
//! connections are closed at the preface deadline, connections past the
//! cap are closed at accept, and a client that is already connected keeps
//! being served through both.

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_tests::TestApp;
use tokio::{io::AsyncReadExt, net::TcpStream};
use tonic::Code;

/// A call the valid client makes over and over: answered (NOT_FOUND) means
/// served.
async fn served(client: &mut crate::agent_support::Client) {
    let status = client
        .get_session(pb::GetSessionRequest {
            session_id: uuid::Uuid::now_v7().to_string(),
        })
        .await
        .expect_err("an unknown session");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
}

/// Opens `n` TCP connections that send nothing.
async fn idle(app: &TestApp, n: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        open.push(TcpStream::connect(app.addr).await.expect("connect"));
    }
    open
}

/// Whether the server closed `stream` within `wait`.
async fn closed(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(wait, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn idle_connections_are_closed_at_the_preface_deadline_while_a_client_is_served() {
    let app = inquest_tests::spawn_app_with(|c| {
        c.limits.connection_preface_timeout = Duration::from_secs(1);
    })
    .await;
    let mut client = app.client().await;
    served(&mut client).await;
    let mut quiet = idle(&app, 2_000).await;
    let started = tokio::time::Instant::now();
    // Served all along, while 2,000 connections sit idle.
    while started.elapsed() < Duration::from_millis(1_500) {
        served(&mut client).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (i, stream) in quiet.iter_mut().enumerate() {
        assert!(
            closed(stream, Duration::from_secs(10)).await,
            "idle connection {i} still open {:?} after it was opened",
            started.elapsed()
        );
    }
    served(&mut client).await;
    app.stop().await.expect("stop");
}

#[tokio::test]
async fn past_the_connection_cap_new_connections_are_closed_and_open_ones_served() {
    const CAP: usize = 20;
    let app = inquest_tests::spawn_app_with(|c| {
        c.limits.max_connections = CAP;
    })
    .await;
    let mut client = app.client().await;
    served(&mut client).await;
    let mut extra = idle(&app, 2 * CAP).await;
    let mut refused = 0;
    for stream in &mut extra {
        if closed(stream, Duration::from_millis(500)).await {
            refused += 1;
        }
    }
    // The client holds one place; at most CAP - 1 of the others got one.
    assert!(
        refused > CAP,
        "only {refused} of {} connections over the cap were closed",
        2 * CAP
    );
    served(&mut client).await;
    // Places come back as connections close.
    drop(extra);
    let mut fresh = app.client().await;
    served(&mut fresh).await;
    app.stop().await.expect("stop");
}
