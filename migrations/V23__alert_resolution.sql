-- When every alert of a group last seen had resolved (NULL: some alert is
-- firing, or the group never resolved). Set by the notification that
-- resolved the last firing alert, cleared by one that fires an alert
-- again, so a group that flaps shows its latest state.
ALTER TABLE alert_groups ADD COLUMN resolved_at timestamptz;

-- A follow-up the group's session could not take when its change arrived
-- (a burst was running), or not yet sent: the rendered message and its
-- idempotency key, written in the transaction that recorded the change,
-- so it survives a crash; cleared (by key) once the session has it. A
-- later change while one waits replaces it with both, merged.
ALTER TABLE alert_groups
    ADD COLUMN pending_message text,
    ADD COLUMN pending_escaped boolean NOT NULL DEFAULT false,
    ADD COLUMN pending_key     text;

-- The sweep that delivers waiting follow-ups reads only these rows.
CREATE INDEX alert_groups_pending ON alert_groups (session_id)
    WHERE pending_key IS NOT NULL;
