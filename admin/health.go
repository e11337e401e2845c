// Health: /healthz, and /readyz (the store's ping and a rate-limited,
// cached write probe; the site's report never fails it, site.go).

package admin

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hookonce/hookonce/internal/problem"
)

// writeProbe is the last result of Store.Probe, shared by every /readyz.
type writeProbe struct {
	mu      sync.Mutex
	at      time.Time     // when err was found; zero before the first probe
	err     error         // nil: the store took the write
	running chan struct{} // closed when the probe under way ends; nil when none runs
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	h.ready(w, r)
}

// readyz answers 200 when the store answers, is migrated (Ping) and takes
// writes (the write probe), 503 otherwise.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.ReadyTimeout)
	defer cancel()
	if err := h.o.Store.Ping(ctx); err != nil {
		h.log.Warn("admin: store not ready", "err", err)
		h.notReady(w, r, "the store is unreachable or not migrated", err)
		return
	}
	if err := h.writable(ctx); err != nil {
		h.notReady(w, r, "the store answers but does not take writes", err)
		return
	}
	h.ready(w, r)
}

// notReady answers 503 with the reason. The probe is unauthenticated: the
// store's error goes only to a caller with the token (or to any caller
// when none is configured, on loopback), and always to the log.
func (h *Handler) notReady(w http.ResponseWriter, r *http.Request, reason string, err error) {
	detail := reason
	if h.authorized(r) {
		detail += ": " + err.Error()
	} else {
		detail += " (see the hookonce log)"
	}
	w.Header().Set("Retry-After", "5")
	problem.Write(w, http.StatusServiceUnavailable, "Not ready", detail)
}

// writable answers from the last write probe while it is younger than
// ProbeInterval, and otherwise probes, one caller at a time: callers that
// arrive meanwhile wait for that probe's result.
func (h *Handler) writable(ctx context.Context) error {
	p := &h.probe
	p.mu.Lock()
	for {
		if !p.at.IsZero() && h.o.Now().Sub(p.at) < h.o.ProbeInterval {
			err := p.err
			p.mu.Unlock()
			return err
		}
		if p.running == nil {
			break
		}
		wait := p.running
		p.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the write probe: %w", ctx.Err())
		}
		p.mu.Lock()
	}
	done := make(chan struct{})
	p.running = done
	was := p.err
	p.mu.Unlock()

	// The probe's result is shared: a caller that hangs up must not make
	// it a failure.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.ReadyTimeout)
	err := h.o.Store.Probe(pctx)
	cancel()

	p.mu.Lock()
	p.at, p.err, p.running = h.o.Now(), err, nil
	close(done)
	p.mu.Unlock()
	switch {
	case err != nil:
		h.log.Warn("admin: the store does not take writes", "err", err)
	case was != nil:
		h.log.Info("admin: the store takes writes again")
	}
	return err
}
