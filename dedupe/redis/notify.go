package redis

import (
	"context"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// recheckInterval bounds how long a waiter can miss a change whose
// announcement was lost (Redis restarted, the subscription was reconnecting).
const recheckInterval = time.Second

// hub is one Pub/Sub connection per Store, shared by every waiter: each
// record's channel is subscribed while someone waits on it, and a message
// wakes every waiter of that channel in this process.
type hub struct {
	s *Store

	mu     sync.Mutex // guards everything below
	ps     *goredis.PubSub
	chans  map[string]*waitSet
	closed bool
}

type waitSet struct {
	ready   chan struct{} // closed once Redis confirmed the subscription
	isReady bool
	waiters map[chan struct{}]struct{}
}

func newHub(s *Store) *hub { return &hub{s: s, chans: map[string]*waitSet{}} }

// WaitChange implements dedupe.Notifier. It returns nil when the record may
// have changed (announced by complete, hold, release, forget or purge, or
// seen by a re-check once a second), and ctx's error when ctx ends first.
// For sender dedupe.ObjectSender(scope) it waits on the object lock
// instead: it returns at once when the object is free (or its holder's
// lease ended), else when it is unlocked (announced) or a re-check sees
// another holder or none.
func (s *Store) WaitChange(ctx context.Context, sender, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := newRef(sender, key)
	ch := r.channel()
	wake, ws, err := s.notify.join(ctx, ch)
	if err != nil {
		return unavailable("wait change", err)
	}
	defer s.notify.leave(ch, wake)

	// Until Redis confirms the subscription a publish could be missed, so
	// the record is read only after that: a change before it is seen here,
	// a change after it is announced.
	// Without a confirmation within recheckInterval (the connection is
	// being redialled) the wait goes on by re-checking alone.
	confirm := time.NewTimer(recheckInterval)
	defer confirm.Stop()
	select {
	case <-ws.ready:
	case <-confirm.C:
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	before, err := s.snapshot(ctx, r)
	if err != nil {
		return unavailable("wait change", err)
	}
	if !busy(before) { // gone, done, unknown, released or a free object: nothing to wait for
		return nil
	}
	tick := time.NewTicker(recheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-wake:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			now, err := s.snapshot(ctx, r)
			if err != nil {
				continue // Redis away: keep waiting until ctx ends
			}
			if now != before {
				return nil
			}
		}
	}
}

// snapshot is the record's state and owner ("" when there is none), or
// for an object sender "locked" and the object's holder ("" when the
// object is free or its holder's lease ended: no record is ever kept under
// an object sender, so its record is never read).
func (s *Store) snapshot(ctx context.Context, r ref) (string, error) {
	if scope, ok := objectScope(r.sender); ok {
		o, err := s.objectHolder(ctx, scope, r.key)
		if err != nil || o == "" {
			return "", err
		}
		return "locked\x00" + o, nil
	}
	v, err := s.client.HMGet(ctx, r.record(), "st", "o").Result()
	if err != nil {
		return "", err
	}
	st, _ := v[0].(string)
	o, _ := v[1].(string)
	if st == "" {
		return "", nil
	}
	return st + "\x00" + o, nil
}

// busy reports whether a snapshot is worth waiting on: a processing claim
// or a held object.
func busy(snap string) bool {
	return strings.HasPrefix(snap, "processing\x00") || strings.HasPrefix(snap, "locked\x00")
}

func (h *hub) join(ctx context.Context, ch string) (chan struct{}, *waitSet, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, goredis.ErrClosed
	}
	if h.ps == nil {
		h.ps = h.s.client.Subscribe(context.Background())
		go h.run(h.ps.ChannelWithSubscriptions(goredis.WithChannelSize(1000)))
	}
	wake := make(chan struct{}, 1)
	ws := h.chans[ch]
	if ws == nil {
		ws = &waitSet{ready: make(chan struct{}), waiters: map[chan struct{}]struct{}{}}
		h.chans[ch] = ws
		err := h.ps.Subscribe(ctx, ch)
		if err != nil && ctx.Err() == nil {
			// The shared connection died with Redis; go-redis has dropped
			// it now, and the second attempt dials afresh.
			err = h.ps.Subscribe(ctx, ch)
		}
		if err != nil {
			// go-redis keeps the channel and subscribes it on reconnect;
			// undo that, this waiter leaves.
			delete(h.chans, ch)
			_ = h.ps.Unsubscribe(context.Background(), ch)
			return nil, nil, err
		}
	}
	ws.waiters[wake] = struct{}{}
	return wake, ws, nil
}

func (h *hub) leave(ch string, wake chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.chans[ch]
	if ws == nil {
		return
	}
	delete(ws.waiters, wake)
	if len(ws.waiters) == 0 && !h.closed {
		delete(h.chans, ch)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = h.ps.Unsubscribe(ctx, ch) // on failure the reconnect drops it (not in go-redis's list any more)
	}
}

// run fans messages out to the waiters of their channel. A subscription
// confirmation marks the channel ready; a repeated confirmation means the
// connection was re-established (messages may have been lost meanwhile), so
// it wakes the channel's waiters too.
func (h *hub) run(msgs <-chan any) {
	for m := range msgs {
		var ch string
		confirm := false
		switch m := m.(type) {
		case *goredis.Message:
			ch = m.Channel
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			ch, confirm = m.Channel, true
		default:
			continue
		}
		h.mu.Lock()
		if ws := h.chans[ch]; ws != nil {
			if confirm && !ws.isReady {
				ws.isReady = true
				close(ws.ready)
			} else {
				for w := range ws.waiters {
					select {
					case w <- struct{}{}:
					default:
					}
				}
			}
		}
		h.mu.Unlock()
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.ps != nil {
		_ = h.ps.Close()
	}
}
