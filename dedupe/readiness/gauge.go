package readiness

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge is hookonce_sender_ready{sender}: 1 when the sender's verdict is
// ready, 0 otherwise (not enough traffic, not ready). While a sender's
// rules changed and the new ones have not seen enough traffic yet, with
// nothing wrong under them, it keeps its value from before the change
// (no series when there was none): a change of the config is no sign
// that the provider changed what it sends, and a sender that was ready
// does not alert (HookonceSenderNoLongerReady) for it.
type Gauge struct {
	g    *prometheus.GaugeVec
	mu   sync.Mutex
	last map[string]float64
}

// NewGauge registers hookonce_sender_ready on reg (nil: unregistered).
func NewGauge(reg prometheus.Registerer) *Gauge {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hookonce_sender_ready",
		Help: "1 when the sender's readiness verdict (hookonce readiness) is ready, 0 when it is not ready or has not seen enough traffic.",
	}, []string{"sender"})
	if reg != nil {
		reg.MustRegister(g)
	}
	return &Gauge{g: g, last: map[string]float64{}}
}

// Set sets the gauge from r: one series per configured sender of the
// report, and the series of senders no longer in it removed.
func (g *Gauge) Set(r Report) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.g.Reset()
	last := map[string]float64{}
	for _, s := range r.Senders {
		if s.Verdict == UnknownSender {
			continue // renamed or removed: no series to alert on
		}
		v := 0.0
		if s.Verdict == GoLive {
			v = 1
		}
		if s.Verdict == NotEnough && s.EarlierRules > 0 {
			prev, ok := g.last[s.Sender]
			if !ok {
				continue
			}
			v = prev
		}
		last[s.Sender] = v
		g.g.WithLabelValues(s.Sender).Set(v)
	}
	g.last = last
}

// Watch builds the report every interval until ctx is done and sets the
// gauge from it; a failed build is logged and leaves the gauge as it was.
func (g *Gauge) Watch(ctx context.Context, every time.Duration, build func(ctx context.Context) (Report, error), log *slog.Logger) {
	run := func() {
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := build(bctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("readiness not computed; hookonce_sender_ready keeps its last values", "err", err)
			}
			return
		}
		g.Set(r)
	}
	run()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			run()
		}
	}
}
