//! The webhook queue gauges of a real `inquest serve` process (its own
//! metrics recorder: in the in-process suite, every app sets the same
//! process-wide gauges): with a receiver that answers 500 to everything,
//! `/metrics` shows the undelivered events and the age of the oldest, and
//! the age grows while it waits.

mod support;

use std::time::Duration;

use inquest_proto::v1 as pb;
use support::{Server, create_incident, free_port};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A receiver that answers 500 to every request; returns its port.
async fn failing_receiver() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The head and (small) body of one request, then the answer.
                let mut buf = vec![0u8; 64 * 1024];
                let mut read = 0;
                loop {
                    match socket.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                    let text = String::from_utf8_lossy(&buf[..read]);
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())
                                    .flatten()
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            break;
                        }
                    }
                }
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    port
}

/// `/metrics` of the admin listener at `port`.
async fn metrics(port: u16) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the admin listener");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    String::from_utf8_lossy(&raw).into_owned()
}

/// The value of the series `series` (name and labels as rendered); `None`
/// when absent.
fn value(page: &str, series: &str) -> Option<f64> {
    page.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (name, v) = l.rsplit_once(' ')?;
        (name == series).then(|| v.parse().ok()).flatten()
    })
}

#[tokio::test]
async fn the_queue_depth_and_the_oldest_events_age_rise_while_a_receiver_fails() {
    let database = inquest_tests::fresh_database().await;
    let receiver = failing_receiver().await;
    let admin_port = free_port();
    let dir = tempfile::Builder::new()
        .prefix("inquest-webhook-queue-")
        .tempdir_in("/tmp")
        .unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n\n\
             [webhooks]\nallow_private_targets = true\nallow_http = true\n"
        ),
    )
    .unwrap();
    let server = Server::start(&[
        "--database-url",
        &database.url,
        "--config",
        config.to_str().unwrap(),
    ])
    .await;
    let mut c = server.client().await;

    // Before anything is waiting: both gauges exported, at 0.
    let page = metrics(admin_port).await;
    assert_eq!(
        value(&page, "inquest_webhook_queue_depth"),
        Some(0.0),
        "{page}"
    );
    assert_eq!(
        value(&page, "inquest_webhook_oldest_undelivered_seconds"),
        Some(0.0),
        "{page}"
    );

    c.create_webhook(pb::CreateWebhookRequest {
        url: format!("http://127.0.0.1:{receiver}/down"),
        ..Default::default()
    })
    .await
    .unwrap();
    create_incident(&mut c, "first").await;
    create_incident(&mut c, "second").await;

    // Both events wait (the first is retried, the second waits for it),
    // and the gauges are set every couple of seconds.
    let mut first_age = None;
    for _ in 0..150 {
        let page = metrics(admin_port).await;
        let depth = value(&page, "inquest_webhook_queue_depth").unwrap_or(0.0);
        let age = value(&page, "inquest_webhook_oldest_undelivered_seconds").unwrap_or(0.0);
        if depth >= 2.0 && age > 0.0 {
            assert_eq!(depth, 2.0, "{page}");
            first_age = Some(age);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first_age = first_age.expect("the queue gauges never rose");
    let mut risen = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let page = metrics(admin_port).await;
        let age = value(&page, "inquest_webhook_oldest_undelivered_seconds").unwrap_or(0.0);
        if age >= first_age + 1.0 {
            assert_eq!(
                value(&page, "inquest_webhook_queue_depth"),
                Some(2.0),
                "{page}"
            );
            assert!(
                value(&page, r#"inquest_webhook_attempts_total{outcome="failed"}"#).unwrap_or(0.0)
                    >= 2.0,
                "{page}"
            );
            assert_eq!(
                value(
                    &page,
                    r#"inquest_webhook_deliveries_total{outcome="delivered"}"#
                ),
                Some(0.0),
                "{page}"
            );
            risen = true;
            break;
        }
    }
    assert!(
        risen,
        "the oldest event's age did not grow from {first_age}"
    );
    server.stop().await;
}
