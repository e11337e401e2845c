-- v4: a conflict keeps the refused request (head and body, under the
-- rules of store_request_body), what its diff holds, whether it was
-- recorded in shadow mode, and when and by whom it was accepted
-- (accepted_at in Unix ms, 0 until then). Accept finds a key's
-- conflicts by (sender, key), newest first.
ALTER TABLE conflicts ADD COLUMN diff_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE conflicts ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conflicts ADD COLUMN request_head TEXT;
ALTER TABLE conflicts ADD COLUMN request_body BLOB;
ALTER TABLE conflicts ADD COLUMN body_truncated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conflicts ADD COLUMN accepted_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conflicts ADD COLUMN accepted_by TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS conflicts_key ON conflicts (sender, key, id);
