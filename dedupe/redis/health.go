package redis

import (
	"context"
	"crypto/rand"
	"time"
)

// Ping implements dedupe.Store. Redis needs no migration; Ping checks that
// the server answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unavailable("ping", err)
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// probeKey is the key Probe writes: a plain string with a short expiry,
// outside every record's slot and every index.
const probeKey = prefix + "probe"

// Probe implements dedupe.Store: SET of probeKey with a 10s expiry, a
// write that the server refuses when it refuses the claims' writes (a
// replica, min-replicas-to-write unmet, maxmemory reached under
// noeviction, a failed RDB save with stop-writes-on-bgsave-error). On
// Cluster it probes the node that holds probeKey's slot.
func (s *Store) Probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unavailable("probe", err)
	}
	if err := s.client.Set(ctx, probeKey, rand.Text(), 10*time.Second).Err(); err != nil {
		return unavailable("probe", err)
	}
	return nil
}
