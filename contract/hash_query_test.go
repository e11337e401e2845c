package contract

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func hashOf(t *testing.T, s *Sender, method, target, body string) (hash, legacy string) {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	h, l, err := s.RequestHash(NewRequest(r, r.URL.Path, []byte(body), netip.Addr{}))
	if err != nil {
		t.Fatal(err)
	}
	return h, l
}

// A GET callback's payload is its query: a changed amount under one id is
// another payload; the same fields in another order or spelling are not.
func TestRequestHashCoversTheQuery(t *testing.T) {
	req := &Sender{Name: "robokassa", Keys: []KeyPart{{Source: FromRequest, Name: "InvId"}}}
	body := &Sender{Name: "stripe", Keys: []KeyPart{{Source: FromBody, Name: "id"}}}

	get10, legacy := hashOf(t, req, "GET", "/r?OutSum=10&InvId=7&SignatureValue=ab", "")
	if legacy == "" || legacy == get10 {
		t.Fatalf("GET with a query: hash %s, legacy %q; want the legacy (body-only) form beside it", get10, legacy)
	}
	if h, _ := hashOf(t, req, "GET", "/r?OutSum=99&InvId=7&SignatureValue=cd", ""); h == get10 {
		t.Error("a changed GET callback hashes as the first one")
	}
	if h, _ := hashOf(t, req, "GET", "/r?InvId=7&SignatureValue=ab&OutSum=10", ""); h != get10 {
		t.Error("the same fields in another order hash differently")
	}
	if h, _ := hashOf(t, req, "GET", "/r?Out%53um=10&InvId=7&SignatureValue=ab&", ""); h != get10 {
		t.Error("the same fields as PHP reads them hash differently")
	}
	// A key that reads $_REQUEST: the query counts beside a body.
	p1, _ := hashOf(t, req, "POST", "/r?InvId=7", "OutSum=10")
	p2, _ := hashOf(t, req, "POST", "/r?InvId=8", "OutSum=10")
	if p1 == p2 {
		t.Error("a POST whose key reads the request: the query is not in the hash")
	}
	// A body sender: the query is not the payload, the hash is as before.
	b1, l1 := hashOf(t, body, "POST", "/s?x=1", `{"id":"e"}`)
	b2, _ := hashOf(t, body, "POST", "/s?x=2", `{"id":"e"}`)
	if b1 != b2 || l1 != "" {
		t.Errorf("a JSON sender's hash depends on the query: %s %s (legacy %q)", b1, b2, l1)
	}
	// No query: hashed in the query form too, with the query empty, so a
	// record it leaves is never the body-only form an older hookonce
	// stored (that form stays the legacy one, for those records).
	h0, l0 := hashOf(t, req, "GET", "/r", "")
	if h0 == mustHash(t, req, "") || l0 != mustHash(t, req, "") {
		t.Errorf("an empty GET hashes as %s (legacy %q), want the query form, legacy the body hash", h0, l0)
	}
	if hq, lq := hashOf(t, req, "GET", "/r?InvId=7", ""); hq == h0 || lq != l0 {
		t.Errorf("a GET with a query hashes as the one without: %s (legacy %q)", hq, lq)
	}
}

func mustHash(t *testing.T, s *Sender, body string) string {
	t.Helper()
	h, err := s.PayloadHash([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return h
}
