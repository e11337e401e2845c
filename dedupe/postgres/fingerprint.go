package postgres

import (
	"context"
	"crypto/rand"
	"errors"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
)

// The install's fingerprint key (dedupe.FingerprintKeyer): one row of
// hookonce_meta, made by the first caller; INSERT … ON CONFLICT DO
// NOTHING, then a read, so every replica gets the one that was stored.

const fingerprintKeyName = "fingerprint_key"

// FingerprintKey implements dedupe.FingerprintKeyer.
func (s *Store) FingerprintKey(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, dedupe.FingerprintKeyLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO hookonce_meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		fingerprintKeyName, fresh); err != nil {
		return nil, fail("fingerprint key", err)
	}
	return s.StoredFingerprintKey(ctx)
}

// StoredFingerprintKey implements dedupe.StoredFingerprintKeyer: the key,
// or dedupe.ErrNotFound when none was made; it writes nothing.
func (s *Store) StoredFingerprintKey(ctx context.Context) ([]byte, error) {
	var key []byte
	err := s.db.QueryRow(ctx, `SELECT value FROM hookonce_meta WHERE name = $1`, fingerprintKeyName).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, dedupe.ErrNotFound
	}
	if err != nil {
		return nil, fail("fingerprint key", err)
	}
	return key, nil
}

var _ dedupe.FingerprintKeyer = (*Store)(nil)
