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
        let mut client = self.pool.get().await.map_err(StoreError::from_pool)?;
        let client: &mut tokio_postgres::Client = &mut client;
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        let result = embedded::migrations::runner().run_async(client).await;
        let unlock = client
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await;
        let report = result.map_err(StoreError::Migration)?;
        unlock?;
        let applied = report.applied_migrations().len();
        if applied > 0 {
            tracing::info!(applied, "applied database migrations");
        }
        Ok(applied)
    }
}
