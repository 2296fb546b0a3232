-- Forked sessions (ForkSession): a fork is a new session of the same
-- incident whose turns 1..forked_at_seq are a copy of its parent's. The
-- parent is named, never referenced by a foreign key: sessions are never
-- deleted (V18), and a key would cost every insert a lookup for nothing.
ALTER TABLE sessions
    ADD COLUMN forked_from   uuid,
    ADD COLUMN forked_at_seq bigint,
    ADD CONSTRAINT sessions_fork_lineage
        CHECK ((forked_from IS NULL) = (forked_at_seq IS NULL)
               AND (forked_at_seq IS NULL OR forked_at_seq >= 1));
