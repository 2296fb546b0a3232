-- Storms: at most `[alerts] max_started_per_hour` investigations a tenant's
-- alerts start per hour. A group reserves its start (`start_reserved_at`)
-- under a per-tenant transaction lock, after counting the tenant's
-- reservations of the last hour, so concurrent notifications cannot pass
-- the cap together; one over it records why on the group instead, and the
-- incident shows it (GetIncident's alert_origin). A later notification of
-- the group tries again.
ALTER TABLE alert_groups ADD COLUMN start_reserved_at timestamptz;
ALTER TABLE alert_groups ADD COLUMN session_skipped text;
-- Counting a tenant's starts of the last hour reads only those rows.
CREATE INDEX alert_groups_recent_starts ON alert_groups (tenant, start_reserved_at)
    WHERE start_reserved_at IS NOT NULL;
