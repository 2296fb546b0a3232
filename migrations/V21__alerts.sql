-- Alerts in (POST /v1/alerts/alertmanager): a notification group, keyed by
-- its tenant and Alertmanager's groupKey, is one incident. The tenant is
-- part of the key, so another tenant's notification with the same
-- groupKey makes its own incident and can never reach this one.
CREATE TABLE alert_groups (
    tenant       text NOT NULL,
    group_key    text NOT NULL,
    incident_id  uuid NOT NULL UNIQUE REFERENCES incidents (id),
    -- Which endpoint the group came in through ('alertmanager'), and the
    -- sender's receiver name and externalURL (a link back to it).
    source       text NOT NULL,
    receiver     text NOT NULL,
    external_url text NOT NULL,
    -- The matching trigger's rendered prompt, set by the first
    -- notification that matched one (NULL: none matched yet); kept so a
    -- retried notification starts the very same session (same message
    -- under the same idempotency key). May hold U+0000 escaped, as
    -- incidents do (V8).
    prompt         text,
    prompt_escaped boolean NOT NULL DEFAULT false,
    -- The session the trigger started (NULL: none yet).
    session_id   uuid REFERENCES sessions (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, group_key)
);

-- Each alert of a group as last seen: what a repeat is compared with, so
-- an unchanged notification writes nothing.
CREATE TABLE alert_states (
    incident_id uuid NOT NULL REFERENCES incidents (id),
    fingerprint text NOT NULL,
    status      text NOT NULL CHECK (status IN ('firing', 'resolved')),
    starts_at   timestamptz NOT NULL,
    PRIMARY KEY (incident_id, fingerprint)
);

-- Append-only: every change a notification brought (an alert firing, or
-- resolved), and when it was received.
CREATE TABLE alert_events (
    incident_id uuid NOT NULL REFERENCES incidents (id),
    id          bigint GENERATED ALWAYS AS IDENTITY,
    fingerprint text NOT NULL,
    status      text NOT NULL CHECK (status IN ('firing', 'resolved')),
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz,
    -- The alert's labels as JSON text (a NUL in a value is the escape
    -- \u0000 there, never a byte PostgreSQL refuses).
    labels      text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (incident_id, id)
);
