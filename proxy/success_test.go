package proxy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// A 1C-Bitrix payment handler answers 200 whether it applied the payment
// or not; only the body says (row 10b, trap 21). A failure answer is
// passed on and not stored, so the sender's retry runs the handler again.
func TestSuccessReadFromTheAnswer(t *testing.T) {
	for _, tt := range []struct {
		name, success, ctype, body, fail, ok string
	}{
		{"body template", `{ body: "OK{form.InvId}" }`, "application/x-www-form-urlencoded", "InvId=77&OutSum=10", "", "OK77\n"},
		{"json", `{ json: { code: 0 } }`, "application/x-www-form-urlencoded", "InvId=78&OutSum=10", `{"code":13}`, `{"code":0}`},
		{"body_matches", `{ status: "200", body_matches: "^OK" }`, "application/json", `{"InvId":"79"}`, "FAIL", "OK"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if runs.Add(1) == 1 {
					_, _ = io.WriteString(w, tt.fail) // a lock timeout: nothing applied
					return
				}
				_, _ = io.WriteString(w, tt.ok)
			})
			store := newStore(t)
			key := "{ form: InvId }"
			if tt.ctype == "application/json" {
				key = "{ body: InvId }"
			}
			px := proxytest.Start(t, store, site.URL, `
senders:
  - name: pay
    match: { path: /bitrix/tools/sale_ps_result.php }
    key: [ `+key+` ]
    success: `+tt.success+`
`)
			deliver := func() *http.Response {
				return send(t, px.Server, "POST", "/bitrix/tools/sale_ps_result.php", tt.body, "Content-Type", tt.ctype)
			}
			r1 := deliver()
			if r1.StatusCode != 200 || r1.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("first answer: %d replayed=%q", r1.StatusCode, r1.Header.Get("Idempotent-Replayed"))
			}
			recs, _ := store.List(context.Background(), dedupe.ListFilter{})
			if len(recs) != 1 || recs[0].State != dedupe.StateReleased || recs[0].Response != nil || recs[0].LastAttempt().Outcome != "not_success" {
				t.Fatalf("a failure answer left %+v; want one released record, nothing stored, attempt not_success", recs)
			}
			deliver()
			r3 := deliver()
			if got := site.Total(); got != 2 {
				t.Fatalf("the handler ran %d times, want 2 (the failed run and the retry)", got)
			}
			if r3.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatal("the third delivery was not replayed from the store")
			}
			if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "pay", "outcome", "not_success"); n != 1 {
				t.Errorf("not_success counted %v times, want 1", n)
			}
		})
	}
}

// Without a success rule every final status is stored, as before.
func TestNoSuccessRuleStoresFinalAnswers(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {})
	store := newStore(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: pay
    match: { path: /p }
    key: [ { header: X-Event-Id } ]
`)
	send(t, px.Server, "POST", "/p", "", "X-Event-Id", "e1")
	send(t, px.Server, "POST", "/p", "", "X-Event-Id", "e1")
	if site.Total() != 1 {
		t.Fatalf("handler ran %d times", site.Total())
	}
	if _, err := get(t, store, "pay", "e1"); errors.Is(err, dedupe.ErrNotFound) {
		t.Fatal("empty 200 not stored")
	}
}
