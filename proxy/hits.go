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
