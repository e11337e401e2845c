package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hookonce/hookonce/dedupe"
)

// The install's fingerprint key (dedupe.FingerprintKeyer), one row of
// meta: made at random by the first caller, the same for every caller
// after it (INSERT OR IGNORE in the writer's transaction).

const fingerprintKeyName = "fingerprint_key"

// FingerprintKey implements dedupe.FingerprintKeyer.
func (s *Store) FingerprintKey(ctx context.Context) ([]byte, error) {
	const op = "fingerprint key"
	fresh := make([]byte, dedupe.FingerprintKeyLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", op, err)
	}
	var key []byte
	err := s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)`, fingerprintKeyName, fresh); err != nil {
			return unavailable(op, err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, fingerprintKeyName).Scan(&key); err != nil {
			return unavailable(op, err)
		}
		return nil
	})
	return key, err
}

// StoredFingerprintKey implements dedupe.StoredFingerprintKeyer for a
// read-only handle: the key, or dedupe.ErrNotFound when none was made.
func (r *reader) StoredFingerprintKey(ctx context.Context) (key []byte, err error) {
	err = r.read("fingerprint key", func(db *sql.DB) error {
		err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, fingerprintKeyName).Scan(&key)
		if errors.Is(err, sql.ErrNoRows) {
			return dedupe.ErrNotFound
		}
		return err
	})
	return key, err
}

var _ dedupe.FingerprintKeyer = (*Store)(nil)

// StoredFingerprintKey implements dedupe.StoredFingerprintKeyer on the
// read pool.
func (s *Store) StoredFingerprintKey(ctx context.Context) ([]byte, error) {
	var key []byte
	err := s.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, fingerprintKeyName).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dedupe.ErrNotFound
	}
	if err != nil {
		return nil, unavailable("fingerprint key", err)
	}
	return key, nil
}
