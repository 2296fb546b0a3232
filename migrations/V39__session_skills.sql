-- The skills a session's bursts load, by name: NULL (every session made
-- before this, and every session started without a choice) loads every
-- configured [[skills]] entry whose server is up, as before. A session an
-- alert trigger or a schedule started carries that entry's `skills`, so a
-- follow-up on any replica, after any restart, loads the same ones. Set
-- when the session is made (a fork copies its parent's) and never changed.
ALTER TABLE sessions ADD COLUMN skills text[];
