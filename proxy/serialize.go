package proxy

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Serialize: deliveries of different events about one business object
// (an order) never run at the site together. A delivery that won its
// event's claim takes its object before the forward and gives it back once
// the site's answer is judged. On one replica, deliveries of one object
// queue in arrival order and only the head asks the store; the store's lock
// (dedupe.ObjectLocker: owner token, lease, fencing) keeps replicas apart.
// Duplicates, conflicts and refusals never get this far: they take no
// object.

// maxObjectWaiters bounds the deliveries of one object queued on one
// replica; past it a delivery is answered 503 at once, so a storm on one
// object cannot hold every max_inflight slot.
const maxObjectWaiters = 32

// objectQueues are the local queues, one per (scope, object) while anyone
// holds or waits on it.
type objectQueues struct {
	mu sync.Mutex
	m  map[[2]string]*objectQueue
}

type objectQueue struct {
	turns []chan struct{} // arrival order; the first one's channel is closed: its turn
}

// join queues a delivery on an object. turn is closed when it is at the
// head; leave must be called once it is done or gives up. ok is false when
// maxObjectWaiters are queued already.
func (o *objectQueues) join(scope, object string) (turn <-chan struct{}, leave func(), ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[[2]string]*objectQueue{}
	}
	k := [2]string{scope, object}
	q := o.m[k]
	if q == nil {
		q = &objectQueue{}
		o.m[k] = q
	}
	if len(q.turns) >= maxObjectWaiters {
		return nil, nil, false
	}
	ch := make(chan struct{})
	q.turns = append(q.turns, ch)
	if len(q.turns) == 1 {
		close(ch)
	}
	return ch, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		for i, c := range q.turns {
			if c != ch {
				continue
			}
			q.turns = append(q.turns[:i], q.turns[i+1:]...)
			if i == 0 && len(q.turns) > 0 {
				close(q.turns[0]) // the next in line
			}
			break
		}
		if len(q.turns) == 0 && o.m[k] == q {
			delete(o.m, k)
		}
	}, true
}

// busyPastWait is the logged reason of a delivery whose object stayed busy
// past serialize.wait.
const busyPastWait = "the business object stayed busy past serialize.wait"

// takeObject waits for the delivery's object and takes it in the store.
// The event's claim is held meanwhile (the heartbeat renews it). On false
// the delivery has been answered (503 object_busy, claim freed) and must
// end.
func (d *delivery) takeObject() bool {
	ser := d.s.Serialize
	if ser == nil || d.object == "" {
		return true
	}
	if d.p.locker == nil {
		d.log.Error("serialize is set but the store holds no object locks: the delivery runs unserialized", "key", d.key)
		return true
	}
	start := time.Now()
	deadline := start.Add(ser.Wait)
	turn, leave, ok := d.p.objects.join(ser.Scope, d.object)
	if !ok {
		d.objectBusy(start, "too many deliveries wait on this object")
		return false
	}
	d.leaveObject = leave
	timer := time.NewTimer(ser.Wait)
	defer timer.Stop()
	select {
	case <-turn:
	case <-timer.C:
		d.objectBusy(start, busyPastWait)
		return false
	}
	// At the head here: take the object in the store, waiting for another
	// replica's holder to free it (woken by the store where it can, else
	// on a short poll), until the deadline.
	for {
		var held bool
		err := d.p.storeCall(d.r, d.s, "lock_object", func(ctx context.Context) (err error) {
			held, err = d.p.locker.LockObject(ctx, ser.Scope, d.object, d.owner, d.s.Lease)
			return err
		})
		if err != nil {
			d.leaveQueue()
			d.release(d.attempt(OutcomeStoreError, http.StatusServiceUnavailable))
			d.done(OutcomeStoreError, http.StatusServiceUnavailable, "err", err.Error(), "scope", ser.Scope, "object", d.object)
			answerStoreDown(d.w)
			return false
		}
		if held {
			d.objectHeld.Store(true)
			d.objectWait = time.Since(start)
			d.p.m.objWait.WithLabelValues(d.s.Name).Observe(d.objectWait.Seconds())
			d.p.m.objBusy.WithLabelValues(ser.Scope).Inc()
			return true
		}
		if !d.waitObject(deadline) {
			d.objectBusy(start, busyPastWait)
			return false
		}
	}
}

// waitObject waits until the object may have been freed, the deadline
// passes or the sender hangs up; it reports whether to try again.
func (d *delivery) waitObject(deadline time.Time) bool {
	remaining := time.Until(deadline)
	if remaining <= 0 || d.r.Context().Err() != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(d.r.Context(), min(250*time.Millisecond, remaining))
	defer cancel()
	if n, ok := d.p.store.(dedupe.Notifier); ok {
		_ = n.WaitChange(ctx, dedupe.ObjectSender(d.s.Serialize.Scope), d.object)
	} else {
		<-ctx.Done()
	}
	return time.Now().Before(deadline) && d.r.Context().Err() == nil
}

// freeObject gives the object back, in the store and to the next local
// waiter. A lock lost meanwhile (lease expired, another holder) is logged;
// the store refuses to free another's.
func (d *delivery) freeObject() {
	if d.objectHeld.Load() {
		ser := d.s.Serialize
		d.objectHeld.Store(false)
		d.p.m.objBusy.WithLabelValues(ser.Scope).Dec()
		err := d.p.storeCall(d.r, d.s, "unlock_object", func(ctx context.Context) error {
			return d.p.locker.UnlockObject(ctx, ser.Scope, d.object, d.owner)
		})
		switch {
		case errors.Is(err, dedupe.ErrNotOwner):
			d.log.Error("business object lost while the site worked: another delivery about it may have run at the same time",
				"key", d.key, "scope", ser.Scope, "object", d.object)
		case err != nil:
			d.log.Warn("business object not freed: it frees when its lease ends", "key", d.key, "scope", ser.Scope, "object", d.object, "err", err)
		}
	}
	d.leaveQueue()
}

// leaveQueue leaves the object's local queue, once: the next delivery of
// the object on this replica gets its turn.
func (d *delivery) leaveQueue() {
	if d.leaveObject != nil {
		d.leaveObject()
		d.leaveObject = nil
	}
}

// objectBusy answers a delivery whose object stayed busy: its claim is
// freed (the sender's retry runs it), nothing is stored.
func (d *delivery) objectBusy(start time.Time, why string) {
	d.leaveQueue()
	waited := time.Since(start)
	d.objectWait = waited
	d.p.m.objWait.WithLabelValues(d.s.Name).Observe(waited.Seconds())
	d.release(d.attempt(OutcomeObjectBusy, http.StatusServiceUnavailable))
	d.done(OutcomeObjectBusy, http.StatusServiceUnavailable, "reason", why,
		"scope", d.s.Serialize.Scope, "object", d.object, "waited_ms", waited.Milliseconds())
	answerObjectBusy(d.w)
}
