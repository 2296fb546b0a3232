-- Every turn append runs one statement that updates its session row and
-- inserts the turn (crates/inquest-store/src/turns.rs, APPEND_SQL). Two
-- costs of that statement were PostgreSQL's, not the design's (issue 14
-- item 3; docs/benchmarks.md "Turn appends", the callgrind section):
--
-- * A table CHECK constraint is stored as an expression tree in text form
--   (pg_constraint.conbin), and every statement that inserts or updates a
--   row of the table reads that text back into nodes and plans it again
--   before checking the row, whichever columns changed. The sessions
--   row's two checks were about a sixth of the append's instructions
--   (the status list alone is a 1,620-character tree), on a row whose
--   status the append never sets and whose head_seq it only increments.
--   A domain's constraint is planned once per backend (the type cache)
--   and checked only when a value is assigned to the column, so the same
--   rules as domains cost an append nothing for status and one cached
--   comparison for head_seq. Values and error class (check_violation) are
--   unchanged. A parameter assigned straight to one of these columns is
--   now inferred as the domain type, which the driver does not bind a
--   string or an integer to: such statements cast it (`$n::text`,
--   `$n::bigint`).
--
-- * The turns -> sessions foreign key ran its trigger (a query locking the
--   session row again) for every turn, a twelfth of the append. Every insert
--   into turns names a session row the same statement has just updated
--   (the append: `FROM bumped`) or inserted (a session's first turn), so
--   the key can only fail if a session is deleted, and nothing deletes
--   sessions. That is now a rule the database enforces, as the audit
--   trail's append-only rule is (V17), instead of a check on every turn.
CREATE DOMAIN session_status AS text
    CHECK (VALUE IN ('pending', 'running', 'idle', 'completed', 'failed', 'cancelled',
                     'awaiting_confirmation'));
ALTER TABLE sessions DROP CONSTRAINT sessions_status_check;
ALTER TABLE sessions ALTER COLUMN status TYPE session_status;

CREATE DOMAIN session_head_seq AS bigint CHECK (VALUE >= 0);
ALTER TABLE sessions DROP CONSTRAINT sessions_head_seq_check;
ALTER TABLE sessions ALTER COLUMN head_seq TYPE session_head_seq;

ALTER TABLE turns DROP CONSTRAINT turns_session_id_fkey;

CREATE FUNCTION sessions_are_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'sessions are never deleted (% refused)', TG_OP;
END;
$$;
CREATE TRIGGER sessions_no_delete BEFORE DELETE OR TRUNCATE ON sessions
    FOR EACH STATEMENT EXECUTE FUNCTION sessions_are_kept();
