-- v3: per-object locks (dedupe.ObjectLocker, objects.go). A row is a
-- held lock: owner and lease as a claim's (lease_until in Unix
-- milliseconds by the store's clock); unlocking deletes it. The table
-- holds only the objects locked now and those whose holder died without
-- unlocking, which Purge removes an hour after their lease ended; so small
-- that Purge's scan needs no index, and lock writes maintain none.
CREATE TABLE IF NOT EXISTS objects (
	scope       TEXT    NOT NULL,
	object      TEXT    NOT NULL,
	owner       TEXT    NOT NULL,
	lease_until INTEGER NOT NULL,
	PRIMARY KEY (scope, object)
) WITHOUT ROWID;
