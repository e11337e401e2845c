package proxy_test

// An answer the site started and did not finish within upstream_timeout:
// the site has the request (it sent a status), so the forward is
// ambiguous (row 10a), never "the site could not be reached". Before, a
// body read that failed after the status was classified by the one-shot
// transport's write alone (nothing wrong there), called unreachable, and a
// streamed answer then ended with a clean chunked terminator: the sender
// took a cut 200 for a whole one.

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// slowAnswer sends a 200, then chunks of size bytes every 100ms, n of them
// (far past the 2s upstream_timeout of shopConfig when n is large).
func slowAnswer(size, n int) http.HandlerFunc {
	chunk := make([]byte, size)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		for range n {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func TestAnswerCutByTimeout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int    // bytes per chunk: over max_stored_body streams
		policy string // the sender's ambiguous:
		state  dedupe.State
	}{
		{"streamed", 64 << 10, "release", dedupe.StateReleased},
		{"held", 16, "release", dedupe.StateReleased},
		{"held, ambiguous: hold", 16, "hold", dedupe.StateUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := proxytest.NewSite(t, slowAnswer(tc.size, 40))
			store := newStore(t)
			px := proxytest.Start(t, store, site.URL, shopConfig+"    max_stored_body: 64KiB\n    ambiguous: "+tc.policy+"\n")
			resp, err := http.Post(px.URL+"/hooks/shop", "application/json", strings.NewReader(`{"id":"cut"}`))
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			whole := int64(40 * tc.size)
			switch {
			case resp.StatusCode == http.StatusOK && err == nil:
				t.Fatalf("the sender got 200 and %d of %d bytes with no error: a cut answer passed as whole", n, whole)
			case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusGatewayTimeout:
				t.Fatalf("status %d, want the site's 200 cut off, or 504", resp.StatusCode)
			}
			if got := site.Executions("cut"); got != 1 {
				t.Fatalf("site ran %d times, want 1", got)
			}
			rec, err := get(t, store, "shop", "cut")
			if err != nil || rec.State != tc.state {
				t.Fatalf("record %+v (%v), want state %s", rec.State, err, tc.state)
			}
			if got := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "ambiguous"); got != 1 {
				t.Fatalf("outcome ambiguous counted %v times, want 1", got)
			}
		})
	}
}
