-- The event log: one row for each lifecycle change of a session, written
-- in the same transaction as the change, so a change without its event (or
-- an event without its change) cannot be committed. Turns are not events:
-- WatchSession carries them.
--
-- Order. `id` is taken under a transaction-level advisory lock held until
-- commit (`record_event`), so events commit in id order: a reader that sees
-- id N has seen every committed id below it, and a delivery cursor that is a
-- single id never skips an event that committed late. The lock serializes
-- only lifecycle writes (a handful per burst), never turn appends: every
-- statement that records an event ends its transaction or is the last
-- write of it, so a holder never waits on a row another writer holds.
CREATE TABLE events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type        text NOT NULL CHECK (type IN (
                    'session.running', 'session.idle', 'session.completed',
                    'session.failed', 'session.cancelled',
                    'session.awaiting_confirmation', 'session.recovered',
                    'report.ready', 'incident.created')),
    tenant      text NOT NULL,
    session_id  uuid,
    incident_id uuid NOT NULL,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- ListEvents pages a tenant's events, or one session's, by id.
CREATE INDEX events_by_tenant ON events (tenant, id);
CREATE INDEX events_by_session ON events (session_id, id) WHERE session_id IS NOT NULL;

-- Arbitrary but fixed: the two-key form keeps it apart from the migration
-- lock (crates/inquest-store/src/migrate.rs).
CREATE FUNCTION record_event(kind text, tenant text, session uuid, incident uuid, payload jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1768845669, 22);
    INSERT INTO events (type, tenant, session_id, incident_id, payload)
    VALUES (kind, tenant, session, incident, payload)
    RETURNING id INTO new_id;
    RETURN new_id;
END;
$$;

-- A status change is its event. `UPDATE OF status` means the trigger is not
-- even considered for an update that does not name the column: the turn
-- append (append_sql! in crates/inquest-store/src/turns.rs) bumps counters
-- only, so it queues nothing and stays a HOT update (no indexed column
-- changes). `pending` is the queue, not news: no event.
CREATE FUNCTION session_status_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM record_event('session.' || NEW.status::text, NEW.tenant, NEW.id, NEW.incident_id,
        jsonb_build_object(
            'status', NEW.status::text,
            'previous_status', OLD.status::text,
            'exit_reason', CASE WHEN NEW.status::text = 'running' THEN NULL ELSE NEW.exit_reason END,
            'lease_epoch', NEW.lease_epoch));
    RETURN NULL;
END;
$$;
CREATE TRIGGER sessions_status_event AFTER UPDATE OF status ON sessions
    FOR EACH ROW
    WHEN (OLD.status::text IS DISTINCT FROM NEW.status::text AND NEW.status::text <> 'pending')
    EXECUTE FUNCTION session_status_event();

-- A saved report (a recovered burst may save its report again: a new
-- event). Tokens and cost are the session's totals at that moment, as
-- GetSession shows them. A summary holding U+0000 is stored escaped
-- (crates/inquest-store/src/text.rs); the event leaves it out rather than
-- show the encoding, and GetReport has it.
CREATE FUNCTION report_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
BEGIN
    SELECT tenant, incident_id, input_tokens, output_tokens, cost_nano_usd, cost_unknown_turns
      INTO s FROM sessions WHERE id = NEW.session_id;
    PERFORM record_event('report.ready', s.tenant, NEW.session_id, s.incident_id,
        jsonb_build_object(
            'burst', NEW.burst,
            'exit_reason', NEW.exit_reason,
            'summary', CASE WHEN NEW.escaped THEN NULL ELSE NEW.summary END,
            'input_tokens', s.input_tokens,
            'output_tokens', s.output_tokens,
            'cost_nano_usd', CASE WHEN s.cost_unknown_turns = 0 THEN s.cost_nano_usd END,
            'cost_unknown_turns', s.cost_unknown_turns,
            'active_ms', NEW.active_ms));
    RETURN NULL;
END;
$$;
CREATE TRIGGER reports_event AFTER INSERT OR UPDATE ON reports
    FOR EACH ROW EXECUTE FUNCTION report_event();

CREATE FUNCTION incident_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM record_event('incident.created', NEW.tenant, NULL, NEW.id,
        jsonb_build_object('title', CASE WHEN NEW.escaped THEN NULL ELSE NEW.title END));
    RETURN NULL;
END;
$$;
CREATE TRIGGER incidents_event AFTER INSERT ON incidents
    FOR EACH ROW EXECUTE FUNCTION incident_event();

-- One row per configured webhook (`[[events.webhooks]]`, by name): how far
-- its stream is delivered and which replica delivers it. `delivered_id`
-- moves only after the receiver answered 2xx (at least once); the lease
-- lets one replica at a time deliver, so the stream stays in order.
CREATE TABLE webhook_cursors (
    name             text PRIMARY KEY,
    delivered_id     bigint NOT NULL,
    holder           text,
    lease_expires_at timestamptz,
    failed_attempts  integer NOT NULL DEFAULT 0,
    last_error       text,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
