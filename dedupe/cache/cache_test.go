package cache_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

func openSQLite(t *testing.T) dedupe.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The cache changes nothing a caller can observe through one process.
func TestConformance(t *testing.T) {
	dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store {
		return cache.New(openSQLite(t), cache.Options{})
	})
}

// counting counts the Claim calls that reach the real store.
type counting struct {
	dedupe.Store
	claims atomic.Int64
}

func (c *counting) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, req)
}

func done(t *testing.T, s dedupe.Store, key, hash string) {
	t.Helper()
	ctx := context.Background()
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: key, PayloadHash: hash, Owner: "o-" + key, Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim %s: %v %v", key, res.Found, err)
	}
	if err := s.Complete(ctx, "s", key, "o-"+key, dedupe.Response{Status: 201, Header: http.Header{}, Body: []byte("ok")}, dedupe.Attempt{At: time.Now(), Outcome: "processed"}); err != nil {
		t.Fatal(err)
	}
}

func claim(t *testing.T, s dedupe.Store, key, hash string) dedupe.Found {
	t.Helper()
	res, err := s.Claim(context.Background(), dedupe.ClaimRequest{Sender: "s", Key: key, PayloadHash: hash, Owner: "x", Lease: time.Minute, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Found == dedupe.Duplicate && (res.Record.Response == nil || res.Record.Response.Status != 201) {
		t.Fatalf("duplicate without its stored answer: %+v", res.Record)
	}
	return res.Found
}

func TestDuplicatesAnsweredFromMemory(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	real := &counting{Store: openSQLite(t)}
	s := cache.New(real, cache.Options{Size: 2, TTL: time.Second, Now: clock})
	done(t, s, "a", "h1")
	before := real.claims.Load()
	for range 5 {
		if got := claim(t, s, "a", "h1"); got != dedupe.Duplicate {
			t.Fatalf("repeat = %v", got)
		}
	}
	if got := real.claims.Load() - before; got != 1 {
		t.Fatalf("5 repeats reached the store %d times, want 1 (the first, which fills the cache)", got)
	}
	// Another payload is a conflict, judged by the store.
	if got := claim(t, s, "a", "h2"); got != dedupe.Conflicting || real.claims.Load()-before != 2 {
		t.Fatalf("conflict = %v, store calls %d", got, real.claims.Load()-before)
	}
	// Past the TTL the store is asked again.
	now = now.Add(2 * time.Second)
	claim(t, s, "a", "h1")
	if got := real.claims.Load() - before; got != 3 {
		t.Fatalf("after the TTL: store calls %d, want 3", got)
	}
	// A local Forget is seen at once.
	if err := s.Forget(context.Background(), "s", "a"); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "a", "h1"); got != dedupe.Claimed {
		t.Fatalf("after Forget: %v, want Claimed", got)
	}
	// Bounded: the least recently used entry goes.
	for _, k := range []string{"b", "c", "d"} {
		done(t, s, k, "h")
		claim(t, s, k, "h")
	}
	if n := s.(*cache.Store).Len(); n != 2 {
		t.Fatalf("cache holds %d entries, size is 2", n)
	}
}

func TestPurgeEmptiesTheCache(t *testing.T) {
	s := cache.New(openSQLite(t), cache.Options{})
	done(t, s, "a", "h")
	claim(t, s, "a", "h")
	if _, err := s.Purge(context.Background(), dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "a", "h"); got != dedupe.Claimed {
		t.Fatalf("after Purge: %v, want Claimed", got)
	}
}

// Duplicate answers from memory exactly what Claim would answer from
// memory, and nothing else: no record it has not seen done, no other
// payload, nothing past the TTL or after a local removal.
func TestDuplicateIsClaimsMemoryAlone(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	real := &counting{Store: openSQLite(t)}
	s := cache.New(real, cache.Options{TTL: time.Second, Now: clock}).(*cache.Store)
	done(t, s, "a", "h1")
	if _, ok := s.Duplicate("s", "a", "h1"); ok {
		t.Fatal("answered a record it never saw as a duplicate")
	}
	before := real.claims.Load()
	claim(t, s, "a", "h1") // the store's duplicate fills the cache
	rec, ok := s.Duplicate("s", "a", "h1")
	if !ok || rec.Response == nil || rec.Response.Status != 201 || rec.Key != "a" {
		t.Fatalf("Duplicate = %+v, %v; want the stored answer", rec, ok)
	}
	if _, ok := s.Duplicate("s", "a", "h2"); ok {
		t.Fatal("answered another payload as a duplicate")
	}
	if _, ok := s.Duplicate("other", "a", "h1"); ok {
		t.Fatal("answered another sender's key")
	}
	if got := real.claims.Load() - before; got != 1 {
		t.Fatalf("Duplicate reached the store: %d claims, want 1", got)
	}
	now = now.Add(2 * time.Second)
	if _, ok := s.Duplicate("s", "a", "h1"); ok {
		t.Fatal("answered past the TTL")
	}
	claim(t, s, "a", "h1")
	if err := s.Forget(context.Background(), "s", "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Duplicate("s", "a", "h1"); ok {
		t.Fatal("answered after Forget")
	}
}
