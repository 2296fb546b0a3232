-- How long a webhook's stream has been failing, for `[webhooks]
-- give_up_after` and `disable_after`. `retry_since`: the first failed
-- attempt of the event at the head of the stream (cleared when the cursor
-- moves, delivered or given up). `failing_since`: the first failed attempt
-- since the last 2xx (cleared only by a 2xx). Kept in the row, not in the
-- deliverer's memory, so a replica that takes a stream over keeps counting.
ALTER TABLE webhooks ADD COLUMN retry_since timestamptz, ADD COLUMN failing_since timestamptz;
ALTER TABLE webhook_cursors ADD COLUMN retry_since timestamptz, ADD COLUMN failing_since timestamptz;
