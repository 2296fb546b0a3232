//! Scheduled investigations (migration V31): when each schedule was first
//! seen, and one row per tick fired or skipped. Firing a tick is one
//! transaction: the tick's row, the incident, the session and its first
//! turn, under a per-schedule lock that also refuses a tick older than one
//! already recorded (two replicas whose clocks straddle a tick cannot fire
//! an older one after a newer).

use inquest_core::{IncidentText, SessionId, Tenant, TenantQuota, UserMessage};
use time::OffsetDateTime;

use crate::{StartedSession, Store, StoreError, rows::get};

/// What a schedule has done so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleState {
    pub name: String,
    pub registered_at: OffsetDateTime,
    /// The latest tick recorded, if any.
    pub last: Option<TickRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TickRow {
    pub tick: OffsetDateTime,
    pub fired_at: OffsetDateTime,
    pub fired_by: String,
    pub incident_id: Option<uuid::Uuid>,
    pub session_id: Option<uuid::Uuid>,
    pub skipped: Option<String>,
}

/// A tick to fire.
pub struct FireTick<'a> {
    pub schedule: &'a str,
    pub tick: OffsetDateTime,
    pub tenant: &'a Tenant,
    pub quota: TenantQuota,
    pub incident: &'a IncidentText,
    pub message: &'a UserMessage,
    /// The skills the session loads (`None`: every configured one).
    pub skills: Option<&'a [String]>,
}

/// What became of a tick.
#[derive(Debug)]
pub enum TickOutcome {
    /// This replica fired it: the session is stored, `pending`.
    Fired(Box<StartedSession>),
    /// Recorded before (by another replica, or a later tick is).
    AlreadyDone,
    /// Recorded as skipped, with why.
    Skipped(String),
}

/// A key for the schedule's transaction-level lock, apart from the event
/// log's and the alert cap's.
const LOCK_CLASS: i32 = 1_768_845_671;

impl Store {
    /// Notes the schedules first seen now; those seen before keep their
    /// time.
    pub async fn register_schedules(&self, names: &[String]) -> Result<(), StoreError> {
        self.run("register_schedules", async |c| {
            c.execute(
                "INSERT INTO schedules (name) SELECT unnest($1::text[]) ON CONFLICT (name) DO NOTHING",
                &[&names],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// The state of each of `names` that is registered.
    pub async fn schedule_states(
        &self,
        names: &[String],
    ) -> Result<Vec<ScheduleState>, StoreError> {
        let rows = self
            .run("schedule_states", async |c| {
                Ok(c.query(
                    "SELECT s.name, s.registered_at, t.tick, t.fired_at, t.fired_by, \
                            t.incident_id, t.session_id, t.skipped \
                     FROM schedules s LEFT JOIN LATERAL ( \
                         SELECT * FROM schedule_ticks WHERE schedule = s.name \
                         ORDER BY tick DESC LIMIT 1) t ON true \
                     WHERE s.name = ANY($1)",
                    &[&names],
                )
                .await?)
            })
            .await?;
        rows.iter()
            .map(|r| {
                let tick: Option<OffsetDateTime> = get(r, 2)?;
                Ok(ScheduleState {
                    name: get(r, 0)?,
                    registered_at: get(r, 1)?,
                    last: match tick {
                        Some(tick) => Some(TickRow {
                            tick,
                            fired_at: get(r, 3)?,
                            fired_by: get(r, 4)?,
                            incident_id: get(r, 5)?,
                            session_id: get(r, 6)?,
                            skipped: get(r, 7)?,
                        }),
                        None => None,
                    },
                })
            })
            .collect()
    }

    /// Fires `t` once: see the module docs. A tenant over its limits gets
    /// the tick recorded as skipped, saying so, with no incident.
    pub async fn fire_schedule_tick(&self, t: FireTick<'_>) -> Result<TickOutcome, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let (schedule, tick, tenant, quota) =
            (t.schedule.to_owned(), t.tick, t.tenant.clone(), t.quota);
        let (incident, message) = (t.incident.clone(), t.message.clone());
        let skills = t.skills.map(<[String]>::to_vec);
        // Detached: a shutdown mid-way does not leave the caller unsure
        // whether the transaction committed.
        self.detached(async move {
            store
                .run_with_timeout("fire_schedule_tick", limit, async |c| {
                    let fired_by = store.replica_id().as_str().to_owned();
                    let tx = c.transaction().await?;
                    if !claim_tick(&tx, &schedule, tick).await? {
                        return Ok(TickOutcome::AlreadyDone);
                    }
                    if let Err(e) = crate::tenants::admit(&tx, &tenant, &quota, None).await {
                        let StoreError::QuotaExceeded(q) = &e else {
                            return Err(e);
                        };
                        let why =
                            format!("no session started: the tenant is over its limits ({q})");
                        insert_tick(
                            &tx,
                            &schedule,
                            tick,
                            &tenant,
                            &fired_by,
                            None,
                            None,
                            Some(&why),
                        )
                        .await?;
                        tx.commit().await?;
                        return Ok(TickOutcome::Skipped(why));
                    }
                    let incident_id = crate::incidents::insert_incident(
                        &tx,
                        &tenant,
                        &incident,
                        crate::IncidentSource::Schedule,
                    )
                    .await?;
                    let id = SessionId::new();
                    let session = crate::sessions::insert_session(
                        &tx,
                        id,
                        incident_id,
                        &tenant,
                        skills.as_deref(),
                    )
                    .await?;
                    let first_turn =
                        crate::sessions::insert_opening_turn(&tx, id, &message).await?;
                    insert_tick(
                        &tx,
                        &schedule,
                        tick,
                        &tenant,
                        &fired_by,
                        Some(*incident_id.as_uuid()),
                        Some(*id.as_uuid()),
                        None,
                    )
                    .await?;
                    tx.commit().await?;
                    Ok(TickOutcome::Fired(Box::new(StartedSession {
                        session,
                        first_turn,
                        created: true,
                    })))
                })
                .await
        })
        .await
    }

    /// Records `tick` as skipped (`why`), unless it or a later one is
    /// recorded already.
    pub async fn skip_schedule_tick(
        &self,
        schedule: &str,
        tick: OffsetDateTime,
        tenant: &Tenant,
        why: &str,
    ) -> Result<bool, StoreError> {
        let fired_by = self.replica_id().as_str().to_owned();
        self.run("skip_schedule_tick", async |c| {
            let tx = c.transaction().await?;
            if !claim_tick(&tx, schedule, tick).await? {
                return Ok(false);
            }
            insert_tick(
                &tx,
                schedule,
                tick,
                tenant,
                &fired_by,
                None,
                None,
                Some(why),
            )
            .await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }
}

/// Takes the schedule's lock; `false` when `tick` or a later one is
/// recorded (the caller then ends the transaction).
async fn claim_tick(
    tx: &deadpool_postgres::Transaction<'_>,
    schedule: &str,
    tick: OffsetDateTime,
) -> Result<bool, StoreError> {
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&LOCK_CLASS, &schedule],
    )
    .await?;
    let done = tx
        .query_opt(
            "SELECT 1 FROM schedule_ticks WHERE schedule = $1 AND tick >= $2 LIMIT 1",
            &[&schedule, &tick],
        )
        .await?
        .is_some();
    Ok(!done)
}

#[allow(clippy::too_many_arguments)]
async fn insert_tick(
    tx: &deadpool_postgres::Transaction<'_>,
    schedule: &str,
    tick: OffsetDateTime,
    tenant: &Tenant,
    fired_by: &str,
    incident: Option<uuid::Uuid>,
    session: Option<uuid::Uuid>,
    skipped: Option<&str>,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO schedule_ticks (schedule, tick, tenant, fired_by, incident_id, session_id, skipped) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[&schedule, &tick, &tenant.as_str(), &fired_by, &incident, &session, &skipped],
    )
    .await?;
    Ok(())
}
