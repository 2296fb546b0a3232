//! Receivers that misbehave, through the real server: a 2xx whose body is
//! huge and never ends, a refusal with a huge body, and one that never
//! answers. Each holds up at most its own webhook: the others go on, the
//! huge answers are not read past an excerpt.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use inquest_proto::v1 as pb;
use inquest_tests::spawn_app_with;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Event ids (`evt_<n>`) each path received, in arrival order.
type Arrivals = Arc<Mutex<HashMap<String, Vec<String>>>>;

/// One HTTP/1.1 server; the path picks the behaviour:
/// - `/huge-ok`: 200 with a 1 GiB content length, 64 KiB sent, then
///   nothing more (the connection held open);
/// - `/huge-refusal`: 500 with a 1 MiB body, all of it sent;
/// - `/silent`: never answers;
/// - anything else: 204.
async fn receiver() -> (u16, Arrivals) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let arrivals = Arrivals::default();
    let seen = Arc::clone(&arrivals);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let _ = serve(socket, seen).await;
            });
        }
    });
    (port, arrivals)
}

async fn serve(socket: tokio::net::TcpStream, seen: Arrivals) -> std::io::Result<()> {
    let (read, mut write) = socket.into_split();
    let mut read = BufReader::new(read);
    loop {
        let (mut path, mut length, mut id) = (String::new(), 0usize, String::new());
        loop {
            let mut line = String::new();
            if read.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                if path.is_empty() {
                    continue;
                }
                break;
            }
            if path.is_empty() {
                path = line.split(' ').nth(1).unwrap_or("").to_owned();
            } else if let Some((k, v)) = line.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    "webhook-id" => v.trim().clone_into(&mut id),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length];
        read.read_exact(&mut body).await?;
        seen.lock()
            .unwrap()
            .entry(path.clone())
            .or_default()
            .push(id);
        match path.as_str() {
            "/huge-ok" => {
                write
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1073741824\r\n\r\n")
                    .await?;
                write.write_all(&vec![b'x'; 64 * 1024]).await?;
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            "/huge-refusal" => {
                let body = vec![b'E'; 1024 * 1024];
                write
                    .write_all(
                        format!(
                            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await?;
                write.write_all(&body).await?;
            }
            "/silent" => tokio::time::sleep(Duration::from_secs(3600)).await,
            _ => write.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await?,
        }
    }
}

#[tokio::test]
async fn huge_answers_are_not_read_and_a_silent_receiver_holds_up_only_its_own_webhook() {
    let (port, arrivals) = receiver().await;
    let app = spawn_app_with(|c| {
        c.webhooks.allow_private_targets = true;
        c.webhooks.allow_http = true;
    })
    .await;
    let mut c = app.client().await;
    let mut hooks = HashMap::new();
    for path in ["/ok", "/huge-ok", "/huge-refusal", "/silent"] {
        let created = c
            .create_webhook(pb::CreateWebhookRequest {
                url: format!("http://127.0.0.1:{port}{path}"),
                event_types: vec!["incident.created".into()],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        hooks.insert(path, created.webhook.unwrap().id);
    }
    let started = Instant::now();
    for i in 0..3 {
        c.create_incident(pb::CreateIncidentRequest {
            title: format!("incident {i}"),
            description: String::new(),
        })
        .await
        .unwrap();
    }
    // The healthy receiver and the one whose 2xx body never ends both get
    // the three events in order, without waiting for the silent one or
    // reading the endless body (the attempt timeout is 10 s).
    let arrived = |path: &str| {
        arrivals
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    };
    loop {
        if arrived("/ok").len() >= 3 && arrived("/huge-ok").len() >= 3 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "held up: {:?}",
            arrivals.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(arrived("/ok"), arrived("/huge-ok"));
    // The silent receiver got the first event only: its stream waits in
    // order.
    assert_eq!(arrived("/silent"), arrived("/ok")[..1].to_vec());
    // The refusal's body is read only for an excerpt of it.
    let refused = loop {
        let deliveries = c
            .list_webhook_deliveries(pb::ListWebhookDeliveriesRequest {
                webhook_id: hooks["/huge-refusal"].clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .deliveries;
        if let Some(d) = deliveries.into_iter().find(|d| d.status_code == 500) {
            break d;
        }
        assert!(started.elapsed() < Duration::from_secs(8));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        refused
            .error
            .starts_with("receiver answered 500 Internal Server Error: EEEE"),
        "{refused:?}"
    );
    assert!(refused.error.chars().count() <= 512, "{refused:?}");
    assert!(refused.duration_ms < 5000, "{refused:?}");
    app.stop().await.unwrap();
}
