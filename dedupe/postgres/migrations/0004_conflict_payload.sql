-- hookonce schema, version 4: a conflict an operator can act on.
--
-- A conflict keeps the refused request (its head as request_head:
-- {"method", "uri", "header"}, and its body, at most the sender's
-- max_stored_body bytes, body_truncated when cut), only for senders that
-- keep requests (store_request_body); what changed_paths holds (diff_kind:
-- 'json', 'form' or ''); whether it was recorded in shadow mode; and when
-- and by whom it was accepted (hookonce accept). Every new column is NULL
-- or has a constant default: existing rows are not rewritten. Accept finds
-- a key's conflicts by (sender, key); the index is built under this
-- migration's lock, on a table that holds only the conflicts of the last
-- ttl.
ALTER TABLE hookonce_conflicts
    ADD COLUMN diff_kind      text        NOT NULL DEFAULT '',
    ADD COLUMN shadow         boolean     NOT NULL DEFAULT false,
    ADD COLUMN request_head   jsonb,
    ADD COLUMN request_body   bytea,
    ADD COLUMN body_truncated boolean     NOT NULL DEFAULT false,
    ADD COLUMN accepted_at    timestamptz,
    ADD COLUMN accepted_by    text;

CREATE INDEX hookonce_conflicts_key ON hookonce_conflicts (sender, key, id);
