//! DeleteSession and DeleteIncident through the real server: watchers on
//! two replicas end NOT_FOUND, a late one too; nothing in any table names
//! an erased id afterwards but the audit trail; a delete racing a
//! follow-up and a fork leaves either side whole; another tenant's ids
//! answer NOT_FOUND and delete nothing; the audit trail stays append-only
//! for a plain DELETE.

use std::time::Duration;

use inquest_auth::Role;
use inquest_core::Tenant;
use inquest_proto::v1 as pb;
use inquest_server::edge::auth::AuthMode;
use inquest_server::reason::{ErrorReason, Reason};
use inquest_store::KeepFor;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use tonic::{Code, Request, metadata::MetadataValue};

use crate::agent_support::{
    Client, app_with_fake, eventually, finished, provider, send, session, start,
};

async fn delete_session(
    client: &mut Client,
    id: &str,
    force: bool,
) -> Result<pb::DeleteResponse, tonic::Status> {
    client
        .delete_session(pb::DeleteSessionRequest {
            session_id: id.into(),
            force,
        })
        .await
        .map(|r| r.into_inner())
}

async fn fork(client: &mut Client, id: &str, at_seq: i64) -> Result<pb::Session, tonic::Status> {
    client
        .fork_session(pb::ForkSessionRequest {
            session_id: id.into(),
            at_seq,
            message: None,
            idempotency_key: String::new(),
        })
        .await
        .map(|r| r.into_inner())
}

async fn watch(client: &mut Client, id: &str) -> tonic::Streaming<pb::WatchEvent> {
    client
        .watch_session(pb::WatchSessionRequest {
            session_id: id.into(),
            after_seq: 0,
            after_committed_at: None,
        })
        .await
        .expect("watch")
        .into_inner()
}

/// Reads `stream` to its end; returns how it ended.
async fn end_of(stream: &mut tonic::Streaming<pb::WatchEvent>) -> tonic::Status {
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return tonic::Status::ok("ended OK"),
                Err(status) => return status,
            }
        }
    })
    .await;
    ended.expect("the watch never ended")
}

/// Every (table, column, count) of a row whose uuid, text, varchar or
/// jsonb column names one of `ids`, outside the audit trail; and the audit
/// trail's rows naming them, as (method, code).
async fn rows_naming(db_url: &str, ids: &[String]) -> (Vec<(String, String, i64)>, Vec<String>) {
    let db = inquest_tests::connect(db_url).await;
    let columns = db
        .query(
            "SELECT c.table_name::text, c.column_name::text FROM information_schema.columns c \
             JOIN information_schema.tables t USING (table_schema, table_name) \
             WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' \
             AND c.data_type IN ('uuid', 'text', 'character varying', 'jsonb', 'json', 'ARRAY') \
             ORDER BY 1, 2",
            &[],
        )
        .await
        .expect("columns");
    assert!(
        columns.len() > 40,
        "the scan found only {} columns",
        columns.len()
    );
    let mut found = Vec::new();
    for row in &columns {
        let (table, column): (String, String) = (row.get(0), row.get(1));
        if table == "audit_events" {
            continue;
        }
        for id in ids {
            let sql = format!(
                "SELECT count(*) FROM \"{table}\" WHERE \"{column}\"::text LIKE '%' || $1 || '%'"
            );
            let n: i64 = db.query_one(&sql, &[id]).await.expect("scan").get(0);
            if n > 0 {
                found.push((table.clone(), column.clone(), n));
            }
        }
    }
    let mut audit = Vec::new();
    for id in ids {
        for row in db
            .query(
                "SELECT method || ' ' || code FROM audit_events \
                 WHERE incident_id::text = $1 OR session_id::text = $1 OR message LIKE '%' || $1 || '%' \
                 ORDER BY id",
                &[id],
            )
            .await
            .expect("audit rows")
        {
            audit.push(row.get(0));
        }
    }
    (found, audit)
}

fn not_found(status: &tonic::Status, reason: Reason) {
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert_eq!(
        ErrorReason::of(status).map(|i| i.reason),
        Some(reason),
        "{status:?}"
    );
}

#[tokio::test]
async fn a_deleted_session_ends_watchers_on_both_replicas_and_no_row_names_it() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    fake.reply(FakeReply::text("It is the DB pool, said the customer."));
    let a = app_with_fake(&fake, |c| c.providers = vec![entry.clone()]).await;
    let b = inquest_tests::spawn_app_on(a.db_name.clone(), a.db_url.clone(), |c| {
        c.providers = vec![entry];
        crate::agent_support::evidence_tools(c);
    })
    .await;
    let (mut on_a, mut on_b) = (a.client().await, b.client().await);

    // A settled session with a report, events and a follow-up key, and a
    // fork of it that must outlive it.
    let settled = start(&mut on_a, "checkout p99 is up for ACME Corp").await;
    finished(&mut on_a, &settled, 1).await;
    let keyed = on_a
        .send_message(pb::SendMessageRequest {
            session_id: settled.clone(),
            message: "and the cache?".into(),
            idempotency_key: "follow-up-1".into(),
            if_running: 0,
        })
        .await
        .unwrap()
        .into_inner();
    finished(&mut on_a, &settled, 2).await;
    let forked = fork(&mut on_a, &settled, 2).await.unwrap();
    let incident = session(&mut on_a, &settled).await.incident_id;

    // A running one, its model call held, watched on both replicas.
    let asked = fake.request_count();
    fake.hold_answers();
    let running = start(&mut on_a, "is the queue backing up?").await;
    eventually("the running session's model call", || {
        fake.request_count() > asked
    })
    .await;
    let mut watch_a = watch(&mut on_a, &running).await;
    let mut watch_b = watch(&mut on_b, &running).await;

    let refused = delete_session(&mut on_b, &running, false)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert_eq!(
        ErrorReason::of(&refused).map(|i| i.reason),
        Some(Reason::SessionRunning)
    );
    assert_eq!(
        session(&mut on_a, &running).await.status(),
        pb::SessionStatus::Running
    );

    let gone = delete_session(&mut on_b, &running, true).await.unwrap();
    assert!(gone.deleted && gone.sessions_deleted == 1, "{gone:?}");
    not_found(&end_of(&mut watch_a).await, Reason::SessionNotFound);
    not_found(&end_of(&mut watch_b).await, Reason::SessionNotFound);
    fake.release_answers();
    // A late watcher, and every other call naming it.
    let late = on_a
        .watch_session(pb::WatchSessionRequest {
            session_id: running.clone(),
            after_seq: 0,
            after_committed_at: None,
        })
        .await
        .unwrap_err();
    not_found(&late, Reason::SessionNotFound);
    let again = delete_session(&mut on_a, &running, false).await.unwrap();
    assert!(!again.deleted, "{again:?}");

    let gone = delete_session(&mut on_a, &settled, false).await.unwrap();
    assert!(gone.deleted, "{gone:?}");
    for client in [&mut on_a, &mut on_b] {
        let e = client
            .get_session(pb::GetSessionRequest {
                session_id: settled.clone(),
            })
            .await
            .unwrap_err();
        not_found(&e, Reason::SessionNotFound);
    }
    // The key never brings it back: a retry is a message to nothing.
    let retry = on_a
        .send_message(pb::SendMessageRequest {
            session_id: settled.clone(),
            message: "and the cache?".into(),
            idempotency_key: "follow-up-1".into(),
            if_running: 0,
        })
        .await
        .unwrap_err();
    not_found(&retry, Reason::SessionNotFound);
    assert!(keyed.seq > 0);

    // The fork stays, its history whole, its lineage gone.
    let kept = session(&mut on_b, &forked.id).await;
    assert!(kept.forked_from_session_id.is_empty(), "{kept:?}");
    assert_eq!(kept.head_seq, forked.head_seq);

    let ids = [settled.clone(), running.clone()];
    let (found, audit) = rows_naming(&a.db_url, &ids).await;
    assert!(
        found.is_empty(),
        "rows still naming an erased session: {found:?}"
    );
    assert!(
        audit.iter().filter(|m| *m == "DeleteSession OK").count() >= 2,
        "{audit:?}"
    );

    // The incident goes with its last session.
    let by_incident = on_a
        .delete_incident(pb::DeleteIncidentRequest {
            incident_id: incident.clone(),
            force: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        by_incident.deleted && by_incident.sessions_deleted == 1,
        "{by_incident:?}"
    );
    let e = session_err(&mut on_a, &forked.id).await;
    not_found(&e, Reason::SessionNotFound);
    let (found, audit) = rows_naming(&a.db_url, &[incident.clone(), forked.id.clone()]).await;
    assert!(
        found.is_empty(),
        "rows still naming the erased incident: {found:?}"
    );
    assert!(audit.iter().any(|m| m == "DeleteIncident OK"), "{audit:?}");
    b.stop().await.unwrap();
    a.stop().await.unwrap();
}

async fn session_err(client: &mut Client, id: &str) -> tonic::Status {
    client
        .get_session(pb::GetSessionRequest {
            session_id: id.into(),
        })
        .await
        .unwrap_err()
}

#[tokio::test]
async fn a_delete_racing_a_follow_up_and_a_fork_leaves_either_side_whole() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    let app = app_with_fake(&fake, |c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    for round in 0..6 {
        let id = start(&mut client, &format!("round {round}")).await;
        finished(&mut client, &id, 1).await;
        let (mut c1, mut c2, mut c3) = (client.clone(), client.clone(), client.clone());
        let follow_up = {
            let id = id.clone();
            tokio::spawn(async move {
                c1.send_message(pb::SendMessageRequest {
                    session_id: id,
                    message: "one more thing".into(),
                    idempotency_key: String::new(),
                    if_running: 0,
                })
                .await
            })
        };
        let forked = {
            let id = id.clone();
            tokio::spawn(async move { fork(&mut c2, &id, 1).await })
        };
        let deleted = {
            let id = id.clone();
            tokio::spawn(async move { delete_session(&mut c3, &id, true).await })
        };
        let deleted = deleted.await.unwrap().expect("a forced delete succeeds");
        assert!(deleted.deleted);
        match follow_up.await.unwrap() {
            Ok(_) => {}
            Err(e) => not_found(&e, Reason::SessionNotFound),
        }
        let fork_id = match forked.await.unwrap() {
            Ok(f) => Some(f.id),
            Err(e) => {
                not_found(&e, Reason::SessionNotFound);
                None
            }
        };
        not_found(
            &session_err(&mut client, &id).await,
            Reason::SessionNotFound,
        );
        if let Some(fork_id) = fork_id {
            // Made before the delete: whole (the copied turn and its
            // notice), no longer naming its source.
            let f = session(&mut client, &fork_id).await;
            assert!(f.forked_from_session_id.is_empty(), "{f:?}");
            assert_eq!(f.head_seq, 2, "{f:?}");
        }
        let (found, _) = rows_naming(&app.db_url, std::slice::from_ref(&id)).await;
        assert!(found.is_empty(), "round {round}: {found:?}");
    }
    // A burst the follow-up started on a session already erased ended
    // without a trace; the server still runs new work.
    let id = start(&mut client, "still working?").await;
    finished(&mut client, &id, 1).await;
    send(&mut client, &id, "good").await;
    app.stop().await.unwrap();
}

fn with<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().expect("token header");
    request.metadata_mut().insert("authorization", value);
    request
}

#[tokio::test]
async fn another_tenants_ids_answer_not_found_and_delete_nothing() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = inquest_tests::spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.providers = vec![provider(&fake, Flavor::OpenAi, "fake")];
        crate::agent_support::evidence_tools(c);
    })
    .await;
    let mut tokens = Vec::new();
    for (tenant, role) in [
        ("acme", Role::Admin),
        ("globex", Role::Admin),
        ("acme", Role::Operator),
    ] {
        let t = app
            .store
            .create_token(
                &format!("{tenant}-{role}"),
                &Tenant::parse(tenant).unwrap(),
                role,
                None,
            )
            .await
            .unwrap();
        tokens.push(t.secret);
    }
    let (acme, globex, operator) = (&tokens[0], &tokens[1], &tokens[2]);
    let mut c = app.client().await;
    let incident = c
        .create_incident(with(
            pb::CreateIncidentRequest {
                title: "acme's outage".into(),
                description: String::new(),
            },
            acme,
        ))
        .await
        .unwrap()
        .into_inner();
    let s = c
        .start_session(with(
            pb::StartSessionRequest {
                incident_id: incident.id.clone(),
                message: "what happened?".into(),
                idempotency_key: String::new(),
            },
            acme,
        ))
        .await
        .unwrap()
        .into_inner();
    eventually_settled(&mut c, acme, &s.id).await;
    let turns_before = app.count("turns").await;

    let e = c
        .delete_session(with(
            pb::DeleteSessionRequest {
                session_id: s.id.clone(),
                force: true,
            },
            globex,
        ))
        .await
        .unwrap_err();
    not_found(&e, Reason::SessionNotFound);
    let e = c
        .delete_incident(with(
            pb::DeleteIncidentRequest {
                incident_id: incident.id.clone(),
                force: true,
            },
            globex,
        ))
        .await
        .unwrap_err();
    not_found(&e, Reason::IncidentNotFound);
    let e = c
        .delete_session(with(
            pb::DeleteSessionRequest {
                session_id: s.id.clone(),
                force: true,
            },
            operator,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(app.count("turns").await, turns_before);
    assert_eq!(app.count("sessions").await, 1);

    // Deleted by its tenant, it is "already deleted" to that tenant and
    // still NOT_FOUND to the other.
    let gone = c
        .delete_session(with(
            pb::DeleteSessionRequest {
                session_id: s.id.clone(),
                force: false,
            },
            acme,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(gone.deleted);
    let e = c
        .delete_session(with(
            pb::DeleteSessionRequest {
                session_id: s.id.clone(),
                force: false,
            },
            globex,
        ))
        .await
        .unwrap_err();
    not_found(&e, Reason::SessionNotFound);
    assert_eq!(app.count("sessions").await, 0);
    app.stop().await.unwrap();
}

async fn eventually_settled(c: &mut Client, token: &str, id: &str) {
    for _ in 0..500 {
        let s = c
            .get_session(with(
                pb::GetSessionRequest {
                    session_id: id.into(),
                },
                token,
            ))
            .await
            .unwrap()
            .into_inner();
        if ![pb::SessionStatus::Pending, pb::SessionStatus::Running].contains(&s.status()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("session {id} never settled");
}

#[tokio::test]
async fn the_audit_trail_refuses_a_plain_delete_and_expires_only_through_its_function() {
    let app = inquest_tests::spawn_app().await;
    let mut client = app.client().await;
    client
        .create_incident(pb::CreateIncidentRequest {
            title: "audited".into(),
            description: String::new(),
        })
        .await
        .unwrap();
    let db = inquest_tests::connect(&app.db_url).await;
    // An old record, as a year of calls would leave.
    db.execute(
        "INSERT INTO audit_events (tenant_seq, at, tenant, subject, actor_name, role, method, \
         code, message) VALUES (0, now() - interval '500 days', 'default', 's', 'n', 'admin', \
         'CreateIncident', 'OK', '')",
        &[],
    )
    .await
    .unwrap();
    let before = app.count("audit_events").await;
    assert!(before >= 2, "{before}");
    for sql in [
        "DELETE FROM audit_events",
        "DELETE FROM audit_events WHERE at < now() - interval '400 days'",
        "UPDATE audit_events SET message = 'x'",
        "TRUNCATE audit_events",
        "DELETE FROM sessions",
    ] {
        let e = db.execute(sql, &[]).await.unwrap_err();
        assert!(
            e.to_string().contains("refused") || format!("{e:?}").contains("refused"),
            "{sql}: {e:?}"
        );
    }
    assert_eq!(app.count("audit_events").await, before);
    // The one path: the function, and only rows older than its cutoff.
    let gone: i64 = db
        .query_one(
            "SELECT expire_audit_events(now() - interval '400 days', 100)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(gone, 1);
    assert_eq!(app.count("audit_events").await, before - 1);
    // Its cutoff does not outlive it.
    let e = db
        .execute("DELETE FROM audit_events", &[])
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("refused"), "{e:?}");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn retention_passes_on_two_replicas_erase_each_expired_session_once_and_keep_the_rest() {
    let app = inquest_tests::spawn_app().await;
    let db = inquest_tests::connect(&app.db_url).await;
    use inquest_tests::retention::seed_settled;
    let old = seed_settled(&db, "default", 230, 4, 100).await;
    let recent = seed_settled(&db, "default", 20, 4, 10).await;
    // acme keeps its sessions 30 days: 40-day-old ones go, 10-day-old stay.
    let acme_old = seed_settled(&db, "acme", 30, 2, 40).await;
    let acme_recent = seed_settled(&db, "acme", 5, 2, 10).await;
    // A settled but running-status session never goes.
    db.execute(
        "UPDATE sessions SET status = 'running' WHERE id = $1",
        &[&recent[0]],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO audit_events (tenant_seq, at, tenant, subject, actor_name, role, method, \
         code, message) SELECT -n, now() - interval '500 days', 'default', 's', 'n', 'admin', \
         'CreateIncident', 'OK', '' FROM generate_series(1, 30) n",
        &[],
    )
    .await
    .unwrap();

    let tenants: inquest_server::config::tenants::TenantsSection =
        toml_tenants("[tenants.overrides.acme]\nretention_finished_sessions = \"30d\"\n");
    let section = inquest_server::retention::RetentionSection {
        finished_sessions: Some(Duration::from_secs(90 * 86_400)),
        audit_events: Some(Duration::from_secs(400 * 86_400)),
        batch_size: 25,
        ..Default::default()
    };
    let (sessions, audit) = (section.sessions(&tenants), section.audit(&tenants));
    let other = inquest_store::Store::connect(&app.config.store_config(&app.db_url)).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let (one, two) = tokio::join!(
        inquest_server::retention::pass(&app.store, &sessions, &audit, pace(25), &stop),
        inquest_server::retention::pass(&other, &sessions, &audit, pace(25), &stop),
    );
    let (one, two) = (one.unwrap(), two.unwrap());
    assert_eq!(one.sessions + two.sessions, 260, "{one:?} {two:?}");
    assert_eq!(one.incidents + two.incidents, 260, "{one:?} {two:?}");
    assert_eq!(one.audit_events + two.audit_events, 30, "{one:?} {two:?}");
    // A pass with nothing left to do removes nothing.
    let again = inquest_server::retention::pass(&app.store, &sessions, &audit, pace(25), &stop)
        .await
        .unwrap();
    assert_eq!((again.sessions, again.audit_events), (0, 0), "{again:?}");

    let left: Vec<uuid::Uuid> = db
        .query("SELECT id FROM sessions ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut kept: Vec<uuid::Uuid> = recent.iter().chain(&acme_recent).copied().collect();
    kept.sort();
    assert_eq!(left, kept);
    let turns: i64 = db
        .query_one("SELECT count(*) FROM turns", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(turns, 20 * 4 + 5 * 2);
    // Each erased session has exactly one retention record.
    let records: i64 = db
        .query_one(
            "SELECT count(DISTINCT session_id) FILTER (WHERE n = 1) - count(*) FILTER (WHERE n > 1) \
             FROM (SELECT session_id, count(*) AS n FROM audit_events \
                   WHERE method = 'Retention/DeleteSession' GROUP BY session_id) r",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(records, 260);
    let ids: Vec<String> = old
        .iter()
        .chain(&acme_old)
        .take(40)
        .map(uuid::Uuid::to_string)
        .collect();
    let (found, _) = rows_naming(&app.db_url, &ids).await;
    assert!(found.is_empty(), "{found:?}");
    app.stop().await.unwrap();
}

fn pace(batch: u32) -> inquest_server::retention::Pace {
    inquest_server::retention::Pace {
        batch,
        pause: Duration::from_millis(1),
    }
}

fn toml_tenants(text: &str) -> inquest_server::config::tenants::TenantsSection {
    inquest_server::config::Config::from_toml(text)
        .expect("a [tenants] table")
        .tenants
}

#[tokio::test]
async fn v33_applies_to_a_populated_database_and_its_old_rows_erase_whole() {
    use inquest_store::{Store, StoreConfig};
    let database = inquest_tests::fresh_database().await;
    let (db_name, db_url) = (database.name.clone(), database.url.clone());
    let store = Store::connect(&StoreConfig::new(db_url.clone())).unwrap();
    assert_eq!(store.migrate_up_to(32).await.unwrap(), 32);
    let db = inquest_tests::connect(&db_url).await;
    // Rows of the V32 schema: settled sessions with turns, a key, a
    // report (and its event), a fork naming its source, audit events.
    let old = inquest_tests::retention::seed_settled(&db, "default", 50, 6, 100).await;
    db.execute(
        "INSERT INTO idempotency_keys (scope, key, session_id, seq) \
         VALUES ($2, 'k1', $1, 3)",
        &[&old[0], &format!("send_message:{}", old[0])],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO reports (session_id, burst, exit_reason, summary) \
         VALUES ($1, 1, 'completed', 'the customer said so')",
        &[&old[0]],
    )
    .await
    .unwrap();
    db.execute(
        "UPDATE sessions SET forked_from = $1, forked_at_seq = 2 WHERE id = $2",
        &[&old[0], &old[1]],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO turns (session_id, seq, role, content) \
         VALUES ($1, 7, 'notice', $2)",
        &[
            &old[1],
            &format!("Forked from session {} at seq 2.", old[0]),
        ],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO audit_events (tenant_seq, tenant, subject, actor_name, role, method, \
         session_id, code, message) VALUES (1, 'default', 's', 'n', 'admin', 'StartSession', \
         $1, 'OK', '')",
        &[&old[0]],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO audit_counters (tenant, last) VALUES ('default', 1)",
        &[],
    )
    .await
    .unwrap();

    let app = inquest_tests::spawn_app_on(db_name, db_url.clone(), |_| {}).await;
    let mut client = app.client().await;
    let gone = delete_session(&mut client, &old[0].to_string(), false)
        .await
        .unwrap();
    assert!(gone.deleted);
    let (found, audit) = rows_naming(&db_url, &[old[0].to_string()]).await;
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(audit, ["StartSession OK", "DeleteSession OK"]);
    let fork = session(&mut client, &old[1].to_string()).await;
    assert!(fork.forked_from_session_id.is_empty());
    assert_eq!(fork.head_seq, 6);

    let keep = KeepFor {
        default: Some(Duration::from_secs(90 * 86_400)),
        overrides: Vec::new(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let done =
        inquest_server::retention::pass(&app.store, &keep, &KeepFor::default(), pace(20), &stop)
            .await
            .unwrap();
    assert_eq!(done.sessions, 49, "{done:?}");
    assert_eq!(app.count("sessions").await, 0);
    assert_eq!(app.count("turns").await, 0);
    app.stop().await.unwrap();
    drop(database);
}
