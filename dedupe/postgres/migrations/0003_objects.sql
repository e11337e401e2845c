-- hookonce schema, version 3: per-object locks (dedupe.ObjectLocker), for
-- senders with serialize.
--
-- One row per object held: (scope, object) is taken by owner until
-- lease_until, judged by the database clock as claims are. An unlock
-- deletes the row; a holder that died leaves one behind, which the next
-- locker takes over once its lease has passed, and Purge removes once it
-- has been expired for an hour. A new table: nothing existing is touched.
CREATE TABLE hookonce_objects (
    scope           text        NOT NULL,
    object          text        NOT NULL,
    owner           text        NOT NULL,
    lease_until     timestamptz NOT NULL,
    PRIMARY KEY (scope, object)
);

-- The purge walks leases that ended long ago, oldest first.
CREATE INDEX hookonce_objects_lease_until ON hookonce_objects (lease_until);
