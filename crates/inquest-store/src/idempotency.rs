//! Idempotency keys: bound to their request, and expired after a retention.
//!
//! A row of `idempotency_keys` (scope, key) names what the first call with
//! that key stored, and `request_hash` (migration V9) the
//! [`RequestFingerprint`] of its request. The writers (`sessions.rs`
//! `start_session_tx`, `bursts.rs` `send_message_tx`) look a key up with
//! [`bound_to`]: the same request gets the first result, another request
//! [`StoreError::IdempotencyConflict`] before anything is written. A row
//! without a hash (written before V9) matches any request, as every key
//! did then.
//!
//! [`Store::expire_idempotency_keys`] deletes rows older than the retention
//! in bounded batches; the server runs it periodically. After that a key
//! is free: the next call with it is a new request.

use std::time::Duration;

use inquest_core::{IdempotencyKey, RequestFingerprint, Seq, SessionId};
use time::OffsetDateTime;

use crate::{Store, StoreError};

/// Rows deleted per statement by [`Store::expire_idempotency_keys`]: one
/// statement holds its row locks and WAL for this many rows at most.
pub const EXPIRE_BATCH: i64 = 10_000;

/// Binds `key` to the turn at `seq` of `session` that this transaction
/// stored, with the request's fingerprint; false when another call holds
/// the key (the caller rolls back and replays what that call stored).
pub(crate) async fn claim(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    key: &IdempotencyKey,
    session: SessionId,
    seq: Seq,
    request: &RequestFingerprint,
) -> Result<bool, StoreError> {
    let claimed = tx
        .execute(
            "INSERT INTO idempotency_keys (scope, key, session_id, seq, request_hash) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[
                &scope,
                &key.as_str(),
                session.as_uuid(),
                &seq.as_i64(),
                &request.as_bytes().as_slice(),
            ],
        )
        .await?;
    Ok(claimed != 0)
}

/// Checks a stored key row's hash against the request now made with it:
/// `Ok` when it is the same request (or the row predates hashes),
/// [`StoreError::IdempotencyConflict`] otherwise.
pub(crate) fn bound_to(
    stored: Option<&[u8]>,
    request: &RequestFingerprint,
    key: &IdempotencyKey,
) -> Result<(), StoreError> {
    let Some(stored) = stored else {
        return Ok(());
    };
    match RequestFingerprint::from_stored(stored) {
        Some(s) if s == *request => Ok(()),
        Some(_) => Err(StoreError::IdempotencyConflict {
            key: key.as_str().to_owned(),
        }),
        // The column's CHECK keeps it 32 bytes.
        None => Err(StoreError::Corrupt(format!(
            "idempotency key request hash of {} bytes",
            stored.len()
        ))),
    }
}

impl Store {
    /// Deletes idempotency keys created more than `older_than` ago (by the
    /// database's clock, which stamped them), [`EXPIRE_BATCH`] rows per
    /// statement until a statement finds fewer. Returns how many it
    /// deleted. Rows another replica's cleanup is deleting at the same
    /// moment are skipped, not waited for.
    pub async fn expire_idempotency_keys(&self, older_than: Duration) -> Result<u64, StoreError> {
        self.expire_idempotency_keys_in_batches(older_than, EXPIRE_BATCH)
            .await
    }

    /// [`Store::expire_idempotency_keys`] with another batch size (tests
    /// walk several batches with a handful of rows).
    #[doc(hidden)]
    pub async fn expire_idempotency_keys_in_batches(
        &self,
        older_than: Duration,
        batch: i64,
    ) -> Result<u64, StoreError> {
        if batch < 1 {
            return Err(StoreError::Config(format!(
                "idempotency key expiry batch {batch} must be >= 1"
            )));
        }
        let seconds = older_than.as_secs_f64();
        // One cutoff for the whole pass, so a pass ends.
        let cutoff: OffsetDateTime = self
            .run("idempotency_cutoff", async |c| {
                let row = c
                    .query_one("SELECT now() - make_interval(secs => $1)", &[&seconds])
                    .await?;
                crate::rows::get(&row, 0)
            })
            .await?;
        let mut total = 0;
        loop {
            let deleted = self
                .run("expire_idempotency_keys", async |c| {
                    // By ctid: the rows the sub-select locked cannot move, and
                    // a TID scan costs the batch, not the table (a join on the
                    // key scanned all 1.1M rows of a test table: 403 ms per
                    // batch of 10,000, against 21 ms by ctid).
                    Ok(c.execute(
                        "DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY( \
                         SELECT ctid FROM idempotency_keys WHERE created_at < $1 \
                         LIMIT $2 FOR UPDATE SKIP LOCKED))",
                        &[&cutoff, &batch],
                    )
                    .await?)
                })
                .await?;
            total += deleted;
            if deleted < batch.unsigned_abs() {
                return Ok(total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inquest_core::{IncidentId, Limits, UserMessage};

    #[test]
    fn a_key_is_bound_to_its_request() {
        let key = IdempotencyKey::parse_optional("k".into()).unwrap().unwrap();
        let msg = |t: &str| UserMessage::parse(t.into(), &Limits::default()).unwrap();
        let ours = RequestFingerprint::start_session(IncidentId::new(), &msg("a"));
        let other = RequestFingerprint::send_message(&msg("a"));
        assert!(bound_to(Some(ours.as_bytes()), &ours, &key).is_ok());
        assert!(bound_to(None, &ours, &key).is_ok(), "rows before V9 match");
        assert!(matches!(
            bound_to(Some(other.as_bytes()), &ours, &key),
            Err(StoreError::IdempotencyConflict { key }) if key == "k"
        ));
        assert!(matches!(
            bound_to(Some(&[1, 2, 3]), &ours, &key),
            Err(StoreError::Corrupt(_))
        ));
    }
}
