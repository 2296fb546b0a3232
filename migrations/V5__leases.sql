-- Replicated workers (issue 6). The lease columns exist since V1; a
-- session's lease is (lease_owner, lease_expires_at, lease_epoch): the
-- replica running its burst, until when, and the fencing epoch every turn
-- insert of that burst checks in the same statement.
--
-- Reapers on every replica look for running sessions whose lease expired,
-- and for pending sessions nobody claimed; both scans walk small partial
-- indexes.
CREATE INDEX sessions_running_lease ON sessions (lease_expires_at) WHERE status = 'running';
