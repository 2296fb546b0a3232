-- Tenants (issue 12): every incident and session belongs to one tenant, the
-- tenant of the caller that created it, and every caller-facing query is
-- scoped by it in SQL (WHERE tenant = $n). Rows from before tenants existed
-- join the `default` tenant, which is also every caller's tenant when
-- authentication is off. A session's tenant is its incident's and never
-- changes. The column default only fills existing rows: it is dropped, so
-- every insert names its tenant.
ALTER TABLE incidents ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE incidents ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE sessions ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE sessions ALTER COLUMN tenant DROP DEFAULT;

-- The listing pages (V10's, now within a tenant). ListSessions of one
-- incident keeps sessions_by_incident(_status): an incident has one tenant.
CREATE INDEX incidents_by_tenant ON incidents (tenant, id DESC);
CREATE INDEX sessions_by_tenant ON sessions (tenant, id DESC);
CREATE INDEX sessions_by_tenant_status ON sessions (tenant, status, id DESC);

-- Tokens spent per tenant, UTC day and session: the daily token budget
-- reads the sum of a tenant's rows for today. One row per session keeps
-- the counter off a shared hot row: the append that adds to it already
-- holds its session's row lock, so no two writers ever wait on one usage
-- row. Filled by the turn append (input + output tokens of the turn).
CREATE TABLE token_usage (
    tenant     text NOT NULL,
    day        date NOT NULL,
    session_id uuid NOT NULL REFERENCES sessions (id),
    tokens     bigint NOT NULL CHECK (tokens >= 0),
    PRIMARY KEY (tenant, day, session_id)
);
