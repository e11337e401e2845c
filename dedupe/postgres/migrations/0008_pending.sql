-- hookonce schema, version 8: durable deliveries (a sender's ack: durable,
-- dedupe.Deferrer). A record whose sender was answered by hookonce itself
-- is done, and carries the delivery still owed to the site in the
-- pending_* columns, all NULL (pending_tries 0) when none is owed:
-- pending_since (when the sender was answered), pending_next_at (when the
-- next try is due), pending_until (when hookonce stops trying),
-- pending_tries (tries that ended with a retry), and the deliverer holding
-- it now, pending_owner until pending_lease_until, judged by the database
-- clock as claims are. Nullable columns and a constant default: existing
-- rows are not rewritten.
ALTER TABLE hookonce_records
    ADD COLUMN pending_since       timestamptz,
    ADD COLUMN pending_next_at     timestamptz,
    ADD COLUMN pending_until       timestamptz,
    ADD COLUMN pending_tries       integer     NOT NULL DEFAULT 0,
    ADD COLUMN pending_owner       text,
    ADD COLUMN pending_lease_until timestamptz;

-- A deliverer takes a sender's due deliveries, oldest pending_next_at
-- first; the owed deliveries are counted per sender. Only records with a
-- delivery owed are in the index (none, when this migration runs: it reads
-- the table once and writes an empty index), and no write of the other
-- records touches it (a completion stays a HOT update).
CREATE INDEX hookonce_records_pending ON hookonce_records (sender, pending_next_at)
    WHERE pending_since IS NOT NULL;
