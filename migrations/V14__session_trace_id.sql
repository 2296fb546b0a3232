-- The trace id (W3C, 32 lowercase hex digits) of the session's latest
-- burst: written when the burst is claimed (`Store::claim_pending_traced`
-- in the claim statement, `Store::record_trace_id` fenced by the lease
-- epoch right after a reaper or recovery claim), returned by GetSession as
-- `Session.trace_id`. NULL until a burst ran with tracing on.
ALTER TABLE sessions ADD COLUMN trace_id text;
