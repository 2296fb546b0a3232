//! Retention of incidents that have no session: they go once they are as
//! old as a settled session would be, unless an alert came in since;
//! one whose last session was erased while its row was held goes at the
//! next pass; a tenant kept "forever" keeps everything.

use std::time::Duration;

use inquest_core::Tenant;
use inquest_store::KeepFor;
use inquest_tests::retention::seed_settled;

async fn incident(db: &tokio_postgres::Client, tenant: &str, age_days: i32) -> uuid::Uuid {
    let id = uuid::Uuid::now_v7();
    db.execute(
        "INSERT INTO incidents (id, title, tenant, created_at) \
         VALUES ($1, 'no session', $2, now() - make_interval(days => $3))",
        &[&id, &tenant, &age_days],
    )
    .await
    .expect("an incident");
    id
}

async fn there(db: &tokio_postgres::Client, id: uuid::Uuid) -> bool {
    db.query_one(
        "SELECT EXISTS (SELECT 1 FROM incidents WHERE id = $1)",
        &[&id],
    )
    .await
    .expect("an incident read")
    .get(0)
}

async fn pass(store: &inquest_store::Store, keep: &KeepFor) -> inquest_server::retention::Pass {
    let pace = inquest_server::retention::Pace {
        batch: 50,
        pause: Duration::from_millis(1),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    inquest_server::retention::pass(store, keep, &KeepFor::default(), pace, &stop)
        .await
        .expect("a retention pass")
}

#[tokio::test]
async fn incidents_without_a_session_go_once_as_old_and_a_tenant_kept_forever_keeps_all() {
    let app = inquest_tests::spawn_app().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let old: Vec<uuid::Uuid> = [
        incident(&db, "default", 120).await,
        incident(&db, "default", 100).await,
    ]
    .to_vec();
    let young = incident(&db, "default", 10).await;
    let alerted = incident(&db, "default", 120).await;
    db.execute(
        "INSERT INTO alert_events (incident_id, fingerprint, status, starts_at, labels, received_at) \
         VALUES ($1, 'f1', 'firing', now() - interval '2 days', '{}', now() - interval '2 days')",
        &[&alerted],
    )
    .await
    .unwrap();
    let forever = incident(&db, "initech", 400).await;
    let forever_sessions = seed_settled(&db, "initech", 3, 2, 400).await;

    let keep = KeepFor {
        default: Some(Duration::from_secs(90 * 86_400)),
        overrides: vec![(Tenant::parse("initech").unwrap(), None)],
    };
    let done = pass(&app.store, &keep).await;
    assert_eq!((done.sessions, done.incidents), (0, 2), "{done:?}");
    for id in &old {
        assert!(!there(&db, *id).await);
    }
    for id in [young, alerted, forever] {
        assert!(there(&db, id).await, "{id}");
    }
    let kept: i64 = db
        .query_one(
            "SELECT count(*) FROM sessions WHERE id = ANY($1)",
            &[&forever_sessions],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 3);
    let records: i64 = db
        .query_one(
            "SELECT count(*) FROM audit_events WHERE method = 'Retention/DeleteIncident' \
             AND incident_id = ANY($1)",
            &[&old],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(records, 2);

    // An incident whose last session is erased while another transaction
    // holds its row stays for that batch, and goes at the next pass.
    let held = seed_settled(&db, "default", 1, 2, 120).await[0];
    let incident_of_held: uuid::Uuid = db
        .query_one("SELECT incident_id FROM sessions WHERE id = $1", &[&held])
        .await
        .unwrap()
        .get(0);
    let mut holder = inquest_tests::connect(&app.db_url).await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM incidents WHERE id = $1 FOR NO KEY UPDATE",
        &[&incident_of_held],
    )
    .await
    .unwrap();
    let first = pass(&app.store, &keep).await;
    assert_eq!((first.sessions, first.incidents), (1, 0), "{first:?}");
    assert!(there(&db, incident_of_held).await);
    tx.rollback().await.unwrap();
    let next = pass(&app.store, &keep).await;
    assert_eq!((next.sessions, next.incidents), (0, 1), "{next:?}");
    assert!(!there(&db, incident_of_held).await);
    app.stop().await.unwrap();
}
