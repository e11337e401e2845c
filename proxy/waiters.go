package proxy

import (
	"sync"
)

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
