-- ListSessions by status, across incidents or within one: each status the
-- request names is read newest first from one of these indexes, LIMIT
-- page_size + 1, and the per-status runs are merged (sessions.rs
-- `list_sessions`). Sessions of one incident, every status, use
-- sessions_by_incident (V1); ListIncidents uses the primary key.
CREATE INDEX sessions_by_status ON sessions (status, id DESC);
CREATE INDEX sessions_by_incident_status ON sessions (incident_id, status, id DESC);
