//! The admin listener: `/metrics` moves
//! when an investigation runs, `/healthz` answers, `/readyz` follows the
//! database. The recorder is process-wide and tests run in parallel, so
//! counters are compared before and after, never to absolute values.

use std::{net::SocketAddr, time::Duration};

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::agent_support::{app_with_fake, finished, start};

/// One GET over HTTP/1.1: (status code, body).
pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the admin listener");
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .expect("send request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The value of the series whose line starts with `series` (name and
/// labels exactly as rendered), 0 when absent.
fn value(page: &str, series: &str) -> f64 {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, v) = l.rsplit_once(' ')?;
            (name == series).then(|| v.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}

/// The sum over every series of `name` whose labels contain `label`.
pub(crate) fn sum(page: &str, name: &str, label: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn metrics_move_when_an_investigation_runs() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.expect("fake");
    fake.reply(
        FakeReply::text("Looking.")
            .call("c1", "list_files", "{}")
            .usage(100, 20),
    )
    .reply(FakeReply::text("The pool was exhausted.").usage(150, 30))
    .reply(FakeReply::text("summary"));
    let app = app_with_fake(&fake, |_| {}).await;
    let admin = app.admin_addr.expect("the admin listener is bound");
    let (status, before) = get(admin, "/metrics").await;
    assert_eq!(status, 200);

    let mut client = app.client().await;
    let id = start(&mut client, "why is checkout slow?").await;
    let (_, session) = finished(&mut client, &id, 1).await;
    assert_eq!(session.status(), pb::SessionStatus::Completed);
    let missing = client
        .get_session(pb::GetSessionRequest {
            session_id: uuid::Uuid::now_v7().to_string(),
        })
        .await;
    assert_eq!(missing.unwrap_err().code(), tonic::Code::NotFound);

    let (status, after) = get(admin, "/metrics").await;
    assert_eq!(status, 200);
    let moved = |series: &str| value(&after, series) - value(&before, series);
    assert!(
        moved(r#"inquest_rpc_requests_total{method="StartSession",code="OK"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        moved(r#"inquest_rpc_requests_total{method="GetSession",code="NOT_FOUND"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        moved(r#"inquest_bursts_started_total{mode="fresh"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        moved(r#"inquest_lease_claims_total{mode="fresh"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        moved(r#"inquest_bursts_ended_total{exit_reason="completed"}"#) >= 1.0,
        "{after}"
    );
    assert!(
        moved(r#"inquest_provider_requests_total{provider="fake",outcome="ok"}"#) >= 3.0,
        "{after}"
    );
    assert!(
        moved(r#"inquest_provider_tokens_total{provider="fake",kind="output"}"#) >= 50.0,
        "{after}"
    );
    assert!(
        moved(r#"inquest_tool_calls_total{server="evidence",tool="list_files",outcome="ok"}"#)
            >= 1.0,
        "{after}"
    );
    let appends = |page: &str| sum(page, "inquest_store_calls_total", r#"outcome="ok""#);
    assert!(appends(&after) > appends(&before), "{after}");
    for name in [
        "inquest_rpc_duration_seconds_bucket",
        "inquest_store_call_duration_seconds_bucket",
        "inquest_store_pool_connections",
        "inquest_bursts_running",
        "inquest_watch_streams",
        "inquest_health_probes_total",
    ] {
        assert!(after.contains(name), "no {name} in {after}");
    }
    assert!(
        after.contains(r#"inquest_store_pool_max{lane="burst"} 4"#),
        "the burst lane's size (the harness sets 4): {after}"
    );
    // No session id ever becomes a label.
    assert!(!after.contains(&id), "a session id leaked into a label");
    app.stop().await.expect("stop");
}

#[tokio::test]
async fn healthz_answers_and_readyz_follows_the_database() {
    let app = inquest_tests::spawn_app().await;
    let admin = app.admin_addr.expect("the admin listener is bound");
    assert_eq!(get(admin, "/healthz").await.0, 200);
    let ready_becomes = |want: u16| async move {
        let mut last = 0;
        for _ in 0..100 {
            last = get(admin, "/readyz").await.0;
            if last == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        last
    };
    assert_eq!(ready_becomes(200).await, 200);
    app.take_database_down().await;
    assert_eq!(ready_becomes(503).await, 503);
    assert_eq!(
        get(admin, "/healthz").await.0,
        200,
        "the process still answers"
    );
    app.bring_database_up().await;
    assert_eq!(ready_becomes(200).await, 200);
    assert_eq!(get(admin, "/nope").await.0, 404);
    app.stop().await.expect("stop");
}

/// Every method of the service, the admin ones included, is counted under
/// its own `method` label: the label comes from the generated table, so a
/// method missing from a hand-kept list can no longer fall into "unknown".
#[tokio::test]
async fn every_rpc_has_its_own_metrics_label() {
    use inquest_proto::rpc::Rpc;

    let app = inquest_tests::spawn_app().await;
    let admin = app.admin_addr.expect("the admin listener is bound");
    let (_, before) = get(admin, "/metrics").await;
    let mut grpc = tonic::client::Grpc::new(app.channel().await);
    for rpc in Rpc::ALL {
        // An empty body decodes as the default request of every method:
        // whatever the method answers, the call is counted.
        grpc.ready().await.expect("the channel is ready");
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(rpc.path());
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        let code = if rpc.server_streaming() {
            match grpc
                .server_streaming(tonic::Request::new(()), path, codec)
                .await
            {
                Ok(mut stream) => {
                    // Read to the end (or the first error) so the call is
                    // finished, and counted, before /metrics is read.
                    let stream = stream.get_mut();
                    loop {
                        match tokio::time::timeout(Duration::from_secs(10), stream.message()).await
                        {
                            Ok(Ok(Some(()))) => continue,
                            Ok(Ok(None)) => break tonic::Code::Ok,
                            Ok(Err(status)) => break status.code(),
                            Err(_) => panic!("{} streamed for 10 s", rpc.name()),
                        }
                    }
                }
                Err(status) => status.code(),
            }
        } else {
            grpc.unary(tonic::Request::new(()), path, codec)
                .await
                .map_or_else(|s| s.code(), |_| tonic::Code::Ok)
        };
        assert_ne!(
            code,
            tonic::Code::Unimplemented,
            "{} is in the table but not served",
            rpc.name()
        );
    }

    let (_, after) = get(admin, "/metrics").await;
    for rpc in Rpc::ALL {
        let label = format!(r#"method="{}""#, rpc.name());
        let moved = sum(&after, "inquest_rpc_requests_total", &label)
            - sum(&before, "inquest_rpc_requests_total", &label);
        assert!(
            moved >= 1.0,
            "{} was not counted under its own label: {after}",
            rpc.name()
        );
    }
    app.stop().await.expect("stop");
}
