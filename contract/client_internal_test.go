package contract

import (
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// StripHopByHop deletes hopHeaders by their names as written: each must
// be the canonical form net/http keeps a header under, or a sender's
// hop-by-hop header would be judged and not forwarded (trap 28).
func TestHopHeadersCanonical(t *testing.T) {
	for _, k := range hopHeaders {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("hopHeaders has %q, canonical %q", k, c)
		}
	}
	h := http.Header{}
	for _, k := range []string{"connection", "PROXY-CONNECTION", "keep-alive", "proxy-authenticate", "Proxy-Authorization", "te", "TRAILER", "transfer-encoding", "upgrade"} {
		h.Add(k, "x")
	}
	h.Add("Connection", "X-Named, x-other")
	h.Add("X-Named", "1")
	h.Add("X-Other", "2")
	h.Add("X-Kept", "3")
	StripHopByHop(h)
	if len(h) != 1 || h.Get("X-Kept") != "3" {
		t.Fatalf("after StripHopByHop: %v, want X-Kept alone", h)
	}
}

// Select says why it picked a sender in the same words whether the words
// were made with the route (the first sender tried) or on the spot (after
// others were tried), and a caller appending to one Choice's Why changes
// no other's.
func TestSelectWhyTaken(t *testing.T) {
	c, err := Parse([]byte(`
senders:
  - name: paid
    match: { path: /hook, method: POST, when: [ { body: type, equals: order.paid } ] }
    key: [ { header: X-Id } ]
  - name: plain
    match: { path: /hook }
    key: [ { header: X-Id } ]
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt := c.Route("/hook")
	req := func(method, body string) *Request {
		r, _ := http.NewRequest(method, "http://x/hook", nil)
		r.Header.Set("Content-Type", "application/json")
		return c.Request(r, "/hook", []byte(body))
	}
	first := rt.Select(req("POST", `{"type":"order.paid"}`))
	if first.Sender == nil || first.Sender.Name != "paid" || len(first.Why) != 1 || first.Why[0] != takenWhy(first.Sender) ||
		!strings.HasPrefix(first.Why[0], "paid: ") || !strings.HasSuffix(first.Why[0], " hold") {
		t.Fatalf("first sender: %+v", first)
	}
	second := rt.Select(req("POST", `{"type":"other"}`))
	if second.Sender == nil || second.Sender.Name != "plain" || len(second.Why) != 2 || second.Why[1] != "plain: no conditions" {
		t.Fatalf("second sender: %+v", second)
	}
	mutated := append(first.Why, "appended")
	mutated[0] = "changed"
	again := rt.Select(req("POST", `{"type":"order.paid"}`))
	if len(again.Why) != 1 || again.Why[0] != takenWhy(again.Sender) {
		t.Fatalf("after an append to an earlier Choice's Why: %q", again.Why)
	}
}
