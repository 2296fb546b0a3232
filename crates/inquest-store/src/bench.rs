//! Support for `inquest bench`: the ceiling a turn append is compared
//! against, a bare single-row INSERT of the same shape over the same pool.
//! The scratch table lives only in the database the benchmark is pointed
//! at and is dropped by [`Store::drop_ceiling_table`].

use uuid::Uuid;

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

    pub async fn drop_ceiling_table(&self) -> Result<(), StoreError> {
        self.run("bench_drop_ceiling", async |c| {
            c.batch_execute("DROP TABLE IF EXISTS bench_ceiling")
                .await?;
            Ok(())
        })
        .await
    }
}
