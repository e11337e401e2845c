package sqlite

import (
	"context"
	"database/sql"
)

// Commits is how many transactions the group-commit writer has committed.
func (s *Store) Commits() int64 { return s.commits.Load() }

// Queued is how many writes are waiting for the writer to take them.
func (s *Store) Queued() int64 { return s.queued.Load() }

// Write runs fn as one item of a group commit, as Claim and Complete do.
func (s *Store) Write(ctx context.Context, op string, fn func(context.Context, *sql.Tx) error) error {
	return s.write(ctx, op, fn)
}

// Unprepared is how many statements of the write path and of the readers
// ran without having been prepared at Open.
func (s *Store) Unprepared() int64 { return s.ws.misses.Load() + s.rs.misses.Load() }

// Checked says whether the background integrity check has finished, and
// what it found.
func (s *Store) Checked() (done bool, bad string) {
	s.check.mu.Lock()
	defer s.check.mu.Unlock()
	return s.check.done, s.check.bad
}

// SchemaVersion is the user_version a migrated file has.
var SchemaVersion = schemaVersion

// WALFrames is the WAL's size in frames at the checkpointer's last
// checkpoint.
func (s *Store) WALFrames() int64 { return s.walFrames.Load() }

// Queries whose plans the tests check.
const (
	QTakeDue       = qTakeDue
	QPendingCounts = qPendingCounts
)

// SyncedBatches is how many batches committed under synchronous=FULL on a
// synchronous=normal store because an item needed its commit on disk.
func (s *Store) SyncedBatches() int64 { return s.syncedBatches.Load() }

// WriteSynced runs fn as a Write whose commit must be on disk (as Defer's).
func (s *Store) WriteSynced(ctx context.Context, op string, fn func(context.Context, *sql.Tx) error) error {
	return s.writeSynced(ctx, op, fn)
}
