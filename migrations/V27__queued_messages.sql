-- Messages sent with `if_running = ENQUEUE` while a burst is pending or
-- running. Stored at once (the answer is only given after the commit), in
-- order (`id`), and moved into user turns by the very transaction that
-- closes the burst with a status a follow-up may reopen
-- (`Store::close_burst`), which also sets the session `pending`: a crash
-- between the two loses nothing and runs nothing twice. A cancel deletes
-- them and stores a notice turn saying how many it dropped. The idempotency key
-- is also claimed in `idempotency_keys` with `seq` NULL until the message
-- becomes a turn (then its seq), so a key names one message whether it
-- was sent or queued.
CREATE TABLE queued_messages (
    id              bigserial PRIMARY KEY,
    session_id      uuid NOT NULL REFERENCES sessions (id),
    -- UTF-8 bytes: a message may hold U+0000, which `text` refuses.
    text            bytea NOT NULL,
    -- Its place in the queue when it was stored (1 = next), answered again
    -- to a retry with the same key.
    position        integer NOT NULL CHECK (position >= 1),
    idempotency_key text,
    request_hash    bytea CHECK (octet_length(request_hash) = 32),
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queued_messages_session ON queued_messages (session_id, id);
CREATE UNIQUE INDEX queued_messages_key ON queued_messages (session_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
