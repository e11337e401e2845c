package contract_test

import (
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// cgiName is a header's name as PHP's $_SERVER has it, written here from
// the CGI rule (RFC 3875 4.1.18: "-" becomes "_", upper case), not from
// contract's code.
func cgiName(h string) string {
	return "HTTP_" + strings.ToUpper(strings.ReplaceAll(h, "-", "_"))
}

// phpReads is what PHP reads for cgi name n from headers sent in order:
// the last one sent under any spelling (php-fpm and php -S keep the last).
func phpReads(sent [][2]string, n string) (string, bool) {
	v, ok := "", false
	for _, h := range sent {
		if cgiName(h[0]) == n {
			v, ok = h[1], true
		}
	}
	return v, ok
}

func cgiSender(t *testing.T) *contract.Sender {
	t.Helper()
	t.Setenv("HOOKONCE_TEST_SECRET", "s3cret")
	return mustSender(t,
		"key: [{header: X-Event-Id}]",
		"signature: {scheme: hmac-sha256, header: X-Signature, encoding: hex, secret_env: HOOKONCE_TEST_SECRET}")
}

// Two spellings that CGI merges are one header sent twice: the extra
// underscore spelling of the signature or of the event id cannot make
// hookonce judge another value than the site reads.
func TestHeadersPHPMergesAreOneHeader(t *testing.T) {
	s := cgiSender(t)
	body := `{"amount":10}`
	sig := hex.EncodeToString(mac([]byte("s3cret"), body))
	judge := func(kv ...string) (string, error, error) {
		req := delivery(t, "POST", "/hook", "application/json", body, "", kv...)
		if err := s.Verify(req, time.Now()); err != nil {
			return "", err, nil
		}
		k, err := s.Key(req)
		return k, nil, err
	}
	if k, sigErr, keyErr := judge("X-Signature", sig, "X-Event-Id", "u1"); sigErr != nil || keyErr != nil || k != "u1" {
		t.Fatalf("genuine: key %q, signature %v, key error %v", k, sigErr, keyErr)
	}
	if _, sigErr, _ := judge("X-Signature", sig, "X_Signature", "junk", "X-Event-Id", "u1"); sigErr == nil {
		t.Fatal("X_Signature beside X-Signature: signature held; PHP reads one of the two")
	}
	if k, _, keyErr := judge("X-Signature", sig, "X-Event-Id", "u1", "X_Event_Id", "u999"); keyErr == nil {
		t.Fatalf("X_Event_Id beside X-Event-Id: key %q; PHP reads one of the two", k)
	}
	if k, sigErr, keyErr := judge("X_Signature", sig, "X_event_ID", "u7"); sigErr != nil || keyErr != nil || k != "u7" {
		t.Fatalf("underscore spellings alone: key %q, signature %v, key error %v; PHP reads them as the headers", k, sigErr, keyErr)
	}
}

// The property behind it, over random spellings: whenever hookonce reads
// an event id from a header, it is the value PHP reads under that name,
// and no other spelling of it was sent.
func TestCGIHeaderJudgedAsPHPReads(t *testing.T) {
	s := cgiSender(t)
	spellings := []string{"X-Event-Id", "x-event-id", "X_Event_Id", "X_EVENT-ID", "x-Event_id"}
	others := []string{"X-Other", "X_Other", "Content-Length_", "Accept"}
	rnd := rand.New(rand.NewPCG(33, 1))
	for i := range 2000 {
		var sent [][2]string
		var kv []string
		for range 1 + rnd.IntN(4) {
			name := spellings[rnd.IntN(len(spellings))]
			if rnd.IntN(3) == 0 {
				name = others[rnd.IntN(len(others))]
			}
			v := "v" + string(rune('a'+rnd.IntN(5)))
			sent = append(sent, [2]string{name, v})
			kv = append(kv, name, v)
		}
		req := delivery(t, "POST", "/hook", "application/json", `{}`, "", kv...)
		k, err := s.Key(req)
		want, ok := phpReads(sent, cgiName("X-Event-Id"))
		n := 0
		for _, h := range sent {
			if cgiName(h[0]) == cgiName("X-Event-Id") {
				n++
			}
		}
		switch {
		case err == nil && (!ok || k != want):
			t.Fatalf("case %d %v: hookonce read %q, PHP reads %q (present %v)", i, sent, k, want, ok)
		case err == nil && n > 1:
			t.Fatalf("case %d %v: hookonce read %q from one of %d spellings", i, sent, k, n)
		case err != nil && n == 1:
			t.Fatalf("case %d %v: one spelling sent, hookonce: %v", i, sent, err)
		}
	}
}

// CGIHeader leaves the header it is given as it was and returns the
// merged one (Inspect forwards that: TestInspectForwardsTheJudgedHeaderNames).
func TestCGIHeaderLeavesTheRequest(t *testing.T) {
	h := http.Header{"X_custom": {"a"}, "X-Custom": {"b"}, "Accept": {"*/*"}}
	j := contract.CGIHeader(h)
	if got := j.Values("X-Custom"); len(got) != 2 {
		t.Fatalf("judged X-Custom = %q, want both spellings' values", got)
	}
	if len(h) != 3 || h.Get("X-Custom") != "b" || h["X_custom"][0] != "a" {
		t.Fatalf("the request's own headers changed: %v", h)
	}
	// The body is read by the real Content-Type only (CGI's CONTENT_TYPE):
	// a Content_Type beside it is not a second one.
	if j := contract.CGIHeader(http.Header{"Content-Type": {"application/json"}, "Content_type": {"text/plain"}}); len(j.Values("Content-Type")) != 1 {
		t.Fatalf("judged Content-Type = %q, want the real header's only", j.Values("Content-Type"))
	}
	plain := http.Header{"Accept": {"*/*"}}
	if j := contract.CGIHeader(plain); len(j) != 1 {
		t.Fatalf("plain header changed: %v", j)
	}
}
