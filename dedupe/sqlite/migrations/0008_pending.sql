-- v8: a durable delivery still owed to the site (a sender's ack: durable;
-- pending.go). The record is done (the sender has its answer) and these
-- columns say what is owed: since when, when the next try is due, until
-- when hookonce tries, how many tries ended in a retry, and the deliverer
-- holding it now with its lease. Times in Unix ms like every other here;
-- pending_since = 0 means nothing owed, and the other columns are then
-- 0 or ''. Each column has a constant default, so adding it rewrites no
-- row of an existing file. The partial index holds only the owed records
-- (few next to all records): TakeDue reads a sender's due ones in
-- pending_next_at order from it, and PendingCounts counts them and finds
-- the oldest pending_since without reading the table.
ALTER TABLE records ADD COLUMN pending_since INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN pending_next_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN pending_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN pending_tries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN pending_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN pending_lease_until INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS records_pending ON records (sender, pending_next_at, pending_since) WHERE pending_since > 0;
