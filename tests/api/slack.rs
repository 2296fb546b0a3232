//! Webhooks of the Slack format, through the real server: each event
//! reaches a receiver that checks the body as Slack's incoming webhooks do,
//! with the Block Kit models of the PyPI `slack_sdk` package (not ours):
//! every block parses and passes its limits, or the answer is 400
//! `invalid_blocks`. The messages carry what a person needs, escaped so a
//! model's text cannot mention a channel or hide a link.

use std::time::Duration;

use inquest_core::{
    ExitReason, IncidentText, Limits, SessionId, SideEffect, Tenant, TenantQuota, UserMessage,
};
use inquest_proto::v1 as pb;
use inquest_store::{NewApproval, NewReport, Store};
use inquest_tests::spawn_app_with;

use crate::leases::store_as;

/// Answers as a Slack incoming webhook: 200 `ok` for a body whose blocks
/// `slack_sdk` parses (no unknown type) and validates, and whose `text`
/// is not empty; else 400 `invalid_blocks`. The first `refuse` requests
/// get 400 whatever they hold. One JSON line per request.
const SLACK: &str = r#"
import http.server, json, sys, threading
from slack_sdk.models.blocks import Block
refuse = int(sys.argv[1])
count, lock = [0], threading.Lock()
def check(message):
    if not isinstance(message.get("text"), str) or not message["text"].strip():
        return "no_text"
    blocks = message.get("blocks", [])
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "invalid_blocks"
    for raw, block in zip(blocks, Block.parse_all(blocks)):
        if block is None:
            return "invalid_blocks: unknown block %r" % raw.get("type")
        try:
            block.validate_json()
        except Exception as e:
            return "invalid_blocks: %s" % e
        if block.to_dict().keys() - {"block_id"} != raw.keys() - {"block_id"}:
            return "invalid_blocks: fields %r" % sorted(raw.keys() ^ block.to_dict().keys())
    return None
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with lock:
            n = count[0]
            count[0] += 1
        try:
            message = json.loads(body)
            error = check(message)
        except Exception as e:
            message, error = None, "invalid_payload: %s" % e
        if n < refuse:
            error = "invalid_blocks"
        status = 400 if error else 200
        with lock:  # threads answer at once: one whole line each
            print(json.dumps({"status": status, "error": error, "message": message}), flush=True)
        answer = (error or "ok").encode()
        self.send_response(status)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
"#;

#[derive(Debug, Clone, serde::Deserialize)]
struct Posted {
    status: u16,
    error: Option<String>,
    message: Option<serde_json::Value>,
}

type Seen = std::sync::Arc<std::sync::Mutex<Vec<Posted>>>;

async fn slack_receiver(refuse: u32) -> (u16, Seen, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt;
    let python = std::env::var("INQUEST_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = tokio::process::Command::new(&python)
        .args(["-c", SLACK, &refuse.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the Slack receiver did not start in 20 s");
    let Ok(Some(first)) = first else {
        let out = child.wait_with_output().await.unwrap();
        panic!(
            "the Slack receiver did not start: {}\nIt needs the PyPI package slack_sdk: set \
             INQUEST_TEST_PYTHON to the venv `cargo xtask test` makes \
             (target/test-python/bin/python).",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let port: serde_json::Value = serde_json::from_str(&first).unwrap();
    let port = u16::try_from(port["port"].as_u64().unwrap()).unwrap();
    let seen = Seen::default();
    let sink = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            sink.lock()
                .unwrap()
                .push(serde_json::from_str(&line).unwrap());
        }
    });
    (port, seen, child)
}

async fn wait_for(seen: &Seen, what: &str, done: impl Fn(&[Posted]) -> bool) -> Vec<Posted> {
    for _ in 0..300 {
        let now = seen.lock().unwrap().clone();
        if done(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: the receiver saw {:#?}", seen.lock().unwrap());
}

/// The blocks' text, joined: what a person reads.
fn shown(message: &serde_json::Value) -> String {
    let mut out = String::new();
    collect(&message["blocks"], &mut out);
    out
}

fn collect(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| collect(x, out)),
        _ => {}
    }
}

async fn session(store: &Store, title: &str) -> SessionId {
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &Tenant::default_tenant(),
            &IncidentText::parse(title.into(), String::new(), &limits).unwrap(),
        )
        .await
        .unwrap();
    store
        .start_session(
            &Tenant::default_tenant(),
            TenantQuota::UNLIMITED,
            incident.id,
            UserMessage::parse("why is checkout failing?".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap()
        .session
        .id
}

/// A Slack webhook gets one Block Kit message per event that Slack's own
/// models accept: a report with its title, status and exit reason, the
/// summary cut and escaped, cost, active time and the console link; an
/// approval request with the tool, its arguments and the command that
/// approves it. A 400 from Slack is retried, and its reason is kept in
/// the webhook's deliveries.
#[tokio::test]
async fn a_slack_webhook_gets_block_kit_messages_slack_accepts() {
    let (port, seen, _child) = slack_receiver(1).await;
    let app = spawn_app_with(|c| {
        c.webhooks.allow_private_targets = true;
        c.webhooks.allow_http = true;
        c.console.public_url = Some("https://inquest.example.com/console/".into());
    })
    .await;
    let mut c = app.client().await;
    let created = c
        .create_webhook(pb::CreateWebhookRequest {
            url: format!("http://127.0.0.1:{port}/services/T0/B0/secret"),
            format: "slack".into(),
            description: "on-call channel".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let hook = created.webhook.unwrap();
    assert_eq!(hook.format, "slack");

    let store = store_as(&app.db_url, "slack-a");
    let sid = session(&store, "checkout-api 5xx <!here>").await;
    // A burst that asks for approval of a mutating call...
    let lease = store.claim_pending(sid).await.unwrap().unwrap();
    let seq = store
        .append_turn_leased(
            &lease,
            inquest_store::WriteId::new(),
            inquest_core::NewTurn::Assistant {
                text: "restarting".into(),
                tool_calls: Vec::new(),
                usage: Default::default(),
            },
        )
        .await
        .unwrap()
        .turn
        .seq;
    store
        .request_approvals(
            &lease,
            seq,
            Duration::from_secs(3600),
            vec![NewApproval {
                call_id: "call_restart_1".into(),
                tool: "restart_service".into(),
                server: "incident".into(),
                arguments: r#"{"service":"checkout-api"}"#.into(),
                side_effect: SideEffect::Mutating,
                rule: "require (mode \"mutating\")".into(),
            }],
        )
        .await
        .unwrap();
    // ...and a report whose summary tries to ping everyone and hide a link.
    let summary = format!(
        "<!channel> The pool is exhausted; see <https://evil.example|the runbook>. {}",
        "More detail. ".repeat(400)
    );
    store
        .save_report(
            &lease,
            NewReport {
                burst: 1,
                exit_reason: ExitReason::Completed,
                summary,
                counters: serde_json::json!({}),
                active_ms: 125_000,
            },
        )
        .await
        .unwrap();
    store
        .close_burst(&lease, ExitReason::Completed)
        .await
        .unwrap();

    let types = [
        "incident.created",
        "session.running",
        "approval.requested",
        "report.ready",
        "session.completed",
    ];
    let all = wait_for(&seen, "every event accepted", |s| {
        s.iter().filter(|p| p.status == 200).count() >= types.len()
    })
    .await;
    // The first answer was Slack's 400; every later one was accepted.
    assert_eq!(all[0].status, 400, "{all:#?}");
    for p in &all[1..] {
        assert_eq!(
            p.status, 200,
            "Slack would refuse: {:?}\n{:#?}",
            p.error, p.message
        );
    }
    let accepted: Vec<&serde_json::Value> =
        all[1..].iter().filter_map(|p| p.message.as_ref()).collect();
    let of = |needle: &str| {
        accepted
            .iter()
            .find(|m| shown(m).contains(needle))
            .unwrap_or_else(|| panic!("no message shows {needle:?}: {accepted:#?}"))
    };
    let report = of("Report ready");
    let text = shown(report);
    assert_eq!(report["blocks"][0]["text"]["type"], "plain_text");
    assert_eq!(
        report["blocks"][0]["text"]["text"],
        "checkout-api 5xx <!here>"
    );
    for want in [
        "*completed* (exit reason `completed`)",
        "The pool is exhausted",
        "… [cut]",
        "2m 05s",
        "*Cost*",
        &format!(
            "<https://inquest.example.com/console/#/session/{sid}|Open in the Inquest console>"
        ),
    ] {
        assert!(text.contains(want), "{want:?} not in {text}");
    }
    assert!(
        !text.contains("<!channel>") && !text.contains("<https://evil"),
        "{text}"
    );
    // Slack parses the notification's text as mrkdwn: escaped too.
    assert!(
        report["text"]
            .as_str()
            .unwrap()
            .starts_with("checkout-api 5xx &lt;!here&gt;: Report ready"),
        "{report:#?}"
    );
    let asked = shown(of("waits for approval"));
    for want in [
        "`restart_service` on `incident` (mutating)",
        r#"{"service":"checkout-api"}"#,
        &format!("inquest approve {sid} call_restart_1"),
    ] {
        assert!(asked.contains(want), "{want:?} not in {asked}");
    }

    // The refusal's reason, read from Slack's answer, is in the history.
    let deliveries = c
        .list_webhook_deliveries(pb::ListWebhookDeliveriesRequest {
            webhook_id: hook.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let refused: Vec<_> = deliveries
        .deliveries
        .iter()
        .filter(|d| d.status_code == 400)
        .collect();
    assert_eq!(refused.len(), 1, "{deliveries:#?}");
    assert!(
        refused[0].error.contains("400 Bad Request: invalid_blocks"),
        "{refused:#?}"
    );
    // The URL is the credential: it is in no log line and no error.
    assert!(
        deliveries
            .deliveries
            .iter()
            .all(|d| !d.error.contains("secret")),
        "{deliveries:#?}"
    );
    app.stop().await.unwrap();
}
