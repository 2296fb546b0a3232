//! The event log (migration V22): every lifecycle change of a session
//! commits with its event row, and the turn append stays a HOT update.

use std::time::Duration;

use inquest_core::{ExitReason, IncidentText, Limits, NewTurn, SessionId, TokenUsage, UserMessage};
use inquest_store::{CallerEvent, NewReport, SendOutcome, Store, WriteId};
use inquest_tests::spawn_app;

use crate::leases::store_as;

async fn new_session(store: &Store, title: &str) -> SessionId {
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse(title.into(), String::new(), &limits).unwrap(),
        )
        .await
        .unwrap();
    store
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            UserMessage::parse("what happened?".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap()
        .session
        .id
}

/// The session's status and the type of its newest event, read in one
/// statement (one snapshot).
async fn status_and_last_event(
    db: &tokio_postgres::Client,
    session: SessionId,
) -> (String, String) {
    let row = db
        .query_one(
            "SELECT s.status::text, (SELECT type FROM events WHERE session_id = s.id \
                                    ORDER BY id DESC LIMIT 1) \
             FROM sessions s WHERE s.id = $1",
            &[session.as_uuid()],
        )
        .await
        .unwrap();
    (
        row.get(0),
        row.get::<_, Option<String>>(1).unwrap_or_default(),
    )
}

async fn types_of(db: &tokio_postgres::Client, session: SessionId) -> Vec<String> {
    db.query(
        "SELECT type FROM events WHERE session_id = $1 ORDER BY id",
        &[session.as_uuid()],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn says(text: &str) -> NewTurn {
    NewTurn::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: TokenUsage {
            input_tokens: 7,
            output_tokens: 3,
            ..TokenUsage::default()
        },
    }
}

#[tokio::test]
async fn every_lifecycle_change_commits_with_its_event() {
    let app = spawn_app().await;
    let store = store_as(&app.db_url, "events-a");
    let db = inquest_tests::connect(&app.db_url).await;
    let session = new_session(&store, "disk full on db-3").await;
    let incident: uuid::Uuid = db
        .query_one(
            "SELECT incident_id FROM sessions WHERE id = $1",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    let created = db
        .query_one(
            "SELECT payload->>'title', session_id IS NULL FROM events \
             WHERE type = 'incident.created' AND incident_id = $1",
            &[&incident],
        )
        .await
        .unwrap();
    assert_eq!(created.get::<_, String>(0), "disk full on db-3");
    assert!(created.get::<_, bool>(1));
    // Pending is the queue, not news.
    assert_eq!(types_of(&db, session).await, Vec::<String>::new());

    let lease = store.claim_pending(session).await.unwrap().unwrap();
    assert_eq!(
        status_and_last_event(&db, session).await,
        ("running".into(), "session.running".into())
    );
    // Turns are not events.
    store
        .append_turn_leased(&lease, WriteId::new(), says("looking"))
        .await
        .unwrap();
    store
        .save_report(
            &lease,
            NewReport {
                burst: 1,
                exit_reason: ExitReason::Completed,
                summary: "the disk filled with WAL".into(),
                counters: serde_json::json!({}),
                active_ms: 1234,
            },
        )
        .await
        .unwrap();
    let report = db
        .query_one(
            "SELECT payload FROM events WHERE session_id = $1 AND type = 'report.ready'",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get::<_, serde_json::Value>(0);
    assert_eq!(report["summary"], "the disk filled with WAL");
    assert_eq!(report["exit_reason"], "completed");
    assert_eq!(report["active_ms"], 1234);
    assert_eq!(report["input_tokens"], 7);
    assert_eq!(report["output_tokens"], 3);
    // No price configured for the turn: the cost is unknown, not zero.
    assert_eq!(report["cost_nano_usd"], serde_json::Value::Null);
    assert_eq!(report["cost_unknown_turns"], 1);
    store
        .close_burst(&lease, ExitReason::Completed)
        .await
        .unwrap();
    assert_eq!(
        status_and_last_event(&db, session).await,
        ("completed".into(), "session.completed".into())
    );
    let exit: Option<String> = db
        .query_one(
            "SELECT payload->>'exit_reason' FROM events WHERE session_id = $1 \
             ORDER BY id DESC LIMIT 1",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(exit.as_deref(), Some("completed"));

    // A follow-up, then an orphan recovered by another replica.
    let limits = Limits::default();
    let sent = store
        .send_message(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            session,
            UserMessage::parse("and now?".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap();
    assert!(matches!(sent, SendOutcome::Sent { .. }));
    let lease = store.claim_pending(session).await.unwrap().unwrap();
    db.execute(
        "UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    let other = store_as(&app.db_url, "events-b");
    let taken = other.claim_orphan(session).await.unwrap().unwrap();
    assert!(taken.epoch() > lease.epoch());
    // Claimed but no plan yet: the recovery is recorded with its plan.
    assert_eq!(
        status_and_last_event(&db, session).await,
        ("running".into(), "session.running".into())
    );
    other
        .save_recovery_plan(
            &taken,
            serde_json::json!({"kind": "interrupted_turn"}),
            true,
        )
        .await
        .unwrap();
    let recovered = db
        .query_one(
            "SELECT payload FROM events WHERE session_id = $1 AND type = 'session.recovered'",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get::<_, serde_json::Value>(0);
    assert_eq!(recovered["plan_kind"], "interrupted_turn");
    assert_eq!(recovered["lease_epoch"], taken.epoch());
    // A cancel from a caller.
    other
        .transition(session, CallerEvent::Cancel)
        .await
        .unwrap();
    assert_eq!(
        types_of(&db, session).await,
        [
            "session.running",
            "report.ready",
            "session.completed",
            "session.running",
            "session.recovered",
            "session.cancelled"
        ]
    );
    app.stop().await.unwrap();
}

/// The event is written by the statement that changes the status: a
/// rolled-back change leaves no event, an uncommitted one shows neither,
/// and a change whose event cannot be written does not happen.
#[tokio::test]
async fn a_status_change_and_its_event_commit_or_fail_together() {
    let app = spawn_app().await;
    let store = store_as(&app.db_url, "events-a");
    let session = new_session(&store, "atomic").await;
    let _lease = store.claim_pending(session).await.unwrap().unwrap();
    let reader = inquest_tests::connect(&app.db_url).await;
    let mut writer = inquest_tests::connect(&app.db_url).await;
    let before = status_and_last_event(&reader, session).await;
    assert_eq!(before, ("running".into(), "session.running".into()));

    let tx = writer.transaction().await.unwrap();
    tx.execute(
        "UPDATE sessions SET status = 'idle' WHERE id = $1",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    assert_eq!(status_and_last_event(&reader, session).await, before);
    tx.rollback().await.unwrap();
    assert_eq!(status_and_last_event(&reader, session).await, before);

    let tx = writer.transaction().await.unwrap();
    tx.execute(
        "UPDATE sessions SET status = 'idle' WHERE id = $1",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        status_and_last_event(&reader, session).await,
        ("idle".into(), "session.idle".into())
    );

    // An event that cannot be stored refuses the change itself.
    writer
        .batch_execute("ALTER TABLE events ADD CONSTRAINT refuse_all CHECK (false) NOT VALID")
        .await
        .unwrap();
    let refused = writer
        .execute(
            "UPDATE sessions SET status = 'failed' WHERE id = $1",
            &[session.as_uuid()],
        )
        .await;
    assert!(refused.is_err(), "the status changed without its event");
    writer
        .batch_execute("ALTER TABLE events DROP CONSTRAINT refuse_all")
        .await
        .unwrap();
    assert_eq!(
        status_and_last_event(&reader, session).await,
        ("idle".into(), "session.idle".into())
    );
    app.stop().await.unwrap();
}

/// The events trigger fires on `UPDATE OF status` only: the turn append,
/// which bumps the session's counters in the same statement, stays a HOT
/// update and records nothing.
#[tokio::test]
async fn the_turn_append_stays_a_hot_update_and_writes_no_event() {
    let app = spawn_app().await;
    let store = store_as(&app.db_url, "events-a");
    let db = inquest_tests::connect(&app.db_url).await;
    let session = new_session(&store, "hot").await;
    let lease = store.claim_pending(session).await.unwrap().unwrap();
    let stats = async || -> (i64, i64) {
        let row = db
            .query_one(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables \
                 WHERE relname = 'sessions'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    // Statistics reach the view when each backend flushes them (at most
    // once a second): wait until the claim's update is counted.
    let mut before = stats().await;
    for _ in 0..100 {
        if before.0 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        before = stats().await;
    }
    let events_before = app.count("events").await;
    const APPENDS: i64 = 40;
    for n in 0..APPENDS {
        store
            .append_turn_leased(&lease, WriteId::new(), says(&format!("turn {n}")))
            .await
            .unwrap();
    }
    let mut after = stats().await;
    for _ in 0..100 {
        if after.0 - before.0 >= APPENDS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = stats().await;
    }
    let updates = after.0 - before.0;
    let hot = after.1 - before.1;
    assert!(updates >= APPENDS, "{updates} updates counted");
    assert_eq!(hot, updates, "every append's session update is HOT");
    assert_eq!(app.count("events").await, events_before);
    app.stop().await.unwrap();
}

/// A receiver that checks every delivery's signature with the PyPI
/// `standardwebhooks` verifier (not ours) and answers 401 when it fails,
/// 500 to the first `fail` requests on `fail_path`, else 204. One JSON line
/// per request on stdout.
const RECEIVER: &str = r#"
import http.server, json, sys, threading
from standardwebhooks.webhooks import Webhook
secret, fail_path, fail = sys.argv[1], sys.argv[2], int(sys.argv[3])
hook = Webhook(secret)
seen, lock = {}, threading.Lock()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            hook.verify(body, headers)
            verified = True
        except Exception:
            verified = False
        with lock:
            n = seen.get(self.path, 0)
            seen[self.path] = n + 1
        if not verified:
            status = 401
        elif self.path == fail_path and n < fail:
            status = 500
        else:
            status = 204
        message = json.loads(body) if verified else {}
        with lock:  # threads answer at once: one whole line each
            print(json.dumps({"path": self.path, "id": headers.get("webhook-id"),
                              "verified": verified, "status": status,
                              "type": message.get("type"),
                              "session": message.get("data", {}).get("session_id")}), flush=True)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
"#;

/// One request the receiver saw.
#[derive(Debug, Clone, serde::Deserialize)]
struct Received {
    path: String,
    id: Option<String>,
    verified: bool,
    status: u16,
    #[serde(rename = "type")]
    kind: Option<String>,
}

struct Receiver {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
    _child: tokio::process::Child,
}

impl Receiver {
    async fn start(secret: &str, fail_path: &str, fail: u32) -> Self {
        use tokio::io::AsyncBufReadExt;
        let python = std::env::var("INQUEST_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = tokio::process::Command::new(&python)
            .args(["-c", RECEIVER, secret, fail_path, &fail.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the receiver did not start in 20 s");
        let Ok(Some(first)) = first else {
            let out = child.wait_with_output().await.unwrap();
            panic!(
                "the webhook receiver did not start: {}\nIt needs the PyPI package \
                 standardwebhooks==1.1.0: set INQUEST_TEST_PYTHON to the venv \
                 `cargo xtask test` makes (target/test-python/bin/python).",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let port: serde_json::Value = serde_json::from_str(&first).unwrap();
        let port = u16::try_from(port["port"].as_u64().unwrap()).unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let received: Received = serde_json::from_str(&line).unwrap();
                sink.lock().unwrap().push(received);
            }
        });
        Self {
            port,
            seen,
            _child: child,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until `done` holds for what was received (30 s at most).
    async fn wait_for(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        for _ in 0..300 {
            let seen = self.seen();
            if done(&seen) {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: the receiver saw {:#?}", self.seen());
    }
}

/// Ids (`evt_<n>`) answered 2xx on `path`, in arrival order.
fn delivered(seen: &[Received], path: &str) -> Vec<i64> {
    seen.iter()
        .filter(|r| r.path == path && (200..300).contains(&r.status))
        .map(|r| {
            r.id.as_deref()
                .and_then(|id| id.strip_prefix("evt_"))
                .and_then(|n| n.parse().ok())
                .unwrap()
        })
        .collect()
}

fn new_secret() -> String {
    use base64::Engine as _;
    let key: [u8; 24] = std::array::from_fn(|_| rand_byte());
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

fn rand_byte() -> u8 {
    let mut b = [0u8; 1];
    getrandom::fill(&mut b).unwrap();
    b[0]
}

fn webhook(
    name: &str,
    url: String,
    secret_file: &std::path::Path,
    types: &[&str],
) -> inquest_engine::webhooks::WebhookSection {
    inquest_engine::webhooks::WebhookSection {
        name: name.into(),
        url,
        format: Default::default(),
        secret_file: Some(secret_file.to_owned()),
        secret_env: None,
        event_types: types.iter().map(|t| (*t).to_owned()).collect(),
        tenant: None,
    }
}

/// Waits until the server opened webhook `name`'s cursor: events
/// committed before that are not its to deliver.
async fn wait_for_cursor(db: &tokio_postgres::Client, name: &str) {
    for _ in 0..200 {
        let open = db
            .query_opt("SELECT 1 FROM webhook_cursors WHERE name = $1", &[&name])
            .await
            .unwrap()
            .is_some();
        if open {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the cursor of webhook {name} was never opened");
}

async fn all_event_ids(db: &tokio_postgres::Client, kind: Option<&str>) -> Vec<i64> {
    db.query(
        "SELECT id FROM events WHERE $1::text IS NULL OR type = $1 ORDER BY id",
        &[&kind],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Drives a session through a burst that completes with a report.
async fn one_burst(store: &Store, session: SessionId, summary: &str) {
    let lease = store.claim_pending(session).await.unwrap().unwrap();
    store
        .save_report(
            &lease,
            NewReport {
                burst: 1,
                exit_reason: ExitReason::Completed,
                summary: summary.into(),
                counters: serde_json::json!({}),
                active_ms: 10,
            },
        )
        .await
        .unwrap();
    store
        .close_burst(&lease, ExitReason::Completed)
        .await
        .unwrap();
}

/// Every event reaches the receiver, signed (checked by the third-party
/// verifier), in id order, at least once: through a receiver that fails
/// its first attempts and a server that stops while events keep coming.
/// A filtered webhook gets only its type.
#[tokio::test]
async fn events_reach_a_webhook_in_order_at_least_once_across_failures_and_a_restart() {
    let dir = std::env::temp_dir().join(format!("inquest-events-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = new_secret();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, format!("{secret}\n")).unwrap();
    let receiver = Receiver::start(&secret, "/all", 3).await;
    let hooks = vec![
        webhook("all", receiver.url("/all"), &secret_file, &[]),
        webhook(
            "reports",
            receiver.url("/reports"),
            &secret_file,
            &["report.ready"],
        ),
        inquest_engine::webhooks::WebhookSection {
            tenant: Some("acme".into()),
            ..webhook("acme", receiver.url("/acme"), &secret_file, &[])
        },
    ];
    let configure =
        |hooks: Vec<_>| move |c: &mut inquest_server::config::Config| c.events.webhooks = hooks;
    let mut app = inquest_tests::spawn_app_with(configure(hooks.clone())).await;
    let db_handle = app.take_database().unwrap();
    let db = inquest_tests::connect(&app.db_url).await;
    let store = store_as(&app.db_url, "events-a");
    wait_for_cursor(&db, "all").await;
    wait_for_cursor(&db, "reports").await;
    wait_for_cursor(&db, "acme").await;

    let first = new_session(&store, "first").await;
    one_burst(&store, first, "first summary").await;
    let before_restart = all_event_ids(&db, None).await;
    assert_eq!(
        before_restart.len(),
        4,
        "incident, running, report, completed"
    );
    let limits = Limits::default();
    store
        .create_incident(
            &inquest_core::Tenant::parse("acme").unwrap(),
            &IncidentText::parse("acme's".into(), String::new(), &limits).unwrap(),
        )
        .await
        .unwrap();
    let acme: Vec<i64> = db
        .query("SELECT id FROM events WHERE tenant = 'acme'", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(acme.len(), 1);
    let before_restart = all_event_ids(&db, None).await;
    let seen = receiver
        .wait_for("the first session's events", |seen| {
            delivered(seen, "/all") == before_restart
        })
        .await;
    // The first three attempts were refused, and sent again under the
    // same id.
    let failed: Vec<&Received> = seen
        .iter()
        .filter(|r| r.path == "/all" && r.status == 500)
        .collect();
    assert_eq!(failed.len(), 3);
    assert!(failed.iter().all(|r| r.id == failed[0].id));
    assert_eq!(
        failed[0].id.as_deref(),
        Some(format!("evt_{}", before_restart[0]).as_str())
    );
    let cursor: i64 = db
        .query_one(
            "SELECT delivered_id FROM webhook_cursors WHERE name = 'all'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(cursor, *before_restart.last().unwrap());

    // Down: events keep being written by another replica.
    let app_url = app.db_url.clone();
    app.stop().await.unwrap();
    let second = new_session(&store, "second").await;
    one_burst(&store, second, "second summary").await;
    store.transition(first, CallerEvent::Cancel).await.unwrap();
    let app =
        inquest_tests::spawn_app_on(db_handle.name.clone(), app_url, configure(hooks.clone()))
            .await;
    let all = all_event_ids(&db, None).await;
    let seen = receiver
        .wait_for("every event after the restart", |seen| {
            let got = delivered(seen, "/all");
            all.iter().all(|id| got.contains(id))
        })
        .await;
    let got = delivered(&seen, "/all");
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "out of order or repeated: {got:?}"
    );
    assert_eq!(got, all);
    assert!(seen.iter().all(|r| r.verified), "{seen:#?}");
    // The tenant's webhook got its tenant's event only.
    assert_eq!(delivered(&seen, "/acme"), acme);
    let reports = all_event_ids(&db, Some("report.ready")).await;
    assert_eq!(reports.len(), 2);
    let seen = receiver
        .wait_for("the reports", |seen| delivered(seen, "/reports") == reports)
        .await;
    assert!(
        seen.iter()
            .filter(|r| r.path == "/reports")
            .all(|r| r.kind.as_deref() == Some("report.ready"))
    );
    app.stop().await.unwrap();
    drop(db_handle);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The verifier can fail: a receiver that knows another secret refuses
/// every delivery, and the cursor does not move past the event.
#[tokio::test]
async fn a_receiver_with_another_secret_refuses_and_the_event_stays_undelivered() {
    let dir = std::env::temp_dir().join(format!("inquest-events-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, new_secret()).unwrap();
    let receiver = Receiver::start(&new_secret(), "/none", 0).await;
    let hooks = vec![webhook("wrong", receiver.url("/x"), &secret_file, &[])];
    let app = inquest_tests::spawn_app_with(move |c| c.events.webhooks = hooks).await;
    let store = store_as(&app.db_url, "events-a");
    let db = inquest_tests::connect(&app.db_url).await;
    wait_for_cursor(&db, "wrong").await;
    new_session(&store, "refused").await;
    let seen = receiver
        .wait_for("two refused attempts", |seen| seen.len() >= 2)
        .await;
    assert!(seen.iter().all(|r| !r.verified && r.status == 401));
    let row = db
        .query_one(
            "SELECT delivered_id, failed_attempts, last_error FROM webhook_cursors \
             WHERE name = 'wrong'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 0);
    assert!(row.get::<_, i32>(1) >= 1);
    let error: String = row.get(2);
    assert!(error.contains("401"), "{error}");
    app.stop().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// ListEvents pages the caller's tenant's log by id, filters by type and
/// session, and never shows another tenant's events.
#[tokio::test]
async fn list_events_pages_the_tenants_log_by_id() {
    use inquest_proto::v1 as pb;
    let app = spawn_app().await;
    let store = store_as(&app.db_url, "events-a");
    let first = new_session(&store, "first").await;
    one_burst(&store, first, "done").await;
    let second = new_session(&store, "second").await;
    // Another tenant's incident: not in the default tenant's log.
    let limits = Limits::default();
    store
        .create_incident(
            &inquest_core::Tenant::parse("acme").unwrap(),
            &IncidentText::parse("acme's".into(), String::new(), &limits).unwrap(),
        )
        .await
        .unwrap();
    let mut c = app.client().await;
    let list = async |c: &mut inquest_proto::v1::investigations_client::InvestigationsClient<
        tonic::transport::Channel,
    >,
                      req: pb::ListEventsRequest| {
        c.list_events(req).await.map(|r| r.into_inner())
    };
    let mut after_id = 0;
    let mut all = Vec::new();
    loop {
        let page = list(
            &mut c,
            pb::ListEventsRequest {
                after_id,
                page_size: 2,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        if page.events.is_empty() {
            assert_eq!(page.next_after_id, after_id);
            break;
        }
        assert!(page.events.len() <= 2);
        after_id = page.next_after_id;
        all.extend(page.events);
    }
    let types: Vec<&str> = all.iter().map(|e| e.r#type.as_str()).collect();
    assert_eq!(
        types,
        [
            "incident.created",
            "session.running",
            "report.ready",
            "session.completed",
            "incident.created"
        ]
    );
    assert!(all.windows(2).all(|w| w[0].id < w[1].id));
    assert!(all.iter().all(|e| e.tenant == "default"));
    let report: serde_json::Value = serde_json::from_str(&all[2].data_json).unwrap();
    assert_eq!(report["summary"], "done");
    assert_eq!(all[2].session_id, first.to_string());

    let reports = list(
        &mut c,
        pb::ListEventsRequest {
            types: vec!["report.ready".into()],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(reports.events.len(), 1);
    let of_second = list(
        &mut c,
        pb::ListEventsRequest {
            session_id: second.to_string(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(
        of_second.events.is_empty(),
        "a pending session has no events"
    );

    for bad in [
        pb::ListEventsRequest {
            after_id: -1,
            ..Default::default()
        },
        pb::ListEventsRequest {
            types: vec!["turn.appended".into()],
            ..Default::default()
        },
        pb::ListEventsRequest {
            session_id: "not-a-uuid".into(),
            ..Default::default()
        },
    ] {
        let refused = list(&mut c, bad.clone()).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{bad:?}");
    }
    let unknown = list(
        &mut c,
        pb::ListEventsRequest {
            session_id: uuid::Uuid::new_v4().to_string(),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    app.stop().await.unwrap();
}

/// Two replicas configured with the same webhook: one at a time delivers
/// it, so each event arrives once and in order; a holder that stops
/// renewing (as a killed replica does) passes the stream on when its lease
/// expires, not before.
#[tokio::test]
async fn one_replica_at_a_time_delivers_and_a_dead_holders_stream_passes_on() {
    let dir = std::env::temp_dir().join(format!("inquest-events-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = new_secret();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, &secret).unwrap();
    let receiver = Receiver::start(&secret, "/none", 0).await;
    let hooks = vec![webhook("shared", receiver.url("/hook"), &secret_file, &[])];
    let configure = |name: &'static str, hooks: Vec<_>| {
        move |c: &mut inquest_server::config::Config| {
            c.replica_id = Some(name.into());
            c.events.webhooks = hooks;
        }
    };
    let mut a = inquest_tests::spawn_app_with(configure("replica-a", hooks.clone())).await;
    let db_handle = a.take_database().unwrap();
    let b = inquest_tests::spawn_app_on(
        db_handle.name.clone(),
        a.db_url.clone(),
        configure("replica-b", hooks),
    )
    .await;
    let db = inquest_tests::connect(&a.db_url).await;
    wait_for_cursor(&db, "shared").await;
    let store = store_as(&a.db_url, "events-writer");
    for n in 0..3 {
        let session = new_session(&store, &format!("session {n}")).await;
        one_burst(&store, session, "done").await;
    }
    let all = all_event_ids(&db, None).await;
    let seen = receiver
        .wait_for("every event", |seen| {
            delivered(seen, "/hook").len() >= all.len()
        })
        .await;
    // Give a second deliverer, if there were one, time to repeat them.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(delivered(&receiver.seen(), "/hook"), all, "{seen:#?}");
    let holder: String = db
        .query_one(
            "SELECT holder FROM webhook_cursors WHERE name = 'shared'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(holder == "replica-a" || holder == "replica-b", "{holder}");

    // A holder that died: its lease runs 3 s more, and nobody sends until
    // then.
    db.execute(
        "UPDATE webhook_cursors SET holder = 'replica-dead', \
         lease_expires_at = now() + interval '3 seconds' WHERE name = 'shared'",
        &[],
    )
    .await
    .unwrap();
    let taken_at = std::time::Instant::now();
    // A pass that claimed just before the overwrite finishes first (a
    // real takeover comes only after a lease expired: never mid-pass).
    tokio::time::sleep(Duration::from_millis(500)).await;
    new_session(&store, "after the death").await;
    let all = all_event_ids(&db, None).await;
    receiver
        .wait_for("the event after the takeover", |seen| {
            delivered(seen, "/hook") == all
        })
        .await;
    assert!(
        taken_at.elapsed() >= Duration::from_millis(2500),
        "delivered while the dead holder's lease ran: {:?}",
        taken_at.elapsed()
    );
    let holder: String = db
        .query_one(
            "SELECT holder FROM webhook_cursors WHERE name = 'shared'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_ne!(holder, "replica-dead");
    b.stop().await.unwrap();
    a.stop().await.unwrap();
    drop(db_handle);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A receiver that accepts the connection and never answers holds the
/// stream for one attempt's timeout (10 s), not for ever: the attempt is
/// recorded as failed and retried.
#[tokio::test]
async fn a_receiver_that_never_answers_fails_the_attempt_after_its_timeout() {
    let dir = std::env::temp_dir().join(format!("inquest-events-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, new_secret()).unwrap();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let hooks = vec![webhook(
        "silent",
        format!("http://127.0.0.1:{port}/"),
        &secret_file,
        &[],
    )];
    let app = inquest_tests::spawn_app_with(move |c| c.events.webhooks = hooks).await;
    let db = inquest_tests::connect(&app.db_url).await;
    wait_for_cursor(&db, "silent").await;
    let store = store_as(&app.db_url, "events-a");
    let started = std::time::Instant::now();
    new_session(&store, "nobody answers").await;
    let error = loop {
        let row = db
            .query_one(
                "SELECT failed_attempts, last_error FROM webhook_cursors WHERE name = 'silent'",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, i32>(0) >= 1 {
            break row.get::<_, String>(1);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no attempt ended in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(9),
        "ended after {took:?}: {error}"
    );
    assert!(error.contains("timed out"), "{error}");
    app.stop().await.unwrap();
    held.abort();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A configured webhook's event failing for `[webhooks] give_up_after` is
/// given up and the cursor moves on to the next; failing past
/// `disable_after`, a configured webhook (the operator's own) is not
/// disabled: it goes on, each event given up in turn.
#[tokio::test]
async fn a_configured_webhooks_failing_events_are_given_up_one_by_one_in_order() {
    let dir = std::env::temp_dir().join(format!("inquest-events-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, new_secret()).unwrap();
    // Another secret: every attempt is refused (401).
    let receiver = Receiver::start(&new_secret(), "/none", 0).await;
    let hooks = vec![webhook("doomed", receiver.url("/x"), &secret_file, &[])];
    let app = inquest_tests::spawn_app_with(move |c| {
        c.events.webhooks = hooks;
        c.webhooks.give_up_after = Duration::from_secs(1);
        c.webhooks.disable_after = Duration::from_secs(1);
    })
    .await;
    let store = store_as(&app.db_url, "events-a");
    let db = inquest_tests::connect(&app.db_url).await;
    wait_for_cursor(&db, "doomed").await;
    new_session(&store, "first").await;
    new_session(&store, "second").await;
    let ids = all_event_ids(&db, None).await;
    assert!(ids.len() >= 2, "{ids:?}");
    let last = *ids.last().unwrap();
    let mut row = None;
    for _ in 0..300 {
        let r = db
            .query_one(
                "SELECT delivered_id, failed_attempts, failing_since IS NOT NULL, \
                        retry_since IS NULL \
                 FROM webhook_cursors WHERE name = 'doomed'",
                &[],
            )
            .await
            .unwrap();
        if r.get::<_, i64>(0) == last {
            row = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let row = row.unwrap_or_else(|| panic!("the cursor never reached {last}"));
    // Given up, not delivered: the failing streak goes on.
    assert!(row.get::<_, i32>(1) >= 2 * i32::try_from(ids.len()).unwrap());
    assert!(row.get::<_, bool>(2));
    assert!(row.get::<_, bool>(3));
    // Each event retried, in id order: no event attempted after a later one.
    let attempted: Vec<i64> = receiver
        .seen()
        .iter()
        .map(|r| {
            r.id.as_deref()
                .and_then(|id| id.strip_prefix("evt_"))
                .and_then(|n| n.parse().ok())
                .unwrap()
        })
        .collect();
    assert!(attempted.windows(2).all(|w| w[0] <= w[1]), "{attempted:?}");
    for id in &ids {
        assert!(
            attempted.iter().filter(|a| *a == id).count() >= 2,
            "{id} retried: {attempted:?}"
        );
    }
    app.stop().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
