//! Webhooks managed over the API (migration V25), through the real server:
//! created, listed, rotated, deleted, their deliveries listed and an event
//! redelivered; each delivery checked by a receiver that verifies the
//! signature with the PyPI `standardwebhooks` package (not ours); tenants
//! kept apart; and the `[webhooks]` refusals, at CreateWebhook and on the
//! address each delivery connects to.

use std::time::Duration;

use inquest_auth::Role;
use inquest_core::{IncidentText, Limits, Tenant};
use inquest_proto::v1 as pb;
use inquest_server::edge::auth::AuthMode;
use inquest_server::reason::{ErrorReason, Reason};
use inquest_tests::{TestApp, spawn_app_with};
use tonic::{Code, Request, metadata::MetadataValue};

/// A receiver that verifies each delivery with `standardwebhooks` against
/// every secret in a file (read again on each request, so a test can add
/// the rotated one), answers 401 when none verifies, 500 to the first
/// `fail` requests on `fail_path`, else 204. One JSON line per request:
/// which secrets verified it.
const RECEIVER: &str = r#"
import http.server, json, sys, threading
from standardwebhooks.webhooks import Webhook
secrets_file, fail_path, fail = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen, lock = {}, threading.Lock()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with open(secrets_file) as f:
            secrets = [line.strip() for line in f if line.strip()]
        verified_by = []
        for i, secret in enumerate(secrets):
            try:
                Webhook(secret).verify(body, headers)
                verified_by.append(i)
            except Exception:
                pass
        with lock:
            n = seen.get(self.path, 0)
            seen[self.path] = n + 1
        if not verified_by:
            status = 401
        elif self.path == fail_path and n < fail:
            status = 500
        else:
            status = 204
        message = json.loads(body) if verified_by else {}
        with lock:  # threads answer at once: one whole line each
            print(json.dumps({"path": self.path, "id": headers.get("webhook-id"),
                              "verified_by": verified_by, "status": status,
                              "type": message.get("type"),
                              "tenant": message.get("data", {}).get("tenant")}), flush=True)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
"#;

#[derive(Debug, Clone, serde::Deserialize)]
struct Received {
    path: String,
    id: Option<String>,
    verified_by: Vec<usize>,
    status: u16,
    tenant: Option<String>,
}

struct Receiver {
    port: u16,
    secrets: std::path::PathBuf,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
    _child: tokio::process::Child,
}

impl Receiver {
    async fn start(fail_path: &str, fail: u32) -> Self {
        use tokio::io::AsyncBufReadExt;
        let secrets = std::env::temp_dir().join(format!("inquest-whsec-{}", uuid::Uuid::new_v4()));
        std::fs::write(&secrets, "").unwrap();
        let python = std::env::var("INQUEST_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = tokio::process::Command::new(&python)
            .args(["-c", RECEIVER])
            .arg(&secrets)
            .args([fail_path, &fail.to_string()])
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
            secrets,
            seen,
            _child: child,
        }
    }

    /// Adds a secret to those the receiver verifies with (numbered 0, 1,
    /// ... in `verified_by`).
    fn know(&self, secret: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.secrets)
            .unwrap();
        writeln!(f, "{secret}").unwrap();
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

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.secrets);
    }
}

/// Event ids (`evt_<n>`) answered 2xx on `path`, in arrival order.
fn delivered(seen: &[Received], path: &str) -> Vec<i64> {
    seen.iter()
        .filter(|r| r.path == path && (200..300).contains(&r.status))
        .map(|r| event_number(r.id.as_deref()))
        .collect()
}

fn event_number(id: Option<&str>) -> i64 {
    id.and_then(|id| id.strip_prefix("evt_"))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

fn with<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

async fn token(app: &TestApp, tenant: &str, role: Role) -> String {
    app.store
        .create_token(role.as_str(), &Tenant::parse(tenant).unwrap(), role, None)
        .await
        .unwrap()
        .secret
}

async fn incident(app: &TestApp, tenant: &str, title: &str) {
    app.store
        .create_incident(
            &Tenant::parse(tenant).unwrap(),
            &IncidentText::parse(title.into(), String::new(), &Limits::default()).unwrap(),
        )
        .await
        .unwrap();
}

/// Ids of `tenant`'s events, oldest first.
async fn event_ids(db: &tokio_postgres::Client, tenant: &str) -> Vec<i64> {
    db.query(
        "SELECT id FROM events WHERE tenant = $1 ORDER BY id",
        &[&tenant],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn reason(status: &tonic::Status) -> Option<Reason> {
    ErrorReason::of(status).map(|r| r.reason)
}

/// A server whose API webhooks may send to a plain-http receiver on this
/// host, with authentication on.
async fn open_app() -> TestApp {
    spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.webhooks.allow_private_targets = true;
        c.webhooks.allow_http = true;
    })
    .await
}

/// The whole life of a webhook: created, it receives its tenant's events
/// (never another tenant's), signed, in order; a refused first attempt is
/// in its delivery list before the 2xx; after a rotation the next delivery
/// verifies with the new secret only; an event redelivered comes again
/// under the same `webhook-id`; deleted, it receives nothing more.
#[tokio::test]
async fn a_webhook_made_over_the_api_receives_its_tenants_events_signed_and_in_order() {
    let app = open_app().await;
    let admin = token(&app, "default", Role::Admin).await;
    let db = inquest_tests::connect(&app.db_url).await;
    let receiver = Receiver::start("/flaky", 1).await;
    let mut c = app.client().await;

    let created = c
        .create_webhook(with(
            pb::CreateWebhookRequest {
                url: receiver.url("/flaky"),
                event_types: Vec::new(),
                description: "on call".into(),
                format: String::new(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    let hook = created.webhook.unwrap();
    assert!(
        created.secret.starts_with("whsec_"),
        "a Standard Webhooks secret"
    );
    assert_eq!(hook.format, "standard");
    receiver.know(&created.secret);
    // The secret joined the redaction registry of this (the server's)
    // process.
    assert!(!inquest_redact::redact(&created.secret).contains(&created.secret));
    // A second webhook, for reports only.
    let reports = c
        .create_webhook(with(
            pb::CreateWebhookRequest {
                url: receiver.url("/reports"),
                event_types: vec!["report.ready".into()],
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    receiver.know(&reports.secret);

    // The tenant's events, with another tenant's between them.
    incident(&app, "default", "first").await;
    incident(&app, "red", "not ours").await;
    incident(&app, "default", "second").await;
    let ours = event_ids(&db, "default").await;
    assert_eq!(ours.len(), 2);
    let seen = receiver
        .wait_for("the tenant's two events", |seen| {
            delivered(seen, "/flaky") == ours
        })
        .await;
    assert!(
        seen.iter()
            .all(|r| r.verified_by == [0] && r.tenant.as_deref() == Some("default")),
        "{seen:#?}"
    );
    // A burst that reports: its report.ready reaches /reports, and only
    // that event (checked once every event reached /flaky).
    let store = crate::leases::store_as(&app.db_url, "webhooks-a");
    let session = store
        .start_session(
            &Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            store
                .create_incident(
                    &Tenant::default_tenant(),
                    &IncidentText::parse("reported".into(), String::new(), &Limits::default())
                        .unwrap(),
                )
                .await
                .unwrap()
                .id,
            inquest_core::UserMessage::parse("what happened?".into(), &Limits::default()).unwrap(),
            None,
        )
        .await
        .unwrap()
        .session
        .id;
    let lease = store.claim_pending(session).await.unwrap().unwrap();
    store
        .save_report(
            &lease,
            inquest_store::NewReport {
                burst: 1,
                exit_reason: inquest_core::ExitReason::Completed,
                summary: "found it".into(),
                counters: serde_json::json!({}),
                active_ms: 10,
            },
        )
        .await
        .unwrap();
    store
        .close_burst(&lease, inquest_core::ExitReason::Completed)
        .await
        .unwrap();
    let ours = event_ids(&db, "default").await;
    let report: Vec<i64> = db
        .query(
            "SELECT id FROM events WHERE tenant = 'default' AND type = 'report.ready'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(report.len(), 1);
    let seen = receiver
        .wait_for("every event on /flaky, the report on /reports", |seen| {
            delivered(seen, "/flaky") == ours && delivered(seen, "/reports") == report
        })
        .await;
    assert!(
        seen.iter()
            .filter(|r| r.path == "/reports")
            .all(|r| r.verified_by == [1]),
        "{seen:#?}"
    );
    // /reports took the report and nothing else; it is done with.
    c.delete_webhook(with(
        pb::DeleteWebhookRequest {
            webhook_id: reports.webhook.unwrap().id,
        },
        &admin,
    ))
    .await
    .unwrap();
    // The first attempt was answered 500 and sent again under its id.
    assert_eq!(seen[0].status, 500);
    assert_eq!(event_number(seen[0].id.as_deref()), ours[0]);

    // ListWebhooks shows it without a secret (the message has no field for
    // one).
    let listed = c
        .list_webhooks(with(pb::ListWebhooksRequest {}, &admin))
        .await
        .unwrap()
        .into_inner()
        .webhooks;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, hook.id);
    assert_eq!(listed[0].description, "on call");
    assert!(!format!("{listed:?}").contains(&created.secret));

    // The deliveries, newest first: each later event's 2xx, the first's
    // 2xx, then its 500.
    let deliveries = c
        .list_webhook_deliveries(with(
            pb::ListWebhookDeliveriesRequest {
                webhook_id: hook.id.clone(),
                page_size: 0,
                page_token: String::new(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner()
        .deliveries;
    let shown: Vec<(i64, u32)> = deliveries
        .iter()
        .map(|d| (d.event_id, d.status_code))
        .collect();
    let mut expected: Vec<(i64, u32)> = ours.iter().rev().map(|id| (*id, 204)).collect();
    expected.push((ours[0], 500));
    assert_eq!(shown, expected);
    let refused = deliveries.last().unwrap();
    assert!(refused.error.contains("500"), "{refused:?}");
    assert!(deliveries[0].error.is_empty());
    // Paged: one at a time reaches the same ones.
    let mut paged = Vec::new();
    let mut page_token = String::new();
    for _ in 0..20 {
        let page = c
            .list_webhook_deliveries(with(
                pb::ListWebhookDeliveriesRequest {
                    webhook_id: hook.id.clone(),
                    page_size: 1,
                    page_token: page_token.clone(),
                },
                &admin,
            ))
            .await
            .unwrap()
            .into_inner();
        paged.extend(page.deliveries.iter().map(|d| d.id));
        page_token = page.next_page_token;
        if page_token.is_empty() {
            break;
        }
    }
    assert_eq!(paged, deliveries.iter().map(|d| d.id).collect::<Vec<_>>());

    // Rotated: the next delivery verifies with the new secret only.
    let rotated = c
        .rotate_webhook_secret(with(
            pb::RotateWebhookSecretRequest {
                webhook_id: hook.id.clone(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(rotated.secret.starts_with("whsec_"));
    assert_ne!(rotated.secret, created.secret);
    assert!(!inquest_redact::redact(&rotated.secret).contains(&rotated.secret));
    receiver.know(&rotated.secret);
    incident(&app, "default", "third").await;
    let third = *event_ids(&db, "default").await.last().unwrap();
    let seen = receiver
        .wait_for("the event after the rotation", |seen| {
            delivered(seen, "/flaky").contains(&third)
        })
        .await;
    let after: Vec<&Received> = seen
        .iter()
        .filter(|r| event_number(r.id.as_deref()) == third)
        .collect();
    assert!(after.iter().all(|r| r.verified_by == [2]), "{after:#?}");

    // Redelivered: the first event again, same webhook-id, recorded.
    let before = receiver.seen().len();
    let redelivery = c
        .redeliver_event(with(
            pb::RedeliverEventRequest {
                webhook_id: hook.id.clone(),
                event_id: ours[0],
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(redelivery.status_code, 204, "{redelivery:?}");
    assert!(redelivery.redelivery);
    let seen = receiver
        .wait_for("the redelivery", |seen| seen.len() > before)
        .await;
    let again = &seen[before];
    assert_eq!(
        again.id.as_deref(),
        Some(format!("evt_{}", ours[0]).as_str())
    );
    assert_eq!(again.verified_by, [2]);
    let newest = c
        .list_webhook_deliveries(with(
            pb::ListWebhookDeliveriesRequest {
                webhook_id: hook.id.clone(),
                page_size: 1,
                page_token: String::new(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner()
        .deliveries;
    assert_eq!(newest[0].id, redelivery.id);
    assert_eq!(newest[0].event_id, ours[0]);
    assert!(newest[0].redelivery);

    // Deleted: twice is fine; nothing more arrives; the id is gone.
    for deleted in [true, false] {
        let answer = c
            .delete_webhook(with(
                pb::DeleteWebhookRequest {
                    webhook_id: hook.id.clone(),
                },
                &admin,
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.deleted, deleted);
    }
    // The stream stops within the table scan.
    tokio::time::sleep(inquest_engine::delivery::SCAN * 2).await;
    let count = receiver.seen().len();
    incident(&app, "default", "after the delete").await;
    tokio::time::sleep(inquest_engine::delivery::SCAN * 2).await;
    assert_eq!(receiver.seen().len(), count, "{:#?}", receiver.seen());
    let gone = c
        .list_webhook_deliveries(with(
            pb::ListWebhookDeliveriesRequest {
                webhook_id: hook.id.clone(),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
    assert!(
        c.list_webhooks(with(pb::ListWebhooksRequest {}, &admin))
            .await
            .unwrap()
            .into_inner()
            .webhooks
            .is_empty()
    );

    // Every call was audited with the webhook named.
    let audit = c
        .list_audit_events(with(pb::ListAuditEventsRequest::default(), &admin))
        .await
        .unwrap()
        .into_inner()
        .events;
    let methods: Vec<&str> = audit.iter().map(|e| e.method.as_str()).collect();
    for method in [
        "CreateWebhook",
        "RotateWebhookSecret",
        "RedeliverEvent",
        "DeleteWebhook",
    ] {
        assert!(
            methods.contains(&method),
            "{method} not audited: {methods:?}"
        );
    }
    assert!(
        audit
            .iter()
            .all(|e| !e.message.contains(&created.secret) && !e.message.contains(&rotated.secret))
    );
    app.stop().await.unwrap();
}

/// Another tenant's webhook is NOT_FOUND for every call that names it,
/// exactly as an unknown id, and absent from the list; another tenant's
/// event cannot be redelivered. A viewer and an operator may not manage
/// webhooks.
#[tokio::test]
async fn another_tenants_webhook_is_not_found_and_only_admins_manage_webhooks() {
    let app = open_app().await;
    let admin = token(&app, "default", Role::Admin).await;
    let red = token(&app, "red", Role::Admin).await;
    let db = inquest_tests::connect(&app.db_url).await;
    let mut c = app.client().await;
    // Nothing listens on port 9: the webhooks' attempts fail, harmlessly.
    let theirs = c
        .create_webhook(with(
            pb::CreateWebhookRequest {
                url: "https://127.0.0.1:9/red".into(),
                ..Default::default()
            },
            &red,
        ))
        .await
        .unwrap()
        .into_inner()
        .webhook
        .unwrap()
        .id;
    let ours = c
        .create_webhook(with(
            pb::CreateWebhookRequest {
                url: "https://127.0.0.1:9/ours".into(),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner()
        .webhook
        .unwrap()
        .id;
    incident(&app, "red", "red's").await;
    let red_event = *event_ids(&db, "red").await.last().unwrap();
    let unknown = uuid::Uuid::now_v7().to_string();

    for id in [&theirs, &unknown] {
        let calls: Vec<(&str, tonic::Status)> = vec![
            (
                "DeleteWebhook",
                c.delete_webhook(with(
                    pb::DeleteWebhookRequest {
                        webhook_id: id.clone(),
                    },
                    &admin,
                ))
                .await
                .unwrap_err(),
            ),
            (
                "RotateWebhookSecret",
                c.rotate_webhook_secret(with(
                    pb::RotateWebhookSecretRequest {
                        webhook_id: id.clone(),
                    },
                    &admin,
                ))
                .await
                .unwrap_err(),
            ),
            (
                "ListWebhookDeliveries",
                c.list_webhook_deliveries(with(
                    pb::ListWebhookDeliveriesRequest {
                        webhook_id: id.clone(),
                        ..Default::default()
                    },
                    &admin,
                ))
                .await
                .unwrap_err(),
            ),
            (
                "RedeliverEvent",
                c.redeliver_event(with(
                    pb::RedeliverEventRequest {
                        webhook_id: id.clone(),
                        event_id: red_event,
                    },
                    &admin,
                ))
                .await
                .unwrap_err(),
            ),
        ];
        for (method, status) in calls {
            assert_eq!(status.code(), Code::NotFound, "{method} {id}: {status:?}");
            assert_eq!(reason(&status), Some(Reason::WebhookNotFound), "{method}");
            // The message names only the id sent: theirs reads as unknown.
            assert_eq!(status.message(), format!("webhook {id} not found"));
        }
    }
    // Another tenant's event through our own webhook.
    let status = c
        .redeliver_event(with(
            pb::RedeliverEventRequest {
                webhook_id: ours.clone(),
                event_id: red_event,
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), format!("event {red_event} not found"));
    let listed: Vec<String> = c
        .list_webhooks(with(pb::ListWebhooksRequest {}, &admin))
        .await
        .unwrap()
        .into_inner()
        .webhooks
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(listed, vec![ours.clone()]);
    // Red's webhook is untouched.
    let red_list = c
        .list_webhooks(with(pb::ListWebhooksRequest {}, &red))
        .await
        .unwrap()
        .into_inner()
        .webhooks;
    assert_eq!(red_list.len(), 1);
    assert_eq!(red_list[0].id, theirs);

    for role in [Role::Viewer, Role::Operator] {
        let t = token(&app, "default", role).await;
        let status = c
            .create_webhook(with(
                pb::CreateWebhookRequest {
                    url: "https://127.0.0.1:9/x".into(),
                    ..Default::default()
                },
                &t,
            ))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{role}");
        let status = c
            .list_webhooks(with(pb::ListWebhooksRequest {}, &t))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{role}");
        let status = c
            .delete_webhook(with(
                pb::DeleteWebhookRequest {
                    webhook_id: ours.clone(),
                },
                &t,
            ))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{role}");
    }
    assert_eq!(app.count("webhooks").await, 2);
    app.stop().await.unwrap();
}

/// With `[webhooks]` at its defaults, CreateWebhook refuses plain http and
/// targets that are or resolve to loopback, private or link-local
/// addresses, in either format, and an unknown format; nothing is stored.
/// With them allowed, the same URLs are taken.
#[tokio::test]
async fn create_webhook_refuses_http_private_targets_and_unknown_formats_by_default() {
    let app = inquest_tests::spawn_app().await;
    let mut c = app.client().await;
    let refused = [
        ("http://hooks.example.com/x", "plain http"),
        ("https://127.0.0.1/x", "127.0.0.1 is a loopback address"),
        ("https://[::1]:8443/x", "::1 is a loopback address"),
        ("https://10.0.0.1/x", "10.0.0.1 is a private address"),
        ("https://192.168.1.20/x", "a private address"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://[::ffff:127.0.0.1]/x", "loopback"),
        ("https://localhost:8443/x", "localhost resolves to"),
    ];
    for (url, why) in refused {
        let status = c
            .create_webhook(pb::CreateWebhookRequest {
                url: url.into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{url}: {status:?}");
        assert!(
            status.message().contains(why),
            "{url}: {:?} does not say {why:?}",
            status.message()
        );
    }
    let slack = c
        .create_webhook(pb::CreateWebhookRequest {
            url: "http://hooks.slack.com/services/T/B/X".into(),
            format: "slack".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(slack.code(), Code::InvalidArgument);
    assert!(slack.message().contains("plain http"), "{slack:?}");
    let teams = c
        .create_webhook(pb::CreateWebhookRequest {
            url: "https://hooks.example.com/x".into(),
            format: "teams".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(teams.code(), Code::InvalidArgument);
    assert!(
        teams.message().contains("neither \"standard\"") && teams.message().contains("\"slack\""),
        "{teams:?}"
    );
    let unknown_type = c
        .create_webhook(pb::CreateWebhookRequest {
            url: "https://hooks.example.com/x".into(),
            event_types: vec!["turn.appended".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown_type.code(), Code::InvalidArgument);
    assert_eq!(app.count("webhooks").await, 0);
    app.stop().await.unwrap();

    // Allowed, the loopback ones are taken (nothing is sent: no event
    // happens before the server stops).
    let app = spawn_app_with(|c| {
        c.webhooks.allow_private_targets = true;
        c.webhooks.allow_http = true;
    })
    .await;
    let mut c = app.client().await;
    for (url, format) in [
        ("http://127.0.0.1:9/x", ""),
        ("https://localhost:9/x", ""),
        ("http://127.0.0.1:9/services/T/B/X", "slack"),
    ] {
        c.create_webhook(pb::CreateWebhookRequest {
            url: url.into(),
            format: format.into(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{url}: {e:?}"));
    }
    app.stop().await.unwrap();
}

/// The check that counts is made on each connection: a webhook whose name
/// resolves to loopback (as after DNS rebinding; the row is written past
/// CreateWebhook here) and one whose address is a loopback literal are
/// never connected to, and each attempt is recorded as failed, saying why.
#[tokio::test]
async fn a_delivery_to_a_refused_address_is_a_failed_attempt_naming_why() {
    let receiver = Receiver::start("/none", 0).await;
    let app = inquest_tests::spawn_app().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let secret = inquest_engine::webhooks::Webhook::new_secret().unwrap();
    receiver.know(&secret);
    // A live receiver on those ports: a connection made would be a TLS
    // error (or a request), not the resolver's refusal.
    let urls = [
        format!("https://localhost:{}/rebound", receiver.port),
        format!("https://127.0.0.1:{}/literal", receiver.port),
    ];
    let mut ids = Vec::new();
    for url in &urls {
        let id = uuid::Uuid::now_v7();
        db.execute(
            "INSERT INTO webhooks (id, tenant, url, secret, delivered_id) \
             VALUES ($1, 'default', $2, $3, (SELECT coalesce(max(id), 0) FROM events))",
            &[&id, url, &secret],
        )
        .await
        .unwrap();
        ids.push(id);
    }
    // Picked up by the table scan, then an event to send.
    tokio::time::sleep(inquest_engine::delivery::SCAN * 2).await;
    incident(&app, "default", "to nowhere").await;
    let mut errors = Vec::new();
    for id in &ids {
        let mut error = None;
        for _ in 0..150 {
            error = db
                .query_opt(
                    "SELECT error FROM webhook_attempts WHERE webhook_id = $1 ORDER BY id LIMIT 1",
                    &[id],
                )
                .await
                .unwrap()
                .map(|r| r.get::<_, Option<String>>(0));
            if error.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let error = error
            .flatten()
            .unwrap_or_else(|| panic!("no failed attempt recorded for {id}"));
        errors.push(error);
    }
    assert!(
        errors[0].contains("localhost resolves to") && errors[0].contains("loopback"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("127.0.0.1 is a loopback address"),
        "{errors:?}"
    );
    let status: Option<i32> = db
        .query_one(
            "SELECT status_code FROM webhook_attempts WHERE webhook_id = $1 LIMIT 1",
            &[&ids[0]],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, None);
    assert!(receiver.seen().is_empty(), "{:#?}", receiver.seen());
    app.stop().await.unwrap();
}

/// A webhook's attempt history keeps its newest rows only.
#[tokio::test]
async fn a_webhooks_attempt_history_is_bounded() {
    let app = inquest_tests::spawn_app().await;
    let row = app
        .store
        .create_webhook(
            inquest_store::NewWebhook {
                tenant: &Tenant::default_tenant(),
                url: "https://hooks.example.com/x",
                event_types: &[],
                description: "",
                format: "standard",
                secret: &inquest_engine::webhooks::Webhook::new_secret().unwrap(),
            },
            10,
        )
        .await
        .unwrap()
        .unwrap();
    let extra = 5;
    for n in 0..inquest_store::MAX_ATTEMPTS_KEPT + extra {
        app.store
            .record_webhook_attempt(inquest_store::NewAttempt {
                webhook: row.id,
                event_id: n,
                status_code: Some(500),
                error: Some("receiver answered 500"),
                duration: Duration::from_millis(1),
                redelivery: false,
            })
            .await
            .unwrap()
            .unwrap();
    }
    let db = inquest_tests::connect(&app.db_url).await;
    let kept = db
        .query_one(
            "SELECT count(*), min(event_id) FROM webhook_attempts WHERE webhook_id = $1",
            &[&row.id],
        )
        .await
        .unwrap();
    assert_eq!(kept.get::<_, i64>(0), inquest_store::MAX_ATTEMPTS_KEPT);
    assert_eq!(kept.get::<_, i64>(1), extra, "the oldest went");
    app.stop().await.unwrap();
}

/// Two replicas follow the same API webhook: one at a time delivers
/// (every event once, in order), and when the holder stops the other takes
/// the stream over and goes on where it stopped.
#[tokio::test]
async fn two_replicas_deliver_an_api_webhook_once_and_the_survivor_goes_on() {
    let receiver = Receiver::start("/none", 0).await;
    let configure = |name: &'static str| {
        move |c: &mut inquest_server::config::Config| {
            c.replica_id = Some(name.into());
            c.webhooks.allow_private_targets = true;
            c.webhooks.allow_http = true;
        }
    };
    let mut a = spawn_app_with(configure("replica-a")).await;
    let db_handle = a.take_database().unwrap();
    let b = inquest_tests::spawn_app_on(
        db_handle.name.clone(),
        a.db_url.clone(),
        configure("replica-b"),
    )
    .await;
    let db = inquest_tests::connect(&a.db_url).await;
    let created = a
        .client()
        .await
        .create_webhook(pb::CreateWebhookRequest {
            url: receiver.url("/hook"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    receiver.know(&created.secret);
    let id = uuid::Uuid::parse_str(&created.webhook.unwrap().id).unwrap();
    for n in 0..5 {
        incident(&a, "default", &format!("incident {n}")).await;
    }
    let all = event_ids(&db, "default").await;
    receiver
        .wait_for("every event", |seen| {
            delivered(seen, "/hook").len() >= all.len()
        })
        .await;
    // Give a second deliverer, if there were one, time to repeat them.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(delivered(&receiver.seen(), "/hook"), all);
    let holder: String = db
        .query_one("SELECT holder FROM webhooks WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    let (survivor, name) = match holder.as_str() {
        "replica-a" => {
            a.stop().await.unwrap();
            (b, "replica-b")
        }
        "replica-b" => {
            b.stop().await.unwrap();
            (a, "replica-a")
        }
        other => panic!("held by {other}"),
    };
    for n in 0..3 {
        incident(&survivor, "default", &format!("after the stop {n}")).await;
    }
    let all = event_ids(&db, "default").await;
    receiver
        .wait_for("the events after the stop", |seen| {
            delivered(seen, "/hook") == all
        })
        .await;
    let holder: String = db
        .query_one("SELECT holder FROM webhooks WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(holder, name);
    assert!(receiver.seen().iter().all(|r| r.verified_by == [0]));
    survivor.stop().await.unwrap();
    drop(db_handle);
}

/// A server as [`open_app`], with `[webhooks] give_up_after` and
/// `disable_after` short enough to pass in a test.
async fn app_giving_up(give_up_after: Duration, disable_after: Duration) -> TestApp {
    spawn_app_with(move |c| {
        c.auth.mode = AuthMode::Required;
        c.webhooks.allow_private_targets = true;
        c.webhooks.allow_http = true;
        c.webhooks.give_up_after = give_up_after;
        c.webhooks.disable_after = disable_after;
    })
    .await
}

async fn deliveries(
    c: &mut pb::investigations_client::InvestigationsClient<tonic::transport::Channel>,
    admin: &str,
    hook: &str,
) -> Vec<pb::WebhookDelivery> {
    c.list_webhook_deliveries(with(
        pb::ListWebhookDeliveriesRequest {
            webhook_id: hook.to_owned(),
            page_size: 0,
            page_token: String::new(),
        },
        admin,
    ))
    .await
    .unwrap()
    .into_inner()
    .deliveries
}

/// An event that fails for `give_up_after` is given up: its deliveries
/// end with "gave up after", and the cursor moves on, so the next event is
/// delivered (to a receiver that answers now) and the first never is.
#[tokio::test]
async fn an_event_failing_for_give_up_after_is_given_up_and_the_next_follows() {
    let app = app_giving_up(Duration::from_secs(1), Duration::from_secs(3600)).await;
    let admin = token(&app, "default", Role::Admin).await;
    let db = inquest_tests::connect(&app.db_url).await;
    // 500 to every request on /down.
    let receiver = Receiver::start("/down", 1_000_000).await;
    let mut c = app.client().await;
    let created = c
        .create_webhook(with(
            pb::CreateWebhookRequest {
                url: receiver.url("/down"),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    receiver.know(&created.secret);
    let hook = created.webhook.unwrap().id;

    incident(&app, "default", "lost").await;
    let lost = event_ids(&db, "default").await;
    assert_eq!(lost.len(), 1);
    let lost = lost[0];
    let mut given_up = None;
    for _ in 0..200 {
        given_up = deliveries(&mut c, &admin, &hook)
            .await
            .into_iter()
            .find(|d| d.error.starts_with("gave up after 1s"));
        if given_up.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let given_up = given_up.unwrap_or_else(|| panic!("never gave up: {:#?}", receiver.seen()));
    assert_eq!(given_up.event_id, lost);
    assert_eq!(given_up.status_code, 0);
    assert!(given_up.error.contains("500"), "{given_up:?}");

    // The receiver answers now (the row's URL, read before each attempt,
    // points at a path that succeeds), and the next event comes.
    db.execute(
        "UPDATE webhooks SET url = $2 WHERE id = $1::text::uuid",
        &[&hook, &receiver.url("/up")],
    )
    .await
    .unwrap();
    incident(&app, "default", "next").await;
    let next = *event_ids(&db, "default").await.last().unwrap();
    let seen = receiver
        .wait_for("the next event", |seen| delivered(seen, "/up") == [next])
        .await;
    let failed: Vec<i64> = seen
        .iter()
        .filter(|r| r.path == "/down")
        .map(|r| event_number(r.id.as_deref()))
        .collect();
    assert!(
        failed.len() >= 2 && failed.iter().all(|id| *id == lost),
        "retried, then given up: {seen:#?}"
    );
    assert!(seen.iter().all(|r| r.verified_by == [0]), "{seen:#?}");
    // Newest first: the next event's 2xx, the give-up, the failures.
    let listed = deliveries(&mut c, &admin, &hook).await;
    assert_eq!(listed[0].event_id, next);
    assert!(listed[0].error.is_empty(), "{listed:#?}");
    assert!(listed[1].error.starts_with("gave up after"), "{listed:#?}");
    assert!(
        listed[2..]
            .iter()
            .all(|d| d.event_id == lost && d.status_code == 500),
        "{listed:#?}"
    );
    // Failing for less than disable_after: still enabled.
    let hooks = c
        .list_webhooks(with(pb::ListWebhooksRequest {}, &admin))
        .await
        .unwrap()
        .into_inner()
        .webhooks;
    assert!(hooks[0].disabled_at.is_none(), "{hooks:#?}");
    app.stop().await.unwrap();
}

/// A webhook whose every attempt failed for `disable_after` is disabled:
/// ListWebhooks says when and why, and nothing more is sent to it.
#[tokio::test]
async fn a_webhook_failing_for_disable_after_is_disabled_and_says_why() {
    // Each event is retried for 1 s; the backoff's jitter can put an
    // event's give-up as late as ~3 s, so the webhook is disabled after
    // 4 s, while enough events keep it failing that long.
    let app = app_giving_up(Duration::from_secs(1), Duration::from_secs(4)).await;
    let admin = token(&app, "default", Role::Admin).await;
    let db = inquest_tests::connect(&app.db_url).await;
    let receiver = Receiver::start("/down", 1_000_000).await;
    let mut c = app.client().await;
    let created = c
        .create_webhook(with(
            pb::CreateWebhookRequest {
                url: receiver.url("/down"),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    receiver.know(&created.secret);
    let hook = created.webhook.unwrap().id;
    for title in ["first", "second", "3", "4", "5", "6", "7", "8"] {
        incident(&app, "default", title).await;
    }
    let ids = event_ids(&db, "default").await;

    let mut listed = Vec::new();
    for _ in 0..200 {
        listed = c
            .list_webhooks(with(pb::ListWebhooksRequest {}, &admin))
            .await
            .unwrap()
            .into_inner()
            .webhooks;
        if listed[0].disabled_at.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let disabled = &listed[0];
    assert!(
        disabled.disabled_at.is_some(),
        "never disabled: {listed:#?}"
    );
    assert!(
        disabled
            .disabled_reason
            .starts_with("every delivery attempt failed for ")
            && disabled.disabled_reason.contains("disable_after is 4s"),
        "{disabled:#?}"
    );
    // The first event was given up on the way (after 1 s), the second
    // tried after it.
    let history = deliveries(&mut c, &admin, &hook).await;
    assert!(
        history
            .iter()
            .any(|d| d.event_id == ids[0] && d.error.starts_with("gave up after 1s")),
        "{history:#?}"
    );
    assert!(history.iter().any(|d| d.event_id == ids[1]), "{history:#?}");

    // Nothing more is sent: not the second event, not a new one.
    let sent = receiver.seen().len();
    incident(&app, "default", "ninth").await;
    tokio::time::sleep(inquest_engine::delivery::SCAN * 2).await;
    assert_eq!(receiver.seen().len(), sent, "{:#?}", receiver.seen());
    assert_eq!(deliveries(&mut c, &admin, &hook).await.len(), history.len());
    app.stop().await.unwrap();
}

/// What the queue gauges count for a configured webhook: the events after
/// its cursor, of its tenant (or all) and its types (or all), the oldest
/// one's age.
#[tokio::test]
async fn the_backlog_counts_the_events_a_webhook_has_still_to_receive() {
    let app = inquest_tests::spawn_app().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let none = app.store.events_backlog(0, None, &[]).await.unwrap();
    assert_eq!(none, inquest_store::Backlog::default());
    incident(&app, "default", "one").await;
    incident(&app, "red", "two").await;
    incident(&app, "default", "three").await;
    let ids = event_ids(&db, "default").await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    let asked = std::time::Instant::now();
    let all = app.store.events_backlog(0, None, &[]).await.unwrap();
    assert_eq!(all.events, 3);
    let oldest = all.oldest.unwrap();
    assert!(oldest >= Duration::from_millis(50), "{all:?}");
    let ours = app
        .store
        .events_backlog(ids[0], Some("default"), &[])
        .await
        .unwrap();
    assert_eq!(ours.events, 1);
    // Ages are read at each query's time: the newer event's age, read
    // later, is under the oldest's plus the time between the two reads.
    assert!(
        ours.oldest.unwrap() <= oldest + asked.elapsed(),
        "{ours:?} {all:?}"
    );
    let typed = app
        .store
        .events_backlog(0, Some("default"), &["report.ready".to_owned()])
        .await
        .unwrap();
    assert_eq!(typed, inquest_store::Backlog::default());
    let created = app
        .store
        .events_backlog(0, None, &["incident.created".to_owned()])
        .await
        .unwrap();
    assert_eq!(created.events, 3);
    app.stop().await.unwrap();
}
