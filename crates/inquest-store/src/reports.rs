//! Reports: what each burst lands (exit reason, summary, counters, active
//! time), one row per `(session, burst)`.

use inquest_core::{ExitReason, SessionId};
use serde_json::Value;
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::{
    Lease, Store, StoreError,
    rows::{count, get},
    text,
};

/// A burst's report as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRow {
    pub session_id: SessionId,
    /// 1 for the session's first burst.
    pub burst: u32,
    pub exit_reason: ExitReason,
    pub summary: String,
    /// Audit counters, skills and servers, as the agent reported them.
    pub counters: Value,
    /// Active time of the session up to the end of this burst.
    pub active_ms: u64,
    pub created_at: OffsetDateTime,
}

/// `escaped` (migration V8): summary and counters are in the encoding of
/// [`crate::text`], decoded by [`report_from_row`].
const REPORT_COLUMNS: &str =
    "session_id, burst, exit_reason, summary, counters, active_ms, created_at, escaped";

fn report_from_row(row: &Row) -> Result<ReportRow, StoreError> {
    let exit: &str = get(row, 2)?;
    let burst: i64 = get(row, 1)?;
    let escaped: bool = get(row, 7)?;
    Ok(ReportRow {
        session_id: SessionId::from_uuid(get(row, 0)?),
        burst: u32::try_from(burst).map_err(|_| StoreError::Corrupt(format!("burst {burst}")))?,
        exit_reason: ExitReason::parse(exit)
            .ok_or_else(|| StoreError::Corrupt(format!("exit reason {exit:?}")))?,
        summary: text::read(get(row, 3)?, escaped, "report summary")?,
        counters: text::read_json(get(row, 4)?, escaped, "report counters")?,
        active_ms: count(get(row, 5)?),
        created_at: get(row, 6)?,
    })
}

/// A burst's report, to be saved.
#[derive(Debug, Clone, PartialEq)]
pub struct NewReport {
    /// 1 for the session's first burst.
    pub burst: u32,
    pub exit_reason: ExitReason,
    pub summary: String,
    pub counters: Value,
    pub active_ms: u64,
}

impl Store {
    /// Records a burst's report. Detached with the turn-write timeout: a
    /// burst that ended must land its report even if its caller is gone. A
    /// burst reported again (a recovered burst) keeps the newer report.
    pub async fn save_report(
        &self,
        lease: &Lease,
        report: NewReport,
    ) -> Result<ReportRow, StoreError> {
        let NewReport {
            burst,
            exit_reason,
            summary,
            counters,
            active_ms,
        } = report;
        let session = lease.session();
        let epoch = lease.epoch();
        // The summary is model text and may hold U+0000 (crate::text).
        let escaped = text::has_nul(&summary) || text::json_has_nul(&counters);
        let (summary, counters) = if escaped {
            (
                text::escape(&summary).into_owned(),
                text::escape_json(&counters),
            )
        } else {
            (summary, counters)
        };
        let store = self.clone();
        let limit = self.turn_write_timeout;
        self.detached(async move {
            // Fenced like every write of a burst: the lease row is locked
            // (FOR SHARE) and its epoch checked in the same statement.
            let sql = format!(
                "WITH fence AS (SELECT id FROM sessions WHERE id = $1 AND lease_epoch = $7 \
                                FOR SHARE) \
                 INSERT INTO reports (session_id, burst, exit_reason, summary, counters, active_ms, \
                                      escaped) \
                 SELECT $1, $2, $3, $4, $5, $6, $8 FROM fence \
                 ON CONFLICT (session_id, burst) DO UPDATE SET exit_reason = EXCLUDED.exit_reason, \
                   summary = EXCLUDED.summary, counters = EXCLUDED.counters, \
                   active_ms = EXCLUDED.active_ms, escaped = EXCLUDED.escaped, created_at = now() \
                 RETURNING {REPORT_COLUMNS}"
            );
            let row = store
                .run_with_timeout("save_report", limit, async |c| {
                    let row = c.query_opt(
                        &sql,
                        &[
                            session.as_uuid(),
                            &i64::from(burst),
                            &exit_reason.as_str(),
                            &summary,
                            &counters,
                            &i64::try_from(active_ms).unwrap_or(i64::MAX),
                            &epoch,
                            &escaped,
                        ],
                    )
                    .await?;
                    match row {
                        Some(row) => Ok(row),
                        None => Err(crate::turns::no_row(&*c, session, Some(epoch), None).await),
                    }
                })
                .await?;
            report_from_row(&row)
        })
        .await
    }

    /// The report of `burst`, or of the latest burst when `None`.
    /// NotFound when the session has no such report (yet).
    pub async fn get_report(
        &self,
        session: SessionId,
        burst: Option<u32>,
    ) -> Result<ReportRow, StoreError> {
        let sql = format!(
            "SELECT {REPORT_COLUMNS} FROM reports WHERE session_id = $1 \
             AND ($2::bigint IS NULL OR burst = $2) ORDER BY burst DESC LIMIT 1"
        );
        let burst_param = burst.map(i64::from);
        let row = self
            .run("get_report", async |c| {
                Ok(c.query_opt(&sql, &[session.as_uuid(), &burst_param])
                    .await?)
            })
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "report of session",
                id: session.to_string(),
            })?;
        report_from_row(&row)
    }
}
