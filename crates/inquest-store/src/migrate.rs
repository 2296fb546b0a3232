//! Schema migrations from `migrations/`, embedded at build time by refinery.

use crate::{Store, StoreError};

mod embedded {
    refinery::embed_migrations!("../../migrations");
}

/// Arbitrary but fixed key of the advisory lock that serializes migrations
/// when several replicas start at once.
const MIGRATION_LOCK: i64 = 0x1e9_0e57;

impl Store {
    /// Applies every pending migration. Safe to call from several replicas
    /// at once: they take turns under an advisory lock.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        self.migrate_with(refinery::Target::Latest).await
    }

    /// Applies the pending migrations up to and including `version` only,
    /// leaving later ones pending: for tests of a migration over rows
    /// written under the schema before it (`tests/api/notice_migration.rs`).
    pub async fn migrate_up_to(&self, version: u32) -> Result<usize, StoreError> {
        let version = refinery::SchemaVersion::try_from(version)
            .map_err(|_| StoreError::Internal(format!("migration version {version}")))?;
        self.migrate_with(refinery::Target::Version(version)).await
    }

    async fn migrate_with(&self, target: refinery::Target) -> Result<usize, StoreError> {
        let mut client = self.pool.get().await.map_err(StoreError::from_pool)?;
        let client: &mut tokio_postgres::Client = &mut client;
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        // refinery creates its history table with `IF NOT EXISTS`, which
        // PostgreSQL answers on every start after the first with a NOTICE
        // ("already exists, skipping") that the driver logs as if it
        // mattered. Warnings and errors still come through.
        client
            .batch_execute("SET client_min_messages = warning")
            .await?;
        let result = embedded::migrations::runner()
            .set_target(target)
            .run_async(client)
            .await;
        // The connection goes back to the pool: the API's calls keep the
        // server's default.
        let reset = client.batch_execute("RESET client_min_messages").await;
        let unlock = client
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await;
        let report = result.map_err(StoreError::Migration)?;
        reset?;
        unlock?;
        let applied = report.applied_migrations().len();
        if applied > 0 {
            tracing::info!(applied, "applied database migrations");
        }
        Ok(applied)
    }
}
