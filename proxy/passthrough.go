package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// passthrough forwards a delivery without dedupe (row 3: the sender's
// dedupe: off or no_dedupe, a preset's shape of notification no key tells
// apart, missing_key: pass): nothing is claimed or stored, the site's
// answer goes back as it came, and the delivery is counted as outcome
// passthrough and logged with why. When the sender sets serialize and the
// delivery names its business object, the object is taken first, as for a
// claimed delivery, so two such deliveries about one order never run at
// the site together.
func (d *delivery) passthrough(reason string) {
	d.unclaimed = true
	if d.s.Serialize != nil && d.object != "" {
		d.owner = newOwner()
		if !d.takeObject() {
			return // answered: 503 object busy or store down
		}
		stop := func() {}
		if d.objectHeld.Load() { // else the store holds no object locks (logged)
			stop = d.renewObject()
		}
		defer func() {
			stop()
			d.freeObject()
		}()
	}
	d.done(OutcomePassthrough, 0, "reason", reason)
	d.forwardPlain()
}

// renewObject keeps a passed-through delivery's object lock alive while the
// site works (a claimed delivery's heartbeat does this with its claim).
func (d *delivery) renewObject() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d.s.Lease / 3)
		defer t.Stop()
		ser := d.s.Serialize
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				err := d.p.storeCall(d.r, d.s, "renew_object", func(ctx context.Context) error {
					return d.p.locker.RenewObject(ctx, ser.Scope, d.object, d.owner, d.s.Lease)
				})
				if errors.Is(err, dedupe.ErrNotOwner) {
					d.log.Error("business object lost while the site works: another delivery about it may run at the same time",
						"scope", ser.Scope, "object", d.object)
					return
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}
