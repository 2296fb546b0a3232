//! Messages queued behind a running burst (`SendMessage.if_running =
//! ENQUEUE`) survive kill -9 of the replica holding the burst: two real
//! `inquest serve` replicas, a scripted model calling a slow read-only MCP
//! tool; the holder dies mid-tool with two messages queued. The survivor
//! recovers the burst, and the queue opens exactly one next burst with
//! both messages, in the order they were acknowledged; none is lost or
//! stored twice, and the queue is empty at the end.

mod support;

use std::time::Duration;

use inquest_proto::v1 as pb;
use support::{ReplicaConfig, create_incident, fleet::Fleet, fleet::python};

const QUEUED: [&str; 2] = [
    "It's not the DB, look at pricing-svc.",
    "And the cache hit rate.",
];

#[tokio::test]
async fn queued_messages_survive_kill_9_of_the_holder_and_run_once_in_order() {
    let python = python();
    let scripts = tempfile::Builder::new()
        .prefix("inquest-queue-crash-")
        .tempdir_in("/tmp")
        .unwrap();
    let replies: Vec<serde_json::Value> = (1..=4)
        .map(|i| {
            serde_json::json!({
                "text": format!("Reading the status, step {i}."),
                "tool_calls": [{"name": "slow_read", "arguments": {"service": "checkout", "seconds": 1.0}}],
            })
        })
        .collect();
    let script = scripts.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"replies": replies, "final": "Pricing-svc it is."}).to_string(),
    )
    .unwrap();
    let providers = format!(
        "[[providers]]\nkind = \"script\"\nname = \"script\"\nscript = \"{}\"\n",
        script.display()
    );
    let config = ReplicaConfig::new(&providers, Some(&python));
    let database = inquest_tests::fresh_database().await;
    let db = inquest_tests::connect(&database.url).await;
    let mut fleet = Fleet::new();
    fleet
        .start(&["queue-a", "queue-b"], &config, &database.url)
        .await;
    let mut a = fleet.client("queue-a").await;
    let mut b = fleet.client("queue-b").await;
    let incident = create_incident(&mut a, "checkout latency").await;
    let session = a
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "Why is checkout slow?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;
    // The burst runs on the replica that took the call; queue behind it
    // from the other one, once its first tool is running.
    for _ in 0..200 {
        let head: i64 = db
            .query_one(
                "SELECT head_seq FROM sessions WHERE id = $1::text::uuid",
                &[&session],
            )
            .await
            .unwrap()
            .get(0);
        if head >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (i, text) in QUEUED.iter().enumerate() {
        let sent = b
            .send_message(pb::SendMessageRequest {
                session_id: session.clone(),
                message: (*text).into(),
                idempotency_key: format!("queued-{i}"),
                if_running: pb::IfRunning::Enqueue.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(sent.queued, "queued behind the running burst: {sent:?}");
    }
    let holder: Option<String> = db
        .query_one(
            "SELECT lease_owner FROM sessions WHERE id = $1::text::uuid",
            &[&session],
        )
        .await
        .unwrap()
        .get(0);
    let holder = holder.expect("a burst holds the session");
    let survivor = if holder == "queue-a" {
        "queue-b"
    } else {
        "queue-a"
    };
    let dead = fleet
        .servers
        .iter()
        .position(|s| s.name == holder)
        .expect("the holder is one of ours");
    fleet.servers.remove(dead).kill9().await;

    // A retry of an acknowledged message (its answer lost, say) changes
    // nothing.
    let mut c = fleet.client(survivor).await;
    c.send_message(pb::SendMessageRequest {
        session_id: session.clone(),
        message: QUEUED[0].into(),
        idempotency_key: "queued-0".into(),
        if_running: pb::IfRunning::Enqueue.into(),
    })
    .await
    .unwrap();

    let mut status = String::new();
    for _ in 0..600 {
        let s = c
            .get_session(pb::GetSessionRequest {
                session_id: session.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        status = s.status().as_str_name().to_owned();
        let queued: i64 = db
            .query_one(
                "SELECT count(*) FROM queued_messages WHERE session_id = $1::text::uuid",
                &[&session],
            )
            .await
            .unwrap()
            .get(0);
        let settled = matches!(
            s.status(),
            pb::SessionStatus::Completed | pb::SessionStatus::Idle
        );
        if settled && queued == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reports: Vec<(i64, String)> = db
        .query(
            "SELECT burst, exit_reason FROM reports WHERE session_id = $1::text::uuid ORDER BY burst",
            &[&session],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(
        matches!(
            status.as_str(),
            "SESSION_STATUS_COMPLETED" | "SESSION_STATUS_IDLE"
        ),
        "{status}; reports: {reports:?}"
    );
    let users: Vec<(i64, String)> = db
        .query(
            "SELECT seq, content FROM turns WHERE session_id = $1::text::uuid AND role = 'user' \
             ORDER BY seq",
            &[&session],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let texts: Vec<&str> = users.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        ["Why is checkout slow?", QUEUED[0], QUEUED[1]],
        "each acknowledged message once, in order: {users:?}"
    );
    // Both opened one burst together: adjacent, after the first burst.
    assert_eq!(users[2].0, users[1].0 + 1, "{users:?}");
    let after_queue: i64 = db
        .query_one(
            "SELECT count(*) FROM turns WHERE session_id = $1::text::uuid AND seq > $2 \
             AND role = 'assistant'",
            &[&session, &users[2].0],
        )
        .await
        .unwrap()
        .get(0);
    assert!(after_queue >= 1, "the queued messages were answered");
    // One burst answered them: the last report, after the first burst's.
    assert!(reports.len() >= 2, "{reports:?}");
    fleet.stop_all().await;
}
