//! Webhooks of real `inquest serve` processes: the queue gauges (a process
//! of its own has its own metrics recorder; in the in-process suite every
//! app sets the same process-wide gauges): with a receiver that answers
//! 500 to everything, `/metrics` shows the undelivered events and the age
//! of the oldest, and the age grows while it waits. And kill -9 of the
//! replica delivering a webhook: the other one takes the stream over, and
//! the receiver (verifying each signature with the PyPI `standardwebhooks`
//! package) gets every event at least once, in order. The same holds
//! across a restart of PostgreSQL mid-run (a cluster the test owns) and a
//! receiver that is down for a while.

mod support;

use std::time::Duration;

use inquest_proto::v1 as pb;
use support::{Server, create_incident, fleet::python, free_port};
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

/// Verifies each delivery with `standardwebhooks` against the secret in a
/// file, waits `delay` seconds (so a kill lands mid-delivery), answers 204
/// (401 when it does not verify); one JSON line per request.
const RECEIVER: &str = r#"
import http.server, json, sys, threading, time
from standardwebhooks.webhooks import Webhook
secret_file, delay = sys.argv[1], float(sys.argv[2])
port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
lock = threading.Lock()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with open(secret_file) as f:
            secret = f.read().strip()
        try:
            Webhook(secret).verify(body, headers)
            status = 204
        except Exception:
            status = 401
        time.sleep(delay)
        with lock:  # threads answer at once: one whole line each
            print(json.dumps({"id": headers.get("webhook-id"), "status": status}), flush=True)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
"#;

/// (event id, status) of each request the receiver answered, in order.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(i64, u16)>>>;

async fn verifying_receiver(
    secret_file: &std::path::Path,
    delay: &str,
) -> (u16, Seen, tokio::process::Child) {
    verifying_receiver_on(secret_file, delay, 0, Seen::default()).await
}

/// [`verifying_receiver`] on `port` (0: any), adding to `seen`.
async fn verifying_receiver_on(
    secret_file: &std::path::Path,
    delay: &str,
    port: u16,
    seen: Seen,
) -> (u16, Seen, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(python())
        .args(["-c", RECEIVER])
        .arg(secret_file)
        .arg(delay)
        .arg(port.to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the receiver did not start in 20 s")
        .unwrap()
        .expect("the receiver did not start: it needs the PyPI package standardwebhooks");
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    let port = u16::try_from(first["port"].as_u64().unwrap()).unwrap();
    let sink = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let id = v["id"]
                .as_str()
                .and_then(|id| id.strip_prefix("evt_"))
                .and_then(|n| n.parse().ok())
                .unwrap();
            let status = u16::try_from(v["status"].as_u64().unwrap()).unwrap();
            sink.lock().unwrap().push((id, status));
        }
    });
    (port, seen, child)
}

/// The event ids answered 2xx, each kept at its first arrival.
fn first_arrivals(seen: &[(i64, u16)]) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::new();
    for (id, status) in seen {
        if (200..300).contains(status) && !out.contains(id) {
            out.push(*id);
        }
    }
    out
}

#[tokio::test]
async fn kill_9_of_the_delivering_replica_loses_no_event_and_keeps_the_order() {
    let database = inquest_tests::fresh_database().await;
    let db = inquest_tests::connect(&database.url).await;
    let dir = tempfile::Builder::new()
        .prefix("inquest-webhook-kill-")
        .tempdir_in("/tmp")
        .unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, "").unwrap();
    let (receiver, seen, _receiver) = verifying_receiver(&secret_file, "0.2").await;
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        "[admin]\nenabled = false\n\n[webhooks]\nallow_private_targets = true\nallow_http = true\n",
    )
    .unwrap();
    let args = [
        "--database-url",
        &database.url,
        "--config",
        config.to_str().unwrap(),
    ];
    let a = Server::start_with("hook-a", &args, &[]).await;
    let b = Server::start_with("hook-b", &args, &[]).await;
    let mut c = b.client().await;
    let created = c
        .create_webhook(pb::CreateWebhookRequest {
            url: format!("http://127.0.0.1:{receiver}/events"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    std::fs::write(&secret_file, &created.secret).unwrap();
    let hook = created.webhook.unwrap().id;
    let from: i64 = db
        .query_one(
            "SELECT delivered_id FROM webhooks WHERE id = $1::text::uuid",
            &[&hook],
        )
        .await
        .unwrap()
        .get(0);
    for i in 0..8 {
        create_incident(&mut c, &format!("before {i}")).await;
    }
    // Some delivered, then the holder dies mid-stream (each answer takes
    // 0.2 s).
    let mut holder = None;
    for _ in 0..300 {
        let delivered = first_arrivals(&seen.lock().unwrap()).len();
        if delivered >= 2 {
            holder = db
                .query_one(
                    "SELECT holder FROM webhooks WHERE id = $1::text::uuid",
                    &[&hook],
                )
                .await
                .unwrap()
                .get::<_, Option<String>>(0);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let holder = holder.expect("no delivery began");
    let (dead, survivor) = if holder == "hook-a" { (a, b) } else { (b, a) };
    dead.kill9().await;
    let mut c = survivor.client().await;
    for i in 0..4 {
        create_incident(&mut c, &format!("after {i}")).await;
    }
    let expected: Vec<i64> = db
        .query(
            "SELECT id FROM events WHERE id > $1 AND tenant = 'default' ORDER BY id",
            &[&from],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(expected.len(), 12);
    // The survivor takes the stream once the dead one's lease expires.
    let mut got = Vec::new();
    for _ in 0..600 {
        got = first_arrivals(&seen.lock().unwrap());
        if got.len() >= expected.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all = seen.lock().unwrap().clone();
    assert_eq!(
        got, expected,
        "every event at least once, in order: {all:?}"
    );
    assert!(
        all.iter().all(|(_, s)| *s == 204),
        "each signature verified: {all:?}"
    );
    let taken: Option<String> = db
        .query_one(
            "SELECT holder FROM webhooks WHERE id = $1::text::uuid",
            &[&hook],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(taken.as_deref(), Some(survivor.name.as_str()));
    survivor.stop().await;
}

/// Creates an incident, retrying while the server answers UNAVAILABLE
/// (its database is restarting); the same title twice is harmless here.
async fn create_incident_retrying(c: &mut support::Client, title: &str) {
    for _ in 0..300 {
        match c
            .create_incident(pb::CreateIncidentRequest {
                title: title.into(),
                description: String::new(),
            })
            .await
        {
            Ok(_) => return,
            Err(s) if s.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(s) => panic!("CreateIncident {title}: {s:?}"),
        }
    }
    panic!("CreateIncident {title}: still unavailable after 30 s");
}

/// A PostgreSQL restart in the middle of a delivery run, then a receiver
/// that is down for a while: every event reaches the receiver at least
/// once, in id order, signed, and the stream resumes by itself both times.
#[tokio::test]
async fn a_postgres_restart_and_a_receiver_down_for_a_while_lose_no_event() {
    let cluster = support::faults::OwnCluster::start().await;
    let db = inquest_tests::connect(&cluster.url()).await;
    let dir = tempfile::Builder::new()
        .prefix("inquest-webhook-pg-")
        .tempdir_in("/tmp")
        .unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, "").unwrap();
    let (port, seen, receiver) = verifying_receiver(&secret_file, "0.05").await;
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        "[admin]\nenabled = false\n\n[webhooks]\nallow_private_targets = true\nallow_http = true\n",
    )
    .unwrap();
    let url = cluster.url();
    let server = Server::start_with(
        "hook-pg",
        &["--database-url", &url, "--config", config.to_str().unwrap()],
        &[],
    )
    .await;
    let mut c = server.client().await;
    let created = c
        .create_webhook(pb::CreateWebhookRequest {
            url: format!("http://127.0.0.1:{port}/events"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    std::fs::write(&secret_file, &created.secret).unwrap();
    let hook = created.webhook.unwrap().id;
    let from: i64 = db
        .query_one(
            "SELECT delivered_id FROM webhooks WHERE id = $1::text::uuid",
            &[&hook],
        )
        .await
        .unwrap()
        .get(0);
    for i in 0..10 {
        create_incident(&mut c, &format!("before {i}")).await;
    }
    // Restarted once a few are through (each answer takes 50 ms).
    for _ in 0..300 {
        if first_arrivals(&seen.lock().unwrap()).len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        first_arrivals(&seen.lock().unwrap()).len() < 10,
        "the restart should land mid-run"
    );
    drop(db);
    cluster.restart().await;
    for i in 0..5 {
        create_incident_retrying(&mut c, &format!("after restart {i}")).await;
    }
    let db = inquest_tests::connect(&cluster.url()).await;
    let all = db
        .query_one(
            "SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM events \
             WHERE id > $1 AND tenant = 'default'",
            &[&from],
        )
        .await
        .unwrap()
        .get::<_, Vec<i64>>(0);
    assert_eq!(all.len(), 15);
    let mut got = Vec::new();
    for _ in 0..600 {
        got = first_arrivals(&seen.lock().unwrap());
        if got.len() >= all.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(got, all, "after the restart: {:?}", seen.lock().unwrap());

    // The receiver goes away; events wait, retried, and arrive once it is
    // back on the same address.
    drop(receiver);
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..4 {
        create_incident(&mut c, &format!("receiver down {i}")).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let failed: i32 = db
        .query_one(
            "SELECT failed_attempts FROM webhooks WHERE id = $1::text::uuid",
            &[&hook],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        failed >= 2,
        "the down receiver's attempts failed and were retried: {failed}"
    );
    let (_, _, _receiver) =
        verifying_receiver_on(&secret_file, "0", port, std::sync::Arc::clone(&seen)).await;
    let all = db
        .query_one(
            "SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM events \
             WHERE id > $1 AND tenant = 'default'",
            &[&from],
        )
        .await
        .unwrap()
        .get::<_, Vec<i64>>(0);
    assert_eq!(all.len(), 19);
    for _ in 0..600 {
        got = first_arrivals(&seen.lock().unwrap());
        if got.len() >= all.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let every = seen.lock().unwrap().clone();
    assert_eq!(got, all, "every event at least once, in order: {every:?}");
    assert!(
        every.iter().all(|(_, s)| *s == 204),
        "each signature verified: {every:?}"
    );
    server.stop().await;
}
