package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// fingerprintKey holds the install's fingerprint key
// (dedupe.FingerprintKeyer), set once (SET NX) and never expiring.
const fingerprintKey = prefix + "meta:fingerprint_key"

// FingerprintKey implements dedupe.FingerprintKeyer.
func (s *Store) FingerprintKey(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, dedupe.FingerprintKeyLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if err := s.client.SetNX(ctx, fingerprintKey, fresh, 0).Err(); err != nil {
		return nil, unavailable("fingerprint key", err)
	}
	return s.StoredFingerprintKey(ctx)
}

// StoredFingerprintKey implements dedupe.StoredFingerprintKeyer: the key,
// or dedupe.ErrNotFound when none was made; it writes nothing.
func (s *Store) StoredFingerprintKey(ctx context.Context) ([]byte, error) {
	b, err := s.client.Get(ctx, fingerprintKey).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis fingerprint key: %w", dedupe.ErrNotFound)
	}
	if err != nil {
		return nil, unavailable("fingerprint key", err)
	}
	return b, nil
}

var _ dedupe.FingerprintKeyer = (*Store)(nil)
