package readiness_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// store opens an SQLite store holding counts.
func store(t *testing.T, counts ...dedupe.TrafficCount) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.AddTraffic(context.Background(), counts); err != nil {
		t.Fatal(err)
	}
	return s
}

func build(t *testing.T, s dedupe.Reader, senders ...readiness.Sender) readiness.Report {
	t.Helper()
	rep, err := readiness.Build(context.Background(), s, senders, readiness.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

var (
	today = dedupe.TrafficDay(time.Now())
	now   = today.Add(12 * time.Hour) // the report's time: the rate of a day is fixed
)

func count(sender, outcome string, status int, n int64) dedupe.TrafficCount {
	return dedupe.TrafficCount{Day: today, Sender: sender, Path: "/p", Outcome: outcome, Status: status, N: n}
}

func has(fs []readiness.Finding, part string) bool {
	for _, f := range fs {
		if strings.Contains(f.What+" → "+f.Fix, part) {
			return true
		}
	}
	return false
}

func TestVerdicts(t *testing.T) {
	signed := func(name string) readiness.Sender {
		return readiness.Sender{Name: name, Path: "/p", Mode: "shadow", Signed: true, Keys: []string{"body:id"}}
	}
	missingShape := dedupe.TrafficCount{Day: today, Sender: "keyless", Path: "/p", Outcome: "would_missing_key", N: 3, Detail: "POST; json: object,type"}
	s := store(t,
		// ready: enough deliveries and repeats, nothing wrong.
		count("ready", "processed", 200, 20), count("ready", "would_duplicate", 0, 2),
		// not enough: few deliveries over three days, no repeat yet.
		dedupe.TrafficCount{Day: today.AddDate(0, 0, -2), Sender: "quiet", Path: "/p", Outcome: "processed", Status: 200, N: 3},
		count("quiet", "processed", 200, 3),
		// not ready: missing keys and bad signatures.
		count("keyless", "processed", 200, 30), count("keyless", "would_duplicate", 0, 5), missingShape,
		count("forged", "processed", 200, 30), count("forged", "would_duplicate", 0, 5), count("forged", "would_rejected_signature", 0, 4),
		// a sender the config no longer has.
		count("gone", "processed", 200, 1),
	)
	rep := build(t, s, signed("ready"), signed("quiet"), signed("keyless"), signed("forged"))
	by := map[string]readiness.SenderReport{}
	for _, r := range rep.Senders {
		by[r.Sender] = r
	}
	if r := by["ready"]; r.Verdict != readiness.GoLive || len(r.Problems) != 0 || len(r.Notes) != 0 {
		t.Errorf("ready: %+v", r)
	}
	if r := by["quiet"]; r.Verdict != readiness.NotEnough || !strings.Contains(r.Reason, "14 more deliveries (about 6 more days") ||
		!strings.Contains(r.Reason, "2 more exact repeats") {
		t.Errorf("quiet: %s: %s", r.Verdict, r.Reason)
	}
	if r := by["keyless"]; r.Verdict != readiness.NoGo || r.MissingKey != 3 ||
		!has(r.Problems, "3 deliveries had no event id (would be answered 400); they looked like: POST; json: object,type") ||
		!has(r.Problems, "`missing_key: pass`") {
		t.Errorf("keyless: %+v", r)
	}
	if r := by["forged"]; r.Verdict != readiness.NoGo || r.SignatureFailures != 4 || !has(r.Problems, "4 deliveries failed the signature check") {
		t.Errorf("forged: %+v", r)
	}
	if r := by["gone"]; r.Verdict != readiness.UnknownSender {
		t.Errorf("gone: %+v", r)
	}
	if rep.GoLive {
		t.Error("the report is ready with senders that are not")
	}
	one, err := readiness.Build(context.Background(), s, []readiness.Sender{signed("ready")}, readiness.Options{Now: now, Sender: "ready"})
	if err != nil || len(one.Senders) != 1 || !one.GoLive {
		t.Errorf("--sender ready: %+v, %v", one, err)
	}
}

// A changed field whose name does not mark a resend, in some repeats only,
// belongs in the key; one in every repeat, in ignore; conflicts that name
// no field (records older than fingerprints) send to the conflicts; a
// payload answered as a duplicate is not counted.
func TestChangedFields(t *testing.T) {
	s := store(t, count("shop", "processed", 200, 30), count("shop", "would_duplicate", 0, 4), count("shop", "would_conflict", 0, 2),
		count("bare", "processed", 200, 30), count("bare", "would_conflict", 0, 1))
	ctx := context.Background()
	for _, c := range []dedupe.Conflict{
		{Sender: "shop", Key: "o1", StoredHash: "a", ReceivedHash: "b", ChangedPaths: []string{"refundId"}},
		{Sender: "shop", Key: "o2", StoredHash: "a", ReceivedHash: "c", ChangedPaths: []string{"meta.sent_at", "refundId"}},
		{Sender: "bare", Key: "x", StoredHash: "a", ReceivedHash: "b"},
		// Answered as a duplicate, not refused: not one of the 422s.
		{Sender: "shop", Key: "o3", StoredHash: "a", ReceivedHash: "d", ChangedPaths: []string{"note"}, AnsweredDuplicate: true},
	} {
		c.ReceivedAt, c.ExpiresAt = now, now.Add(time.Hour)
		if err := s.RecordConflict(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	rep := build(t, s, readiness.Sender{Name: "shop", Path: "/p", Signed: true, HashJSON: true, StoreRequestBody: true},
		readiness.Sender{Name: "bare", Path: "/p", Signed: true})
	shop, bare := rep.Senders[1], rep.Senders[0]
	if len(shop.ChangedFields) != 2 || shop.ChangedFields[0].Field != "refundId" || shop.ChangedFields[0].Suggest != "key" ||
		shop.ChangedFields[0].Keys != 2 || shop.ChangedFields[1].Suggest != "ignore" || shop.ChangedRead != 2 {
		t.Errorf("shop changed fields: %+v", shop.ChangedFields)
	}
	if !has(shop.Problems, "add `refundId` to the key") || !has(shop.Problems, "add `meta.sent_at` to `ignore`") {
		t.Errorf("shop problems: %+v", shop.Problems)
	}
	if bare.Verdict != readiness.NoGo || !has(bare.Problems, "open the conflicts") || has(bare.Problems, "store_request_body") {
		t.Errorf("bare: %+v", bare)
	}
}

// Deliveries no sender took are the path's, not the senders'.
func TestUnmatchedPaths(t *testing.T) {
	s := store(t, count("rk", "processed", 200, 25), count("rk", "would_duplicate", 0, 2),
		dedupe.TrafficCount{Day: today, Path: "/p", Outcome: "unmatched", Status: 403, Detail: "POST; form: TerminalKey", N: 37})
	rep := build(t, s, readiness.Sender{Name: "rk", Path: "/p", Signed: true})
	if !rep.GoLive || rep.Senders[0].Deliveries != 27 {
		t.Errorf("rk is judged on the unmatched deliveries: %+v", rep.Senders[0])
	}
	if len(rep.Paths) != 1 || rep.Paths[0].Refused != 37 ||
		!strings.Contains(rep.Paths[0].Finding.What, "37 deliveries on /p matched no sender (37 of them refused, not forwarded); they looked like: POST; form: TerminalKey") {
		t.Errorf("paths: %+v", rep.Paths)
	}
}

// A flood of made-up shapes over several days on a sender's path: the
// store keeps a bounded number of them, the report counts every
// delivery, names a real shape rather than the folded rest, and still
// judges the sender on its own deliveries.
func TestUnmatchedFlood(t *testing.T) {
	var flood []dedupe.TrafficCount
	for d := range 3 {
		for i := range 4 * dedupe.MaxTrafficShapes {
			flood = append(flood, dedupe.TrafficCount{Day: today.AddDate(0, 0, -d), Path: "/p", Outcome: "unmatched", Status: 403,
				Detail: fmt.Sprintf("POST; form: junk%d", i), N: 1})
		}
	}
	flood = append(flood, count("rk", "processed", 200, 25), count("rk", "would_duplicate", 0, 2),
		dedupe.TrafficCount{Day: today.AddDate(0, 0, -2), Path: "/p", Outcome: "unmatched", Status: 403, Detail: "POST; form: TerminalKey", N: 1})
	s := store(t, flood...)
	rep := build(t, s, readiness.Sender{Name: "rk", Path: "/p", Signed: true})
	if !rep.GoLive || rep.Senders[0].Deliveries != 27 {
		t.Errorf("rk is judged on the unmatched deliveries: %+v", rep.Senders[0])
	}
	want := int64(3*4*dedupe.MaxTrafficShapes + 1)
	if len(rep.Paths) != 1 || rep.Paths[0].Deliveries != want || rep.Paths[0].Refused != want {
		t.Fatalf("paths: %+v, want %d deliveries on /p", rep.Paths, want)
	}
	if sh := rep.Paths[0].Shapes; len(sh) == 0 || sh[0].Shape == dedupe.TrafficOtherDetail {
		t.Errorf("the report names the folded shapes first: %+v", sh)
	}
	if !rep.Since.Equal(today.AddDate(0, 0, -2)) {
		t.Errorf("since %v, want the first day counted, %v", rep.Since, today.AddDate(0, 0, -2))
	}
	ts, err := s.TrafficTotals(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) > 2+dedupe.MaxTrafficShapes*3+1 {
		t.Errorf("the store reads %d totals for the report, want at most %d", len(ts), 2+dedupe.MaxTrafficShapes*3+1)
	}
}

// The gauge has a series per configured sender: 1 ready, 0 otherwise;
// none for a sender only the counters name.
func TestGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := readiness.NewGauge(reg)
	g.Set(readiness.Report{Senders: []readiness.SenderReport{
		{Sender: "a", Verdict: readiness.GoLive}, {Sender: "b", Verdict: readiness.NotEnough},
		{Sender: "c", Verdict: readiness.NoGo}, {Sender: "gone", Verdict: readiness.UnknownSender}}})
	want := `
# HELP hookonce_sender_ready 1 when the sender's readiness verdict (hookonce readiness) is ready, 0 when it is not ready or has not seen enough traffic.
# TYPE hookonce_sender_ready gauge
hookonce_sender_ready{sender="a"} 1
hookonce_sender_ready{sender="b"} 0
hookonce_sender_ready{sender="c"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookonce_sender_ready"); err != nil {
		t.Fatal(err)
	}
	// A's rules changed and the new ones have little traffic yet: a keeps
	// its 1 (a config change is no sign the provider changed); c, now not
	// ready under its new rules, is 0; d, new and changed, has no series.
	g.Set(readiness.Report{Senders: []readiness.SenderReport{
		{Sender: "a", Verdict: readiness.NotEnough, EarlierRules: 40}, {Sender: "b", Verdict: readiness.NotEnough},
		{Sender: "c", Verdict: readiness.NoGo, EarlierRules: 9}, {Sender: "d", Verdict: readiness.NotEnough, EarlierRules: 3}}})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookonce_sender_ready"); err != nil {
		t.Fatal(err)
	}
	// Then a's new rules prove not ready: 0.
	g.Set(readiness.Report{Senders: []readiness.SenderReport{{Sender: "a", Verdict: readiness.NoGo, EarlierRules: 40}}})
	if v := testutil.ToFloat64(mustGauge(t, reg)); v != 0 {
		t.Errorf("a not ready under its new rules: gauge %v, want 0", v)
	}
}

func mustGauge(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, %v; want one series", mfs, err)
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return mfs[0].GetMetric()[0].GetGauge().GetValue() })
}

func tagged(c dedupe.TrafficCount, rules, from string) dedupe.TrafficCount {
	c.Detail = dedupe.TrafficDetail(rules, from, "")
	return c
}

// After a fix the report counts afresh: only the deliveries counted
// under the sender's rules in force, and says since when; --since counts
// everything from its day.
func TestRulesWindow(t *testing.T) {
	s := store(t,
		tagged(count("shop", "processed", 200, 30), "oldrules", "192.0.2.0/24"),
		tagged(count("shop", "conflict", 422, 6), "oldrules", ""),
		tagged(count("shop", "processed", 200, 21), "newrules", "192.0.2.0/24"),
		tagged(count("shop", "duplicate", 200, 3), "newrules", "192.0.2.0/24"),
		count("shop", "missing_key", 400, 0), // nothing under no tag
	)
	snd := readiness.Sender{Name: "shop", Path: "/p", Mode: "shadow", Signed: true, Rules: "newrules"}
	sh := build(t, s, snd).Senders[0]
	if sh.Verdict != readiness.GoLive || sh.Changed != 0 || sh.Deliveries != 24 || sh.EarlierRules != 36 || !sh.RulesSince.Equal(today) {
		t.Fatalf("after the fix: %s (%s), changed %d, deliveries %d, earlier %d, since %v; want ready on the 24 under the new rules",
			sh.Verdict, sh.Reason, sh.Changed, sh.Deliveries, sh.EarlierRules, sh.RulesSince)
	}
	var text strings.Builder
	readiness.WriteText(&text, build(t, s, snd))
	if !strings.Contains(text.String(), "rules newrules: counted since they last changed, "+today.Format("2006-01-02")+" (36 deliveries under earlier rules not counted") {
		t.Errorf("the text does not say since when:\n%s", text.String())
	}
	// With a window of its own, every delivery since then counts.
	all, err := readiness.Build(context.Background(), s, []readiness.Sender{snd}, readiness.Options{Now: now, Since: today})
	if err != nil {
		t.Fatal(err)
	}
	if a := all.Senders[0]; a.Verdict != readiness.NoGo || a.Deliveries != 60 || a.Changed != 6 {
		t.Errorf("--since today: %s, deliveries %d, changed %d; want not ready, 60, 6", a.Verdict, a.Deliveries, a.Changed)
	}
	// Rules changed and nothing came since: not enough traffic, saying so.
	snd.Rules = "newest"
	if n := build(t, s, snd).Senders[0]; n.Verdict != readiness.NotEnough || n.EarlierRules != 60 || !strings.Contains(n.Reason, "60 deliveries under earlier rules") {
		t.Errorf("no traffic under the rules in force: %s (%s)", n.Verdict, n.Reason)
	}
}

// Bad signatures are told apart by where they come from: a few from a
// network the sender never used are refused strangers (a note, ready
// all the same); from the sender's own network, or with no good delivery
// at all, the secret is wrong.
func TestSignatureStrangers(t *testing.T) {
	good := func(n int64) []dedupe.TrafficCount {
		return []dedupe.TrafficCount{
			tagged(count("psp", "processed", 200, n), "r1", "192.0.2.0/24"),
			tagged(count("psp", "duplicate", 200, 3), "r1", "192.0.2.0/24"),
		}
	}
	snd := readiness.Sender{Name: "psp", Path: "/p", Mode: "shadow", Signed: true, Rules: "r1"}

	strangers := build(t, store(t, append(good(25), tagged(count("psp", "would_rejected_signature", 0, 2), "r1", "203.0.113.0/24"))...), snd).Senders[0]
	if strangers.Verdict != readiness.GoLive || strangers.RefusedStrangers != 2 || !has(strangers.Notes, "refused strangers: 2 deliveries") || !has(strangers.Notes, "203.0.113.0/24") {
		t.Errorf("strangers: %s, refused %d, problems %+v, notes %+v; want ready with a note naming 203.0.113.0/24", strangers.Verdict, strangers.RefusedStrangers, strangers.Problems, strangers.Notes)
	}

	own := build(t, store(t, append(good(25), tagged(count("psp", "would_rejected_signature", 0, 4), "r1", "192.0.2.0/24"))...), snd).Senders[0]
	if own.Verdict != readiness.NoGo || own.RefusedStrangers != 0 || !has(own.Problems, "check the sender's secret") {
		t.Errorf("bad signatures from the provider's own network: %s, problems %+v; want not ready, check the secret", own.Verdict, own.Problems)
	}

	all := build(t, store(t, tagged(count("psp", "would_rejected_signature", 0, 9), "r1", "198.51.100.0/24")), snd).Senders[0]
	if all.Verdict != readiness.NoGo || !has(all.Problems, "all 9 deliveries failed the signature check") || !has(all.Problems, "check the sender's secret") {
		t.Errorf("every delivery failing: %s, problems %+v; want not ready, check the secret", all.Verdict, all.Problems)
	}
}

// A signature or an amount is never proposed as a key part: under a key
// documented unique (Robokassa's InvId) a changed amount is a conflict to
// look at, with where it came from, and the sender stays ready; under a
// hand-written key it holds the sender back, still never "add it to the
// key". A field documented to tell notifications apart (RBS refunds'
// refundedAmount) goes to the key though its name reads like an amount.
func TestNeverKeyOnAmountOrSignature(t *testing.T) {
	counts := []dedupe.TrafficCount{
		tagged(count("rk", "would_processed", 200, 24), "r", "192.0.2.0/24"),
		tagged(count("rk", "would_duplicate", 0, 4), "r", "192.0.2.0/24"),
		tagged(count("rk", "would_conflict", 0, 1), "r", "203.0.113.0/24"),
		tagged(count("rbs", "processed", 200, 24), "r", "192.0.2.0/24"),
		tagged(count("rbs", "conflict", 422, 3), "r", "192.0.2.0/24"),
	}
	s := store(t, counts...)
	ctx := context.Background()
	for _, c := range []dedupe.Conflict{
		{Sender: "rk", Key: "7", StoredHash: "a", ReceivedHash: "b", ChangedPaths: []string{"OutSum", "SignatureValue"}, DiffKind: dedupe.DiffFields},
		{Sender: "rbs", Key: "m1:refunded:10000", StoredHash: "a", ReceivedHash: "b", ChangedPaths: []string{"checksum", "refundedAmount"}, DiffKind: dedupe.DiffFields},
		{Sender: "rbs", Key: "m2:refunded:10000", StoredHash: "a", ReceivedHash: "c", ChangedPaths: []string{"checksum", "refundedAmount"}, DiffKind: dedupe.DiffFields},
		{Sender: "rbs", Key: "m3:refunded:10000", StoredHash: "a", ReceivedHash: "d", ChangedPaths: []string{"checksum", "refundedAmount"}, DiffKind: dedupe.DiffFields},
	} {
		c.ReceivedAt, c.ExpiresAt = now, now.Add(time.Hour)
		if err := s.RecordConflict(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	preset := readiness.Sender{Name: "rk", Path: "/p", Mode: "shadow", Rules: "r", Keys: []string{"request:InvId"},
		UniqueKey: "Robokassa sends its Result URL notification once per paid invoice"}
	rbs := readiness.Sender{Name: "rbs", Path: "/p", Mode: "shadow", Rules: "r", Keys: []string{"request:mdOrder", "request:operation", "request:amount"}}
	rep := build(t, s, preset, rbs)
	rk := senderReport(t, rep, "rk")
	for _, f := range append(rk.Problems, rk.Notes...) {
		if strings.Contains(f.Fix, "to the key") && (strings.Contains(f.What+f.Fix, "`OutSum` to") || strings.Contains(f.What+f.Fix, "`SignatureValue` to")) {
			t.Errorf("robokassa told to key on an amount or a signature: %+v", f)
		}
	}
	if rk.Verdict != readiness.GoLive || !has(rk.Notes, "`OutSum`, an amount, changed 1 times") || !has(rk.Notes, "possible tampering") ||
		!has(rk.Notes, "203.0.113.0/24 (never sent a good delivery)") {
		t.Errorf("robokassa preset: %s (%s), problems %+v, notes %+v; want ready, OutSum to look at from 203.0.113.0/24", rk.Verdict, rk.Reason, rk.Problems, rk.Notes)
	}
	// The same without the preset's evidence: held back, never keyed on.
	preset.UniqueKey = ""
	hand := senderReport(t, build(t, s, preset), "rk")
	if hand.Verdict != readiness.NoGo || !has(hand.Problems, "never an amount nor a signature") || has(hand.Problems, "add `OutSum` to the key") || has(hand.Problems, "add `SignatureValue` to the key") {
		t.Errorf("hand-written robokassa: %s, problems %+v", hand.Verdict, hand.Problems)
	}
	b := senderReport(t, rep, "rbs")
	if b.Verdict != readiness.NoGo || !has(b.Problems, "add `refundedAmount` to the key") || has(b.Problems, "`checksum` to the key") ||
		!has(b.Problems, "once per refund") {
		t.Errorf("rbs: %s, changed fields %+v, problems %+v; want refundedAmount to the key, with why", b.Verdict, b.ChangedFields, b.Problems)
	}
}

func senderReport(t *testing.T, rep readiness.Report, name string) readiness.SenderReport {
	t.Helper()
	for _, s := range rep.Senders {
		if s.Sender == name {
			return s
		}
	}
	t.Fatalf("no sender %s", name)
	return readiness.SenderReport{}
}

// A durable sender's deliveries are answered by hookonce (outcome
// accepted): they count as its good deliveries, so going live with ack:
// durable does not turn it "not enough traffic".
func TestAcceptedCountsAsDelivered(t *testing.T) {
	s := store(t, count("durable", "accepted", 200, 20), count("durable", "duplicate", 200, 2))
	rep := build(t, s, readiness.Sender{Name: "durable", Path: "/p", Mode: "enforce", Signed: true, Keys: []string{"body:id"}})
	if r := rep.Senders[0]; r.Verdict != readiness.GoLive {
		t.Fatalf("durable sender: %s: %s", r.Verdict, r.Reason)
	}
}
