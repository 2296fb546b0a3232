-- Tool calls held for a human's approval before they first run.
--
-- One row per held call, written by the burst that stored the assistant
-- turn asking for it (fenced by that burst's lease), then decided once:
-- by DecideToolCalls, by the expiry, by a follow-up message that
-- supersedes it, or by a cancel (the trigger below). `started_at` is set,
-- fenced, right before an approved call starts: an approved call with no
-- result and no `started_at` provably never ran, so the next claimer runs
-- it; one with `started_at` and no result may have run, and waits for a
-- human like any interrupted mutating call.
ALTER DOMAIN session_status DROP CONSTRAINT session_status_check;
ALTER DOMAIN session_status ADD CONSTRAINT session_status_check
    CHECK (VALUE IN ('pending', 'running', 'idle', 'completed', 'failed', 'cancelled',
                     'awaiting_confirmation', 'awaiting_approval'));

CREATE TABLE approvals (
    session_id    uuid NOT NULL,
    call_id       text NOT NULL,
    tenant        text NOT NULL,
    assistant_seq bigint NOT NULL,
    -- The call's place in its assistant turn: the order people see.
    position      integer NOT NULL,
    tool          text NOT NULL,
    server        text NOT NULL,
    arguments     text NOT NULL,
    side_effect   text NOT NULL CHECK (side_effect IN ('read_only', 'idempotent', 'mutating')),
    rule          text NOT NULL,
    state         text NOT NULL DEFAULT 'pending' CHECK (state IN (
                      'pending', 'approved', 'denied', 'expired', 'superseded', 'cancelled')),
    requested_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    decided_by    text,
    comment       text,
    decided_at    timestamptz,
    started_at    timestamptz,
    PRIMARY KEY (session_id, call_id),
    CHECK ((state = 'pending') = (decided_at IS NULL))
);

-- The expiry sweep finds what is still pending past its time.
CREATE INDEX approvals_pending_expiry ON approvals (expires_at) WHERE state = 'pending';

ALTER TABLE events DROP CONSTRAINT events_type_check;
ALTER TABLE events ADD CONSTRAINT events_type_check CHECK (type IN (
    'session.running', 'session.idle', 'session.completed',
    'session.failed', 'session.cancelled',
    'session.awaiting_confirmation', 'session.awaiting_approval', 'session.recovered',
    'approval.requested', 'approval.decided',
    'report.ready', 'incident.created'));

CREATE FUNCTION approval_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    incident uuid;
BEGIN
    SELECT incident_id INTO incident FROM sessions WHERE id = NEW.session_id;
    PERFORM record_event(
        CASE WHEN TG_OP = 'INSERT' THEN 'approval.requested' ELSE 'approval.decided' END,
        NEW.tenant, NEW.session_id, incident,
        jsonb_build_object(
            'call_id', NEW.call_id,
            'assistant_seq', NEW.assistant_seq,
            'tool', NEW.tool,
            'server', NEW.server,
            'side_effect', NEW.side_effect,
            'rule', NEW.rule,
            'state', NEW.state,
            'expires_at', NEW.expires_at,
            'decided_by', NEW.decided_by,
            'comment', NEW.comment));
    RETURN NULL;
END;
$$;
CREATE TRIGGER approvals_requested_event AFTER INSERT ON approvals
    FOR EACH ROW EXECUTE FUNCTION approval_event();
CREATE TRIGGER approvals_decided_event AFTER UPDATE OF state ON approvals
    FOR EACH ROW WHEN (OLD.state = 'pending' AND NEW.state <> 'pending')
    EXECUTE FUNCTION approval_event();

-- A cancel decides what is still pending, on every path that cancels.
CREATE FUNCTION cancel_pending_approvals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE approvals SET state = 'cancelled', decided_by = 'system', decided_at = now()
     WHERE session_id = NEW.id AND state = 'pending';
    RETURN NULL;
END;
$$;
CREATE TRIGGER sessions_cancel_approvals AFTER UPDATE OF status ON sessions
    FOR EACH ROW
    WHEN (OLD.status::text = 'awaiting_approval' AND NEW.status::text = 'cancelled')
    EXECUTE FUNCTION cancel_pending_approvals();
