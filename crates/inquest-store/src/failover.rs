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

impl Store {
    /// Stores the tombstone of every seq from the session's head + 1 to
    /// `known` (`described`: what the writer knew of a lost turn, by seq)
    /// and expires the burst's lease, so a claim plans its recovery from
    /// what the database holds. One transaction under the session row's
    /// lock. LeaseLost when a newer epoch claimed the session meanwhile
    /// (its writes may already stand under those seqs). Returns the
    /// tombstones (none when the head had caught up), to publish.
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
            let (head, current): (i64, i64) = (get(&row, 0)?, get(&row, 1)?);
            if current > held {
                return Err(StoreError::LeaseLost {
                    session: session.to_string(),
                    held,
                    current,
                });
            }
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
