-- A typed recovery notice (issue 15 item 5). A recovery notice turn used to
-- carry its plan as one JSON line at the end of its content
-- ({"recovery_plan": {...}}); the plan now has its own column, and content
-- holds only the human text. NULL for every other turn (and for notices
-- that record no plan, e.g. "resume refused"). On a notice turn the plan's
-- notice_text is empty: its human text is the turn's content.
--
-- Like tool_calls, the column follows the row's `escaped` flag (V8): on a
-- flagged row every string value and object key is in the encoding of
-- inquest-store/src/text.rs.
--
-- No default: a catalog-only change, no table rewrite.
ALTER TABLE turns ADD COLUMN recovery_plan jsonb;

-- Old rows. For every notice whose last line (after its last newline)
-- starts with {"recovery_plan": and is a JSON object holding a plan
-- object, the plan moves into the column and that line, with the newline
-- before it, leaves the content. Any other row is left exactly as it is:
-- each row is moved in its own subtransaction, and a row whose line does
-- not parse (a plan line cut by the old notice cap, hand-written text) is
-- skipped, never aborting the migration. One scan of turns; notices are
-- few, so the per-row cost does not matter.
--
-- NUL: the old writer (serde_json) wrote U+0000 inside the JSON line as
-- JSON's own escape \u0000 (six ASCII characters), which jsonb refuses, and
-- U+E000 as itself. So before the cast, each \u0000 escape of the line
-- becomes U+E000 '0' (the encoding of text.rs): the line is split at its
-- "\\" escapes first, which tokenises exactly as JSON does (the old writer
-- wrote every backslash as an escape), so a literal backslash followed by
-- "u0000" is never mistaken for one.
-- - Escaped row (`escaped`): the content, JSON line included, is already
--   encoded (its U+E000 doubled), so after the \u0000 rewrite the parsed
--   value is exactly the plan with every string escaped: what the column
--   of an escaped row must hold.
-- - Unflagged row whose line holds a \u0000 escape (a NUL only in the
--   plan): the row becomes escaped. Its content had no U+0000 (or it
--   would be flagged), so encoding it is doubling U+E000; the line gets
--   the same doubling, then the rewrite. A notice has no other text
--   field (tool_calls '[]', no call id or tool name); a row that does is
--   left as it is.
DO $migrate$
DECLARE
    r record;
    esc constant text := chr(57344);
    nl integer;
    human text;
    line text;
    rewritten text;
    doc jsonb;
    plan jsonb;
    becomes_escaped boolean;
BEGIN
    FOR r IN
        SELECT session_id, seq, content, escaped, tool_calls, tool_call_id, tool_name
        FROM turns
        WHERE role = 'notice' AND strpos(content, '{"recovery_plan":') > 0
    LOOP
        BEGIN
            nl := strpos(reverse(r.content), E'\n');
            IF nl = 0 THEN
                human := '';
                line := r.content;
            ELSE
                human := left(r.content, length(r.content) - nl);
                line := right(r.content, nl - 1);
            END IF;
            CONTINUE WHEN left(line, 17) <> '{"recovery_plan":';
            rewritten := array_to_string(ARRAY(
                SELECT replace(part, '\u0000', esc || '0')
                FROM unnest(string_to_array(line, '\\')) WITH ORDINALITY AS u(part, i)
                ORDER BY i), '\\');
            becomes_escaped := NOT r.escaped AND rewritten <> line;
            IF becomes_escaped THEN
                CONTINUE WHEN r.tool_calls <> '[]'::jsonb
                    OR r.tool_call_id IS NOT NULL OR r.tool_name IS NOT NULL;
                human := replace(human, esc, esc || esc);
                rewritten := array_to_string(ARRAY(
                    SELECT replace(replace(part, esc, esc || esc), '\u0000', esc || '0')
                    FROM unnest(string_to_array(line, '\\')) WITH ORDINALITY AS u(part, i)
                    ORDER BY i), '\\');
            END IF;
            doc := rewritten::jsonb;
            plan := doc -> 'recovery_plan';
            CONTINUE WHEN jsonb_typeof(doc) <> 'object' OR jsonb_typeof(plan) IS DISTINCT FROM 'object';
            IF plan ? 'notice_text' THEN
                plan := jsonb_set(plan, '{notice_text}', '""'::jsonb);
            END IF;
            UPDATE turns
            SET content = human,
                recovery_plan = plan,
                escaped = r.escaped OR becomes_escaped
            WHERE session_id = r.session_id AND seq = r.seq;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'V11: notice % of session % keeps its text (%: %)',
                r.seq, r.session_id, SQLSTATE, SQLERRM;
        END;
    END LOOP;
END
$migrate$;
