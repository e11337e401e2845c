package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// unreadableAccepts is a real store whose AcceptedConflict fails as an
// unreachable store does.
type unreadableAccepts struct{ dedupe.Store }

func (unreadableAccepts) AcceptedConflict(context.Context, string, string, string) (dedupe.Conflict, error) {
	return dedupe.Conflict{}, fmt.Errorf("accepted conflict: %w", dedupe.ErrUnavailable)
}

// TestAcceptedPayloadsUnreadable: when the store cannot say whether a
// changed payload was accepted, the delivery gets 503 (retry later):
// never a plain forward, even under on_store_error: forward, and never
// read as "not accepted". Counted at the site.
func TestAcceptedPayloadsUnreadable(t *testing.T) {
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, unreadableAccepts{newStore(t)}, site.URL, `
senders:
  - name: open
    match: { path: /open }
    key: [ { body: id } ]
    on_store_error: forward
    store_request_body: true
`)
	if r := proxytest.Post(t, px.URL+"/open", `{"id":"u1","amount":1}`); r.Status != http.StatusOK {
		t.Fatalf("first: %d", r.Status)
	}
	if r := proxytest.Post(t, px.URL+"/open", `{"id":"u1","amount":2}`); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("changed payload with the accepted payloads unreadable: %d %s, want 503", r.Status, r.Body)
	}
	if n := site.Executions("u1"); n != 1 {
		t.Fatalf("site ran %d times, want 1", n)
	}
}
