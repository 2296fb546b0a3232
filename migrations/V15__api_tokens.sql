-- API tokens (issue 12): bearer tokens the service issues. A token is
-- `inq_<id>_<secret>`; only SHA-256 of the 256-bit random secret is kept,
-- so a stolen database holds no usable token. A token belongs to one tenant
-- and has one role; it may expire, and revoking it (revoked_at) takes
-- effect on every replica within the verification cache's few seconds.
CREATE TABLE api_tokens (
    id uuid PRIMARY KEY,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    tenant text NOT NULL CHECK (length(tenant) BETWEEN 1 AND 200),
    role text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    secret_hash bytea NOT NULL CHECK (octet_length(secret_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz
);
