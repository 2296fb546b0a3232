-- An idempotency key is bound to its request (issue 11). `request_hash` is
-- the SHA-256 fingerprint of the request that first used the key
-- (inquest-core/src/idempotency.rs: the call, then each field
-- length-prefixed; for StartSession the incident and the message, for
-- SendMessage the message, both as the client sent them). A retry with the
-- same key and the same fingerprint gets the first call's result; a
-- different fingerprint is refused with ALREADY_EXISTS and nothing is
-- written.
--
-- Rows written before this migration have no hash (NULL) and match any
-- request, as every key did before: a client retrying across the upgrade
-- still gets its first result. They expire like any other row.
--
-- No default: a catalog-only change, no table rewrite.
ALTER TABLE idempotency_keys ADD COLUMN request_hash bytea
    CHECK (request_hash IS NULL OR octet_length(request_hash) = 32);

-- Keys expire after `limits.idempotency_key_retention` (default 24h): each
-- replica's cleanup deletes rows older than that in bounded batches
-- (`Store::expire_idempotency_keys`), walking this index.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
