-- Audit event ids numbered per tenant. The global identity column showed
-- every tenant's admin the gaps other tenants' calls left in it; the id
-- the API shows (and pages by) is now `tenant_seq`: 1, 2, 3, ... within
-- one tenant, drawn from `audit_counters` in the same statement as the
-- insert (the counter row's lock orders one tenant's inserts; it is held
-- for that statement only).
CREATE TABLE audit_counters (
    tenant text PRIMARY KEY,
    last   bigint NOT NULL
);

ALTER TABLE audit_events ADD COLUMN tenant_seq bigint;

-- The append-only trigger is lifted for the numbering of the rows that
-- exist, inside this migration's transaction only.
ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update;
UPDATE audit_events a SET tenant_seq = n.seq
FROM (SELECT id, row_number() OVER (PARTITION BY tenant ORDER BY id) AS seq
      FROM audit_events) n
WHERE a.id = n.id;
ALTER TABLE audit_events ENABLE TRIGGER audit_events_no_update;

INSERT INTO audit_counters (tenant, last)
SELECT tenant, max(tenant_seq) FROM audit_events GROUP BY tenant;

ALTER TABLE audit_events ALTER COLUMN tenant_seq SET NOT NULL;
CREATE UNIQUE INDEX audit_events_by_tenant_seq ON audit_events (tenant, tenant_seq DESC);
CREATE INDEX audit_events_by_session_seq ON audit_events (tenant, session_id, tenant_seq DESC)
    WHERE session_id IS NOT NULL;
DROP INDEX audit_events_by_tenant;
DROP INDEX audit_events_by_session;
