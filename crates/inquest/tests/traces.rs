//! One trace per burst, through the real binary: the
//! tracing subscriber is process-global, so the server runs as its own
//! process, exporting over OTLP to a receiver in this test. A real
//! investigation (the fake model, the real MCP server, a tool call) started
//! with a W3C `traceparent` is one trace, the caller's: its `rpc` span is
//! the child of the caller's span, the `burst` span the child of the `rpc`
//! span, and every claim, provider request, tool call and turn write of
//! the burst below it; GetSession returns that trace id and every log line
//! of the burst carries it. A follow-up without a `traceparent` is a new
//! trace. A dead OTLP endpoint does not hold up shutdown.

mod support;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::{AnyValue, any_value},
};
use support::{
    ReplicaConfig, Server, create_incident, fake_provider_toml, get_session, settled, start_session,
};

/// One span as the receiver got it; ids in lowercase hex.
#[derive(Debug, Clone)]
struct Got {
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    attributes: HashMap<String, String>,
}

/// An OTLP/gRPC trace receiver: keeps every span it is sent.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Got>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push(Got {
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        name: span.name,
                        attributes: span
                            .attributes
                            .into_iter()
                            .map(|kv| (kv.key, value(kv.value)))
                            .collect(),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Receiver {
    /// Serves on 127.0.0.1:0; returns the endpoint to export to.
    async fn start() -> (Receiver, String) {
        let receiver = Receiver::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let service = TraceServiceServer::new(receiver.clone());
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        (receiver, format!("http://{addr}"))
    }

    fn trace(&self, trace_id: &str) -> Vec<Got> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    }

    /// Polls (a minute at most: a hang guard) until `trace_id` holds spans
    /// of every name in `names`, then returns that trace.
    async fn wait_for(&self, trace_id: &str, names: &[&str]) -> Vec<Got> {
        for _ in 0..1200 {
            let trace = self.trace(trace_id);
            if names.iter().all(|n| trace.iter().any(|s| s.name == *n)) {
                return trace;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "trace {trace_id} never held {names:?}: {:#?}",
            self.trace(trace_id)
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn value(v: Option<AnyValue>) -> String {
    match v.and_then(|v| v.value) {
        Some(any_value::Value::StringValue(s)) => s,
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// Follows `span`'s parents within `trace` and says whether the chain
/// reaches `ancestor` (by span id).
fn descends_from(trace: &[Got], span: &Got, ancestor: &str) -> bool {
    let by_id: HashMap<&str, &Got> = trace.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let mut at = span;
    for _ in 0..trace.len() {
        if at.parent_span_id == ancestor {
            return true;
        }
        match by_id.get(at.parent_span_id.as_str()) {
            Some(parent) => at = parent,
            None => return false,
        }
    }
    false
}

fn one<'a>(trace: &'a [Got], name: &str) -> &'a Got {
    let found: Vec<&Got> = trace.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} span expected: {trace:#?}");
    found[0]
}

fn all<'a>(trace: &'a [Got], name: &str) -> Vec<&'a Got> {
    trace.iter().filter(|s| s.name == name).collect()
}

/// The server's JSON log lines (`INQUEST_LOG_FORMAT=json`) that were
/// written inside `session`'s burst span: `(message, that span's
/// trace_id)` for each.
fn burst_lines(server: &Server, session: &str) -> Vec<(String, String)> {
    server
        .lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|line| {
            let burst = line["spans"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "burst" && s["session_id"] == session)?
                .clone();
            Some((
                line["fields"]["message"].as_str().unwrap_or("").to_owned(),
                burst["trace_id"].as_str().unwrap_or("").to_owned(),
            ))
        })
        .collect()
}

fn random_hex(len: usize) -> String {
    uuid::Uuid::new_v4().simple().to_string()[..len].to_owned()
}

const SPAN_NAMES: [&str; 6] = [
    "rpc",
    "burst",
    "lease.claim",
    "provider.request",
    "tool.call",
    "turn.append",
];

#[tokio::test]
async fn a_burst_is_one_trace_from_the_callers_traceparent_to_every_turn_write() {
    let python = inquest_testkit::mcp::python()
        .expect("the MCP SDK (INQUEST_TEST_PYTHON) is required: the burst calls a real tool");
    let (receiver, endpoint) = Receiver::start().await;
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Reading the checkout log.").call(
        "call_1",
        "read_log",
        r#"{"service": "checkout"}"#,
    ))
    .reply(FakeReply::text("Checkout is fine; the alert was noise."))
    .reply(FakeReply::text("Report: nothing to fix."));
    let config = ReplicaConfig::new(&fake_provider_toml(&fake.base_url()), Some(&python));
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let server = Server::start_with(
        "traced",
        &["--config", config.path(), "--database-url", &url],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("INQUEST_LOG_FORMAT", "json"),
        ],
    )
    .await;
    server
        .wait_for_log("serving inquest.v1.Investigations")
        .await;
    let mut c = server.client().await;
    let incident = create_incident(&mut c, "checkout alert").await;

    // The caller's trace, as a W3C traceparent in the request metadata.
    let caller_trace = random_hex(32);
    let caller_span = random_hex(16);
    let mut request = tonic::Request::new(pb::StartSessionRequest {
        incident_id: incident.id.clone(),
        message: "is checkout down?".into(),
        idempotency_key: String::new(),
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{caller_trace}-{caller_span}-01")
            .parse()
            .unwrap(),
    );
    let session = c.start_session(request).await.unwrap().into_inner();
    let done = settled(&mut c, &session.id).await;
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    assert_eq!(done.tool_calls, 1, "{done:?}");
    assert_eq!(
        done.trace_id, caller_trace,
        "GetSession names the caller's trace"
    );

    let trace = receiver.wait_for(&caller_trace, &SPAN_NAMES).await;
    let rpcs: Vec<&Got> = all(&trace, "rpc");
    let rpc = rpcs
        .iter()
        .find(|s| {
            s.attributes.get("method").map(String::as_str)
                == Some("/inquest.v1.Investigations/StartSession")
        })
        .unwrap_or_else(|| panic!("no StartSession rpc span: {trace:#?}"));
    assert_eq!(
        rpc.parent_span_id, caller_span,
        "the rpc span continues the caller's"
    );
    assert_eq!(rpc.attributes["trace_id"], caller_trace);
    let burst = one(&trace, "burst");
    // The burst's parent is the span it was started in: the handler's
    // (`start_session`), the rpc span's child.
    let handler = one(&trace, "start_session");
    assert_eq!(handler.parent_span_id, rpc.span_id, "{trace:#?}");
    assert_eq!(burst.parent_span_id, handler.span_id, "{trace:#?}");
    assert!(descends_from(&trace, burst, &rpc.span_id));
    assert_eq!(burst.attributes["session_id"], session.id);
    assert_eq!(burst.attributes["trace_id"], caller_trace);
    assert_eq!(burst.attributes["mode"], "fresh");
    assert_eq!(burst.attributes["exit_reason"], "completed");
    for name in &SPAN_NAMES[2..] {
        for span in all(&trace, name) {
            assert!(
                descends_from(&trace, span, &burst.span_id),
                "{name} span outside the burst: {span:#?}\n{trace:#?}"
            );
        }
    }
    let claim = one(&trace, "lease.claim");
    assert_eq!(claim.parent_span_id, burst.span_id);
    // Two loop calls and the report author's, each answered first time.
    let requests = all(&trace, "provider.request");
    assert_eq!(requests.len(), 3, "{requests:#?}");
    for r in &requests {
        assert_eq!(r.attributes["provider"], "fake", "{r:#?}");
        assert_eq!(r.attributes["model"], "fake-model", "{r:#?}");
        assert_eq!(r.attributes["outcome"], "ok", "{r:#?}");
    }
    let tool = one(&trace, "tool.call");
    assert_eq!(tool.attributes["tool"], "read_log", "{tool:#?}");
    assert_eq!(tool.attributes["server"], "incident", "{tool:#?}");
    assert_eq!(tool.attributes["outcome"], "ok", "{tool:#?}");
    // The burst's writes: assistant (call), tool result, final assistant
    // turn, at seqs 2, 3, 4 after the user's turn 1 (which StartSession
    // wrote before the burst).
    let mut appends: Vec<(i64, String)> = all(&trace, "turn.append")
        .iter()
        .map(|s| {
            (
                s.attributes["seq"].parse().unwrap(),
                s.attributes["role"].clone(),
            )
        })
        .collect();
    appends.sort();
    assert_eq!(
        appends,
        [
            (2, "assistant".into()),
            (3, "tool".into()),
            (4, "assistant".into())
        ],
        "{trace:#?}"
    );

    // Every log line of the burst carries its trace id.
    let lines = burst_lines(&server, &session.id);
    assert!(
        lines.iter().any(|(m, _)| m == "burst finished"),
        "no burst log line: {lines:#?}"
    );
    for (message, trace_id) in &lines {
        assert_eq!(trace_id, &caller_trace, "log line {message:?} of the burst");
    }

    // A follow-up with no traceparent: a new trace, rooted at its rpc.
    fake.reply(FakeReply::text("Still fine."))
        .reply(FakeReply::text("Report: still nothing."));
    c.send_message(pb::SendMessageRequest {
        session_id: session.id.clone(),
        message: "and now?".into(),
        idempotency_key: String::new(),
        if_running: 0,
    })
    .await
    .unwrap();
    let again = settled(&mut c, &session.id).await;
    assert!(
        matches!(
            again.status(),
            pb::SessionStatus::Completed | pb::SessionStatus::Idle
        ),
        "{again:?}"
    );
    assert_eq!(again.lease_epoch, done.lease_epoch + 1, "{again:?}");
    let second = again.trace_id.clone();
    assert_eq!(second.len(), 32, "{again:?}");
    assert_ne!(second, caller_trace, "a follow-up is a new trace");
    assert_eq!(get_session(&mut c, &session.id).await.trace_id, second);
    let trace = receiver
        .wait_for(&second, &["rpc", "burst", "lease.claim"])
        .await;
    let rpc = trace
        .iter()
        .find(|s| s.name == "rpc")
        .unwrap_or_else(|| panic!("{trace:#?}"));
    assert_eq!(
        rpc.attributes["method"],
        "/inquest.v1.Investigations/SendMessage"
    );
    assert_eq!(
        rpc.parent_span_id, "",
        "no traceparent: the rpc is the root"
    );
    let burst = one(&trace, "burst");
    assert_eq!(one(&trace, "send_message").parent_span_id, rpc.span_id);
    assert!(descends_from(&trace, burst, &rpc.span_id), "{trace:#?}");
    let lines = burst_lines(&server, &session.id);
    assert!(lines.iter().any(|(_, t)| t == &second), "{lines:#?}");

    server.stop().await;
    fake.stop().await;
}

/// An OTLP endpoint nobody listens on: the server runs a burst and still
/// shuts down (exit 0) instead of waiting on the exporter.
#[tokio::test]
async fn a_dead_otlp_endpoint_does_not_hold_up_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"text": "Nothing is wrong."}, {"text": "Report: nothing."}]"#,
    )
    .unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        "[[providers]]\nkind = \"script\"\nscript = \"script.json\"\n",
    )
    .unwrap();
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let server = Server::start_with(
        "dead-otlp",
        &["--config", config.to_str().unwrap(), "--database-url", &url],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &dead),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
    let mut c = server.client().await;
    let incident = create_incident(&mut c, "dead collector").await;
    let session = start_session(&mut c, &incident.id, "anything?")
        .await
        .unwrap();
    let done = settled(&mut c, &session.id).await;
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    // The id exists without a reachable collector.
    assert_eq!(done.trace_id.len(), 32, "{done:?}");
    // A hang guard, not a timing assertion: `stop` asserts exit 0.
    tokio::time::timeout(Duration::from_secs(60), server.stop())
        .await
        .expect("shutdown hung on the dead OTLP endpoint");
}

/// Bursts no request started are new traces, rooted at their `burst` span:
/// two sessions left pending (one of them by a request with a
/// `traceparent`) are started by the next server, one at startup (its
/// claim statement stores the trace id) and, with one burst slot, the
/// other by the reaper once the slot frees (the id is stored right after
/// its batch claim, fenced by the lease).
#[tokio::test]
async fn bursts_from_startup_and_the_reaper_start_their_own_traces() {
    let (receiver, endpoint) = Receiver::start().await;
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"text": "Nothing is wrong."}, {"text": "Report: nothing."}]"#,
    )
    .unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        "[limits]\nmax_running_bursts = 1\n\n\
         [[providers]]\nkind = \"script\"\nscript = \"script.json\"\n",
    )
    .unwrap();
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];

    // No agent (the harness's in-process server stores sessions and runs
    // no burst): both sessions are stored and stay pending.
    let first = inquest_tests::spawn_app_on(database.name.clone(), url.clone(), |_| {}).await;
    let mut c = first.client().await;
    let incident = create_incident(&mut c, "left pending").await;
    let caller_trace = random_hex(32);
    let mut request = tonic::Request::new(pb::StartSessionRequest {
        incident_id: incident.id.clone(),
        message: "traced caller".into(),
        idempotency_key: String::new(),
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{caller_trace}-{}-01", random_hex(16))
            .parse()
            .unwrap(),
    );
    let traced = c.start_session(request).await.unwrap().into_inner();
    let plain = start_session(&mut c, &incident.id, "untraced caller")
        .await
        .unwrap();
    assert_eq!(get_session(&mut c, &traced.id).await.trace_id, "");
    first.stop().await.unwrap();

    let second = Server::start_with(
        "agent",
        &["--database-url", &url, "--config", config.to_str().unwrap()],
        &otel,
    )
    .await;
    let mut c = second.client().await;
    let mut kinds = Vec::new();
    let mut ids = Vec::new();
    for session in [&traced, &plain] {
        let done = settled(&mut c, &session.id).await;
        assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
        assert_eq!(done.trace_id.len(), 32, "{done:?}");
        assert_ne!(
            done.trace_id, caller_trace,
            "not the stored request's trace"
        );
        let trace = receiver
            .wait_for(&done.trace_id, &["burst", "lease.claim", "turn.append"])
            .await;
        let burst = one(&trace, "burst");
        assert_eq!(burst.parent_span_id, "", "a root span: {trace:#?}");
        assert_eq!(burst.attributes["session_id"], session.id);
        assert!(!trace.iter().any(|s| s.name == "rpc"), "{trace:#?}");
        let claim = one(&trace, "lease.claim");
        assert_eq!(claim.parent_span_id, burst.span_id);
        kinds.push(claim.attributes["kind"].clone());
        ids.push(done.trace_id);
    }
    assert_ne!(ids[0], ids[1], "one trace per burst");
    kinds.sort();
    // One claimed by the startup pass, the other by the reaper.
    assert_eq!(kinds, ["adopted", "pending"], "{kinds:?}");
    second.stop().await;
}
