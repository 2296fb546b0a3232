-- Compaction turns (issue 13): role 'compaction', content = the summary,
-- and the record {"first_retained_seq", "tokens_before", "tokens_after"}
-- in the existing tool_calls jsonb column (a compaction has no calls), so
-- the append statement, the NOTIFY payload and every row reader carry it
-- unchanged (inquest-core `Turn::compaction`).
ALTER TABLE turns DROP CONSTRAINT turns_role_check;
ALTER TABLE turns ADD CONSTRAINT turns_role_check
    CHECK (role IN ('user', 'assistant', 'tool', 'notice', 'compaction'));
ALTER TABLE turns ADD CONSTRAINT turns_compaction_record
    CHECK (role <> 'compaction' OR jsonb_typeof(tool_calls) = 'object');
-- A follow-up reads from the latest compaction (inquest-store `turns.rs`
-- `turns_from_latest_compaction`): found by this index, not a scan.
CREATE INDEX turns_compactions ON turns (session_id, seq DESC) WHERE role = 'compaction';
