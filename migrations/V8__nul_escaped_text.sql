-- Text PostgreSQL refuses (issue 11). `text` cannot hold U+0000 and
-- `jsonb` cannot hold `\u0000`, yet model text, tool-call arguments, ids and
-- names, tool results, files the file tools read, user messages and
-- incidents may contain it. A row that would hold U+0000 in any text field
-- is stored escaped, and its flag here says so: in every text field of the
-- row U+E000 (a private-use code point) is doubled and U+0000 is written as
-- U+E000 followed by '0'; in its jsonb fields the same applies to every
-- string value and object key. The store decodes flagged rows when it reads
-- them (inquest-store/src/text.rs), so nothing outside it sees the
-- encoding. Rows without U+0000 are stored as before, flag false.
--
-- Constant defaults: catalog-only changes, no table rewrite.
ALTER TABLE turns ADD COLUMN escaped boolean NOT NULL DEFAULT false;
ALTER TABLE incidents ADD COLUMN escaped boolean NOT NULL DEFAULT false;
-- The summary and counters of a burst's report.
ALTER TABLE reports ADD COLUMN escaped boolean NOT NULL DEFAULT false;
-- `last_recovery_plan` (call ids, tool names, the notice text).
ALTER TABLE sessions ADD COLUMN recovery_plan_escaped boolean NOT NULL DEFAULT false;
