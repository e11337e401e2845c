-- v7: each record keeps its delivery's fingerprint (field names with
-- keyed digests of their values, never the values), and the install's
-- key for those digests is kept in meta, made once.
ALTER TABLE records ADD COLUMN fingerprint BLOB;
CREATE TABLE IF NOT EXISTS meta (
	name  TEXT PRIMARY KEY,
	value BLOB NOT NULL
) WITHOUT ROWID;
