package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// POST /v1/accept with the admin token, wired to a proxy as serve wires
// it: without the bearer header nothing runs (401); with it the refused
// payload runs at the site once (200, the conflict now accepted, its
// accepted key); again is 409 and runs nothing; no such conflict is 404.
// The lists take key= as a whole part of the key.
func TestAcceptAPI(t *testing.T) {
	site := proxytest.NewSite(t, nil)
	store := openStore(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: tbank
    match: { path: /hooks/tbank }
    key: [ { body: id }, { body: status } ]
    store_request_body: true
`)
	url := px.URL + "/hooks/tbank"
	if r := proxytest.Post(t, url, `{"id":"8742591","status":"CONFIRMED","amount":100}`); r.Status != 200 {
		t.Fatalf("first delivery: %d", r.Status)
	}
	if r := proxytest.Post(t, url, `{"id":"8742591","status":"CONFIRMED","amount":300}`); r.Status != 422 {
		t.Fatalf("changed delivery: %d", r.Status)
	}
	h, err := admin.New(admin.Options{Store: store, Token: testToken, Logger: slog.New(slog.DiscardHandler),
		Accept: func(ctx context.Context, sender, key, id, by string) (admin.Acceptance, error) {
			res, err := px.Proxy.Accept(ctx, sender, key, id, by)
			if errors.Is(err, proxy.ErrNoSender) {
				err = fmt.Errorf("%w: %w", admin.ErrRefused, err)
			}
			return admin.Acceptance{Conflict: view.Conflict(res.Conflict),
				Redelivery: admin.Redelivery{Outcome: res.Outcome, Status: res.Status}}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	t.Cleanup(adm.Close)

	var cs []view.ConflictJSON
	r := do(t, "GET", adm.URL+"/v1/conflicts?key=8742591", testToken)
	if err := json.Unmarshal(r.body, &cs); r.status != 200 || err != nil || len(cs) != 1 || !cs[0].Acceptable {
		t.Fatalf("GET /v1/conflicts?key=8742591: %d %s", r.status, r.body)
	}
	var recs []view.RecordJSON
	r = do(t, "GET", adm.URL+"/v1/events?key=8742591", testToken)
	if err := json.Unmarshal(r.body, &recs); r.status != 200 || err != nil || len(recs) != 1 || recs[0].Key != "8742591:CONFIRMED" {
		t.Fatalf("GET /v1/events?key=8742591: %d %s", r.status, r.body)
	}
	accept := adm.URL + "/v1/accept/tbank/8742591:CONFIRMED?by=support"
	if r := do(t, "POST", accept, ""); r.status != http.StatusUnauthorized || site.Executions("8742591") != 1 {
		t.Fatalf("accept without the token: %d, executions %d", r.status, site.Executions("8742591"))
	}
	r = do(t, "POST", accept, testToken)
	var res admin.Acceptance
	if err := json.Unmarshal(r.body, &res); r.status != 200 || err != nil || res.Outcome != "processed" ||
		res.Conflict.AcceptedBy != "support" || res.Conflict.AcceptedKey != "8742591:CONFIRMED:accepted-"+cs[0].ID {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	if n := site.Executions("8742591"); n != 2 {
		t.Fatalf("executions after accept = %d, want 2", n)
	}
	if r := do(t, "POST", accept, testToken); r.status != http.StatusConflict || !strings.Contains(string(r.body), "already accepted") ||
		site.Executions("8742591") != 2 {
		t.Fatalf("second accept: %d %s, executions %d", r.status, r.body, site.Executions("8742591"))
	}
	if r := do(t, "POST", adm.URL+"/v1/accept/tbank/nope", testToken); r.status != http.StatusNotFound {
		t.Fatalf("accept of no conflict: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", adm.URL+"/v1/accept/gone/8742591:CONFIRMED", testToken); r.status != http.StatusConflict {
		t.Fatalf("accept for a sender not configured: %d %s", r.status, r.body)
	}
}
