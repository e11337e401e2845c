-- hookonce schema, version 1.
-- One row per (sender, key) claim; the primary key is what makes a claim
-- atomic across every replica sharing the database.
CREATE TABLE hookonce_records (
    sender          text        NOT NULL,
    key             text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('processing', 'done', 'unknown')),
    payload_hash    text        NOT NULL,
    owner           text,                       -- set only while processing
    lease_until     timestamptz,                -- meaningful only while processing
    received_at     timestamptz NOT NULL,
    completed_at    timestamptz,
    expires_at      timestamptz NOT NULL,
    hits            bigint      NOT NULL DEFAULT 0,
    takeovers       bigint      NOT NULL DEFAULT 0,
    resp_status     integer,                    -- NULL until done
    resp_headers    jsonb,
    resp_body       bytea,
    resp_truncated  boolean     NOT NULL DEFAULT false,
    request_body    bytea,                      -- only with store_request_body
    PRIMARY KEY (sender, key)
);

-- The TTL purge walks expired records oldest first.
CREATE INDEX hookonce_records_expires_at ON hookonce_records (expires_at);
-- list (newest first) and purge --older-than.
CREATE INDEX hookonce_records_received_at ON hookonce_records (received_at);

-- Deliveries that reused a key with another payload. Never joined to the
-- record: the original is never touched by a conflict.
CREATE TABLE hookonce_conflicts (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sender          text        NOT NULL,
    key             text        NOT NULL,
    stored_hash     text        NOT NULL,
    received_hash   text        NOT NULL,
    received_at     timestamptz NOT NULL,
    changed_paths   text[],
    expires_at      timestamptz NOT NULL
);

CREATE INDEX hookonce_conflicts_expires_at ON hookonce_conflicts (expires_at);
CREATE INDEX hookonce_conflicts_received_at ON hookonce_conflicts (received_at);
