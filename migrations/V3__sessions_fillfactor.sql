-- Every turn append updates its session row (head_seq and counters). With
-- free space left on each page, those updates stay HOT (no index entries,
-- old versions pruned in place) instead of moving the row to a new page.
-- Sessions are few and small, so the space costs little.
-- Measured with `inquest bench append` (docs/benchmarks.md).
ALTER TABLE sessions SET (fillfactor = 50);
