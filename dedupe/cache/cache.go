// Package cache answers repeats of finished events from memory: a
// dedupe.Store decorator that keeps recently seen done records, so a
// duplicate delivery costs no store round trip.
//
// A done record never changes until it expires or an operator removes it,
// so serving it from memory is safe for as long as no removal is missed.
// Removals through this process (Release, Free, Forget, Purge, Hold) evict at
// once; a removal by another replica is seen when the entry's TTL ends,
// which is why the TTL is short. The package imports only dedupe.
package cache

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Defaults for Options' zero values.
const (
	DefaultSize = 10000
	DefaultTTL  = 5 * time.Second
)

// Options size the cache. Zero values take the defaults; a negative Size
// disables caching (every call goes to the store).
type Options struct {
	Size int           // entries kept at most, least recently used dropped first
	TTL  time.Duration // how long an entry answers before the store is asked again
	Now  func() time.Time
}

// Store is a dedupe.Store whose Claim answers Duplicate and Conflicting
// from memory for done records it has seen recently.
type Store struct {
	dedupe.Store
	size int
	ttl  time.Duration
	now  func() time.Time

	mu      sync.Mutex // guards entries and lru
	entries map[[2]string]*list.Element
	lru     *list.List // of *entry, most recent at the front
}

type entry struct {
	k       [2]string
	rec     dedupe.Record // done, with its response
	fresher time.Time     // answers from memory until then
}

// New wraps s. The result also implements dedupe.Notifier when s does
// (for every key, the objects' dedupe.ObjectSender keys too), and always
// dedupe.ObjectLocker, passed on to s (see LockObject).
func New(s dedupe.Store, o Options) dedupe.Store {
	c := &Store{Store: s, size: o.Size, ttl: o.TTL, now: o.Now,
		entries: map[[2]string]*list.Element{}, lru: list.New()}
	if c.size == 0 {
		c.size = DefaultSize
	}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	if n, ok := s.(dedupe.Notifier); ok {
		return &notifying{Store: c, n: n}
	}
	return c
}

// notifying keeps the wrapped store's Notifier visible.
type notifying struct {
	*Store
	n dedupe.Notifier
}

func (n *notifying) WaitChange(ctx context.Context, sender, key string) error {
	return n.n.WaitChange(ctx, sender, key)
}

var _ dedupe.ObjectLocker = (*Store)(nil)

// LockObject passes the call to the wrapped store: object locks are never
// cached (they change with every delivery, and only the store judges
// leases). A wrapped store that holds no object locks answers an error
// wrapping dedupe.ErrUnavailable.
func (c *Store) LockObject(ctx context.Context, scope, object, owner string, lease time.Duration) (bool, error) {
	l, err := c.locker("lock object")
	if err != nil {
		return false, err
	}
	return l.LockObject(ctx, scope, object, owner, lease)
}

// RenewObject passes the call to the wrapped store, as LockObject does.
func (c *Store) RenewObject(ctx context.Context, scope, object, owner string, lease time.Duration) error {
	l, err := c.locker("renew object")
	if err != nil {
		return err
	}
	return l.RenewObject(ctx, scope, object, owner, lease)
}

// UnlockObject passes the call to the wrapped store, as LockObject does; a
// wrapped Notifier announces it, and WaitChange (on a store New returned
// for a Notifier) hears it.
func (c *Store) UnlockObject(ctx context.Context, scope, object, owner string) error {
	l, err := c.locker("unlock object")
	if err != nil {
		return err
	}
	return l.UnlockObject(ctx, scope, object, owner)
}

func (c *Store) locker(op string) (dedupe.ObjectLocker, error) {
	if l, ok := c.Store.(dedupe.ObjectLocker); ok {
		return l, nil
	}
	return nil, fmt.Errorf("%s: the wrapped store %T holds no object locks (dedupe.ObjectLocker): %w", op, c.Store, dedupe.ErrUnavailable)
}

var _ dedupe.Summarizer = (*Store)(nil)

// Summary passes the call to the wrapped store (the overview page's
// aggregate is never cached: it is read rarely and must be current). A
// wrapped store that is no Summarizer answers an error wrapping
// dedupe.ErrNoSummary.
func (c *Store) Summary(ctx context.Context, since time.Time) ([]dedupe.SenderSummary, error) {
	if s, ok := c.Store.(dedupe.Summarizer); ok {
		return s.Summary(ctx, since)
	}
	return nil, fmt.Errorf("summary: the wrapped store %T: %w", c.Store, dedupe.ErrNoSummary)
}

// GetConfirmed implements dedupe.ConfirmedReader: the wrapped store's,
// or its Get when it has none (never the cache's memory).
func (c *Store) GetConfirmed(ctx context.Context, sender, key string) (dedupe.Record, error) {
	if cr, ok := c.Store.(dedupe.ConfirmedReader); ok {
		return cr.GetConfirmed(ctx, sender, key)
	}
	return c.Store.Get(ctx, sender, key)
}

// Unwrap returns the wrapped store, for callers that need its own
// interfaces (migrations).
func (c *Store) Unwrap() dedupe.Store { return c.Store }

// Claim answers Duplicate from memory when the key is a recently seen done
// record with the same payload hash. Anything else asks the store (a
// conflict, rare, needs the stored request body for its changed paths).
func (c *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if rec, ok := c.Duplicate(req.Sender, req.Key, req.PayloadHash); ok {
		return dedupe.ClaimResult{Found: dedupe.Duplicate, Record: rec}, nil
	}
	res, err := c.Store.Claim(ctx, req)
	if err == nil && res.Found == dedupe.Duplicate && res.Record.State == dedupe.StateDone {
		c.put(res.Record)
	}
	return res, err
}

// Duplicate answers from memory alone what Claim would answer from
// memory: the record of a recently seen done record of the key with the
// same payload hash (ok), without a context, an owner or a store call. A
// caller on the request path asks it first and claims only when it is not
// ok.
func (c *Store) Duplicate(sender, key, payloadHash string) (dedupe.Record, bool) {
	if rec, ok := c.get(sender, key); ok && rec.PayloadHash == payloadHash {
		return rec, true
	}
	return dedupe.Record{}, false
}

func (c *Store) Release(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	c.evict(sender, key)
	return c.Store.Release(ctx, sender, key, owner, att)
}

func (c *Store) Hold(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	c.evict(sender, key)
	return c.Store.Hold(ctx, sender, key, owner, att)
}

func (c *Store) Free(ctx context.Context, sender, key string, att dedupe.Attempt) (dedupe.State, error) {
	c.evict(sender, key)
	return c.Store.Free(ctx, sender, key, att)
}

func (c *Store) Forget(ctx context.Context, sender, key string) error {
	c.evict(sender, key)
	return c.Store.Forget(ctx, sender, key)
}

// Purge empties the cache: which records went is not known here.
func (c *Store) Purge(ctx context.Context, req dedupe.PurgeRequest) (int, error) {
	n, err := c.Store.Purge(ctx, req)
	c.mu.Lock()
	c.entries = map[[2]string]*list.Element{}
	c.lru.Init()
	c.mu.Unlock()
	return n, err
}

func (c *Store) get(sender, key string) (dedupe.Record, bool) {
	if c.size < 0 {
		return dedupe.Record{}, false
	}
	k := [2]string{sender, key}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return dedupe.Record{}, false
	}
	e := el.Value.(*entry)
	if now.After(e.fresher) || !now.Before(e.rec.ExpiresAt) {
		c.lru.Remove(el)
		delete(c.entries, k)
		return dedupe.Record{}, false
	}
	c.lru.MoveToFront(el)
	return e.rec, true
}

func (c *Store) put(rec dedupe.Record) {
	if c.size < 0 || rec.Response == nil {
		return
	}
	rec.RequestBody = nil // not needed to replay
	k := [2]string{rec.Sender, rec.Key}
	e := &entry{k: k, rec: rec, fresher: c.now().Add(c.ttl)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.entries[k] = c.lru.PushFront(e)
	for c.lru.Len() > c.size {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*entry).k)
	}
}

func (c *Store) evict(sender, key string) {
	k := [2]string{sender, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.lru.Remove(el)
		delete(c.entries, k)
	}
}

// Len is how many records the cache holds.
func (c *Store) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
