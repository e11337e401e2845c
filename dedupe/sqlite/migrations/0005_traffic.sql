-- v5: the traffic counters of the readiness report (traffic.go). A new
-- table: nothing existing is touched.
CREATE TABLE IF NOT EXISTS traffic (
	day     INTEGER NOT NULL,
	sender  TEXT    NOT NULL,
	path    TEXT    NOT NULL,
	outcome TEXT    NOT NULL,
	status  INTEGER NOT NULL,
	detail  TEXT    NOT NULL,
	n       INTEGER NOT NULL,
	max_ms  INTEGER NOT NULL,
	PRIMARY KEY (day, sender, path, outcome, status, detail)
) WITHOUT ROWID;
