//! Turns lost in a failover. PostgreSQL with asynchronous replication can
//! promote a standby that had not received the last commits: a session's
//! head then goes back below seqs a burst already committed and published
//! to watchers. The burst's writes carry the highest seq it saw committed
//! (`Store::append_turn_after`), so the first write after such a failover
//! is refused with `StoreError::HeadBehind` rather than taking a lost seq
//! for other content. [`Store::mark_lost_turns`] then stores a tombstone
//! under each lost seq (`NewTurn::lost_in_failover`) and leaves the session
//! to recovery: what the lost turns did (a tool call, its result) is
//! unknown, which the recovery plan handles as for any interrupted call.

use std::collections::BTreeMap;

use inquest_core::{NewTurn, Seq, SessionStatus, Turn};

use crate::{Lease, Store, StoreError, rows::get};

/// How far back a reconnecting watcher's cursor is compared
/// ([`Store::replaced_before`]): a failover loses the latest turns.
const REPLACED_WINDOW: i64 = 256;

impl Store {
    /// For a watcher reconnecting after `after` (the turn it received there
    /// committed at `at`): `None` when the session still holds that turn
    /// (or no turn there: the cursor check answers that); otherwise the
    /// first seq at or below `after` that holds a turn committed since,
    /// which the watcher must read again from.
    pub async fn replaced_before(
        &self,
        session: inquest_core::SessionId,
        after: Seq,
        at: time::OffsetDateTime,
    ) -> Result<Option<Seq>, StoreError> {
        let after = after.as_i64();
        let row = self
            .run("replaced_before", async |c| {
                Ok(c.query_one(
                    "SELECT (SELECT created_at FROM turns WHERE session_id = $1 AND seq = $2), \
                            (SELECT min(seq) FROM turns WHERE session_id = $1 AND seq <= $2 \
                             AND seq > $2 - $4 AND created_at > $3)",
                    &[session.as_uuid(), &after, &at, &REPLACED_WINDOW],
                )
                .await?)
            })
            .await?;
        let stored: Option<time::OffsetDateTime> = get(&row, 0)?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        // Stored to the microsecond; the client's copy may carry the same
        // instant with more digits.
        let micros = |t: time::OffsetDateTime| t.unix_timestamp_nanos() / 1000;
        if micros(stored) == micros(at) {
            return Ok(None);
        }
        let first: Option<i64> = get(&row, 1)?;
        Ok(Seq::from_stored(first.unwrap_or(after)))
    }

    /// Stores the tombstone of every seq from the session's head + 1 to
    /// `known` (`described`: what the writer knew of a lost turn, by seq)
    /// and, while the lease is still this burst's, expires it, so a claim
    /// plans its recovery from what the database holds. One transaction
    /// under the session row's lock: the seqs past the head hold nothing
    /// yet, so the tombstones take no one's place, even when another
    /// replica claimed the session since (its next turn goes after them).
    /// Returns the tombstones (none when the head had caught up), to
    /// publish.
    pub async fn mark_lost_turns(
        &self,
        lease: &Lease,
        known: Seq,
        described: &BTreeMap<i64, String>,
    ) -> Result<Vec<Turn>, StoreError> {
        let session = lease.session();
        let held = lease.epoch();
        let origin = self.replica.clone();
        let running = SessionStatus::Running.as_str();
        self.run("mark_lost_turns", async |c| {
            let tx = c.transaction().await?;
            let Some(row) = tx
                .query_opt(
                    "SELECT head_seq, lease_epoch FROM sessions WHERE id = $1 FOR UPDATE",
                    &[session.as_uuid()],
                )
                .await?
            else {
                return Err(StoreError::NotFound {
                    what: "session",
                    id: session.to_string(),
                });
            };
            let head: i64 = get(&row, 0)?;
            let mut tombstones = Vec::new();
            for n in head.saturating_add(1)..=known.as_i64() {
                let Some(seq) = Seq::from_stored(n) else {
                    continue;
                };
                let turn = NewTurn::lost_in_failover(seq, described.get(&n).map(String::as_str));
                tombstones.push(
                    crate::turns::insert_turn(&tx, &origin, session, None, None, &turn).await?,
                );
            }
            tx.execute(
                "UPDATE sessions SET lease_owner = NULL, lease_expires_at = now(), updated_at = now() \
                 WHERE id = $1 AND lease_epoch <= $2 AND status::text = $3",
                &[session.as_uuid(), &held, &running],
            )
            .await?;
            tx.commit().await?;
            Ok(tombstones)
        })
        .await
    }
}
