//! The turns table's monthly partitions: a month whose sessions are all
//! erased is dropped whole (its files leave the disk), by the retention
//! pass or after DeleteIncident; one session left keeps it; the
//! migration turns a populated table into the first partition without
//! copying a row, and its old sessions go on.

use std::time::Duration;

use inquest_core::{NewTurn, SessionId, TokenUsage};
use inquest_proto::v1 as pb;
use inquest_store::KeepFor;
use inquest_tests::retention::seed_settled;

/// The partition holding `session`'s turns.
async fn partition_of(db: &tokio_postgres::Client, session: uuid::Uuid) -> String {
    db.query_one(
        "SELECT tableoid::regclass::text FROM turns WHERE session_id = $1 LIMIT 1",
        &[&session],
    )
    .await
    .expect("the session's turns")
    .get(0)
}

async fn exists(db: &tokio_postgres::Client, table: &str) -> bool {
    db.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .expect("to_regclass")
        .get(0)
}

async fn partitions(db: &tokio_postgres::Client) -> Vec<String> {
    db.query(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = 'turns'::regclass ORDER BY 1",
        &[],
    )
    .await
    .expect("the partitions")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn ninety_days() -> KeepFor {
    KeepFor {
        default: Some(Duration::from_secs(90 * 86_400)),
        overrides: Vec::new(),
    }
}

async fn pass(store: &inquest_store::Store) -> inquest_server::retention::Pass {
    let pace = inquest_server::retention::Pace {
        batch: 50,
        pause: Duration::from_millis(1),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    inquest_server::retention::pass(store, &ninety_days(), &KeepFor::default(), pace, &stop)
        .await
        .expect("a retention pass")
}

async fn turns_of(client: &mut crate::agent_support::Client, id: &str) -> Vec<i64> {
    client
        .list_turns(pb::ListTurnsRequest {
            session_id: id.into(),
            after_seq: 0,
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("list turns")
        .into_inner()
        .turns
        .iter()
        .map(|t| t.seq)
        .collect()
}

/// The constraint a second row with the write id of `session`'s first turn
/// breaks:
/// the store knows a repeated write by that name, in any partition.
async fn write_id_conflict(db: &tokio_postgres::Client, session: uuid::Uuid) -> String {
    let write = uuid::Uuid::now_v7();
    db.execute(
        "UPDATE turns SET write_id = $2 WHERE session_id = $1 AND seq = 1",
        &[&session, &write],
    )
    .await
    .expect("a write id");
    let err = db
        .execute(
            "INSERT INTO turns (session_id, seq, role, content, write_id) \
             VALUES ($1, 1000, 'notice', 'again', $2)",
            &[&session, &write],
        )
        .await
        .expect_err("a repeated write id is refused");
    err.as_db_error()
        .and_then(|e| e.constraint())
        .expect("the constraint")
        .to_owned()
}

#[tokio::test]
async fn a_month_whose_sessions_are_all_erased_is_dropped_and_one_left_keeps_it() {
    let app = inquest_tests::spawn_app().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let old = seed_settled(&db, "default", 40, 25, 120).await;
    let recent = seed_settled(&db, "default", 3, 4, 0).await;
    let month = partition_of(&db, old[0]).await;
    assert!(month.starts_with("turns_y"), "{month}");
    assert_ne!(partition_of(&db, recent[0]).await, month);
    let conflict = write_id_conflict(&db, old[1]).await;
    assert_eq!(conflict, format!("{month}_write_id"));

    // One session of the month still running keeps the month whole.
    db.execute(
        "UPDATE sessions SET status = 'running' WHERE id = $1",
        &[&old[0]],
    )
    .await
    .unwrap();
    let first = pass(&app.store).await;
    assert_eq!((first.sessions, first.partitions), (39, 0), "{first:?}");
    assert!(exists(&db, &month).await);
    db.execute(
        "UPDATE sessions SET status = 'completed' WHERE id = $1",
        &[&old[0]],
    )
    .await
    .unwrap();
    let last = pass(&app.store).await;
    assert_eq!((last.sessions, last.partitions), (1, 1), "{last:?}");
    assert!(!exists(&db, &month).await, "{:?}", partitions(&db).await);
    // Keeping the months ahead does not bring it back.
    app.store.make_turn_partitions().await.unwrap();
    assert!(!partitions(&db).await.contains(&month));

    // The rest of the table is as it was: the recent sessions read whole,
    // and a live one appends.
    let mut client = app.client().await;
    assert_eq!(
        turns_of(&mut client, &recent[0].to_string()).await,
        [1, 2, 3, 4]
    );
    let turn = app
        .store
        .append_turn(
            SessionId::from_uuid(recent[1]),
            NewTurn::Assistant {
                text: "looking".into(),
                tool_calls: Vec::new(),
                usage: TokenUsage::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(turn.seq.as_i64(), 5);
    assert_eq!(app.count("turns").await, 3 * 4 + 1);

    // DeleteIncident frees a month too, at the next upkeep.
    let older = seed_settled(&db, "default", 5, 3, 200).await;
    let month = partition_of(&db, older[0]).await;
    for id in &older {
        let incident: uuid::Uuid = db
            .query_one("SELECT incident_id FROM sessions WHERE id = $1", &[id])
            .await
            .unwrap()
            .get(0);
        client
            .delete_incident(pb::DeleteIncidentRequest {
                incident_id: incident.to_string(),
                force: false,
            })
            .await
            .expect("delete incident");
    }
    let dropped = app.store.drop_empty_turn_partitions().await.unwrap();
    assert_eq!(dropped, [month.as_str()]);
    assert!(!exists(&db, &month).await);

    // A month a crash left detached is dropped when empty; one with rows
    // is someone's archive and stays.
    let mut left = Vec::new();
    // 60 days apart: never the same month.
    for (days, rows) in [(300, false), (360, true)] {
        let name: String = db
            .query_one(
                "SELECT inquest_turns_partition_for(now() - make_interval(days => $1))",
                &[&days],
            )
            .await
            .unwrap()
            .get(0);
        db.batch_execute(&format!("ALTER TABLE turns DETACH PARTITION {name}"))
            .await
            .unwrap();
        if rows {
            db.batch_execute(&format!(
                "INSERT INTO {name} (session_id, seq, role, content) \
                 SELECT session_id, 1, 'user', 'kept' FROM (SELECT inquest_uuid_floor( \
                   now() - interval '360 days') AS session_id) s"
            ))
            .await
            .unwrap();
        }
        left.push(name);
    }
    let dropped = app.store.drop_empty_turn_partitions().await.unwrap();
    assert_eq!(dropped, [left[0].as_str()]);
    assert!(!exists(&db, &left[0]).await);
    assert!(exists(&db, &left[1]).await);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn v40_makes_a_populated_turns_table_its_first_partition_without_copying_and_old_sessions_go_on()
 {
    use inquest_store::{Store, StoreConfig};
    let database = inquest_tests::fresh_database().await;
    let (db_name, db_url) = (database.name.clone(), database.url.clone());
    let store = Store::connect(&StoreConfig::new(db_url.clone())).unwrap();
    assert_eq!(store.migrate_up_to(39).await.unwrap(), 35);
    let db = inquest_tests::connect(&db_url).await;
    let old = seed_settled(&db, "default", 20, 6, 100).await;
    let recent = seed_settled(&db, "default", 5, 3, 1).await;
    let table: u32 = db
        .query_one("SELECT 'turns'::regclass::oid", &[])
        .await
        .unwrap()
        .get(0);

    let app = inquest_tests::spawn_app_on(db_name, db_url.clone(), |_| {}).await;
    // The old table, the same relation with its rows, is the first partition.
    let legacy: u32 = db
        .query_one("SELECT 'turns_legacy'::regclass::oid", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(legacy, table);
    assert_eq!(partition_of(&db, old[0]).await, "turns_legacy");
    assert_eq!(partition_of(&db, recent[0]).await, "turns_legacy");
    assert_eq!(app.count("turns").await, 20 * 6 + 5 * 3);
    assert_eq!(
        write_id_conflict(&db, old[1]).await,
        "turns_legacy_write_id"
    );

    // Old sessions read and append as before.
    let mut client = app.client().await;
    assert_eq!(
        turns_of(&mut client, &old[0].to_string()).await,
        [1, 2, 3, 4, 5, 6]
    );
    let turn = app
        .store
        .append_turn(
            SessionId::from_uuid(old[0]),
            NewTurn::notice("reopened after the migration"),
        )
        .await
        .unwrap();
    assert_eq!(turn.seq.as_i64(), 7);

    // Erasing the old sessions leaves the legacy partition in place while
    // the recent ones live in it.
    let done = pass(&app.store).await;
    assert_eq!(done.sessions, 20, "{done:?}");
    assert!(exists(&db, "turns_legacy").await);
    assert_eq!(
        turns_of(&mut client, &recent[0].to_string()).await,
        [1, 2, 3]
    );
    app.stop().await.unwrap();
    drop(database);
}
