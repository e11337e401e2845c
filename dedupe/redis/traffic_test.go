package redis_test

import (
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

func TestTrafficConformance(t *testing.T) {
	srv := redistest.Shared(t)
	dedupetest.RunTrafficConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) },
		func(t *testing.T) dedupe.Store {
			s, err := redis.OpenReadOnly(ctxT(t, 5*time.Second), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
}

func TestTrafficConformanceCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	dedupetest.RunTrafficConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.ClusterURL()) }, nil)
}
