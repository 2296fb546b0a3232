-- Slack incoming webhooks join the Standard Webhooks format: the same
-- stream, cursor and lease, a Block Kit body instead of the signed one.
ALTER TABLE webhooks DROP CONSTRAINT webhooks_format_check;
ALTER TABLE webhooks ADD CONSTRAINT webhooks_format_check CHECK (format IN ('standard', 'slack'));

-- Each new event wakes the replicas' deliverers at its commit
-- (`pg_notify` is sent only if the transaction commits), so an idle
-- stream does not wait for its next poll. The channel is not the turn
-- feed's: the payload is only the id, and a replica that does not deliver
-- does not listen. Identical payloads in one transaction are sent once.
CREATE OR REPLACE FUNCTION record_event(kind text, tenant text, session uuid, incident uuid, payload jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1768845669, 22);
    INSERT INTO events (type, tenant, session_id, incident_id, payload)
    VALUES (kind, tenant, session, incident, payload)
    RETURNING id INTO new_id;
    PERFORM pg_notify('inquest_log', new_id::text);
    RETURN new_id;
END;
$$;
