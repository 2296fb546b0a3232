-- The audit trail (issue 12): one row per mutating call (CreateIncident,
-- StartSession, SendMessage, CancelSession, ContinueSession, CreateToken,
-- RevokeToken): who (token id or JWT subject, its name, tenant, role), what
-- (the method), on which ids, when, and with which result (the gRPC code
-- name and the status message). Written after the call, whatever its
-- outcome; calls refused before the service (no or bad token, role too
-- low) are not calls of the service and are logged, not recorded here.
-- Append-only: a trigger refuses UPDATE, DELETE and TRUNCATE.
CREATE TABLE audit_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    tenant      text NOT NULL,
    subject     text NOT NULL,
    actor_name  text NOT NULL,
    role        text NOT NULL,
    method      text NOT NULL,
    incident_id uuid,
    session_id  uuid,
    token_id    uuid,
    code        text NOT NULL,
    message     text NOT NULL
);
CREATE INDEX audit_events_by_tenant ON audit_events (tenant, id DESC);
CREATE INDEX audit_events_by_session ON audit_events (tenant, session_id, id DESC)
    WHERE session_id IS NOT NULL;

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only (% refused)', TG_OP;
END;
$$;
CREATE TRIGGER audit_events_no_update BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
