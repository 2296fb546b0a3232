use inquest_core::{
    ExitReason, IdempotencyKey, IncidentId, NewTurn, RequestFingerprint, Seq, SessionId,
    SessionStatus, Tenant, TenantQuota, Turn, UserMessage,
};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::{
    Store, StoreError, idempotency,
    rows::{TURN_COLUMNS, count, get, turn_from_row},
    text,
};

/// A session row: status, counters and timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: SessionId,
    pub incident_id: IncidentId,
    pub status: SessionStatus,
    pub exit_reason: Option<ExitReason>,
    /// The newest committed turn, `None` for a session with no turns.
    pub head_seq: Option<Seq>,
    pub turn_count: u64,
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    // Prompt caching and cost, over the session's turns (migration V13).
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    /// Known costs summed, and how many assistant turns had none.
    pub cost: inquest_core::CostTotal,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    /// The serde form of the last recovery plan a resume acted on
    /// (`inquest_core::RecoveryPlan`); `None` until a follow-up resumed.
    pub last_recovery_plan: Option<serde_json::Value>,
    /// The replica running the burst, while one does.
    pub lease_owner: Option<String>,
    /// Until when that replica's lease holds (it renews it); a `running`
    /// session past this is an orphan any replica may claim.
    pub lease_expires_at: Option<OffsetDateTime>,
    /// Bumped by every claim; fences the burst's writes.
    pub lease_epoch: i64,
    /// The trace id of the session's latest burst (32 hex digits), written
    /// when it was claimed (migration V14); `None` before any traced burst.
    pub trace_id: Option<String>,
    /// Whose session it is: the tenant its policy and limits come from.
    pub tenant: inquest_core::Tenant,
    /// A fork's parent session and the seq it was forked at: its turns
    /// `1..=at` are copies of the parent's (migration V32). `None` for a
    /// session that is no fork.
    pub forked_from: Option<(SessionId, Seq)>,
    /// The `[[skills]]` its bursts load, by name (migration V39); `None`:
    /// every configured one.
    pub skills: Option<Vec<String>>,
}

impl SessionRow {
    /// `running`, but its lease expired (or it never had one) as of `now`:
    /// its worker is gone and any replica may claim it.
    pub fn is_orphaned(&self, now: OffsetDateTime) -> bool {
        self.status == SessionStatus::Running && self.lease_expires_at.is_none_or(|t| t <= now)
    }
}

/// The columns [`session_from_row`] reads, in its order. `updated_at` is the
/// later of the row's (status, lease and plan changes set it) and its head
/// turn's `created_at`: the append statement leaves the column alone so its
/// update of the row stays HOT (see `turns.rs` `APPEND_SQL`). The head turn
/// is one primary-key lookup; it is NULL (ignored by `GREATEST`) for a
/// session with no turn yet. Usable in `SELECT ... FROM sessions` and in
/// `RETURNING` of a statement on `sessions` that gives it no alias.
pub(crate) const SESSION_COLUMNS: &str = "id, incident_id, status, exit_reason, head_seq, turn_count, \
     tool_calls, input_tokens, output_tokens, created_at, \
     GREATEST(sessions.updated_at, (SELECT t.created_at FROM turns t \
         WHERE t.session_id = sessions.id AND t.seq = sessions.head_seq)) AS updated_at, \
     last_recovery_plan, \
     lease_owner, lease_expires_at, lease_epoch, recovery_plan_escaped, trace_id, \
     cache_read_input_tokens, cache_creation_input_tokens, cost_nano_usd, cost_unknown_turns, \
     tenant, forked_from, forked_at_seq, skills";

pub(crate) fn session_from_row(row: &Row) -> Result<SessionRow, StoreError> {
    let head: i64 = get(row, 4)?;
    let plan: Option<serde_json::Value> = get(row, 11)?;
    let plan_escaped: bool = get(row, 15)?;
    Ok(SessionRow {
        id: SessionId::from_uuid(get(row, 0)?),
        incident_id: IncidentId::from_uuid(get(row, 1)?),
        status: crate::rows::status(row, 2)?,
        exit_reason: crate::rows::exit_reason(row, 3)?,
        head_seq: Seq::from_stored(head),
        turn_count: count(get(row, 5)?),
        tool_calls: count(get(row, 6)?),
        input_tokens: count(get(row, 7)?),
        output_tokens: count(get(row, 8)?),
        cache_read_input_tokens: count(get(row, 17)?),
        cache_creation_input_tokens: count(get(row, 18)?),
        cost: inquest_core::CostTotal {
            known: inquest_core::Cost::from_nanos(count(get(row, 19)?)),
            unknown_calls: count(get(row, 20)?),
        },
        created_at: get(row, 9)?,
        updated_at: get(row, 10)?,
        last_recovery_plan: plan
            .map(|p| text::read_json(p, plan_escaped, "last recovery plan"))
            .transpose()?,
        lease_owner: get(row, 12)?,
        lease_expires_at: get(row, 13)?,
        lease_epoch: get(row, 14)?,
        trace_id: get(row, 16)?,
        tenant: {
            let tenant: String = get(row, 21)?;
            inquest_core::Tenant::parse(&tenant)
                .map_err(|e| StoreError::Corrupt(format!("session tenant {tenant:?}: {e}")))?
        },
        forked_from: match (
            get::<Option<uuid::Uuid>>(row, 22)?,
            get::<Option<i64>>(row, 23)?,
        ) {
            (Some(parent), Some(at)) => Some((SessionId::from_uuid(parent), crate::rows::seq(at)?)),
            _ => None,
        },
        skills: get(row, 24)?,
    })
}

/// What `start_session` returns.
#[derive(Debug, Clone)]
pub struct StartedSession {
    pub session: SessionRow,
    /// The opening user turn.
    pub first_turn: Turn,
    /// False when an earlier call with the same idempotency key created it.
    pub created: bool,
}

/// One page of sessions, newest first.
#[derive(Debug, Clone)]
pub struct SessionPage {
    pub sessions: Vec<SessionRow>,
    /// Pass as `before` to get the next page; `None` on the last page.
    pub next: Option<SessionId>,
}

pub(crate) fn not_found_session(id: SessionId) -> StoreError {
    StoreError::NotFound {
        what: "session",
        id: id.to_string(),
    }
}

impl Store {
    /// Creates a session of `tenant`'s incident with its opening user turn
    /// (seq 1), in one transaction. Another tenant's incident is NotFound,
    /// as an unknown one; a session over `quota` is
    /// [`StoreError::QuotaExceeded`] (a replay by idempotency key is not:
    /// it opens no burst). With an idempotency key, a retry of the same request
    /// (incident and message) returns the session the first call created
    /// and stores nothing new; the key with another request is
    /// [`StoreError::IdempotencyConflict`], and nothing is stored.
    ///
    /// Runs detached with the turn-write timeout, like every turn write.
    pub async fn start_session(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        incident: IncidentId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
    ) -> Result<StartedSession, StoreError> {
        self.start_session_with_skills(tenant, quota, incident, message, key, None)
            .await
    }

    /// [`Store::start_session`] for a session whose bursts load only
    /// `skills` (by name; `None`: every configured one), stored with it.
    /// A replay by idempotency key returns the session as first made.
    pub async fn start_session_with_skills(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        incident: IncidentId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
        skills: Option<Vec<String>>,
    ) -> Result<StartedSession, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let tenant = tenant.clone();
        self.detached(async move {
            store
                .run_with_timeout("start_session", limit, async |c| {
                    let opening = Opening {
                        tenant: &tenant,
                        quota: &quota,
                        incident,
                        message: &message,
                        key: key.as_ref(),
                        skills: skills.as_deref(),
                    };
                    start_session_tx(c, opening).await
                })
                .await
        })
        .await
    }

    /// Stores `plan` as the session's last recovery plan, fenced by the
    /// burst's lease: a worker that lost its lease cannot overwrite the
    /// plan its successor stored. `recovered`: the burst is an orphan this
    /// replica claimed, and the same statement records the
    /// `session.recovered` event with the plan's kind (the claim itself
    /// cannot: the plan is made after it).
    pub async fn save_recovery_plan(
        &self,
        lease: &crate::Lease,
        plan: serde_json::Value,
        recovered: bool,
    ) -> Result<(), StoreError> {
        let kind = plan
            .get("kind")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let id = lease.session();
        let epoch = lease.epoch();
        // Call ids, tool names and the notice may hold U+0000 (crate::text).
        let escaped = text::json_has_nul(&plan);
        let plan = if escaped {
            text::escape_json(&plan)
        } else {
            plan
        };
        self.detached(async move {
            store
                .run_with_timeout("save_recovery_plan", limit, async |c| {
                    let changed = c
                        .query(
                            "WITH saved AS ( \
                               UPDATE sessions SET last_recovery_plan = $2, \
                               recovery_plan_escaped = $4, updated_at = now() \
                               WHERE id = $1 AND lease_epoch = $3 \
                               RETURNING id, tenant, incident_id, lease_epoch) \
                             SELECT CASE WHEN $5 THEN record_event('session.recovered', \
                                 tenant, id, incident_id, jsonb_build_object( \
                                     'plan_kind', $6::text, 'lease_epoch', lease_epoch)) END \
                             FROM saved",
                            &[id.as_uuid(), &plan, &epoch, &escaped, &recovered, &kind],
                        )
                        .await?
                        .len();
                    if changed == 0 {
                        return Err(crate::turns::no_row(&*c, id, Some(epoch), None).await);
                    }
                    Ok(())
                })
                .await
        })
        .await
    }

    pub async fn get_session(&self, id: SessionId) -> Result<SessionRow, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
        let row = self
            .run("get_session", async |c| {
                Ok(c.query_opt(&sql, &[id.as_uuid()]).await?)
            })
            .await?
            .ok_or_else(|| not_found_session(id))?;
        session_from_row(&row)
    }

    /// The session `id` if it belongs to `tenant`: another tenant's is
    /// NotFound, exactly as an unknown id. Every call a client makes about
    /// a session reads it through this first; a session's tenant never
    /// changes, so what this admits stays admitted.
    pub async fn get_tenant_session(
        &self,
        tenant: &Tenant,
        id: SessionId,
    ) -> Result<SessionRow, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1 AND tenant = $2");
        let row = self
            .run("get_session", async |c| {
                Ok(c.query_opt(&sql, &[id.as_uuid(), &tenant.as_str()]).await?)
            })
            .await?
            .ok_or_else(|| not_found_session(id))?;
        session_from_row(&row)
    }

    /// `tenant`'s sessions newest first (ids are UUIDv7), of `incident` or
    /// of every incident, only those whose status is in `statuses` (empty: any),
    /// `limit` at a time, starting after the session `before` (exclusive)
    /// when given. An unknown incident is [`StoreError::NotFound`].
    ///
    /// Every page is index-backed and reads at most `limit + 1` rows per
    /// status named: without a status filter from the primary key or
    /// `sessions_by_incident`; with one, each status is read newest first
    /// from `sessions_by_status` / `sessions_by_incident_status` (V10) and
    /// the runs are merged, so a rare status among many sessions costs no
    /// scan. Statuses are bound as parameters, never SQL literals.
    pub async fn list_sessions(
        &self,
        tenant: &Tenant,
        incident: Option<IncidentId>,
        statuses: &[SessionStatus],
        before: Option<SessionId>,
        limit: u32,
        queued_only: bool,
    ) -> Result<SessionPage, StoreError> {
        // Sessions with a queued message: a semi-join, so the planner can
        // start from the queue (a few rows while bursts run) rather than
        // walk every session of the tenant.
        let queued = if queued_only {
            "id IN (SELECT session_id FROM queued_messages) AND "
        } else {
            ""
        };
        let mut wanted: Vec<&'static str> = statuses.iter().map(|s| s.as_str()).collect();
        wanted.sort_unstable();
        wanted.dedup();
        // $1 the keyset bound, $2 the row count, $3 the tenant; then the
        // incident ($4) when given, then the status set, each only when
        // used.
        let by_incident = if incident.is_some() {
            "incident_id = $4 AND "
        } else {
            ""
        };
        let statuses_param = if incident.is_some() { "$5" } else { "$4" };
        let sql = if wanted.is_empty() {
            format!(
                "SELECT {SESSION_COLUMNS} FROM sessions \
                 WHERE tenant = $3 AND {by_incident}{queued}id < $1 ORDER BY id DESC LIMIT $2"
            )
        } else {
            format!(
                "SELECT page.* FROM unnest({statuses_param}::text[]) AS wanted(status) \
                 CROSS JOIN LATERAL (SELECT {SESSION_COLUMNS} FROM sessions \
                   WHERE tenant = $3 AND {by_incident}{queued}sessions.status = wanted.status \
                   AND id < $1 ORDER BY id DESC LIMIT $2) AS page \
                 ORDER BY page.id DESC LIMIT $2"
            )
        };
        let fetch = i64::from(limit) + 1;
        let before = before.map_or(uuid::Uuid::max(), |b| *b.as_uuid());
        let incident_uuid = incident.map(|i| *i.as_uuid());
        let tenant = tenant.as_str();
        let (exists, rows) = self
            .run("list_sessions", async |c| {
                let exists = match &incident_uuid {
                    Some(id) => c
                        .query_opt(
                            "SELECT 1 FROM incidents WHERE id = $1 AND tenant = $2",
                            &[id, &tenant],
                        )
                        .await?
                        .is_some(),
                    None => true,
                };
                let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    vec![&before, &fetch, &tenant];
                if let Some(id) = &incident_uuid {
                    params.push(id);
                }
                if !wanted.is_empty() {
                    params.push(&wanted);
                }
                let rows = c.query(&sql, &params).await?;
                Ok((exists, rows))
            })
            .await?;
        if !exists {
            return Err(StoreError::NotFound {
                what: "incident",
                id: incident.map(|i| i.to_string()).unwrap_or_default(),
            });
        }
        let mut sessions = rows
            .iter()
            .map(session_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if sessions.len() > limit as usize {
            sessions.truncate(limit as usize);
            sessions.last().map(|s| s.id)
        } else {
            None
        };
        Ok(SessionPage { sessions, next })
    }
}

/// What a new session is opened with.
struct Opening<'a> {
    tenant: &'a Tenant,
    quota: &'a TenantQuota,
    incident: IncidentId,
    message: &'a UserMessage,
    key: Option<&'a IdempotencyKey>,
    skills: Option<&'a [String]>,
}

async fn start_session_tx(
    client: &mut deadpool_postgres::Client,
    opening: Opening<'_>,
) -> Result<StartedSession, StoreError> {
    let Opening {
        tenant,
        quota,
        incident,
        message,
        key,
        skills,
    } = opening;
    let scope = format!("start_session:{incident}");
    let request = RequestFingerprint::start_session(incident, message);
    let tx = client.transaction().await?;
    // The tenant first: an idempotency key must not replay another
    // tenant's session.
    check_tenant_incident(&tx, tenant, incident).await?;
    if let Some(key) = key
        && let Some(found) = existing_for_key(&tx, &scope, key, &request).await?
    {
        tx.commit().await?;
        return Ok(found);
    }
    crate::tenants::admit(&tx, tenant, quota, None).await?;
    let id = SessionId::new();
    let session = insert_session(&tx, id, incident, tenant, skills).await?;
    let first_turn = insert_opening_turn(&tx, id, message).await?;
    if let Some(key) = key
        && !crate::idempotency::claim(&tx, &scope, key, id, Seq::FIRST, &request).await?
    {
        // A concurrent call with the same key committed first (the
        // insert waited for it): undo ours, then return theirs if it was
        // this request, or refuse if it was another.
        tx.rollback().await?;
        return replay_claimed(client, &scope, key, &request).await;
    }
    tx.commit().await?;
    Ok(StartedSession {
        session,
        first_turn,
        created: true,
    })
}

/// NotFound unless `incident` is `tenant`'s.
async fn check_tenant_incident(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &Tenant,
    incident: IncidentId,
) -> Result<(), StoreError> {
    if tx
        .query_opt(
            "SELECT 1 FROM incidents WHERE id = $1 AND tenant = $2",
            &[incident.as_uuid(), &tenant.as_str()],
        )
        .await?
        .is_none()
    {
        return Err(StoreError::NotFound {
            what: "incident",
            id: incident.to_string(),
        });
    }
    Ok(())
}

/// The new session's row, in its initial status with one turn counted.
pub(crate) async fn insert_session(
    tx: &deadpool_postgres::Transaction<'_>,
    id: SessionId,
    incident: IncidentId,
    tenant: &Tenant,
    skills: Option<&[String]>,
) -> Result<SessionRow, StoreError> {
    let session_sql = format!(
        "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant, skills) \
         VALUES ($1, $2, $4::text, 1, 1, $3, $5) RETURNING {SESSION_COLUMNS}"
    );
    session_from_row(
        &tx.query_one(
            &session_sql,
            &[
                id.as_uuid(),
                incident.as_uuid(),
                &tenant.as_str(),
                &SessionStatus::INITIAL.as_str(),
                &skills,
            ],
        )
        .await?,
    )
}

/// The session's opening user turn, seq 1.
pub(crate) async fn insert_opening_turn(
    tx: &deadpool_postgres::Transaction<'_>,
    id: SessionId,
    message: &UserMessage,
) -> Result<Turn, StoreError> {
    let turn = NewTurn::User(message.clone());
    let turn_sql = format!(
        "INSERT INTO turns (session_id, seq, role, content, escaped) \
         VALUES ($1, 1, 'user', $2, $3) RETURNING {TURN_COLUMNS}"
    );
    // A user message may hold U+0000: stored escaped (crate::text).
    let escaped = text::has_nul(turn.content());
    let content = text::field(turn.content(), escaped);
    turn_from_row(
        &tx.query_one(&turn_sql, &[id.as_uuid(), &&*content, &escaped])
            .await?,
    )
}

/// The session another call claimed `key` for, read in a new transaction
/// (ours was rolled back); an error when it was for another request.
async fn replay_claimed(
    client: &mut deadpool_postgres::Client,
    scope: &str,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<StartedSession, StoreError> {
    let tx = client.transaction().await?;
    let found = existing_for_key(&tx, scope, key, request)
        .await?
        .ok_or_else(|| StoreError::Internal("idempotency key vanished".into()))?;
    tx.commit().await?;
    Ok(found)
}

/// The session a key names, if the key is in use; an error when it was
/// used for another request (`crate::idempotency`).
async fn existing_for_key(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<Option<StartedSession>, StoreError> {
    let Some(claim) = tx
        .query_opt(
            "SELECT session_id, request_hash FROM idempotency_keys WHERE scope = $1 AND key = $2",
            &[&scope, &key.as_str()],
        )
        .await?
    else {
        return Ok(None);
    };
    let stored: Option<&[u8]> = get(&claim, 1)?;
    idempotency::bound_to(stored, request, key)?;
    let id: uuid::Uuid = get(&claim, 0)?;
    let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
    let session = session_from_row(&tx.query_one(&sql, &[&id]).await?)?;
    let turn_sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND seq = 1");
    let first_turn = turn_from_row(&tx.query_one(&turn_sql, &[session.id.as_uuid()]).await?)?;
    Ok(Some(StartedSession {
        session,
        first_turn,
        created: false,
    }))
}

impl Store {
    /// Sessions whose burst waits to start (`pending`), oldest first: what
    /// a starting replica picks up (a message stored just before a
    /// restart). Claiming is atomic, so replicas that race here start each
    /// burst once.
    pub async fn pending_sessions(&self, limit: u32) -> Result<Vec<SessionId>, StoreError> {
        let rows = self
            .run("pending_sessions", async |c| {
                Ok(c.query(
                    "SELECT id FROM sessions WHERE status = $1 ORDER BY updated_at, id LIMIT $2",
                    &[&SessionStatus::Pending.as_str(), &i64::from(limit)],
                )
                .await?)
            })
            .await?;
        rows.iter()
            .map(|r| get(r, 0).map(SessionId::from_uuid))
            .collect()
    }
}
