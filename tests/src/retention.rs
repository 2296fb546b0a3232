//! Settled sessions of another age, written straight into the tables in
//! bulk, for retention tests and the deletion benchmark's checks.

/// Makes `sessions` completed sessions of `tenant`, each on its own
/// incident, each with `turns` turns, made and last changed `age_days`
/// ago (their incidents too); returns their ids.
pub async fn seed_settled(
    db: &tokio_postgres::Client,
    tenant: &str,
    sessions: i64,
    turns: i64,
    age_days: i64,
) -> Vec<uuid::Uuid> {
    let days = i32::try_from(age_days).expect("days");
    // The month they were made in gets its turns partition first, as a
    // replica running then would have made it (the schema before the
    // partitioned turns table has none to make).
    db.batch_execute(&format!(
        "DO $$ BEGIN \
           IF to_regproc('inquest_turns_partition_for') IS NOT NULL THEN \
             PERFORM inquest_turns_partition_for(now() - make_interval(days => {days})); \
           END IF; \
         END $$"
    ))
    .await
    .expect("making the partition of their month");
    // Session ids are UUIDv7 of the time they were made, as the server
    // makes them: the turns table is partitioned by that time.
    let rows = db
        .query(
            "WITH made AS ( \
               SELECT gen_random_uuid() AS incident, \
                 encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) \
                   PLACING substring(int8send((extract(epoch FROM \
                     now() - make_interval(days => $4::int)) * 1000)::bigint) FROM 3) \
                   FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid AS session \
               FROM generate_series(1, $2::bigint)), \
             i AS (INSERT INTO incidents (id, title, tenant, created_at) \
               SELECT incident, 'retention seed', $1, now() - make_interval(days => $4::int) \
               FROM made), \
             s AS (INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant, \
                   created_at, updated_at) \
               SELECT session, incident, 'completed', $3::bigint, $3::bigint, $1, \
                      now() - make_interval(days => $4::int), \
                      now() - make_interval(days => $4::int) \
               FROM made) \
             SELECT session FROM made",
            &[&tenant, &sessions, &turns, &days],
        )
        .await
        .expect("seeding sessions");
    let ids: Vec<uuid::Uuid> = rows.iter().map(|r| r.get(0)).collect();
    db.execute(
        "INSERT INTO turns (session_id, seq, role, content) \
         SELECT s, n, CASE WHEN n % 2 = 1 THEN 'user' ELSE 'assistant' END, \
                'customer data ' || n \
         FROM unnest($1::uuid[]) s, generate_series(1, $2::bigint) n",
        &[&ids, &turns],
    )
    .await
    .expect("seeding turns");
    ids
}
