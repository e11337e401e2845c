package proxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// webhookLines is each msg=webhook line of a JSON log, decoded.
func webhookLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "webhook" {
			out = append(out, m)
		}
	}
	return out
}

// A site that answers with a failure (here 500) frees the claim for the
// sender's retry; the line says so at WARN, at ERROR from the third such
// answer in a row, and a good answer resets the count. Refusals a sender
// got (a changed payload) are WARN too; a processed delivery stays INFO.
func TestSiteFailuresAndRefusalsAreLoggedAtWarn(t *testing.T) {
	fail := true
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if fail && r.Header.Get("X-Event-Id") != "good" {
			http.Error(w, "PHP Fatal error", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`)
	post := func(id, body string) int {
		return proxytest.Post(t, px.URL+"/hooks/shop", body, "X-Event-Id", id).Status
	}
	for _, id := range []string{"a", "b", "c"} {
		if got := post(id, `{}`); got != http.StatusInternalServerError {
			t.Fatalf("delivery %s: %d, want the site's 500", id, got)
		}
	}
	if got := post("good", `{"n":1}`); got != http.StatusOK {
		t.Fatalf("good delivery: %d", got)
	}
	if got := post("d", `{}`); got != http.StatusInternalServerError {
		t.Fatalf("delivery d: %d", got)
	}
	if got := post("good", `{"n":2}`); got != http.StatusUnprocessableEntity {
		t.Fatalf("changed payload: %d, want 422", got)
	}
	for _, id := range []string{"a", "b", "c", "good", "d"} {
		if n := site.Executions(id); n != 1 {
			t.Fatalf("the site ran %s %d times, want 1", id, n)
		}
	}

	type line struct{ level, key, outcome string }
	var got []line
	for _, m := range webhookLines(t, px.Logs.String()) {
		got = append(got, line{m["level"].(string), m["key"].(string), m["outcome"].(string)})
		if m["outcome"] == "released" && m["site_failed"] != true {
			t.Errorf("released line without site_failed: %v", m)
		}
	}
	want := []line{
		{"WARN", "a", "released"}, {"WARN", "b", "released"}, {"ERROR", "c", "released"},
		{"INFO", "good", "processed"},
		{"WARN", "d", "released"}, // the count starts again after a good answer
		{"WARN", "good", "conflict"},
	}
	if len(got) != len(want) {
		t.Fatalf("webhook lines %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("webhook line %d: %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}
