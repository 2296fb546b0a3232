-- Resume wiring (issue 5): the last recovery plan a resume acted on, and the
-- status of a session whose follow-up waits for a human's confirmation.

ALTER TABLE sessions ADD COLUMN last_recovery_plan jsonb;

ALTER TABLE sessions DROP CONSTRAINT sessions_status_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_status_check
    CHECK (status IN ('pending', 'running', 'idle', 'completed', 'failed', 'cancelled',
                      'awaiting_confirmation'));
