//! Alert notifications (migration V21): a notification group is one
//! incident, and only what changed in it is written.
//!
//! [`Store::record_alerts`] runs in one transaction under a lock on its
//! group: the first notification of a group creates the incident and the
//! group's row; each later one compares its alerts with what the group
//! last saw (`alert_states`) and appends an `alert_events` row per alert
//! that fired or resolved since. A repeat of an unchanged group (a retry,
//! a `repeat_interval` resend) reads and writes nothing new.
//!
//! A notification that leaves no alert of the group firing sets the
//! group's `resolved_at` (V23) and, when the trigger's session exists,
//! stores a notice on it in the same transaction: a retry finds nothing
//! changed, so the notice is written once.
//!
//! One that fires new alerts in a group whose session exists writes the
//! follow-up for it (rendered by the caller's [`FollowUp`]) as the group's
//! pending follow-up, in the same transaction: the caller sends it and
//! clears it by its key ([`Store::alert_follow_up_sent`]); while a burst
//! runs it waits there, through a crash, until
//! [`Store::alert_follow_ups_ready`] finds the session settled.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use inquest_core::{IncidentId, IncidentText, NewTurn, SessionId, Tenant, Turn};
use time::OffsetDateTime;

use crate::{Store, StoreError, rows::get, text};

/// One alert of a notification, as the edge parsed it.
#[derive(Debug, Clone)]
pub struct AlertSeen {
    pub fingerprint: String,
    pub firing: bool,
    pub starts_at: OffsetDateTime,
    /// `None` while firing (Alertmanager sends the zero time then).
    pub ends_at: Option<OffsetDateTime>,
    /// The labels as JSON text (no NUL byte: JSON escapes it).
    pub labels_json: String,
}

/// Renders a group's follow-up from the fingerprints that fired and
/// resolved and the follow-up still waiting, if any (to merge with):
/// the message and its idempotency key.
pub type FollowUp =
    Arc<dyn Fn(&[String], &[String], Option<&str>) -> (String, String) + Send + Sync>;

/// A follow-up for a group's session, waiting until the session has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFollowUp {
    pub tenant: String,
    pub group_key: String,
    pub session: SessionId,
    pub message: String,
    pub key: String,
}

/// A notification to record for `tenant`'s group `group_key`.
#[derive(Clone)]
pub struct AlertNotification {
    pub group_key: String,
    /// The endpoint it came through (`alertmanager`).
    pub source: &'static str,
    pub receiver: String,
    pub external_url: String,
    /// Title and description of the incident, used only if this
    /// notification creates it.
    pub incident: IncidentText,
    /// The matching trigger's rendered prompt, if one matched.
    pub prompt: Option<String>,
    /// The group's trigger asks for a follow-up (a burst) when every alert
    /// resolves, not only a notice.
    pub follow_up_on_resolved: bool,
    /// Distinct fingerprints (the edge drops repeats).
    pub alerts: Vec<AlertSeen>,
    /// How a change becomes a follow-up on the group's session.
    pub follow_up: FollowUp,
}

impl std::fmt::Debug for AlertNotification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertNotification")
            .field("group_key", &self.group_key)
            .field("source", &self.source)
            .field("alerts", &self.alerts.len())
            .finish_non_exhaustive()
    }
}

/// What [`Store::record_alerts`] did.
#[derive(Debug, Clone)]
pub struct AlertsRecorded {
    pub incident: IncidentId,
    /// This notification created the incident.
    pub created: bool,
    /// Alerts that fired or resolved since the group's last notification.
    pub changed: usize,
    /// The session the group's trigger started, if it did.
    pub session: Option<SessionId>,
    /// The trigger prompt of a group whose session is not started yet
    /// (started by the caller; kept until it is, so a retry starts it).
    pub to_start: Option<String>,
    /// This notification resolved the group's last firing alert.
    pub resolved_at: Option<OffsetDateTime>,
    /// The notice stored on the group's session when it resolved.
    pub notice: Option<Turn>,
    /// The group's follow-up its session does not have yet (this
    /// notification's, or an earlier one's still waiting).
    pub pending: Option<PendingFollowUp>,
}

/// One recorded change of an alert of an incident.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertEvent {
    pub fingerprint: String,
    pub firing: bool,
    pub starts_at: OffsetDateTime,
    pub ends_at: Option<OffsetDateTime>,
    pub labels_json: String,
    pub received_at: OffsetDateTime,
}

/// Where an incident came from, when an alert group made it.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertOrigin {
    pub source: String,
    pub receiver: String,
    pub external_url: String,
    pub group_key: String,
    /// When every alert of the group had resolved; `None` while one fires.
    pub resolved_at: Option<OffsetDateTime>,
    /// How many alert events the incident has (all, not only those read).
    pub events_total: i64,
    /// Why the matching trigger started no session (the storm cap), while
    /// none is started.
    pub session_skipped: Option<String>,
    /// The newest events, newest first.
    pub events: Vec<AlertEvent>,
}

/// What [`Store::reserve_alert_start`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartReservation {
    /// The group may start its session.
    Reserved,
    /// The tenant's cap is reached: `started` in the last hour.
    Capped { started: i64 },
}

/// `t` as PostgreSQL keeps it (microseconds): Alertmanager sends
/// nanoseconds, and a stored time compared with the sent one would
/// otherwise differ on every repeat.
fn micros(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(t.nanosecond() / 1000 * 1000)
        .unwrap_or(t)
}

fn status_text(firing: bool) -> &'static str {
    if firing { "firing" } else { "resolved" }
}

impl Store {
    /// Records a notification of `tenant`'s group in one transaction; see
    /// the module docs.
    pub async fn record_alerts(
        &self,
        tenant: &Tenant,
        n: &AlertNotification,
    ) -> Result<AlertsRecorded, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let tenant = tenant.clone();
        let n = n.clone();
        // Detached: a sender that hangs up does not cut the transaction
        // short half way through its round trips (it would roll back, but
        // a retry would then wait on the lock for nothing).
        self.detached(async move {
            store
                .run_with_timeout("record_alerts", limit, async |c| {
                    record_alerts_tx(c, &store.replica, &tenant, &n).await
                })
                .await
        })
        .await
    }

    /// Notes that the trigger's session of `tenant`'s group started.
    pub async fn alert_session_started(
        &self,
        tenant: &Tenant,
        group_key: &str,
        session: SessionId,
    ) -> Result<(), StoreError> {
        self.run("alert_session_started", async |c| {
            c.execute(
                "UPDATE alert_groups SET session_id = $3 \
                 WHERE tenant = $1 AND group_key = $2 AND session_id IS NULL",
                &[&tenant.as_str(), &group_key, session.as_uuid()],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// Reserves one of `tenant`'s alert-started investigations of the last
    /// hour for `group_key` when fewer than `cap` are reserved (a group that
    /// reserved before keeps its reservation); otherwise records `why` on
    /// the group and answers false. One transaction under a per-tenant
    /// lock: concurrent notifications cannot pass the cap together.
    pub async fn reserve_alert_start(
        &self,
        tenant: &Tenant,
        group_key: &str,
        cap: u32,
    ) -> Result<StartReservation, StoreError> {
        self.run("reserve_alert_start", async |c| {
            let tx = c.transaction().await?;
            // A per-tenant key, apart from the event log's (V22) and the
            // migration lock's.
            tx.execute(
                "SELECT pg_advisory_xact_lock(1768845670, hashtext($1))",
                &[&tenant.as_str()],
            )
            .await?;
            let mine: Option<Option<OffsetDateTime>> = tx
                .query_opt(
                    "SELECT start_reserved_at FROM alert_groups WHERE tenant = $1 AND group_key = $2",
                    &[&tenant.as_str(), &group_key],
                )
                .await?
                .map(|r| get(&r, 0))
                .transpose()?;
            if let Some(Some(at)) = mine
                && at > OffsetDateTime::now_utc() - time::Duration::hours(1)
            {
                tx.commit().await?;
                return Ok(StartReservation::Reserved);
            }
            let recent: i64 = get(
                &tx.query_one(
                    "SELECT count(*) FROM alert_groups WHERE tenant = $1 \
                     AND start_reserved_at > now() - interval '1 hour'",
                    &[&tenant.as_str()],
                )
                .await?,
                0,
            )?;
            if recent < i64::from(cap) {
                tx.execute(
                    "UPDATE alert_groups SET start_reserved_at = now(), session_skipped = NULL \
                     WHERE tenant = $1 AND group_key = $2",
                    &[&tenant.as_str(), &group_key],
                )
                .await?;
                tx.commit().await?;
                return Ok(StartReservation::Reserved);
            }
            let why = format!(
                "no session started: {recent} investigations were started by this tenant's \
                 alerts in the last hour, the limit (alerts.max_started_per_hour) is {cap}; a \
                 later notification of this group tries again"
            );
            tx.execute(
                "UPDATE alert_groups SET session_skipped = $3 WHERE tenant = $1 AND group_key = $2",
                &[&tenant.as_str(), &group_key, &why],
            )
            .await?;
            tx.commit().await?;
            Ok(StartReservation::Capped { started: recent })
        })
        .await
    }

    /// Clears the group's pending follow-up if it is still the one keyed
    /// `key` (a newer merged one stays, to be sent in turn).
    pub async fn alert_follow_up_sent(
        &self,
        tenant: &str,
        group_key: &str,
        key: &str,
    ) -> Result<(), StoreError> {
        self.run("alert_follow_up_sent", async |c| {
            c.execute(
                "UPDATE alert_groups SET pending_message = NULL, pending_escaped = false, \
                 pending_key = NULL WHERE tenant = $1 AND group_key = $2 AND pending_key = $3",
                &[&tenant, &group_key, &key],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// Up to `limit` pending follow-ups whose session can take a message
    /// now (no burst waiting or running), or never will (cancelled: the
    /// sender then drops it), oldest group first.
    pub async fn alert_follow_ups_ready(
        &self,
        limit: i64,
    ) -> Result<Vec<PendingFollowUp>, StoreError> {
        self.run("alert_follow_ups_ready", async |c| {
            let rows = c
                .query(
                    "SELECT g.tenant, g.group_key, g.session_id, g.pending_message, \
                     g.pending_escaped, g.pending_key FROM alert_groups g \
                     JOIN sessions s ON s.id = g.session_id \
                     WHERE g.pending_key IS NOT NULL \
                     AND s.status IN ('idle', 'completed', 'failed', 'cancelled') \
                     ORDER BY g.created_at LIMIT $1",
                    &[&limit],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(PendingFollowUp {
                        tenant: get(r, 0)?,
                        group_key: get(r, 1)?,
                        session: SessionId::from_uuid(get(r, 2)?),
                        message: text::read(get(r, 3)?, get(r, 4)?, "alert follow-up")?,
                        key: get(r, 5)?,
                    })
                })
                .collect()
        })
        .await
    }

    /// The alert group behind `tenant`'s incident and its newest `limit`
    /// events; `None` for an incident no alert made.
    pub async fn alert_origin(
        &self,
        tenant: &Tenant,
        incident: IncidentId,
        limit: i64,
    ) -> Result<Option<AlertOrigin>, StoreError> {
        self.run("alert_origin", async |c| {
            let Some(group) = c
                .query_opt(
                    "SELECT source, receiver, external_url, group_key, \
                     (SELECT count(*) FROM alert_events e WHERE e.incident_id = g.incident_id), \
                     resolved_at, CASE WHEN session_id IS NULL THEN session_skipped END \
                     FROM alert_groups g WHERE tenant = $1 AND incident_id = $2",
                    &[&tenant.as_str(), incident.as_uuid()],
                )
                .await?
            else {
                return Ok(None);
            };
            let rows = c
                .query(
                    "SELECT fingerprint, status, starts_at, ends_at, labels, received_at \
                     FROM alert_events WHERE incident_id = $1 ORDER BY id DESC LIMIT $2",
                    &[incident.as_uuid(), &limit],
                )
                .await?;
            let events = rows
                .iter()
                .map(|r| {
                    Ok(AlertEvent {
                        fingerprint: get(r, 0)?,
                        firing: get::<String>(r, 1)? == "firing",
                        starts_at: get(r, 2)?,
                        ends_at: get(r, 3)?,
                        labels_json: get(r, 4)?,
                        received_at: get(r, 5)?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Some(AlertOrigin {
                source: get(&group, 0)?,
                receiver: get(&group, 1)?,
                external_url: get(&group, 2)?,
                group_key: get(&group, 3)?,
                events_total: get(&group, 4)?,
                resolved_at: get(&group, 5)?,
                session_skipped: get(&group, 6)?,
                events,
            }))
        })
        .await
    }
}

async fn record_alerts_tx(
    client: &mut deadpool_postgres::Client,
    origin: &crate::ReplicaId,
    tenant: &Tenant,
    n: &AlertNotification,
) -> Result<AlertsRecorded, StoreError> {
    let tx = client.transaction().await?;
    // One notification of a group at a time: two first notifications
    // racing would otherwise both create an incident. Keyed by hashes, so
    // an unrelated group may share a lock by chance (it waits a moment).
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))",
        &[&tenant.as_str(), &n.group_key],
    )
    .await?;
    let group = tx
        .query_opt(
            "SELECT incident_id, prompt, prompt_escaped, session_id, resolved_at, \
             pending_message, pending_escaped, pending_key FROM alert_groups \
             WHERE tenant = $1 AND group_key = $2",
            &[&tenant.as_str(), &n.group_key],
        )
        .await?;
    let (incident, created, mut prompt, started, was_resolved, waiting) = match group {
        Some(row) => {
            let escaped: bool = get(&row, 2)?;
            let prompt = get::<Option<String>>(&row, 1)?
                .map(|p| text::read(p, escaped, "alert trigger prompt"))
                .transpose()?;
            let started = get::<Option<uuid::Uuid>>(&row, 3)?.map(SessionId::from_uuid);
            let was_resolved: Option<OffsetDateTime> = get(&row, 4)?;
            let incident = IncidentId::from_uuid(get(&row, 0)?);
            let waiting = match (
                get::<Option<String>>(&row, 5)?,
                get::<Option<String>>(&row, 7)?,
            ) {
                (Some(m), Some(k)) => Some((text::read(m, get(&row, 6)?, "alert follow-up")?, k)),
                _ => None,
            };
            (incident, false, prompt, started, was_resolved, waiting)
        }
        None => {
            let incident = crate::incidents::insert_incident(
                &tx,
                tenant,
                &n.incident,
                crate::IncidentSource::Alert,
            )
            .await?;
            tx.execute(
                "INSERT INTO alert_groups (tenant, group_key, incident_id, source, receiver, \
                 external_url) VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &tenant.as_str(),
                    &n.group_key,
                    incident.as_uuid(),
                    &n.source,
                    &n.receiver,
                    &n.external_url,
                ],
            )
            .await?;
            (incident, true, None, None, None, None)
        }
    };
    let changes = record_changes(&tx, incident, &n.alerts).await?;
    let changed = changes.len();
    let (fired, resolved): (Vec<_>, Vec<_>) = changes.into_iter().partition(|(_, f)| *f);
    let (mut resolved_at, mut notice) = (None, None);
    let mut follow_up_resolution = false;
    if changed > 0 {
        // Resolved when no alert of the group fires any more; an alert
        // firing again reopens it. Only the transition writes.
        let firing_left: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM alert_states \
                 WHERE incident_id = $1 AND status = 'firing')",
                &[incident.as_uuid()],
            )
            .await
            .and_then(|r| r.try_get(0))?;
        // `Some(new value)` when the group's state moves.
        let moved = match (firing_left, was_resolved) {
            (true, Some(_)) => Some(None),
            (false, None) => Some(Some(micros(OffsetDateTime::now_utc()))),
            _ => None,
        };
        if let Some(at) = moved {
            tx.execute(
                "UPDATE alert_groups SET resolved_at = $3 WHERE tenant = $1 AND group_key = $2",
                &[&tenant.as_str(), &n.group_key, &at],
            )
            .await?;
        }
        if let Some(Some(at)) = moved {
            resolved_at = Some(at);
            if let Some(session) = started {
                follow_up_resolution = n.follow_up_on_resolved;
                let text = if follow_up_resolution {
                    format!(
                        "Every alert of the group has resolved ({} resolved by this \
                         notification); the trigger asks for a follow-up to confirm it.",
                        resolved.len()
                    )
                } else {
                    format!(
                        "Every alert of the group has resolved ({} resolved by this \
                         notification); no new investigation was started.",
                        resolved.len()
                    )
                };
                notice = Some(
                    crate::turns::insert_turn(
                        &tx,
                        origin,
                        session,
                        None,
                        None,
                        &NewTurn::notice(text),
                    )
                    .await?,
                );
            }
        }
    }
    // The first notification that matches a trigger decides the prompt; a
    // later one changes nothing about it.
    if prompt.is_none()
        && (created || changed > 0)
        && let Some(p) = &n.prompt
    {
        let escaped = text::has_nul(p);
        tx.execute(
            "UPDATE alert_groups SET prompt = $3, prompt_escaped = $4 \
             WHERE tenant = $1 AND group_key = $2",
            &[
                &tenant.as_str(),
                &n.group_key,
                &&*text::field(p, escaped),
                &escaped,
            ],
        )
        .await?;
        prompt = Some(p.clone());
    }
    let mut pending = waiting;
    if started.is_some() && (!fired.is_empty() || follow_up_resolution) {
        let f: Vec<String> = fired.iter().map(|(f, _)| f.clone()).collect();
        let r: Vec<String> = resolved.iter().map(|(f, _)| f.clone()).collect();
        let (message, key) = (n.follow_up)(&f, &r, pending.as_ref().map(|(m, _)| m.as_str()));
        let escaped = text::has_nul(&message);
        tx.execute(
            "UPDATE alert_groups SET pending_message = $3, pending_escaped = $4, \
             pending_key = $5 WHERE tenant = $1 AND group_key = $2",
            &[
                &tenant.as_str(),
                &n.group_key,
                &&*text::field(&message, escaped),
                &escaped,
                &key,
            ],
        )
        .await?;
        pending = Some((message, key));
    }
    tx.commit().await?;
    let pending = match (started, pending) {
        (Some(session), Some((message, key))) => Some(PendingFollowUp {
            tenant: tenant.as_str().to_owned(),
            group_key: n.group_key.clone(),
            session,
            message,
            key,
        }),
        _ => None,
    };
    Ok(AlertsRecorded {
        pending,
        incident,
        created,
        changed,
        to_start: prompt.filter(|_| started.is_none()),
        session: started,
        resolved_at,
        notice,
    })
}

/// Writes the alerts whose status or start differs from what the group
/// last saw; returns their fingerprints and whether each fires.
async fn record_changes(
    tx: &deadpool_postgres::Transaction<'_>,
    incident: IncidentId,
    alerts: &[AlertSeen],
) -> Result<Vec<(String, bool)>, StoreError> {
    let mut seen = HashSet::new();
    let alerts: Vec<&AlertSeen> = alerts
        .iter()
        .filter(|a| seen.insert(a.fingerprint.as_str()))
        .collect();
    let fingerprints: Vec<&str> = alerts.iter().map(|a| a.fingerprint.as_str()).collect();
    let rows = tx
        .query(
            "SELECT fingerprint, status, starts_at FROM alert_states \
             WHERE incident_id = $1 AND fingerprint = ANY($2)",
            &[incident.as_uuid(), &fingerprints],
        )
        .await?;
    let mut last: HashMap<String, (bool, OffsetDateTime)> = HashMap::with_capacity(rows.len());
    for row in &rows {
        let status: String = get(row, 1)?;
        last.insert(get(row, 0)?, (status == "firing", get(row, 2)?));
    }
    let changed: Vec<&AlertSeen> = alerts
        .into_iter()
        .filter(|a| last.get(&a.fingerprint) != Some(&(a.firing, micros(a.starts_at))))
        .collect();
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let fingerprints: Vec<&str> = changed.iter().map(|a| a.fingerprint.as_str()).collect();
    let statuses: Vec<&str> = changed.iter().map(|a| status_text(a.firing)).collect();
    let starts: Vec<OffsetDateTime> = changed.iter().map(|a| micros(a.starts_at)).collect();
    let ends: Vec<Option<OffsetDateTime>> = changed.iter().map(|a| a.ends_at.map(micros)).collect();
    let labels: Vec<&str> = changed.iter().map(|a| a.labels_json.as_str()).collect();
    tx.execute(
        "INSERT INTO alert_states (incident_id, fingerprint, status, starts_at) \
         SELECT $1, f, s, t FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS u(f, s, t) \
         ON CONFLICT (incident_id, fingerprint) \
         DO UPDATE SET status = excluded.status, starts_at = excluded.starts_at",
        &[incident.as_uuid(), &fingerprints, &statuses, &starts],
    )
    .await?;
    tx.execute(
        "INSERT INTO alert_events (incident_id, fingerprint, status, starts_at, ends_at, labels) \
         SELECT $1, f, s, t, e, l FROM unnest($2::text[], $3::text[], $4::timestamptz[], \
         $5::timestamptz[], $6::text[]) WITH ORDINALITY AS u(f, s, t, e, l, n) ORDER BY n",
        &[
            incident.as_uuid(),
            &fingerprints,
            &statuses,
            &starts,
            &ends,
            &labels,
        ],
    )
    .await?;
    Ok(changed
        .iter()
        .map(|a| (a.fingerprint.clone(), a.firing))
        .collect())
}
