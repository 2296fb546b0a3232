-- Erasure: DeleteSession, DeleteIncident and retention remove a session
-- and everything it owns (crates/inquest-store/src/erase.rs). Until now
-- nothing deleted sessions, and two rules said so; both now have one
-- door, opened only inside the transaction that erases.
--
-- * sessions: the statement trigger of V18 still refuses DELETE and
--   TRUNCATE, unless the transaction set `inquest.erasing` (set_config
--   with is_local, so it ends with the transaction). Only the erasing
--   transaction sets it, after it removed every row that names the
--   sessions; the turns have no foreign key (V18), so that order is the
--   erasing code's duty.
-- * audit_events stays append-only for every UPDATE, DELETE and
--   TRUNCATE, except rows older than the cutoff that
--   `expire_audit_events` (below, SECURITY DEFINER) deletes: the
--   function sets `inquest.audit_expiry` to its cutoff for its own
--   statement, and the trigger lets through a DELETE only of a row at or
--   before it. A plain DELETE is refused as before.
CREATE OR REPLACE FUNCTION sessions_are_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('inquest.erasing', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'sessions are never deleted (% refused)', TG_OP;
END;
$$;

CREATE OR REPLACE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cutoff text := current_setting('inquest.audit_expiry', true);
BEGIN
    IF TG_OP = 'DELETE' AND TG_LEVEL = 'ROW' AND cutoff IS NOT NULL AND cutoff <> ''
       AND OLD.at < cutoff::timestamptz THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_events is append-only (% refused)', TG_OP;
END;
$$;

-- Deletes at most `batch` audit events older than `older_than`, oldest
-- first, of `only_tenant` when given, else of every tenant but
-- `except_tenants` (those with their own cutoff); returns how many. SKIP
-- LOCKED: replicas running it at once take different rows, so each row
-- is deleted once.
CREATE FUNCTION expire_audit_events(older_than timestamptz, batch integer,
                                    only_tenant text DEFAULT NULL,
                                    except_tenants text[] DEFAULT '{}')
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    gone bigint;
BEGIN
    PERFORM set_config('inquest.audit_expiry', older_than::text, true);
    WITH doomed AS (
        SELECT id FROM audit_events
         WHERE at < older_than
           AND (only_tenant IS NULL OR tenant = only_tenant)
           AND NOT tenant = ANY(except_tenants)
         ORDER BY at LIMIT batch FOR UPDATE SKIP LOCKED)
    DELETE FROM audit_events a USING doomed WHERE a.id = doomed.id;
    GET DIAGNOSTICS gone = ROW_COUNT;
    PERFORM set_config('inquest.audit_expiry', '', true);
    RETURN gone;
END;
$$;

-- Retention finds settled sessions by when they last changed.
CREATE INDEX sessions_settled_by_update ON sessions (updated_at)
    WHERE status::text NOT IN ('pending', 'running');
CREATE INDEX audit_events_by_time ON audit_events (at);

-- Erasing a session deletes its events (and the webhook attempts that
-- carried them); the incident's ones too when the incident goes.
CREATE INDEX events_by_incident ON events (incident_id);
CREATE INDEX webhook_attempts_by_event ON webhook_attempts (event_id);
CREATE INDEX sessions_by_forked_from ON sessions (forked_from) WHERE forked_from IS NOT NULL;
-- Every other table an erasure reads by session id: without these each
-- batch would scan them whole.
CREATE INDEX idempotency_keys_by_session ON idempotency_keys (session_id);
CREATE INDEX token_usage_by_session ON token_usage (session_id);
CREATE INDEX alert_groups_by_session ON alert_groups (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX schedule_ticks_by_session ON schedule_ticks (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX schedule_ticks_by_incident ON schedule_ticks (incident_id) WHERE incident_id IS NOT NULL;
