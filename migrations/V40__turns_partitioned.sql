-- The turns table becomes partitioned by range of session id, one
-- partition per calendar month (UTC), so that the space of erased
-- sessions goes back to the operating system whole: once every session
-- of a month is erased its partition is empty and is dropped
-- (`Store::drop_empty_turn_partitions`, crates/inquest-store/src/partitions.rs),
-- where deleting rows from one big table left its files as large as
-- they were (VACUUM makes freed pages reusable, it does not shrink the
-- files; docs/benchmarks.md, `erase`).
--
-- Session ids are UUIDv7: the first 48 bits are the creation time in
-- milliseconds and uuid order is byte order, so a month of sessions is
-- one range of ids, and every turn of a session lands in the partition
-- of the month the session was made in (a fork is a new session, of
-- the month it was forked in). Reads and appends name a session id, so
-- they touch one partition.
--
-- The table as it was is kept, rows and indexes unchanged, as the first
-- partition, `turns_legacy`: every id below the first month after its
-- newest session. No row is copied; attaching it scans it once to check
-- its bound, under the migration's lock. An empty one is dropped.

-- The smallest UUIDv7 a session made at `at` can have.
CREATE FUNCTION inquest_uuid_floor(at timestamptz) RETURNS uuid
LANGUAGE sql STABLE STRICT AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0')
            || '00000000000000000000')::uuid
$$;

-- The time a UUIDv7 was made at (its first 48 bits).
CREATE FUNCTION inquest_uuid_time(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
$$;

-- Makes the partition of the month (UTC) that holds `at`, unless a
-- partition covers it already; returns its name, or NULL when
-- `turns_legacy` covers that month. CREATE + ATTACH rather than
-- CREATE ... PARTITION OF: attaching takes SHARE UPDATE EXCLUSIVE on
-- `turns`, which appends and reads do not wait for. Two replicas making
-- the same month at once: one waits for the other's lock, then finds
-- the table.
CREATE FUNCTION inquest_turns_partition_for(at timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz := date_trunc('month', at, 'UTC');
    hi timestamptz := date_trunc('month', lo + interval '40 days', 'UTC');
    name text := 'turns_' || to_char(lo AT TIME ZONE 'UTC', '"y"YYYY"m"MM');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('inquest_turns_partitions'));
    IF EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'turns'::regclass AND c.relname = name) THEN
        RETURN name;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I (LIKE turns INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                       'INCLUDING STORAGE INCLUDING COMPRESSION)', name);
        -- Named here, so a repeated write id's conflict names
        -- `<partition>_write_id` (is_write_id_conflict in
        -- crates/inquest-store/src/turns.rs); attaching adopts them.
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (session_id, seq)',
                       name, name || '_pkey');
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (session_id, write_id)', name || '_write_id', name);
        EXECUTE format('CREATE INDEX %I ON %I (session_id, seq DESC) WHERE role = ''compaction''',
                       name || '_compactions', name);
        EXECUTE format('ALTER TABLE turns ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       name, inquest_uuid_floor(lo), inquest_uuid_floor(hi));
    EXCEPTION WHEN invalid_object_definition THEN
        -- "would overlap partition": turns_legacy covers this month.
        RETURN NULL;
    END;
    RETURN name;
END;
$$;

ALTER TABLE turns RENAME TO turns_legacy;
ALTER INDEX turns_pkey RENAME TO turns_legacy_pkey;
ALTER INDEX turns_write_id RENAME TO turns_legacy_write_id;
ALTER INDEX turns_compactions RENAME TO turns_legacy_compactions;

CREATE TABLE turns (LIKE turns_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS
                    INCLUDING STORAGE INCLUDING COMPRESSION)
    PARTITION BY RANGE (session_id);
ALTER TABLE turns ADD PRIMARY KEY (session_id, seq);
CREATE UNIQUE INDEX turns_write_id ON turns (session_id, write_id);
CREATE INDEX turns_compactions ON turns (session_id, seq DESC) WHERE role = 'compaction';

DO $$
DECLARE
    newest uuid := (SELECT session_id FROM turns_legacy ORDER BY session_id DESC LIMIT 1);
    bound timestamptz;
BEGIN
    IF newest IS NULL THEN
        -- Nothing to keep: every month gets a partition of its own.
        DROP TABLE turns_legacy;
    ELSE
        IF inquest_uuid_time(newest) > now() + interval '1 day' THEN
            RAISE EXCEPTION 'turns names session %, not a UUIDv7 of a past time: the turns table is partitioned by the time in session ids', newest;
        END IF;
        -- The first month after the newest session's.
        bound := date_trunc('month', date_trunc('month', inquest_uuid_time(newest), 'UTC')
                                     + interval '40 days', 'UTC');
        -- The legacy table's indexes match the parent's, so they are
        -- attached as its partitions, not built again.
        EXECUTE format('ALTER TABLE turns ATTACH PARTITION turns_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                       inquest_uuid_floor(bound));
    END IF;
    -- The month a replica whose clock is a week behind is in, this one
    -- and the two ahead, so that an append always finds its partition
    -- (Store::make_turn_partitions keeps making them).
    PERFORM inquest_turns_partition_for(now() - interval '7 days');
    PERFORM inquest_turns_partition_for(now());
    PERFORM inquest_turns_partition_for(now() + interval '1 month');
    PERFORM inquest_turns_partition_for(now() + interval '2 months');
END;
$$;
