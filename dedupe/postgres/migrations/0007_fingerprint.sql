-- hookonce schema, version 7: each record keeps its delivery's
-- fingerprint (field names with keyed digests of their values, never the
-- values); the install's key for those digests is one row of
-- hookonce_meta, made once. A nullable column: existing rows are not
-- rewritten.
ALTER TABLE hookonce_records ADD COLUMN fingerprint bytea;
CREATE TABLE IF NOT EXISTS hookonce_meta (
    name  text PRIMARY KEY,
    value bytea NOT NULL
);
