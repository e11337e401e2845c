package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// hitCounter batches replay counts so that a duplicate costs no write on the
// request path: counts are added to the store every HitFlushInterval (1s by default) and on close.
type hitCounter struct {
	store dedupe.Store
	log   *slog.Logger

	mu      sync.Mutex // guards pending
	pending map[[2]string]int64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newHitCounter(store dedupe.Store, log *slog.Logger, every time.Duration) *hitCounter {
	h := &hitCounter{store: store, log: log, pending: map[[2]string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				h.flush()
			case <-h.stop:
				h.flush()
				return
			}
		}
	}()
	return h
}

func (h *hitCounter) add(sender, key string) {
	h.mu.Lock()
	h.pending[[2]string{sender, key}]++
	h.mu.Unlock()
}

func (h *hitCounter) flush() {
	h.mu.Lock()
	if len(h.pending) == 0 {
		h.mu.Unlock()
		return
	}
	batch := make([]dedupe.Hit, 0, len(h.pending))
	for k, n := range h.pending {
		batch = append(batch, dedupe.Hit{Sender: k[0], Key: k[1], N: n})
	}
	h.pending = map[[2]string]int64{}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.store.AddHits(ctx, batch); err != nil {
		// Hit counts are for operators' curiosity; losing a batch is harmless.
		h.log.Warn("hit counts not stored", "records", len(batch), "err", err)
	}
}

func (h *hitCounter) close() {
	h.once.Do(func() { close(h.stop) })
	<-h.done
}

// waiters wakes deliveries waiting on a key that this process completes or
// releases, so they do not wait for their next poll. An entry lives while
// someone waits on it: a key finished by another replica is forgotten when
// its last local waiter leaves.
type waiters struct {
	mu sync.Mutex // guards m
	m  map[[2]string]*waitEntry
}

type waitEntry struct {
	ch chan struct{} // closed by fire
	n  int           // waiters holding the entry
}

// watch returns a channel closed when this process finishes the key, and
// leave, which the waiter must call when it stops waiting.
func (w *waiters) watch(sender, key string) (ch <-chan struct{}, leave func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[[2]string]*waitEntry{}
	}
	k := [2]string{sender, key}
	e := w.m[k]
	if e == nil {
		e = &waitEntry{ch: make(chan struct{})}
		w.m[k] = e
	}
	e.n++
	return e.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if e.n--; e.n == 0 && w.m[k] == e {
			delete(w.m, k)
		}
	}
}

func (w *waiters) fire(sender, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := [2]string{sender, key}
	if e, ok := w.m[k]; ok {
		close(e.ch)
		delete(w.m, k)
	}
}

// len is how many keys are being waited on.
func (w *waiters) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
