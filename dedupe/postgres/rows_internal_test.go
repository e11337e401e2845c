package postgres

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// jsonStrings are strings that encoding/json writes as they are and ones
// it escapes (quotes, backslashes, HTML characters, control characters,
// DEL, U+2028, non-ASCII, invalid UTF-8).
var jsonStrings = []string{"", "sender", "ok", `a"b`, `a\b`, "<script>&", "a<b", "a>b", "a&b", "tab\there", "nl\n", "\x00\x1f", "\x7f",
	"line\u2028sep\u2029", "Grüße, 東京", "bad\xff\xfeutf8", "text/plain; charset=utf-8"}

// TestAttemptJSONAsEncodingJSON: the attempt and header encoders write the
// bytes encoding/json writes, for every kind of string and number.
func TestAttemptJSONAsEncodingJSON(t *testing.T) {
	times := []time.Time{time.Date(2026, 12, 3, 17, 4, 5, 123456789, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.FixedZone("x", 3*3600)), {}}
	n := 0
	for _, at := range times {
		for _, s := range jsonStrings {
			for _, d := range []time.Duration{0, 1, -5, 1<<62 + 7} {
				a := dedupe.Attempt{At: at, By: s, Outcome: "completed" + s, Status: 200 + int(d%3), Duration: d, Replica: s, Wait: d / 2}
				want, err := json.Marshal(attemptJSON{At: a.At.UTC(), By: a.By, Outcome: a.Outcome, Status: a.Status,
					DurationNS: int64(a.Duration), Replica: a.Replica, WaitNS: int64(a.Wait)})
				if err != nil {
					t.Fatal(err)
				}
				got, err := encodeAttempt(a)
				if err != nil || got != string(want) {
					t.Fatalf("encodeAttempt(%+v) = %s, %v; encoding/json: %s", a, got, err, want)
				}
				n++
			}
		}
	}
	if _, err := encodeAttempt(dedupe.Attempt{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("a year past 9999 encoded: encoding/json refuses it")
	}
	headers := []http.Header{{}, {"Content-Type": {"application/json"}}, {"X-Nil": nil, "X-Empty": {}, "B": {"1", "2"}, "A": {"z"}}}
	for _, s := range jsonStrings {
		headers = append(headers, http.Header{s: {s, s + "x"}, "Set-Cookie": {s}})
	}
	big := http.Header{}
	for i := range 40 {
		big[string(rune('A'+i%26))+string(rune('a'+i))] = []string{jsonStrings[i%len(jsonStrings)]}
	}
	headers = append(headers, big)
	for _, h := range headers {
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeHeader(h); got != string(want) {
			t.Fatalf("encodeHeader(%v) = %s; encoding/json: %s", h, got, want)
		}
		n++
	}
	t.Logf("%d values compared", n)
}
