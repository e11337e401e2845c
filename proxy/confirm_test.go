package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// unconfirmedStore applies the first Complete but loses its reply (as a
// PostgreSQL commit kept on the primary alone after its wait for the
// standby was cancelled), and confirms reads only when confirm is set;
// Get always sees what is there.
type unconfirmedStore struct {
	dedupe.Store
	completes atomic.Int64
	confirm   atomic.Bool
	confirms  atomic.Int64
}

func (u *unconfirmedStore) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	if u.completes.Add(1) == 1 {
		if err := u.Store.Complete(ctx, sender, key, owner, resp, att); err != nil {
			return err
		}
		return fmt.Errorf("complete: %w: reply lost", dedupe.ErrUnavailable)
	}
	return u.Store.Complete(ctx, sender, key, owner, resp, att)
}

func (u *unconfirmedStore) GetConfirmed(ctx context.Context, sender, key string) (dedupe.Record, error) {
	u.confirms.Add(1)
	if !u.confirm.Load() {
		return dedupe.Record{}, fmt.Errorf("confirmed get: %w: not confirmed", dedupe.ErrUnavailable)
	}
	return u.Store.Get(ctx, sender, key)
}

// A completion whose reply was lost counts as stored only when the store
// confirms it (#36, trap 35): a plain read that sees the answer is not
// enough. Unconfirmed until the lease runs out: logged and counted as not
// stored. Confirmed: stored, nothing logged.
func TestLostCompletionNeedsAConfirmedRead(t *testing.T) {
	for _, confirm := range []bool{false, true} {
		t.Run(fmt.Sprint("confirm=", confirm), func(t *testing.T) {
			store := &unconfirmedStore{Store: newStore(t)}
			store.confirm.Store(confirm)
			site := proxytest.NewSite(t, nil)
			px := proxytest.Start(t, store, site.URL, strings.Replace(shopConfig, "lease: 3s", "lease: 1s", 1))
			start := time.Now()
			if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"ev"}`); r.Status != 200 {
				t.Fatalf("status %d", r.Status)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("took %v", took)
			}
			logs := px.Logs.String()
			notStored := proxytest.Metric(t, px.Registry, "hookonce_answers_not_stored_total")
			if store.confirms.Load() == 0 {
				t.Fatal("the lost completion was never checked with GetConfirmed")
			}
			if confirm {
				if notStored != 0 || strings.Contains(logs, `"stored":false`) {
					t.Fatalf("a confirmed completion reported as not stored (%v):\n%s", notStored, logs)
				}
				return
			}
			if notStored != 1 || !strings.Contains(logs, `"stored":false`) ||
				!strings.Contains(logs, "the store did not confirm it") {
				t.Fatalf("an unconfirmed completion not reported as not stored (%v):\n%s", notStored, logs)
			}
		})
	}
}
