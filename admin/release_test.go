package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// held stores one record held in state unknown after an ambiguous outcome.
func held(t *testing.T, s dedupe.Store, key string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "shop", Key: key, PayloadHash: strings.Repeat("a", 64),
		Owner: "o-" + key, Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, "shop", key, "o-"+key, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "ambiguous", Status: 504}); err != nil {
		t.Fatal(err)
	}
}

func mustReleased(t *testing.T, s dedupe.Store, key string) {
	t.Helper()
	rec, err := s.Get(context.Background(), "shop", key)
	if err != nil || rec.State != dedupe.StateReleased || len(rec.Attempts) != 2 {
		t.Fatalf("%s after release: %+v %v, want released with the sender's and the operator's attempts", key, rec, err)
	}
	if a := rec.LastAttempt(); a.By != dedupe.AttemptByOperator || a.Outcome != "released" || a.Replica == "" {
		t.Fatalf("operator's attempt = %+v", a)
	}
}

// POST /v1/release frees a held event and keeps it, with its history; it
// needs the token.
func TestReleaseAPI(t *testing.T) {
	f := newFixture(t, testToken)
	held(t, f.store, "amb-1")
	if r := do(t, http.MethodPost, f.srv.URL+"/v1/release/shop/amb-1", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", r.status)
	}
	if rec, _ := f.store.Get(context.Background(), "shop", "amb-1"); rec.State != dedupe.StateUnknown {
		t.Fatalf("a refused release changed the record: %s", rec.State)
	}
	r := do(t, http.MethodPost, f.srv.URL+"/v1/release/shop/amb-1", testToken)
	var got map[string]any
	if r.status != http.StatusOK || json.Unmarshal(r.body, &got) != nil || got["released"] != true || got["was"] != "unknown" {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	mustReleased(t, f.store, "amb-1")
	if r := do(t, http.MethodPost, f.srv.URL+"/v1/release/shop/nope", testToken); r.status != http.StatusNotFound {
		t.Fatalf("release of no record: %d", r.status)
	}
}

// The page offers Release on a held event; the POST needs the session's
// CSRF token.
func TestReleaseButton(t *testing.T) {
	f := newFixture(t, testToken)
	held(t, f.store, "amb-2")
	jar := newSession(t, f.srv.URL)
	get, _ := http.NewRequest("GET", f.srv.URL+"/ui/events/shop/amb-2", nil)
	for _, c := range jar {
		get.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if !strings.Contains(page, `id="release"`) {
		t.Fatalf("no release form on a held event's page:\n%s", page)
	}
	i := strings.Index(page, `name="csrf" value="`)
	if i < 0 {
		t.Fatal("no csrf field")
	}
	token := page[i+len(`name="csrf" value="`):]
	token = token[:strings.IndexByte(token, '"')]

	// As the page's form posts: a fixed path, the event in the body.
	if !strings.Contains(page, `<form method="post" action="/ui/release" id="release">`) ||
		!strings.Contains(page, `<input type="hidden" name="key" value="amb-2">`) {
		t.Fatalf("release form does not post the key in its body:\n%s", page)
	}
	post := func(form url.Values) int {
		form.Set("sender", "shop")
		form.Set("key", "amb-2")
		return postForm(t, f.srv.URL+"/ui/release", jar, form)
	}
	if got := post(url.Values{}); got != http.StatusForbidden {
		t.Fatalf("no CSRF token: %d, want 403", got)
	}
	if rec, _ := f.store.Get(context.Background(), "shop", "amb-2"); rec.State != dedupe.StateUnknown {
		t.Fatalf("a refused release changed the record: %s", rec.State)
	}
	if got := post(url.Values{"csrf": {token}}); got != http.StatusSeeOther {
		t.Fatalf("release: %d, want 303", got)
	}
	mustReleased(t, f.store, "amb-2")
}
