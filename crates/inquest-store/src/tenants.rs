//! The tenant side of a new burst: its limits, checked inside the
//! transaction that asks for the burst (migration V16).
//!
//! The running-burst count and the insert or status change that adds one
//! more run under a transaction-scoped advisory lock on the tenant, so two
//! concurrent calls of one tenant cannot both take its last slot. The
//! budget needs no lock: it only grows, and a burst already running is
//! allowed to finish past it.

use inquest_core::{SessionId, SessionStatus, Tenant, TenantQuota};

use crate::{Store, StoreError, rows::get};

/// The advisory-lock key space of tenants (the second argument of
/// `hashtextextended`), apart from the migration lock's.
const TENANT_LOCK_SEED: i64 = 0x1e57_7e4a;

const SPENT_TODAY_SQL: &str = "SELECT coalesce(sum(tokens), 0)::bigint FROM token_usage \
     WHERE tenant = $1 AND day = (now() AT TIME ZONE 'UTC')::date";

/// Refuses with [`StoreError::QuotaExceeded`] when `tenant` may not open
/// another burst under `quota`. Run inside the transaction that opens it;
/// `opening` is a session that transaction already made pending, which is
/// not counted.
pub(crate) async fn admit(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &Tenant,
    quota: &TenantQuota,
    opening: Option<SessionId>,
) -> Result<(), StoreError> {
    if *quota == TenantQuota::UNLIMITED {
        return Ok(());
    }
    let spent = match quota.daily_token_budget {
        Some(_) => {
            let row = tx.query_one(SPENT_TODAY_SQL, &[&tenant.as_str()]).await?;
            count(get(&row, 0)?)
        }
        None => 0,
    };
    let running = match quota.max_running_bursts {
        Some(_) => {
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, $2))",
                &[&tenant.as_str(), &TENANT_LOCK_SEED],
            )
            .await?;
            let active = [
                SessionStatus::Pending.as_str(),
                SessionStatus::Running.as_str(),
            ];
            let row = tx
                .query_one(
                    "SELECT count(*) FROM sessions \
                     WHERE tenant = $1 AND status = ANY($2) AND id IS DISTINCT FROM $3",
                    &[
                        &tenant.as_str(),
                        &&active[..],
                        &opening.map(|s| *s.as_uuid()),
                    ],
                )
                .await?;
            count(get(&row, 0)?)
        }
        None => 0,
    };
    quota
        .admits(running, spent)
        .map_err(StoreError::QuotaExceeded)
}

fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Store {
    /// Input plus output tokens `tenant`'s turns spent today (UTC).
    pub async fn tokens_spent_today(&self, tenant: &Tenant) -> Result<u64, StoreError> {
        let row = self
            .run("tokens_spent_today", async |c| {
                Ok(c.query_one(SPENT_TODAY_SQL, &[&tenant.as_str()]).await?)
            })
            .await?;
        Ok(count(get(&row, 0)?))
    }
}

impl Store {
    /// Whether `tenant` may open another burst under `quota` now, checked
    /// outside any write (ContinueSession); [`StoreError::QuotaExceeded`]
    /// when not.
    pub async fn check_tenant_quota(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
    ) -> Result<(), StoreError> {
        if quota == TenantQuota::UNLIMITED {
            return Ok(());
        }
        self.run("check_tenant_quota", async |c| {
            let tx = c.transaction().await?;
            admit(&tx, tenant, &quota, None).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
