package contract_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

func mustLoad(t *testing.T, path string) *contract.Contract {
	t.Helper()
	c, err := contract.Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return c
}

func TestLoadValid(t *testing.T) {
	c := mustLoad(t, "testdata/valid.yaml")
	if c.MaxBody != 64<<10 || c.Upstream != "http://127.0.0.1:8000" || len(c.Senders) != 2 {
		t.Fatalf("contract = %+v", c)
	}
	shop := c.Sender("shop")
	if shop.TTL != 96*time.Hour || shop.InProgress != "reject" || shop.Lease != contract.DefaultLease {
		t.Errorf("shop inherits defaults wrongly: ttl %s in_progress %s lease %s", shop.TTL, shop.InProgress, shop.Lease)
	}
	if shop.ConflictStatus != 409 || shop.Ambiguous != "hold" || shop.DuplicateStatus != 200 || shop.Hash != "json" {
		t.Errorf("shop own settings lost: %+v", shop)
	}
	legacy := c.Sender("legacy")
	if !slices.Equal(legacy.Methods, []string{"POST"}) || legacy.InProgress != "wait" || legacy.TTL != 96*time.Hour {
		t.Errorf("legacy = methods %v in_progress %s ttl %s", legacy.Methods, legacy.InProgress, legacy.TTL)
	}
	if rt := c.Route("/api/webhooks/orders"); rt == nil || rt.Senders[0] != shop {
		t.Errorf("prefix route = %v, want shop's", rt)
	} else if rt.AcceptsMethod("GET") {
		t.Errorf("GET accepted on %s", rt.Path)
	}
	// The script's own path runs for PATH_INFO variants too.
	if rt := c.Route("/pay/callback.php/x"); rt == nil || rt.Senders[0] != legacy {
		t.Errorf("PATH_INFO variant route = %v, want legacy's", rt)
	}
}

func TestLoadInvalidNamesFileSenderField(t *testing.T) {
	_, err := contract.Load("testdata/invalid.yaml")
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	want := []string{
		`testdata/invalid.yaml:4: sender "shop": field match.path: "api/webhooks" must start with /`,
		`testdata/invalid.yaml:5: sender "shop": field key: required: at least one of header, body, query, form or request (or a preset that sets it)`,
		`testdata/invalid.yaml:6: sender "shop": field in_progress: "later": want one of wait, reject`,
		`testdata/invalid.yaml:9: sender "shop": field key[0]: set exactly one of header, body, query, form or request`,
		`testdata/invalid.yaml:10: sender "shop": field conflict.status: 200: want a 4xx or 5xx status`,
		`testdata/invalid.yaml:11: sender "shop": field duplicate: "maybe": want replay or a status such as 200`,
		`testdata/invalid.yaml:7: sender "shop": field name: duplicate sender name`,
	}
	got := strings.Split(err.Error(), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "senders:\n  - name: a\n    match: {path: /a}\n    key: [{header: X}]\n    colour: red\n", `x.yaml:5: sender "a": field colour: unknown setting "colour"`},
		{"bad duration", "defaults:\n  ttl: forever\n", `x.yaml:2: field defaults.ttl: invalid duration "forever"`},
		{"bad size", "max_body: lots\n", `x.yaml:1: field max_body: invalid size "lots"`},
		{"short lease", "defaults:\n  lease: 1ms\n", `x.yaml:2: field defaults.lease: 1ms is too short`},
		{"unknown preset", "senders:\n  - name: a\n    preset: lemonsqueezy\n    match: {path: /a}\n", `x.yaml:3: sender "a": field preset: unknown preset "lemonsqueezy"`},
		{"signature without scheme", "senders:\n  - name: a\n    match: {path: /a}\n    key: [{header: X}]\n    signature: {secret_env: S}\n", `x.yaml:5: sender "a": field signature.scheme: required`},
		{"ignore without json", "senders:\n  - name: a\n    match: {path: /a}\n    key: [{header: X}]\n    ignore: [a]\n", `field ignore: only applies with hash: json`},
		{"bad name", "senders:\n  - name: Shop Two\n    match: {path: /a}\n    key: [{header: X}]\n", `field name: "Shop Two": use lowercase`},
		{"bad final", "senders:\n  - name: a\n    match: {path: /a}\n    key: [{header: X}]\n    final_statuses: 2xx,7xx\n", `field final_statuses: invalid status "7xx"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := contract.Parse([]byte(tt.yaml), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestKeyExtraction(t *testing.T) {
	c := mustLoad(t, "testdata/valid.yaml")
	shop, legacy := c.Sender("shop"), c.Sender("legacy")
	tests := []struct {
		name    string
		sender  *contract.Sender
		header  http.Header
		ctype   string
		body    string
		want    string
		missing bool
	}{
		{"composite", shop, http.Header{"X-Event-Id": {"e1"}}, "", `{"data":{"order":{"id":42}}}`, "e1:42", false},
		{"string id", shop, http.Header{"X-Event-Id": {"e1"}}, "", `{"data":{"order":{"id":"A-1"}}}`, "e1:A-1", false},
		{"header absent", shop, http.Header{}, "", `{"data":{"order":{"id":42}}}`, "", true},
		{"field absent", shop, http.Header{"X-Event-Id": {"e1"}}, "", `{"data":{}}`, "", true},
		{"not json", shop, http.Header{"X-Event-Id": {"e1"}}, "", `id=42`, "", true},
		{"object id", shop, http.Header{"X-Event-Id": {"e1"}}, "", `{"data":{"order":{"id":{}}}}`, "", true},
		{"form", legacy, http.Header{}, "application/x-www-form-urlencoded", "OutSum=10&InvId=77", "77", false},
		{"form wrong type", legacy, http.Header{}, "application/json", `{"InvId":77}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tt.body))
			for k, v := range tt.header {
				r.Header[k] = v
			}
			if tt.ctype != "" {
				r.Header.Set("Content-Type", tt.ctype)
			}
			got, err := tt.sender.Key(keyRequest(r, []byte(tt.body)))
			if tt.missing {
				if err == nil {
					t.Fatalf("Key = %q, want a missing-key error", got)
				}
				if strings.Contains(err.Error(), tt.body) && tt.body != "" {
					t.Fatalf("error quotes the body: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Key = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFinalStatuses(t *testing.T) {
	set, err := contract.ParseStatusSet("2xx,4xx")
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[int]bool{200: true, 204: true, 400: true, 422: true, 408: false, 425: false, 429: false, 500: false, 503: false, 302: false} {
		if got := set.Final(status); got != want {
			t.Errorf("Final(%d) = %v, want %v", status, got, want)
		}
	}
	named, _ := contract.ParseStatusSet("2xx,429")
	if !named.Final(429) || named.Final(404) {
		t.Errorf("2xx,429: Final(429)=%v Final(404)=%v", named.Final(429), named.Final(404))
	}
}

func TestCanonicalJSON(t *testing.T) {
	a, err := contract.CanonicalJSON([]byte(`{"b": 1.50, "a": {"attempt": 2, "x": "<&>"}, "attempt": 3}`), []string{"attempt", "a.attempt"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"x":"<&>"},"b":1.50}`; string(a) != want {
		t.Fatalf("canonical = %s, want %s", a, want)
	}
}

func TestChangedPaths(t *testing.T) {
	got := contract.ChangedPaths(
		[]byte(`{"id":"e1","amount":100,"items":[{"qty":1},{"qty":2}],"meta":{"a":1}}`),
		[]byte(`{"id":"e1","amount":150,"items":[{"qty":1},{"qty":3},{"qty":4}],"meta":{"b":1}}`))
	want := "[amount items.1.qty items.2 meta.a meta.b]"
	if fmt.Sprint(got) != want {
		t.Fatalf("ChangedPaths = %v, want %s", got, want)
	}
	if got := contract.ChangedPaths([]byte(`not json`), []byte(`{}`)); got != nil {
		t.Fatalf("non-JSON gave %v", got)
	}
}

func TestTrustedProxies(t *testing.T) {
	c, err := contract.Parse([]byte("trusted_proxies: [10.0.0.0/8, 127.0.0.1, \"::1\"]\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{"10.1.2.3:5000": true, "127.0.0.1:1": true, "127.0.0.2:1": false, "[::1]:80": true, "192.168.1.1:80": false, "garbage": false} {
		if got := c.TrustedPeer(addr); got != want {
			t.Errorf("TrustedPeer(%s) = %v, want %v", addr, got, want)
		}
	}
	if _, err := contract.Parse([]byte("trusted_proxies: [nginx]\n"), "x.yaml"); err == nil || !strings.Contains(err.Error(), `x.yaml:1: field trusted_proxies: "nginx"`) {
		t.Fatalf("bad entry: %v", err)
	}
}
