-- Forked sessions (ForkSession): a fork is a new session of the same
-- incident whose turns 1..forked_at_seq are a copy of its parent's. Both
-- columns are set together, by the statement that makes the fork
-- (crates/inquest-store/src/forks.rs), and never change.
--
-- No CHECK tying them together: a table CHECK on sessions is planned again
-- by every statement that updates the row, the turn append included (V18).
-- No foreign key to the parent either: sessions are never deleted (V18),
-- and a key would cost nothing but a lookup.
ALTER TABLE sessions
    ADD COLUMN forked_from   uuid,
    ADD COLUMN forked_at_seq bigint;
