-- A burst names each turn it writes with a random write id before it sends
-- the insert. When the answer to an insert does not arrive (a timeout, a
-- connection cut after the statement was sent), the outcome is unknown:
-- the burst sends the same insert again, and this index turns a second
-- copy into a unique violation, after which the store reads the committed
-- turn back by its write id. A write is therefore applied at most once
-- however often it is retried, and its outcome is always found out rather
-- than guessed. API writes (start, follow-up) carry idempotency keys
-- instead and leave it NULL; NULLs never collide.
ALTER TABLE turns ADD COLUMN write_id uuid;
CREATE UNIQUE INDEX turns_write_id ON turns (session_id, write_id);
