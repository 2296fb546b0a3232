//! Support for `inquest-bench` (feature `bench`, which only that crate
//! enables): the ceiling a turn append is compared against, a bare
//! single-row INSERT of the same shape over the same pool.
//! The scratch table lives only in the database the benchmark is pointed
//! at and is dropped by [`Store::drop_ceiling_table`].

use uuid::Uuid;

use inquest_core::SessionId;

use crate::{Store, StoreError};

impl Store {
    /// Creates (empty) the scratch table: the `turns` columns and primary
    /// key, without the session-row bump that an append does.
    pub async fn create_ceiling_table(&self) -> Result<(), StoreError> {
        self.run("bench_create_ceiling", async |c| {
            c.batch_execute(
                "DROP TABLE IF EXISTS bench_ceiling; \
                 CREATE TABLE bench_ceiling (LIKE turns INCLUDING DEFAULTS INCLUDING CONSTRAINTS, \
                 PRIMARY KEY (session_id, seq))",
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// One bare INSERT into the scratch table.
    pub async fn insert_ceiling_row(
        &self,
        writer: Uuid,
        seq: i64,
        content: &str,
    ) -> Result<(), StoreError> {
        self.run("bench_insert_ceiling", async |c| {
            // Prepared once per connection, as the append statement is.
            let stmt = c
                .prepare_cached(
                    "INSERT INTO bench_ceiling (session_id, seq, role, content, tool_calls) \
                     VALUES ($1, $2, 'assistant', $3, '[]')",
                )
                .await?;
            c.execute(&stmt, &[&writer, &seq, &content]).await?;
            Ok(())
        })
        .await
    }

    /// The plain copy a fork is compared against: turns `1..=at` of
    /// `source` into the scratch table under the new session id `into`,
    /// one `INSERT ... SELECT` and nothing else (no session row, no
    /// counters, no notice). Returns the rows copied.
    pub async fn copy_into_ceiling(
        &self,
        source: inquest_core::SessionId,
        into: Uuid,
        at: i64,
    ) -> Result<u64, StoreError> {
        self.run("bench_copy_ceiling", async |c| {
            Ok(c.execute(
                "INSERT INTO bench_ceiling (session_id, seq, role, content, tool_calls, \
                     tool_call_id, tool_name, is_error, input_tokens, output_tokens, escaped, \
                     recovery_plan, cache_read_input_tokens, cache_creation_input_tokens, \
                     cost_nano_usd, created_at) \
                 SELECT $1, seq, role, content, tool_calls, tool_call_id, tool_name, is_error, \
                     input_tokens, output_tokens, escaped, recovery_plan, \
                     cache_read_input_tokens, cache_creation_input_tokens, cost_nano_usd, \
                     created_at \
                 FROM turns WHERE session_id = $2 AND seq <= $3",
                &[&into, source.as_uuid(), &at],
            )
            .await?)
        })
        .await
    }

    pub async fn drop_ceiling_table(&self) -> Result<(), StoreError> {
        self.run("bench_drop_ceiling", async |c| {
            c.batch_execute("DROP TABLE IF EXISTS bench_ceiling")
                .await?;
            Ok(())
        })
        .await
    }
}

impl Store {
    /// Writes a finished (`idle`) session of `turns` turns (even, >= 2)
    /// straight into the tables, for `inquest-bench resume`: a user turn,
    /// then assistant turns that each call `read_file` answered by a tool
    /// turn, and a final assistant answer. 10 ms apart, an hour ago.
    pub async fn insert_bench_session(
        &self,
        incident: inquest_core::IncidentId,
        session: inquest_core::SessionId,
        turns: i64,
    ) -> Result<(), StoreError> {
        self.run("bench_insert_session", async |c| {
            let tx = c.transaction().await?;
            tx.execute(
                "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant) \
                 SELECT $1, $2, $4::text, $3::bigint, $3, tenant FROM incidents WHERE id = $2",
                &[
                    session.as_uuid(),
                    incident.as_uuid(),
                    &turns,
                    &inquest_core::SessionStatus::Idle.as_str(),
                ],
            )
            .await?;
            tx.execute(
                "INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, \
                                    tool_name, created_at) \
                 SELECT $1, g, \
                   CASE WHEN g = 1 THEN 'user' WHEN g % 2 = 0 THEN 'assistant' ELSE 'tool' END, \
                   CASE WHEN g = 1 THEN 'why is checkout slow?' ELSE repeat('x', 200) END, \
                   CASE WHEN g % 2 = 0 AND g < $2::bigint THEN jsonb_build_array(jsonb_build_object( \
                     'id', 'c' || g, 'name', 'read_file', \
                     'arguments', jsonb_build_object('path', 'app.log'))) ELSE '[]'::jsonb END, \
                   CASE WHEN g % 2 = 1 AND g > 1 THEN 'c' || (g - 1) END, \
                   CASE WHEN g % 2 = 1 AND g > 1 THEN 'read_file' END, \
                   now() - interval '1 hour' + g * interval '10 ms' \
                 FROM generate_series(1::bigint, $2::bigint) AS g",
                &[session.as_uuid(), &turns],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// [`Store::insert_bench_session`], then a compaction turn at the head
    /// (seq `turns + 1`) keeping the last `keep` turns (even, < turns)
    /// verbatim, with the counters the turns before them carry: the
    /// session `inquest-bench resume` measures a follow-up of when a long
    /// investigation was compacted.
    pub async fn insert_bench_compacted_session(
        &self,
        incident: inquest_core::IncidentId,
        session: inquest_core::SessionId,
        turns: i64,
        keep: i64,
    ) -> Result<(), StoreError> {
        self.insert_bench_session(incident, session, turns).await?;
        let first_retained = turns - keep;
        let left_out = (first_retained - 2) / 2;
        let record = serde_json::json!({
            "first_retained_seq": first_retained,
            "tokens_before": turns * 60,
            "tokens_after": keep * 60,
            "carried": {
                "assistant_turns": left_out, "user_turns": 0, "tool_calls": left_out,
                "input_tokens": 0, "output_tokens": 0, "used_servers": [],
                "active_ms": (first_retained - 2) * 10,
            },
        });
        self.run("bench_insert_compaction", async |c| {
            let tx = c.transaction().await?;
            tx.execute(
                "INSERT INTO turns (session_id, seq, role, content, tool_calls) \
                 VALUES ($1, $2, 'compaction', 'The investigation so far: the checkout pool was \
                 exhausted; every log read says so.', $3)",
                &[session.as_uuid(), &(turns + 1), &record],
            )
            .await?;
            tx.execute(
                "UPDATE sessions SET head_seq = $2::bigint, turn_count = $2 WHERE id = $1",
                &[session.as_uuid(), &(turns + 1)],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// `ANALYZE` of the tables a bench session was written into.
    pub async fn analyze_bench_tables(&self) -> Result<(), StoreError> {
        self.run("bench_analyze", async |c| {
            c.batch_execute("ANALYZE turns; ANALYZE sessions").await?;
            Ok(())
        })
        .await
    }

    /// `sessions` completed sessions, each on its own incident with
    /// `turns` turns of `payload` bytes, made and last changed `age_days`
    /// ago (for retention to erase), written in one statement per table.
    /// Their ids are UUIDv7 of that time, as a replica then made them, so
    /// their turns land in that month's partition (made first if none
    /// covers it, as a replica running then would have).
    pub async fn insert_bench_settled(
        &self,
        sessions: i64,
        turns: i64,
        payload: i32,
        age_days: i32,
    ) -> Result<(), StoreError> {
        self.run_with_timeout(
            "bench_insert_settled",
            std::time::Duration::from_secs(3600),
            async |c| {
                c.execute(
                    "SELECT inquest_turns_partition_for(now() - make_interval(days => $1::int))",
                    &[&age_days],
                )
                .await?;
                let tx = c.transaction().await?;
                tx.execute(
                    "CREATE TEMP TABLE bench_made ON COMMIT DROP AS \
                     SELECT gen_random_uuid() AS incident, \
                       encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) \
                         PLACING substring(int8send((extract(epoch FROM \
                           now() - make_interval(days => $2::int)) * 1000)::bigint) FROM 3) \
                         FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid AS session \
                     FROM generate_series(1, $1::bigint)",
                    &[&sessions, &age_days],
                )
                .await?;
                tx.execute(
                    "INSERT INTO incidents (id, title, tenant) \
                     SELECT incident, 'bench retention', 'default' FROM bench_made",
                    &[],
                )
                .await?;
                tx.execute(
                    "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant, \
                     created_at, updated_at) \
                     SELECT session, incident, 'completed', $1::bigint, $1::bigint, 'default', \
                     now() - make_interval(days => $2::int), now() - make_interval(days => $2::int) \
                     FROM bench_made",
                    &[&turns, &age_days],
                )
                .await?;
                tx.execute(
                    "INSERT INTO turns (session_id, seq, role, content) \
                     SELECT session, n, CASE WHEN n % 2 = 1 THEN 'user' ELSE 'assistant' END, \
                     repeat('x', $2::int) FROM bench_made, generate_series(1, $1::bigint) n",
                    &[&turns, &payload],
                )
                .await?;
                tx.commit().await?;
                Ok(())
            },
        )
        .await
    }

    /// `pg_total_relation_size` of `table` (heap, TOAST and indexes), summed
    /// over its partitions when it has them.
    pub async fn bench_relation_size(&self, table: &str) -> Result<i64, StoreError> {
        let table = table.to_owned();
        self.run("bench_relation_size", async move |c| {
            Ok(c.query_one(
                "SELECT coalesce((SELECT sum(pg_total_relation_size(relid))::bigint \
                                  FROM pg_partition_tree($1::text::regclass)), \
                                 pg_total_relation_size($1::text::regclass))",
                &[&table],
            )
            .await?
            .get(0))
        })
        .await
    }

    /// `pg_total_relation_size` of the turns partition holding `session`'s
    /// turns (the whole table when it is not partitioned).
    pub async fn bench_partition_size_of(&self, session: SessionId) -> Result<i64, StoreError> {
        self.run("bench_partition_size_of", async move |c| {
            Ok(c.query_one(
                "SELECT pg_total_relation_size(tableoid) FROM turns WHERE session_id = $1 LIMIT 1",
                &[session.as_uuid()],
            )
            .await?
            .get(0))
        })
        .await
    }

    /// `VACUUM` of `table`, as autovacuum would run it after a deletion.
    pub async fn bench_vacuum(&self, table: &str) -> Result<(), StoreError> {
        let sql = format!("VACUUM (ANALYZE) {table}");
        self.run_with_timeout(
            "bench_vacuum",
            std::time::Duration::from_secs(3600),
            async move |c| {
                c.batch_execute(&sql).await?;
                Ok(())
            },
        )
        .await
    }
}
