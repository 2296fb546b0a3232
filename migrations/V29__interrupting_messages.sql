-- A message sent with `if_running = INTERRUPT` is queued like an ENQUEUE
-- one (the close of the burst it interrupts drains it into a user turn),
-- and this flag asks the burst that will drain it to stop at its next
-- safe point. The holder of the lease reads it at its claim and at every
-- renewal (so an interrupt reaches it within the renew interval even when
-- the notification is missed); the flag goes with the row when the queue
-- drains, so it can never stop the burst the message itself opens.
ALTER TABLE queued_messages ADD COLUMN interrupt boolean NOT NULL DEFAULT false;
