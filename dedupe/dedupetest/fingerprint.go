package dedupetest

import (
	"bytes"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
)

// testFingerprintKept: a claim keeps its delivery's fingerprint; a
// conflicting claim is answered the original's (so the caller can say
// which fields changed); Get and List read it; a released record claimed
// again takes the new delivery's. The install's key is made once and
// the same for every caller.
func testFingerprintKept(t *testing.T, s dedupe.Store, sender string) {
	k, ok := s.(dedupe.FingerprintKeyer)
	if !ok {
		t.Fatalf("%T keeps no fingerprint key", s)
	}
	key, err := k.FingerprintKey(ctxT(t))
	if err != nil || len(key) != dedupe.FingerprintKeyLen {
		t.Fatalf("FingerprintKey = %x, %v; want %d bytes", key, err, dedupe.FingerprintKeyLen)
	}
	if again, err := k.FingerprintKey(ctxT(t)); err != nil || !bytes.Equal(again, key) {
		t.Fatalf("FingerprintKey again = %x, %v; want the key made first", again, err)
	}
	fp := func(amount string) []byte {
		return dedupe.Fingerprint(key, func(f func(string, string)) {
			f("orderId", "o1")
			f("refundedAmount", amount)
		})
	}
	first, second := fp("0"), fp("500")
	o := owner()
	r := req(sender, "evt", "h1", o)
	r.Fingerprint = first
	mustClaim(t, s, r, dedupe.Claimed)
	if got := mustGet(t, s, sender, "evt").Fingerprint; !bytes.Equal(got, first) {
		t.Fatalf("Get: fingerprint %x, want %x", got, first)
	}
	c := req(sender, "evt", "h2", owner())
	c.Fingerprint = second
	res := mustClaim(t, s, c, dedupe.Conflicting)
	if !bytes.Equal(res.Record.Fingerprint, first) {
		t.Fatalf("conflicting claim: the original's fingerprint %x, want %x", res.Record.Fingerprint, first)
	}
	if ch := dedupe.ChangedFields(res.Record.Fingerprint, second); len(ch) != 1 || ch[0] != "refundedAmount" {
		t.Fatalf("changed fields %v, want [refundedAmount]", ch)
	}
	recs, err := s.List(ctxT(t), dedupe.ListFilter{Sender: sender})
	if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Fingerprint, first) {
		t.Fatalf("List = %+v, %v; want the record with its fingerprint", recs, err)
	}
	if !dedupe.FingerprintHas(recs[0].Fingerprint, key, "", "o1") || dedupe.FingerprintHas(recs[0].Fingerprint, key, "", "o2") {
		t.Fatal("FingerprintHas does not find the order by its value")
	}
	if err := s.Release(ctxT(t), sender, "evt", o, dedupe.Attempt{Outcome: "released"}); err != nil {
		t.Fatal(err)
	}
	c.Owner = owner()
	mustClaim(t, s, c, dedupe.Claimed)
	if got := mustGet(t, s, sender, "evt").Fingerprint; !bytes.Equal(got, second) {
		t.Fatalf("released and claimed again: fingerprint %x, want the new delivery's %x", got, second)
	}
	// A claim without one keeps none.
	mustClaim(t, s, req(sender, "bare", "h", owner()), dedupe.Claimed)
	if got := mustGet(t, s, sender, "bare").Fingerprint; got != nil {
		t.Fatalf("a claim without a fingerprint: %x", got)
	}
}
