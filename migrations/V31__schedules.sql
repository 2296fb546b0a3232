-- Scheduled investigations (`[[schedules]]`). `schedules` remembers when a
-- schedule was first seen, so a new one does not fire the ticks before
-- it. `schedule_ticks` has one row per fired (or skipped) tick: its
-- primary key is what makes a tick fire once across replicas, and the
-- incident and session it started are written in the same transaction as
-- the row, so a replica that dies at the tick either fired it whole or
-- left it to another.
CREATE TABLE schedules (
    name          text PRIMARY KEY,
    registered_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE schedule_ticks (
    schedule    text NOT NULL,
    tick        timestamptz NOT NULL,
    tenant      text NOT NULL,
    fired_at    timestamptz NOT NULL DEFAULT now(),
    fired_by    text NOT NULL,
    incident_id uuid,
    session_id  uuid,
    -- Why no session started (a missed tick with catch_up = "none", the
    -- tenant over its limits); NULL when one did.
    skipped     text,
    PRIMARY KEY (schedule, tick),
    CHECK ((skipped IS NULL) = (session_id IS NOT NULL))
);
