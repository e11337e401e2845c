package notify

import (
	"context"
	"sync"
	"time"
)

// outbox is one channel's bounded queue and its sender: messages in
// order, each tried up to Options.Attempts times with backoff; when full,
// the oldest waiting message is dropped and the next one sent says so.
type outbox struct {
	n    *Notifier
	name string

	mu      sync.Mutex
	ch      Channel
	q       []Message
	dropped int // messages dropped (full queue, or tries used up) not yet said
	wake    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newOutbox(n *Notifier, name string) *outbox {
	return &outbox{n: n, name: name, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (b *outbox) setChannel(c Channel) {
	b.mu.Lock()
	b.ch = c
	b.mu.Unlock()
}

func (b *outbox) stop() { b.once.Do(func() { close(b.done) }) }

func (b *outbox) put(m Message) {
	b.mu.Lock()
	if len(b.q) >= b.n.o.Queue {
		b.q = b.q[1:]
		b.dropped++
		b.n.o.Logger.Warn("notice dropped: the channel's queue is full (it has been failing)", "channel", b.name, "queue", b.n.o.Queue)
	}
	b.q = append(b.q, m)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest message, with a word on the messages dropped
// before it (said: how many it tells of).
func (b *outbox) next() (m Message, ch Channel, said int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.q) == 0 {
		return Message{}, nil, 0, false
	}
	m = b.q[0]
	b.q = b.q[1:]
	if b.dropped > 0 {
		m.Text += "\n\n(" + itoa(b.dropped) + " earlier notices were dropped: this channel failed, and they could not wait.)"
	}
	return m, b.ch, b.dropped, true
}

func (b *outbox) run(ctx context.Context) {
	log := b.n.o.Logger
	for {
		m, ch, said, ok := b.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-b.done:
				return
			case <-b.wake:
				continue
			}
		}
		delay := b.n.o.Backoff
		for try := 1; ; try++ {
			sctx, cancel := context.WithTimeout(ctx, b.n.o.SendTimeout)
			err := ch.Send(sctx, m)
			cancel()
			if err == nil {
				b.mu.Lock()
				b.dropped -= said
				b.mu.Unlock()
				log.Info("notice sent", "channel", b.name, "kind", string(m.Kind), "id", m.ID, "events", m.Count)
				break
			}
			b.n.failures.WithLabelValues(b.name).Inc()
			if ctx.Err() != nil {
				return
			}
			if try >= b.n.o.Attempts {
				b.mu.Lock()
				b.dropped++
				b.mu.Unlock()
				log.Error("notice not sent: gave up after its tries", "channel", b.name, "kind", string(m.Kind), "id", m.ID, "tries", try, "err", err)
				break
			}
			log.Warn("notice not sent; trying again", "channel", b.name, "kind", string(m.Kind), "id", m.ID, "try", try, "retry_in", delay, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-b.done:
				return
			case <-time.After(delay):
			}
			delay *= 2
			if delay > b.n.o.MaxBackoff {
				delay = b.n.o.MaxBackoff
			}
			b.mu.Lock()
			ch = b.ch // a reload may have fixed the channel
			b.mu.Unlock()
		}
	}
}
