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
type beat struct {
	quit  chan struct{}
	wg    sync.WaitGroup
	until atomic.Int64 // the lease's end as of the last renewal: monotonic nanos since epoch
	once  sync.Once
	// settling: the delivery is storing its outcome, which ends the claim;
	// a renewal that lands after it finds no claim, and that is no loss.
	settling atomic.Bool
}

func (b *beat) stop() { b.once.Do(func() { close(b.quit); b.wg.Wait() }) }

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

// heartbeat renews the lease every lease/3 while the site works and while
// the outcome is stored (trap 6).
func (d *delivery) heartbeat() *beat {
	b := &beat{quit: make(chan struct{})}
	b.until.Store(leaseEnd(d.claimSent, d.s.Lease))
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(d.s.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-b.quit:
				return
			case <-t.C:
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
					return
				default:
					d.log.Warn("lease not renewed", "key", d.key, "err", err)
				}
			}
		}
	}()
	return b
}
