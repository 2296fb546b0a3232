//! Settled sessions of another age, written straight into the tables in
//! bulk, for retention tests and the deletion benchmark's checks.

/// Makes `sessions` completed sessions of `tenant`, each on its own
/// incident, each with `turns` turns, last changed `age_days` ago; returns
/// their ids.
pub async fn seed_settled(
    db: &tokio_postgres::Client,
    tenant: &str,
    sessions: i64,
    turns: i64,
    age_days: i64,
) -> Vec<uuid::Uuid> {
    let rows = db
        .query(
            "WITH made AS ( \
               SELECT gen_random_uuid() AS incident, gen_random_uuid() AS session \
               FROM generate_series(1, $2::bigint)), \
             i AS (INSERT INTO incidents (id, title, tenant) \
               SELECT incident, 'retention seed', $1 FROM made), \
             s AS (INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant, \
                   created_at, updated_at) \
               SELECT session, incident, 'completed', $3::bigint, $3::bigint, $1, \
                      now() - make_interval(days => $4::int), \
                      now() - make_interval(days => $4::int) \
               FROM made) \
             SELECT session FROM made",
            &[
                &tenant,
                &sessions,
                &turns,
                &i32::try_from(age_days).expect("days"),
            ],
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
