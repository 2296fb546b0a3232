-- Webhooks managed over the API (CreateWebhook ... RedeliverEvent), beside
-- the configured ones of `[[events.webhooks]]` (`webhook_cursors`, V22).
-- Each row is one tenant's endpoint and its own delivery stream: it
-- receives only its tenant's events, of `event_types` (empty: all), in id
-- order. `delivered_id` moves only after the receiver answered 2xx (at
-- least once); the lease (`holder`, `lease_expires_at`) lets one replica at
-- a time deliver, so the stream stays in order. A deleted webhook keeps
-- its row, marked `deleted_at` with its secret cleared and its attempts
-- gone, so deleting it again is OK while another tenant's (or an unknown)
-- id stays NOT_FOUND.
CREATE TABLE webhooks (
    id               uuid PRIMARY KEY,
    tenant           text NOT NULL,
    url              text NOT NULL CHECK (char_length(url) <= 2048),
    event_types      text[] NOT NULL DEFAULT '{}',
    description      text NOT NULL DEFAULT '' CHECK (char_length(description) <= 1000),
    -- Only the Standard Webhooks format is delivered so far.
    format           text NOT NULL DEFAULT 'standard' CHECK (format IN ('standard')),
    -- `whsec_<base64>`: kept in clear, since signing needs it; shown by
    -- CreateWebhook and RotateWebhookSecret only.
    secret           text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    disabled_at      timestamptz,
    disabled_reason  text,
    deleted_at       timestamptz,
    delivered_id     bigint NOT NULL,
    holder           text,
    lease_expires_at timestamptz,
    failed_attempts  integer NOT NULL DEFAULT 0,
    last_error       text,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_by_tenant ON webhooks (tenant, created_at, id) WHERE deleted_at IS NULL;

-- Each attempt to deliver an event to an API webhook (the stream's and
-- RedeliverEvent's), newest kept: the deliverer trims a webhook's history
-- to its newest rows after each insert (`Store::record_webhook_attempt`),
-- so a receiver failing for days does not grow it without bound.
CREATE TABLE webhook_attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id   uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id     bigint NOT NULL,
    attempted_at timestamptz NOT NULL DEFAULT now(),
    -- The receiver's status; NULL when none came (refused target,
    -- connection error, timeout).
    status_code  integer,
    -- Why it failed, secrets redacted, cut; NULL after a 2xx.
    error        text CHECK (char_length(error) <= 512),
    duration_ms  bigint NOT NULL,
    -- Sent by RedeliverEvent, outside the stream.
    redelivery   boolean NOT NULL DEFAULT false
);
CREATE INDEX webhook_attempts_by_webhook ON webhook_attempts (webhook_id, id DESC);
