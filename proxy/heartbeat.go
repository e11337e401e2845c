package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// beat is a running heartbeat: it renews the lease every lease/3 and knows
// until when the claim is surely ours.
//
// Almost every delivery ends long before its first renewal is due, so the
// common case costs one runtime timer and nothing else: no goroutine, no
// ticker channel. The timer's function runs only when a renewal is due
// (in a goroutine of the runtime's own), renews, and re-arms the timer for
// the next one.
type beat struct {
	d     *delivery
	every time.Duration
	t     *time.Timer
	until atomic.Int64 // the lease's end as of the last renewal: monotonic nanos since epoch
	// mu is held by a renewal from start to end, and by stop: once stop
	// returns, no renewal is running and none will start.
	mu      sync.Mutex
	stopped bool // under mu
	// settling: the delivery is storing its outcome, which ends the claim;
	// a renewal that lands after it finds no claim, and that is no loss.
	settling atomic.Bool
}

// stop ends the heartbeat, waiting for a renewal under way to finish. It
// may be called more than once.
func (b *beat) stop() {
	b.mu.Lock()
	b.stopped = true
	b.t.Stop() // a call already fired finds stopped set and does nothing
	b.mu.Unlock()
}

// epoch anchors beat.until to the monotonic clock: a paused process (a GC
// pause, a VM stall, SIGSTOP) or a wall clock stepped back cannot make a
// lease look longer than it is.
var epoch = time.Now()

// leaseEnd is when a lease of d asked for at asked ends, as beat.until.
func leaseEnd(asked time.Time, lease time.Duration) int64 { return int64(asked.Sub(epoch) + lease) }

// leaseLeft is how long the claim is ours for sure.
func (b *beat) leaseLeft() time.Duration { return time.Duration(b.until.Load()) - time.Since(epoch) }

// errLeaseLost: the delivery's lease may have run out before the site was
// called, and renewing it under the owner check failed: another delivery
// may hold the claim now, so this one must not forward.
var errLeaseLost = errors.New("the claim's lease ran out before the site was called")

// leaseHeld runs just before the request is written to the site. A claim
// whose lease may be ending (measured from when the claim or its last
// renewal was sent) is renewed under the owner check first; the delivery
// forwards only if that succeeds, so a process paused past its lease
// while a retry took the claim over never runs the handler a second time.
// What remains is the time between this check and the write (ARCHITECTURE
// trap 33).
func (d *delivery) leaseHeld(b *beat) error {
	if b.leaseLeft() > d.s.Lease/10 {
		return nil
	}
	asked := time.Now()
	err := d.p.storeCall(d.r, d.s, "renew", func(ctx context.Context) error {
		return d.renewLease(ctx)
	})
	if err != nil {
		return fmt.Errorf("%w: renewing it failed: %w", errLeaseLost, err)
	}
	b.until.Store(leaseEnd(asked, d.s.Lease))
	return nil
}

// BeforeWrite is the forward's last check before its request is written
// to the site (oneshot.WriteCheck): the delivery's leaseHeld, as a method
// so that the check needs no closure.
func (b *beat) BeforeWrite() error { return b.d.leaseHeld(b) }

// heartbeat renews the lease every lease/3 while the site works and while
// the outcome is stored (trap 6).
func (d *delivery) heartbeat() *beat {
	b := &beat{d: d, every: d.s.Lease / 3}
	b.until.Store(leaseEnd(d.claimSent, d.s.Lease))
	b.mu.Lock() // a renewal due at once (a tiny lease) waits for b.t
	b.t = time.AfterFunc(b.every, b.renew)
	b.mu.Unlock()
	return b
}

// renew is one renewal, run by the heartbeat's timer when it is due; it
// arms the timer for the next one, on the schedule a ticker of lease/3
// would keep (a renewal slower than that is followed at once by the next).
func (b *beat) renew() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	d := b.d
	asked := time.Now()
	err := d.p.storeCall(d.r, d.s, "renew", func(ctx context.Context) error {
		return d.renewLease(ctx)
	})
	if err == nil && d.objectHeld.Load() {
		ser := d.s.Serialize
		oerr := d.p.storeCall(d.r, d.s, "renew_object", func(ctx context.Context) error {
			return d.p.locker.RenewObject(ctx, ser.Scope, d.object, d.owner, d.s.Lease)
		})
		if errors.Is(oerr, dedupe.ErrNotOwner) && !b.settling.Load() {
			d.log.Error("business object lost while the site works: another delivery about it may run at the same time",
				"key", d.key, "scope", ser.Scope, "object", d.object)
		}
	}
	switch {
	case err == nil:
		b.until.Store(leaseEnd(asked, d.s.Lease))
	case errors.Is(err, dedupe.ErrNotOwner):
		b.until.Store(0)
		if !b.settling.Load() {
			d.log.Error("claim lost while the site works: another delivery may run the handler too", "key", d.key)
		} // else the outcome's own write ended the claim, or reports its loss itself
		return // the claim is gone: no more renewals
	default:
		d.log.Warn("lease not renewed", "key", d.key, "err", err)
	}
	b.t.Reset(max(b.every-time.Since(asked), 0))
}
