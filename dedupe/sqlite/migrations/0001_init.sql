-- v1: records (one per sender and event id; times in Unix milliseconds)
-- and the conflicts refused under a stored id.
CREATE TABLE IF NOT EXISTS records (
	sender       TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	state        TEXT    NOT NULL,
	payload_hash TEXT    NOT NULL,
	owner        TEXT    NOT NULL DEFAULT '',
	lease_until  INTEGER NOT NULL DEFAULT 0,
	received_at  INTEGER NOT NULL,
	completed_at INTEGER NOT NULL DEFAULT 0,
	expires_at   INTEGER NOT NULL,
	hits         INTEGER NOT NULL DEFAULT 0,
	takeovers    INTEGER NOT NULL DEFAULT 0,
	status       INTEGER NOT NULL DEFAULT 0,
	headers      BLOB,
	body         BLOB,
	truncated    INTEGER NOT NULL DEFAULT 0,
	request_body BLOB,
	PRIMARY KEY (sender, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_received ON records (received_at);
CREATE INDEX IF NOT EXISTS records_expires ON records (expires_at);
CREATE TABLE IF NOT EXISTS conflicts (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	sender        TEXT    NOT NULL,
	key           TEXT    NOT NULL,
	stored_hash   TEXT    NOT NULL,
	received_hash TEXT    NOT NULL,
	received_at   INTEGER NOT NULL,
	changed_paths TEXT    NOT NULL DEFAULT '',
	expires_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS conflicts_sender ON conflicts (sender, id);
CREATE INDEX IF NOT EXISTS conflicts_expires ON conflicts (expires_at);
