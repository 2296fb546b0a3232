-- A starting replica looks for sessions whose burst waits to start.
CREATE INDEX sessions_pending ON sessions (updated_at) WHERE status = 'pending';
