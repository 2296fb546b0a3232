-- Keys every replica of one deployment shares, made once by the migration
-- that creates them: 'page_token' signs the page tokens the list calls
-- hand out, so a token this deployment did not issue (forged, edited, or
-- another tenant's) is refused. gen_random_uuid() draws from PostgreSQL's
-- strong random source; two of them give 244 random bits.
CREATE TABLE deployment_keys (
    name text PRIMARY KEY,
    key bytea NOT NULL CHECK (length(key) >= 16)
);

INSERT INTO deployment_keys (name, key)
VALUES ('page_token',
        decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
