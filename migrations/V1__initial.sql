-- Inquest's initial schema. Applied by `inquest migrate` and at server start
-- (refinery, embedded in the binary).

CREATE TABLE incidents (
    id          uuid PRIMARY KEY,
    title       text NOT NULL,
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    id               uuid PRIMARY KEY,
    incident_id      uuid NOT NULL REFERENCES incidents (id),
    status           text NOT NULL
        CHECK (status IN ('pending', 'running', 'idle', 'completed', 'failed', 'cancelled')),
    -- Why the last burst ended; NULL until one has.
    exit_reason      text,
    -- Seq of the newest committed turn. Appends bump it in the same
    -- statement that inserts the turn, which is what makes seqs gapless.
    head_seq         bigint NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
    turn_count       bigint NOT NULL DEFAULT 0,
    tool_calls       bigint NOT NULL DEFAULT 0,
    input_tokens     bigint NOT NULL DEFAULT 0,
    output_tokens    bigint NOT NULL DEFAULT 0,
    -- Lease of the replica running a burst (filled by the replication work).
    lease_owner      text,
    lease_expires_at timestamptz,
    lease_epoch      bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Session ids are UUIDv7, so id order is creation order: pages walk this index.
CREATE INDEX sessions_by_incident ON sessions (incident_id, id DESC);

CREATE TABLE turns (
    session_id    uuid NOT NULL REFERENCES sessions (id),
    seq           bigint NOT NULL CHECK (seq >= 1),
    role          text NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'notice')),
    content       text NOT NULL,
    tool_calls    jsonb NOT NULL DEFAULT '[]',
    tool_call_id  text,
    tool_name     text,
    is_error      boolean NOT NULL DEFAULT false,
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq),
    CHECK ((role = 'tool') = (tool_call_id IS NOT NULL))
);

CREATE TABLE reports (
    session_id   uuid NOT NULL REFERENCES sessions (id),
    burst        bigint NOT NULL CHECK (burst >= 1),
    exit_reason  text NOT NULL,
    summary      text NOT NULL DEFAULT '',
    counters     jsonb NOT NULL DEFAULT '{}',
    active_ms    bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, burst)
);

-- A create call retried with the same key finds what the first call made.
-- `scope` separates key spaces (e.g. 'start_session:<incident id>').
CREATE TABLE idempotency_keys (
    scope      text NOT NULL,
    key        text NOT NULL,
    session_id uuid NOT NULL REFERENCES sessions (id),
    seq        bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
