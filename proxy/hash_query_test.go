package proxy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// A GET callback's payload is its query (issue: a re-signed Robokassa GET
// with another OutSum under a known InvId was replayed the first one's
// answer). Executions are counted at the site.
func TestGetCallbackPayloadIsItsQuery(t *testing.T) {
	store, site, px := startRequestKeyed(t)
	get := func(q string) *http.Response { return send(t, px, "GET", "/result.php?"+q, "") }

	if r := get("OutSum=10&InvId=7"); r.StatusCode != 200 || site.Total() != 1 {
		t.Fatalf("first callback: %d, %d runs", r.StatusCode, site.Total())
	}
	for range 2 {
		if r := get("InvId=7&OutSum=10"); r.StatusCode != 200 || r.Header.Get(proxy.ReplayHeader) != "true" {
			t.Fatalf("exact repeat (fields in another order): %d, replayed %q", r.StatusCode, r.Header.Get(proxy.ReplayHeader))
		}
	}
	if r := get("OutSum=99&InvId=7"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("changed amount under one InvId: %d, want 422", r.StatusCode)
	}
	if n := site.Total(); n != 1 {
		t.Fatalf("the site ran %d times, want once", n)
	}

	// Upgrade: a record an older hookonce stored hashed the body alone.
	// Its sender's retry is still a duplicate, not a conflict.
	empty := sha256.Sum256(nil)
	ctx := context.Background()
	owner := "older-hookonce"
	res, err := store.Claim(ctx, dedupe.ClaimRequest{Sender: "rk", Key: "8", PayloadHash: hex.EncodeToString(empty[:]),
		Owner: owner, Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("seed claim: %v %v", res.Found, err)
	}
	if err := store.Complete(ctx, "rk", "8", owner, dedupe.Response{Status: 200, Body: []byte("OK8")}, dedupe.Attempt{At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if r := get("OutSum=10&InvId=8"); r.StatusCode != 200 || r.Header.Get(proxy.ReplayHeader) != "true" {
		t.Fatalf("retry of an event stored before the upgrade: %d, replayed %q; want the stored answer", r.StatusCode, r.Header.Get(proxy.ReplayHeader))
	}
	if n := site.Total(); n != 1 {
		t.Fatalf("the site ran %d times, want once", n)
	}
}

// A record this hookonce wrote from a request without a query holds the
// query form of the hash, never the older body-only form: a later request
// with the same body and some query is a changed payload (422), not a
// replay of the first (issue 33: the old form matched any query).
func TestQuerylessRecordIsNotTheOldForm(t *testing.T) {
	_, site, px := startRequestKeyed(t)
	post := func(target string) *http.Response {
		return send(t, px, "POST", target, "InvId=9&OutSum=10", "Content-Type", "application/x-www-form-urlencoded")
	}
	if r := post("/result.php"); r.StatusCode != 200 || site.Total() != 1 {
		t.Fatalf("first callback: %d, %d runs", r.StatusCode, site.Total())
	}
	if r := post("/result.php"); r.Header.Get(proxy.ReplayHeader) != "true" {
		t.Fatalf("its exact repeat: %d, replayed %q", r.StatusCode, r.Header.Get(proxy.ReplayHeader))
	}
	if r := post("/result.php?OutSum=99"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("the same body with a query that changes the amount: %d replayed %q, want 422", r.StatusCode, r.Header.Get(proxy.ReplayHeader))
	}
	if n := site.Total(); n != 1 {
		t.Fatalf("the site ran %d times, want once", n)
	}
}

// startRequestKeyed runs a sender keyed on $_REQUEST's InvId, as Robokassa
// calls back, by GET or POST, before a counting site.
func startRequestKeyed(t *testing.T) (dedupe.Store, *proxytest.Site, *httptest.Server) {
	t.Helper()
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.StartProxy(t, store, site.URL, `
senders:
  - name: rk
    match: { method: "GET,POST", path: /result.php }
    key: [ { request: InvId } ]
`)
	return store, site, px
}
