-- hookonce schema, version 5: traffic counters for the readiness report
-- (dedupe.TrafficRecorder): per day, sender, path, outcome, status and
-- detail, how many deliveries came to it and the longest time one spent at
-- the site. Refusals that write no record (a bad signature, a missing key,
-- a request no sender takes) are counted here; counters are not records.
-- A new table: nothing existing is touched, and it needs no earlier
-- migration but the first.
CREATE TABLE IF NOT EXISTS hookonce_traffic (
    day     date   NOT NULL,
    sender  text   NOT NULL,
    path    text   NOT NULL,
    outcome text   NOT NULL,
    status  integer NOT NULL,
    detail  text   NOT NULL,
    n       bigint NOT NULL,
    max_ms  bigint NOT NULL,
    PRIMARY KEY (day, sender, path, outcome, status, detail)
);
