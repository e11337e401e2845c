package postgres_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func ctxFor(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustNew opens a migrated store on dsn, closed when the test ends.
func mustNew(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(ctxFor(t, 30*time.Second), dsn)
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}

// Two stores (two pools, as two replicas would have) on one database.
func TestConformanceTwoPools(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	a := mustNew(t, dsn)
	b := mustNew(t, dsn)
	dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return twoPools{a: a, b: b} })
}

func TestPendingConformance(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}

// Durable deliveries, each statement alone (no batching): the path a
// Defer, renewal or settle takes when its batch aborted.
func TestPendingConformanceUnbatched(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store {
		s := mustNew(t, dsn)
		postgres.SetClaimBatching(s, false)
		return s
	})
}

// Durable deliveries across two replicas: deferred by one, taken,
// renewed and settled by either, taken concurrently by both.
func TestPendingConformanceTwoPools(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	a := mustNew(t, dsn)
	b := mustNew(t, dsn)
	dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return twoPools{a: a, b: b} })
}

func TestObjectConformance(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}

// Object locks, each statement alone (no batching): the path a statement
// takes when its batch aborted.
func TestObjectConformanceUnbatched(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store {
		s := mustNew(t, dsn)
		postgres.SetClaimBatching(s, false)
		return s
	})
}

func TestObjectConformanceTwoPools(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	a := mustNew(t, dsn)
	b := mustNew(t, dsn)
	dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store { return twoPools{a: a, b: b} })
}

// twoPools sends each call to one of two stores in turn, so that every
// sequence of the conformance suite crosses replicas.
type twoPools struct {
	a, b *postgres.Store
}

var flip struct {
	sync.Mutex
	n int
}

func (p twoPools) pick() dedupe.Store {
	flip.Lock()
	defer flip.Unlock()
	flip.n++
	if flip.n%2 == 0 {
		return p.a
	}
	return p.b
}

func (p twoPools) Claim(ctx context.Context, r dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	return p.pick().Claim(ctx, r)
}
func (p twoPools) Complete(ctx context.Context, s, k, o string, r dedupe.Response, a dedupe.Attempt) error {
	return p.pick().Complete(ctx, s, k, o, r, a)
}
func (p twoPools) Release(ctx context.Context, s, k, o string, a dedupe.Attempt) error {
	return p.pick().Release(ctx, s, k, o, a)
}
func (p twoPools) Hold(ctx context.Context, s, k, o string, a dedupe.Attempt) error {
	return p.pick().Hold(ctx, s, k, o, a)
}
func (p twoPools) Renew(ctx context.Context, s, k, o string, l time.Duration) error {
	return p.pick().Renew(ctx, s, k, o, l)
}
func (p twoPools) RecordConflict(ctx context.Context, c dedupe.Conflict) error {
	return p.pick().RecordConflict(ctx, c)
}
func (p twoPools) AcceptConflict(ctx context.Context, s, k, id, by string) (dedupe.Conflict, error) {
	return p.pick().AcceptConflict(ctx, s, k, id, by)
}
func (p twoPools) AcceptedConflict(ctx context.Context, s, k, h string) (dedupe.Conflict, error) {
	return p.pick().AcceptedConflict(ctx, s, k, h)
}
func (p twoPools) AddHits(ctx context.Context, h []dedupe.Hit) error { return p.pick().AddHits(ctx, h) }
func (p twoPools) Free(ctx context.Context, s, k string, a dedupe.Attempt) (dedupe.State, error) {
	return p.pick().Free(ctx, s, k, a)
}
func (p twoPools) Get(ctx context.Context, s, k string) (dedupe.Record, error) {
	return p.pick().Get(ctx, s, k)
}
func (p twoPools) List(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Record, error) {
	return p.pick().List(ctx, f)
}
func (p twoPools) Conflicts(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Conflict, error) {
	return p.pick().Conflicts(ctx, f)
}
func (p twoPools) Forget(ctx context.Context, s, k string) error { return p.pick().Forget(ctx, s, k) }
func (p twoPools) Purge(ctx context.Context, r dedupe.PurgeRequest) (int, error) {
	return p.pick().Purge(ctx, r)
}
func (p twoPools) Ping(ctx context.Context) error  { return p.pick().Ping(ctx) }
func (p twoPools) Probe(ctx context.Context) error { return p.pick().Probe(ctx) }
func (p twoPools) Close() error                    { return nil } // closed by the test

func (p twoPools) FingerprintKey(ctx context.Context) ([]byte, error) {
	return p.pick().(dedupe.FingerprintKeyer).FingerprintKey(ctx)
}

func (p twoPools) locker() dedupe.ObjectLocker { return p.pick().(dedupe.ObjectLocker) }

func (p twoPools) LockObject(ctx context.Context, sc, o, own string, l time.Duration) (bool, error) {
	return p.locker().LockObject(ctx, sc, o, own, l)
}
func (p twoPools) RenewObject(ctx context.Context, sc, o, own string, l time.Duration) error {
	return p.locker().RenewObject(ctx, sc, o, own, l)
}
func (p twoPools) UnlockObject(ctx context.Context, sc, o, own string) error {
	return p.locker().UnlockObject(ctx, sc, o, own)
}

func (p twoPools) deferrer() dedupe.Deferrer { return p.pick().(dedupe.Deferrer) }

func (p twoPools) Defer(ctx context.Context, s, k, o string, d dedupe.DeferRequest) error {
	return p.deferrer().Defer(ctx, s, k, o, d)
}
func (p twoPools) TakeDue(ctx context.Context, s, o string, l time.Duration, n int) ([]dedupe.Record, error) {
	return p.deferrer().TakeDue(ctx, s, o, l, n)
}
func (p twoPools) RenewPending(ctx context.Context, s, k, o string, l time.Duration) error {
	return p.deferrer().RenewPending(ctx, s, k, o, l)
}
func (p twoPools) SettlePending(ctx context.Context, s, k, o string, st dedupe.PendingSettle) error {
	return p.deferrer().SettlePending(ctx, s, k, o, st)
}
func (p twoPools) PendingCounts(ctx context.Context) ([]dedupe.PendingCount, error) {
	return p.deferrer().PendingCounts(ctx)
}

func TestSummaryConformance(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	dedupetest.RunSummaryConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}
