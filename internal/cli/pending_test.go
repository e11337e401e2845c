package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
)

// owe claims (sender, key) and defers it as ack: durable does: done, with
// hookonce's answer, the delivery owed to the site; held by its first try
// for lease when lease > 0. It returns the owner.
func owe(t *testing.T, s dedupe.Store, sender, key string, lease time.Duration) string {
	t.Helper()
	ctx := context.Background()
	owner := "o-" + key
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h-" + key, Owner: owner,
		Lease: time.Minute, TTL: time.Hour, Request: &dedupe.StoredRequest{Method: "POST", URI: "/cdek"}, RequestBody: []byte(key)})
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim %s/%s = %v, %v", sender, key, res.Found, err)
	}
	d := s.(dedupe.Deferrer)
	if err := d.Defer(ctx, sender, key, owner, dedupe.DeferRequest{Ack: dedupe.Response{Status: 200, Body: []byte("OK")}, RetryFor: 72 * time.Hour, Lease: lease}); err != nil {
		t.Fatalf("defer %s/%s: %v", sender, key, err)
	}
	return owner
}

// list --status pending lists the records owed to the site and nothing
// else; list and lookup say plainly that hookonce still owes the site the
// delivery, how many tries failed, and when the next is due; --json
// carries a pending object.
func TestListAndLookupShowOwedDeliveries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	dsn := "sqlite:" + path
	store := servetest.OpenStore(t, dsn)
	ctx := context.Background()

	// "retried": its first try failed (the site answered 503), the next
	// is due in an hour. "trying": a try holds it now. "plain": a done
	// record the site took synchronously.
	owner := owe(t, store, "cdek", "retried", time.Minute)
	if err := store.(dedupe.Deferrer).SettlePending(ctx, "cdek", "retried", owner, dedupe.PendingSettle{Outcome: dedupe.SettleRetry, RetryIn: time.Hour,
		Attempt: dedupe.Attempt{At: time.Now(), By: dedupe.AttemptByDurable, Outcome: "released", Status: 503, Replica: "shop-1/1"}}); err != nil {
		t.Fatal(err)
	}
	owe(t, store, "cdek", "trying", time.Minute)
	res, err := store.Claim(ctx, dedupe.ClaimRequest{Sender: "cdek", Key: "plain", PayloadHash: "h", Owner: "o", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatal(res.Found, err)
	}
	if err := store.Complete(ctx, "cdek", "plain", "o", dedupe.Response{Status: 200}, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "processed", Status: 200}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := hookonce(t, "list", "--json", "--store", dsn, "--status", "pending")
	var got []view.RecordJSON
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("list --status pending exit %d %s:\n%s", code, errOut, out)
	}
	byKey := map[string]view.RecordJSON{}
	for _, r := range got {
		byKey[r.Key] = r
	}
	if len(got) != 2 || byKey["retried"].Pending == nil || byKey["trying"].Pending == nil {
		t.Fatalf("list --status pending lists %s; want retried and trying, each with pending", out)
	}
	if p := byKey["retried"].Pending; p.Tries != 1 || p.Held || p.HeldUntil != nil || time.Until(p.NextAt) < 50*time.Minute ||
		time.Until(p.Until) < 71*time.Hour || p.Since.IsZero() {
		t.Fatalf("retried: pending %+v; want 1 try, not held, next in an hour, until in 72h", p)
	}
	if p := byKey["trying"].Pending; p.Tries != 0 || !p.Held || p.HeldUntil == nil {
		t.Fatalf("trying: pending %+v; want held by its first try", p)
	}
	if a := byKey["retried"].Attempts; len(a) == 0 || a[len(a)-1].By != "hookonce" {
		t.Fatalf("retried: attempts %+v; want the try by hookonce", a)
	}
	// The alias --state and the filter on the table.
	out, _, code = hookonce(t, "list", "--store", dsn, "--state", "pending")
	if code != 0 || strings.Contains(out, "plain") || !strings.Contains(out, "done, owed to the site (1 try failed, next try in") ||
		!strings.Contains(out, "done, owed to the site (trying now)") {
		t.Fatalf("list --state pending (exit %d):\n%s", code, out)
	}
	// The done record is listed without pending.
	out, _, _ = hookonce(t, "list", "--json", "--store", dsn, "--key", "plain")
	if !strings.Contains(out, `"key": "plain"`) || strings.Contains(out, `"pending"`) {
		t.Fatalf("a record owing nothing shows pending:\n%s", out)
	}

	out, _, code = hookonce(t, "lookup", "--store", dsn, "cdek", "retried")
	for _, want := range []string{"state:", "done, owed to the site", "owed:", "1 try failed; next try ", "given up at ",
		"hookonce (durable try)", "response: 200 (hookonce's answer to the sender"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("lookup does not say %q:\n%s", want, out)
		}
	}
	out, _, _ = hookonce(t, "lookup", "--store", dsn, "cdek", "trying")
	if !strings.Contains(out, "a try holds it now") {
		t.Fatalf("lookup of a held delivery:\n%s", out)
	}
	out, _, _ = hookonce(t, "lookup", "--store", dsn, "cdek", "plain")
	if strings.Contains(out, "owed") {
		t.Fatalf("lookup of a record owing nothing:\n%s", out)
	}
	if _, errOut, code := hookonce(t, "list", "--store", dsn, "--status", "owed"); code != exitUsage || !strings.Contains(errOut, "pending") {
		t.Fatalf("list --status owed: exit %d, %s; want usage naming pending", code, errOut)
	}
}
