package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Each claim keeps its delivery's fingerprint (dedupe.Fingerprint: field
// names with keyed digests of the values, never the values), so that a
// changed payload under a known key names the fields that changed even
// when no body is kept (store_request_body: false, the default), and the
// readiness report can name a fix on its first pass.

// loadFingerprintKey reads (or makes) the install's key from the store:
// at once, and when the store does not answer, again every 30 s in the
// background until it does. Until then claims keep no fingerprint; no
// delivery waits for it.
func (p *Proxy) loadFingerprintKey() {
	k, ok := p.store.(dedupe.FingerprintKeyer)
	if !ok {
		return
	}
	warned := false
	try := func() bool {
		ctx, cancel := context.WithTimeout(p.abortCtx, 3*time.Second)
		defer cancel()
		key, err := k.FingerprintKey(ctx)
		if err != nil || len(key) == 0 {
			// Once at WARN; the retries every 30 s at DEBUG.
			level := slog.LevelWarn
			if warned {
				level = slog.LevelDebug
			}
			warned = true
			p.log.Log(ctx, level, "fingerprint key not read from the store; claims keep no field fingerprint until it is (the readiness report cannot name changed fields)", "err", err)
			return false
		}
		if warned {
			p.log.Info("fingerprint key read from the store; claims keep field fingerprints again")
		}
		p.fpKey.Store(&key)
		return true
	}
	if try() {
		return
	}
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.abortCtx.Done():
				return
			case <-t.C:
				if try() {
					return
				}
			}
		}
	}()
}

// fingerprint is the delivery's fingerprint, made once; nil without a
// key or a read request.
func (d *delivery) fingerprint() []byte {
	if d.fp != nil || d.req == nil {
		return d.fp
	}
	key := d.p.fpKey.Load()
	if key == nil {
		return nil
	}
	d.fp = dedupe.Fingerprint(*key, d.req.EachField)
	return d.fp
}

// fingerprinter is d.fingerprint as a method value made once per
// delivery (ClaimRequest.Fingerprinter): the store calls it only when it
// writes the claim.
func (d *delivery) fingerprinter() []byte { return d.fingerprint() }

// maxChangedFields bounds the changed fields a conflict records.
const maxChangedFields = 50

// changedFields names the fields whose digests differ between the stored
// original's fingerprint and this delivery's; nil when either has none.
func (d *delivery) changedFields(stored dedupe.Record) []string {
	ch := dedupe.ChangedFields(stored.Fingerprint, d.fingerprint())
	if len(ch) > maxChangedFields {
		ch = ch[:maxChangedFields]
	}
	return ch
}
