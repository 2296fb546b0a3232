-- Prompt caching and cost (issue 13, items 4 and 5).
--
-- turns: the parts of an assistant turn's input_tokens the provider read
-- from and wrote to its prompt cache, and what the call cost in
-- nano-dollars (10^-9 USD) at the configured price of the provider that
-- answered it. cost_nano_usd NULL means unknown (no price configured, or a
-- turn stored before this migration): never a made-up zero.
ALTER TABLE turns
    ADD COLUMN cache_read_input_tokens     bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_creation_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cost_nano_usd               bigint CHECK (cost_nano_usd >= 0);

-- sessions: the same sums over the session's turns, kept by the append
-- statement like the other counters; cost_unknown_turns counts assistant
-- turns whose cost is unknown, so a total is never passed off as complete.
ALTER TABLE sessions
    ADD COLUMN cache_read_input_tokens     bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_creation_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cost_nano_usd               bigint NOT NULL DEFAULT 0,
    ADD COLUMN cost_unknown_turns          bigint NOT NULL DEFAULT 0;

-- Assistant turns stored before this migration have no known cost.
UPDATE sessions s SET cost_unknown_turns = t.n
FROM (SELECT session_id, count(*) AS n FROM turns WHERE role = 'assistant'
      GROUP BY session_id) t
WHERE t.session_id = s.id;
