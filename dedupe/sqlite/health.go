package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Ping implements dedupe.Store: reachable and migrated.
func (s *Store) Ping(ctx context.Context) error {
	return ping(ctx, s.r)
}

func ping(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return unavailable("ping", err)
	}
	if v != schemaVersion {
		return fmt.Errorf("ping: schema version %d, want %d: %w", v, schemaVersion, dedupe.ErrUnavailable)
	}
	return nil
}

// Probe implements dedupe.Store: a record of dedupe.ProbeSender inserted
// and deleted in one committed write transaction on the writer connection,
// as a claim commits (a rolled-back transaction would write nothing to the
// WAL, and so find nothing out). It fails at once when the background
// integrity check (check.go) found the file damaged.
//
// First it checks that the file and its directory are still writable by
// this process. The open connection would go on writing to a file made
// read-only under it, but the next connection (after an error, or a
// restart) could not open it for writing, nor create its -wal and -shm.
func (s *Store) Probe(ctx context.Context) error {
	if err := s.corruption(); err != nil {
		return unavailable("probe", err)
	}
	for _, p := range []string{s.path, filepath.Dir(s.path)} {
		if err := writable(p); err != nil {
			return unavailable("probe", fmt.Errorf("%s is not writable: %w", p, err))
		}
	}
	key := rand.Text()
	tx, err := s.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see _txlock)
	if err != nil {
		return unavailable("probe", err)
	}
	defer tx.Rollback()
	now := ms(time.Now())
	if _, err := tx.ExecContext(ctx, `INSERT INTO records (sender, key, state, payload_hash, received_at, expires_at)
		VALUES (?, ?, 'processing', '', ?, ?)`, dedupe.ProbeSender, key, now, now); err != nil {
		return unavailable("probe", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE sender = ? AND key = ?`, dedupe.ProbeSender, key); err != nil {
		return unavailable("probe", err)
	}
	if err := tx.Commit(); err != nil {
		return unavailable("probe", err)
	}
	return nil
}
