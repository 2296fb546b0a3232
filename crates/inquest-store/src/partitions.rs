//! The turns table's monthly partitions (migration V40): made ahead of
//! time, and dropped once every session of their month is erased, which
//! is how erased turns give their space back to the operating system.
//!
//! A partition holds the turns of the sessions made in one month (by the
//! time in their UUIDv7 ids). Erasure deletes a session's turns row by
//! row, in the transaction that erases the session; a partition left
//! with no row holds no session (every session has a first turn), and
//! one whose month ended more than [`SETTLE`] ago gets no new session, so
//! it is detached (`CONCURRENTLY`: appends and reads of other partitions
//! never wait) and dropped.

use crate::{Store, StoreError, rows::get};

/// How long after its month's end a partition may be dropped: a replica
/// whose clock is this far behind could still make a session in it.
const SETTLE: &str = "7 days";

/// Arbitrary but fixed key of the advisory lock that lets one replica at
/// a time drop partitions.
const DROP_LOCK: i64 = 0x1e9_7a27;

/// Months made ahead of the current one, so an append always finds its
/// partition even when no replica ran for a while before it.
const AHEAD: i32 = 2;

impl Store {
    /// Makes the partitions of this month, the next [`AHEAD`] ones, and
    /// the month [`SETTLE`] ago (which a replica with a slow clock may
    /// still be in; never one [`Store::drop_empty_turn_partitions`] would
    /// drop) that are missing; returns the names made or found.
    pub async fn make_turn_partitions(&self) -> Result<Vec<String>, StoreError> {
        self.run("make_turn_partitions", async |c| {
            let rows = c
                .query(
                    "SELECT inquest_turns_partition_for(at) FROM ( \
                       SELECT now() - $2::text::interval AS at \
                       UNION ALL \
                       SELECT now() + make_interval(months => m) \
                       FROM generate_series(0, $1::int) m) a",
                    &[&AHEAD, &SETTLE],
                )
                .await?;
            let mut names = Vec::with_capacity(rows.len());
            for row in &rows {
                if let Some(name) = get::<Option<String>>(row, 0)? {
                    names.push(name);
                }
            }
            Ok(names)
        })
        .await
    }

    /// Drops every turns partition that holds no row and whose range ended
    /// more than [`SETTLE`] ago; returns their names. One replica at a
    /// time (the others return at once with nothing); a detach a crash
    /// cut short is finished first, and a table it left detached dropped.
    pub async fn drop_empty_turn_partitions(&self) -> Result<Vec<String>, StoreError> {
        self.run_with_timeout(
            "drop_empty_turn_partitions",
            std::time::Duration::from_secs(600),
            async |c| {
                let locked: bool = c
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&DROP_LOCK])
                    .await?
                    .get(0);
                if !locked {
                    return Ok(Vec::new());
                }
                let dropped = drop_empty(c).await;
                let unlocked = c
                    .execute("SELECT pg_advisory_unlock($1)", &[&DROP_LOCK])
                    .await;
                let dropped = dropped?;
                unlocked?;
                Ok(dropped)
            },
        )
        .await
    }
}

/// Names quoted as identifiers are ours (`turns_legacy`, `turns_yYYYYmMM`),
/// matched by pattern before use.
fn is_ours(name: &str) -> bool {
    name == "turns_legacy"
        || (name.len() == "turns_y2026m12".len()
            && name.starts_with("turns_y")
            && name[7..11].bytes().all(|b| b.is_ascii_digit())
            && &name[11..12] == "m"
            && name[12..].bytes().all(|b| b.is_ascii_digit()))
}

async fn is_empty(c: &deadpool_postgres::Client, name: &str) -> Result<bool, StoreError> {
    let row = c
        .query_one(
            &format!("SELECT NOT EXISTS (SELECT 1 FROM \"{name}\")"),
            &[],
        )
        .await?;
    get(&row, 0)
}

async fn drop_empty(c: &mut deadpool_postgres::Client) -> Result<Vec<String>, StoreError> {
    // A detach cut short leaves its partition "detach pending": finish it.
    let pending = c
        .query(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = 'turns'::regclass AND i.inhdetachpending",
            &[],
        )
        .await?;
    for row in &pending {
        let name: String = get(row, 0)?;
        if is_ours(&name) {
            c.batch_execute(&format!(
                "ALTER TABLE turns DETACH PARTITION \"{name}\" FINALIZE"
            ))
            .await?;
        }
    }
    let rows = c
        .query(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) \
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = 'turns'::regclass \
               AND substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \\(''([0-9a-f-]+)''\\)')::uuid \
                   <= inquest_uuid_floor(now() - $1::text::interval) \
             ORDER BY c.relname",
            &[&SETTLE],
        )
        .await?;
    let mut dropped = Vec::new();
    for row in &rows {
        let (name, bound): (String, String) = (get(row, 0)?, get(row, 1)?);
        if !is_ours(&name) || !is_empty(c, &name).await? {
            continue;
        }
        c.batch_execute(&format!(
            "ALTER TABLE turns DETACH PARTITION \"{name}\" CONCURRENTLY"
        ))
        .await?;
        // Nothing writes to a month that ended this long ago with no
        // session left in it; should a row have come in between the check
        // and the detach all the same, the partition goes back whole.
        if !is_empty(c, &name).await? {
            tracing::warn!(partition = %name, "a turns partition got rows while being dropped; attached again");
            c.batch_execute(&format!(
                "ALTER TABLE turns ATTACH PARTITION \"{name}\" {bound}"
            ))
            .await?;
            continue;
        }
        c.batch_execute(&format!("DROP TABLE \"{name}\"")).await?;
        tracing::info!(partition = %name, "dropped an empty turns partition");
        dropped.push(name);
    }
    // A table a crash left detached but not dropped (one that holds rows
    // is someone's archive, and stays).
    let orphans = c
        .query(
            "SELECT c.relname FROM pg_class c \
             WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace \
               AND (c.relname = 'turns_legacy' OR c.relname ~ '^turns_y[0-9]{4}m[0-9]{2}$') \
               AND NOT c.relispartition",
            &[],
        )
        .await?;
    for row in &orphans {
        let name: String = get(row, 0)?;
        if is_ours(&name) && is_empty(c, &name).await? {
            c.batch_execute(&format!("DROP TABLE \"{name}\"")).await?;
            dropped.push(name);
        }
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::is_ours;

    #[test]
    fn only_our_partition_names_are_ever_quoted_into_sql() {
        assert!(is_ours("turns_legacy"));
        assert!(is_ours("turns_y2026m12"));
        for name in [
            "turns",
            "turns_y2026m1",
            "turns_y2026x12",
            "turns_y2026m12\"; DROP TABLE sessions; --",
            "turns_yabcdm12",
            "sessions",
        ] {
            assert!(!is_ours(name), "{name}");
        }
    }
}
