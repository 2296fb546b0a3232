//! API tokens (migration V15): issued, listed, verified by id, revoked.
//! The secret is never stored, only its SHA-256 (`inquest_auth`).

use inquest_auth::{PresentedToken, Role};
use inquest_core::Tenant;
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::{Store, StoreError, rows::get};

/// A token as stored (no secret).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiToken {
    pub id: Uuid,
    pub name: String,
    pub tenant: String,
    pub role: Role,
    pub created_at: OffsetDateTime,
    pub expires_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub secret_hash: Vec<u8>,
}

impl ApiToken {
    /// Usable at `now`: not revoked, not expired.
    pub fn live_at(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| e > now)
    }
}

/// A new token: its row and the secret text, shown once.
#[derive(Debug)]
pub struct IssuedToken {
    pub token: ApiToken,
    pub secret: String,
}

const COLUMNS: &str = "id, name, tenant, role, created_at, expires_at, revoked_at, secret_hash";

fn token_from_row(row: &Row) -> Result<ApiToken, StoreError> {
    let role: String = get(row, 3)?;
    Ok(ApiToken {
        id: get(row, 0)?,
        name: get(row, 1)?,
        tenant: get(row, 2)?,
        role: Role::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("api token role {role:?}")))?,
        created_at: get(row, 4)?,
        expires_at: get(row, 5)?,
        revoked_at: get(row, 6)?,
        secret_hash: get(row, 7)?,
    })
}

impl Store {
    /// Issues a token with a fresh random 256-bit secret.
    pub async fn create_token(
        &self,
        name: &str,
        tenant: &Tenant,
        role: Role,
        expires_at: Option<OffsetDateTime>,
    ) -> Result<IssuedToken, StoreError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| StoreError::Config(format!("no random source for a token: {e}")))?;
        let id = Uuid::now_v7();
        let presented = PresentedToken::new(id, secret);
        let hash = presented.secret_hash().to_vec();
        let sql = format!(
            "INSERT INTO api_tokens (id, name, tenant, role, secret_hash, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
        );
        let row = self
            .run("create_token", async |c| {
                Ok(c.query_one(
                    &sql,
                    &[
                        &id,
                        &name,
                        &tenant.as_str(),
                        &role.as_str(),
                        &hash,
                        &expires_at,
                    ],
                )
                .await?)
            })
            .await?;
        Ok(IssuedToken {
            token: token_from_row(&row)?,
            secret: PresentedToken::format(id, &secret),
        })
    }

    /// The deployment's key for signing page tokens (made by a migration,
    /// shared by every replica).
    pub async fn page_token_key(&self) -> Result<Vec<u8>, StoreError> {
        let row = self
            .run("page_token_key", async |c| {
                Ok(c.query_opt(
                    "SELECT key FROM deployment_keys WHERE name = 'page_token'",
                    &[],
                )
                .await?)
            })
            .await?;
        let row = row.ok_or_else(|| StoreError::Corrupt("no page_token key".into()))?;
        get(&row, 0)
    }

    /// The token with `id`, if any (revoked and expired ones included).
    pub async fn find_token(&self, id: Uuid) -> Result<Option<ApiToken>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE id = $1");
        let row = self
            .run("find_token", async |c| {
                Ok(c.query_opt(&sql, &[&id]).await?)
            })
            .await?;
        row.as_ref().map(token_from_row).transpose()
    }

    /// The tokens that can authenticate now (neither revoked nor expired),
    /// at most `limit`, in one read: what a replica verifies against.
    pub async fn live_tokens(&self, limit: i64) -> Result<Vec<ApiToken>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM api_tokens WHERE revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > now()) LIMIT $1"
        );
        let rows = self
            .run("live_tokens", async |c| {
                Ok(c.query(&sql, &[&limit]).await?)
            })
            .await?;
        rows.iter().map(token_from_row).collect()
    }

    /// Every token, newest first, at most `limit`.
    pub async fn list_tokens(&self, limit: i64) -> Result<Vec<ApiToken>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens ORDER BY id DESC LIMIT $1");
        let rows = self
            .run("list_tokens", async |c| {
                Ok(c.query(&sql, &[&limit]).await?)
            })
            .await?;
        rows.iter().map(token_from_row).collect()
    }

    /// Revokes `id`; `false` when there is no such token. Revoking twice
    /// keeps the first time.
    pub async fn revoke_token(&self, id: Uuid) -> Result<bool, StoreError> {
        let n = self
            .run("revoke_token", async |c| {
                Ok(c.execute(
                    "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1",
                    &[&id],
                )
                .await?)
            })
            .await?;
        Ok(n == 1)
    }

    /// `tenant`'s tokens, newest first, at most `limit`.
    pub async fn list_tenant_tokens(
        &self,
        tenant: &Tenant,
        limit: i64,
    ) -> Result<Vec<ApiToken>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM api_tokens WHERE tenant = $1 ORDER BY id DESC LIMIT $2");
        let rows = self
            .run("list_tokens", async |c| {
                Ok(c.query(&sql, &[&tenant.as_str(), &limit]).await?)
            })
            .await?;
        rows.iter().map(token_from_row).collect()
    }

    /// Revokes `tenant`'s token `id`: the token as it now stands, `None`
    /// when `tenant` has no such token (another tenant's included).
    pub async fn revoke_tenant_token(
        &self,
        tenant: &Tenant,
        id: Uuid,
    ) -> Result<Option<ApiToken>, StoreError> {
        let sql = format!(
            "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) \
             WHERE id = $1 AND tenant = $2 RETURNING {COLUMNS}"
        );
        let row = self
            .run("revoke_token", async |c| {
                Ok(c.query_opt(&sql, &[&id, &tenant.as_str()]).await?)
            })
            .await?;
        row.as_ref().map(token_from_row).transpose()
    }
}
