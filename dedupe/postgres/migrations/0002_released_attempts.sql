-- hookonce schema, version 2: released records, attempts, the request head.
--
-- A released claim is no longer deleted: the record stays in state
-- 'released' (no owner, no lease) with its payload hash, request and
-- attempts, and the next delivery claims it as new. The old CHECK allowed a
-- subset of the new one, so every existing row satisfies it: the constraint
-- is added NOT VALID, which spares a scan of the whole table while this
-- migration holds its ACCESS EXCLUSIVE lock (it is enforced on every write
-- all the same).
ALTER TABLE hookonce_records
    DROP CONSTRAINT hookonce_records_state_check,
    ADD CONSTRAINT hookonce_records_state_check
        CHECK (state IN ('processing', 'done', 'unknown', 'released')) NOT VALID,
    -- The deliveries to the site, oldest first, at most dedupe.MaxAttempts:
    -- [{"at": RFC 3339, "by", "outcome", "status", "duration_ns", "replica"}].
    -- A constant default: existing rows are not rewritten.
    ADD COLUMN attempts jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- The claimed request's head, kept with request_body (store_request_body):
    -- {"method", "uri", "header": {name: [values]}}; NULL when not kept.
    ADD COLUMN request_head jsonb;
