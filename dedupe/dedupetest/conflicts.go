package dedupetest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// keptConflict is a conflict whose refused request was kept whole.
func keptConflict(sender, key, hash string, body []byte) dedupe.Conflict {
	now := time.Now()
	return dedupe.Conflict{Sender: sender, Key: key, StoredHash: "h1", ReceivedHash: hash, ReceivedAt: now,
		ExpiresAt: now.Add(time.Hour), ChangedPaths: []string{"amount"}, DiffKind: dedupe.DiffJSON,
		Request: &dedupe.StoredRequest{Method: http.MethodPost, URI: "/hook?x=1",
			Header: http.Header{"Content-Type": {"application/json"}, "X-Signature": {"sig-1"}}},
		Body: body}
}

func mustRecordConflict(t *testing.T, s dedupe.Store, c dedupe.Conflict) {
	t.Helper()
	if err := s.RecordConflict(ctxT(t), c); err != nil {
		t.Fatalf("RecordConflict(%s/%s): %v", c.Sender, c.Key, err)
	}
}

func mustConflicts(t *testing.T, s dedupe.Store, f dedupe.ListFilter) []dedupe.Conflict {
	t.Helper()
	cs, err := s.Conflicts(ctxT(t), f)
	if err != nil {
		t.Fatalf("Conflicts(%+v): %v", f, err)
	}
	return cs
}

// A conflict keeps the refused request (method, target, headers, body,
// whether it was cut), what its diff holds and whether it was recorded in
// shadow mode; one recorded without a request has none; an empty body
// kept is empty, not absent. Each gets an ID of its own.
func testConflictPayloadKept(t *testing.T, s dedupe.Store, sender string) {
	body := []byte("{\"id\":\"evt\",\"amount\":2,\"bin\":\"\x00\xff\"}")
	full := keptConflict(sender, "evt", "h2", body)
	mustRecordConflict(t, s, full)
	time.Sleep(5 * time.Millisecond)
	cut := keptConflict(sender, "evt", "h3", []byte("{\"id\":"))
	cut.BodyTruncated, cut.Shadow, cut.DiffKind, cut.ChangedPaths = true, true, dedupe.DiffForm, []string{"OrderId", "data[FIELDS][ID]"}
	mustRecordConflict(t, s, cut)
	time.Sleep(5 * time.Millisecond)
	mustRecordConflict(t, s, dedupe.Conflict{Sender: sender, Key: "evt", StoredHash: "h1", ReceivedHash: "h4",
		ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)})
	time.Sleep(5 * time.Millisecond)
	mustRecordConflict(t, s, keptConflict(sender, "empty", "h5", nil))

	cs := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "evt"})
	if len(cs) != 3 {
		t.Fatalf("Conflicts of evt = %d, want 3: %+v", len(cs), cs)
	}
	bare, gotCut, got := cs[0], cs[1], cs[2]
	if got.ID == "" || gotCut.ID == "" || bare.ID == "" || got.ID == gotCut.ID || gotCut.ID == bare.ID {
		t.Fatalf("conflict ids %q %q %q, want three different ones", got.ID, gotCut.ID, bare.ID)
	}
	if got.Request == nil || got.Request.Method != http.MethodPost || got.Request.URI != "/hook?x=1" ||
		got.Request.Header.Get("X-Signature") != "sig-1" || !bytes.Equal(got.Body, body) || got.BodyTruncated || got.Shadow ||
		got.DiffKind != dedupe.DiffJSON || fmt.Sprint(got.ChangedPaths) != "[amount]" || !got.Kept() || got.Accepted() {
		t.Fatalf("kept conflict read back as %+v (request %+v)", got, got.Request)
	}
	if !gotCut.BodyTruncated || !gotCut.Shadow || gotCut.DiffKind != dedupe.DiffForm ||
		fmt.Sprint(gotCut.ChangedPaths) != "[OrderId data[FIELDS][ID]]" || string(gotCut.Body) != "{\"id\":" || gotCut.Kept() {
		t.Fatalf("cut shadow conflict read back as %+v", gotCut)
	}
	if bare.Request != nil || bare.Body != nil || bare.Kept() || bare.DiffKind != "" {
		t.Fatalf("conflict recorded without a request read back with one: %+v", bare)
	}
	empty := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "empty"})
	if len(empty) != 1 || empty[0].Body == nil || len(empty[0].Body) != 0 || !empty[0].Kept() {
		t.Fatalf("conflict with an empty body kept = %+v", empty)
	}
	if all := mustConflicts(t, s, dedupe.ListFilter{Sender: sender}); len(all) != 4 || all[0].Key != "empty" {
		t.Fatalf("Conflicts of the sender = %+v, want 4, newest first", all)
	}
}

// AcceptConflict marks a conflict once: the newest of the key when no id
// is given, any other by its id; a second accept is refused with
// ErrAccepted and the first acceptance stands; of 8 concurrent accepts of
// one conflict exactly one wins. A conflict whose payload was not kept
// whole, or recorded in shadow mode, is refused with ErrNotAcceptable and
// stays unaccepted; an unknown key or id is ErrNotFound. Accepted
// conflicts are listed as accepted and purged with their ttl.
func testAcceptConflictOnce(t *testing.T, s dedupe.Store, sender string) {
	ctx := ctxT(t)
	mustRecordConflict(t, s, keptConflict(sender, "evt", "h2", []byte(`{"amount":2}`)))
	time.Sleep(5 * time.Millisecond)
	mustRecordConflict(t, s, keptConflict(sender, "evt", "h3", []byte(`{"amount":3}`)))
	mustRecordConflict(t, s, keptConflict(sender, "other", "h9", []byte(`{}`)))

	c, err := s.AcceptConflict(ctx, sender, "evt", "", "alice")
	if err != nil {
		t.Fatalf("AcceptConflict(newest): %v", err)
	}
	if c.ReceivedHash != "h3" || c.AcceptedBy != "alice" || time.Since(c.AcceptedAt).Abs() > time.Minute || string(c.Body) != `{"amount":3}` {
		t.Fatalf("accepted %+v, want the newest (h3) by alice, now, with its body", c)
	}
	again, err := s.AcceptConflict(ctx, sender, "evt", "", "bob")
	if !errors.Is(err, dedupe.ErrAccepted) || again.AcceptedBy != "alice" || again.ID != c.ID {
		t.Fatalf("second accept = %+v, %v; want ErrAccepted with alice's acceptance", again, err)
	}
	cs := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "evt"})
	if len(cs) != 2 || !cs[0].Accepted() || cs[0].AcceptedBy != "alice" || cs[1].Accepted() {
		t.Fatalf("after accepting the newest: %+v", cs)
	}
	if !cs[0].AcceptedAt.Equal(c.AcceptedAt.Truncate(time.Millisecond)) && cs[0].AcceptedAt.Sub(c.AcceptedAt).Abs() > time.Millisecond {
		t.Fatalf("accepted_at read back %v, accept answered %v", cs[0].AcceptedAt, c.AcceptedAt)
	}
	older, err := s.AcceptConflict(ctx, sender, "evt", cs[1].ID, "bob")
	if err != nil || older.ReceivedHash != "h2" || older.AcceptedBy != "bob" {
		t.Fatalf("accept by id = %+v, %v; want h2 by bob", older, err)
	}
	if _, err := s.AcceptConflict(ctx, sender, "other", cs[1].ID, "bob"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("accept of another key's conflict id: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"", "999999999", "nonsense"} {
		if _, err := s.AcceptConflict(ctx, sender, "no-such-key", id, "bob"); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("accept of no conflict (id %q): %v, want ErrNotFound", id, err)
		}
	}

	// Not acceptable: refused, nothing marked.
	notKept := dedupe.Conflict{Sender: sender, Key: "bare", StoredHash: "h1", ReceivedHash: "h2", ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	shadow := keptConflict(sender, "shadow", "h2", []byte(`{}`))
	shadow.Shadow = true
	cut := keptConflict(sender, "cut", "h2", []byte(`{"amo`))
	cut.BodyTruncated = true
	for _, bad := range []dedupe.Conflict{notKept, shadow, cut} {
		mustRecordConflict(t, s, bad)
		if _, err := s.AcceptConflict(ctx, sender, bad.Key, "", "bob"); !errors.Is(err, dedupe.ErrNotAcceptable) {
			t.Fatalf("accept of %s: %v, want ErrNotAcceptable", bad.Key, err)
		}
		if got := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: bad.Key}); len(got) != 1 || got[0].Accepted() {
			t.Fatalf("refused accept of %s marked it: %+v", bad.Key, got)
		}
	}

	// Concurrent accepts of one conflict: one winner.
	mustRecordConflict(t, s, keptConflict(sender, "race", "h2", []byte(`{}`)))
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		won, lost   int
		unexpected  []error
		winnersByID []string
	)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := s.AcceptConflict(ctx, sender, "race", "", fmt.Sprintf("op-%d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
				winnersByID = append(winnersByID, c.AcceptedBy)
			case errors.Is(err, dedupe.ErrAccepted):
				lost++
			default:
				unexpected = append(unexpected, err)
			}
		}(i)
	}
	wg.Wait()
	if won != 1 || lost != 7 || len(unexpected) > 0 {
		t.Fatalf("8 concurrent accepts: %d won, %d refused as accepted, errors %v; want 1 and 7", won, lost, unexpected)
	}
	if got := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "race"}); len(got) != 1 || got[0].AcceptedBy != winnersByID[0] {
		t.Fatalf("race accepted by %v, stored %+v", winnersByID, got)
	}

	// Purged with their ttl, accepted or not.
	gone := keptConflict(sender, "gone", "h2", []byte(`{}`))
	gone.ReceivedAt, gone.ExpiresAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	mustRecordConflict(t, s, gone)
	if got := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "gone"}); len(got) == 1 {
		if _, err := s.AcceptConflict(ctx, sender, "gone", "", "bob"); err != nil {
			t.Fatalf("accept of an expired, unpurged conflict: %v", err)
		}
	}
	if _, err := s.Purge(ctx, dedupe.PurgeRequest{}); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if got := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "gone"}); len(got) != 0 {
		t.Fatalf("expired conflict left after Purge: %+v", got)
	}
	if got := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "evt"}); len(got) != 2 || !got[0].Accepted() || !got[1].Accepted() {
		t.Fatalf("live accepted conflicts after Purge: %+v", got)
	}
}

// List and Conflicts find keys by a whole part: "8742591" finds
// 8742591:CONFIRMED, 8742591:AUTHORIZED and CONFIRMED:8742591, never
// 87425910:CONFIRMED nor a part that holds an escaped colon
// (x\:8742591); newest first, bounded by the limit even when the match is
// older than a page of other keys.
func testKeyPart(t *testing.T, s dedupe.Store, sender string) {
	ctx := ctxT(t)
	for _, k := range []string{"8742591:CONFIRMED", "87425910:CONFIRMED", `x\:8742591`, "8742591:AUTHORIZED", "CONFIRMED:8742591", "8742591"} {
		mustClaim(t, s, req(sender, k, "h", owner()), dedupe.Claimed)
		time.Sleep(3 * time.Millisecond)
	}
	for i := 0; i < 120; i++ {
		mustClaim(t, s, req(sender, fmt.Sprintf("other-%d:CONFIRMED", i), "h", owner()), dedupe.Claimed)
	}
	want := []string{"8742591", "CONFIRMED:8742591", "8742591:AUTHORIZED", "8742591:CONFIRMED"}
	got, err := s.List(ctx, dedupe.ListFilter{Sender: sender, KeyPart: "8742591"})
	if err != nil || !slices.Equal(keys(got), want) {
		t.Fatalf("List key part 8742591 = %v, %v; want %v", keys(got), err, want)
	}
	got, err = s.List(ctx, dedupe.ListFilter{Sender: sender, KeyPart: "8742591", Limit: 3})
	if err != nil || !slices.Equal(keys(got), want[:3]) {
		t.Fatalf("List key part, limit 3 = %v, %v; want %v", keys(got), err, want[:3])
	}
	got, err = s.List(ctx, dedupe.ListFilter{KeyPart: "8742591:AUTHORIZED"})
	if err != nil || len(got) != 1 || got[0].Sender != sender {
		t.Fatalf("List of every sender, whole key = %+v, %v", got, err)
	}
	got, err = s.List(ctx, dedupe.ListFilter{Sender: sender, KeyPart: "x:8742591"})
	if err != nil || !slices.Equal(keys(got), []string{`x\:8742591`}) {
		t.Fatalf("List key part holding a colon = %v, %v", keys(got), err)
	}
	got, err = s.List(ctx, dedupe.ListFilter{Sender: sender, KeyPart: "8742591", State: dedupe.StateDone})
	if err != nil || len(got) != 0 {
		t.Fatalf("List key part and state done = %v, %v; want none", keys(got), err)
	}

	for _, k := range []string{"8742591:CONFIRMED", "87425910:CONFIRMED", "other-1:CONFIRMED"} {
		mustRecordConflict(t, s, keptConflict(sender, k, "h2", []byte(`{}`)))
	}
	cs := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, KeyPart: "8742591"})
	if len(cs) != 1 || cs[0].Key != "8742591:CONFIRMED" {
		t.Fatalf("Conflicts key part 8742591 = %+v", cs)
	}
}

// A payload is accepted once per key: AcceptedConflict finds the accepted
// conflict of a key by its payload hash (ErrNotFound before, and for
// another payload or key); accepting another conflict of the key with
// the same payload is refused with ErrAccepted and the first acceptance
// (its id, who, when), and marks nothing; another payload of the key, and
// the same payload under another key, are accepted on their own. Of
// concurrent accepts of two conflicts with one payload exactly one
// succeeds. A conflict answered as a duplicate (changed_payload:
// duplicate) reads back as such and is accepted like a refused one.
func testAcceptOncePerPayload(t *testing.T, s dedupe.Store, sender string) {
	ctx := ctxT(t)
	if _, err := s.AcceptedConflict(ctx, sender, "pay", "h2"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("AcceptedConflict before any: %v, want ErrNotFound", err)
	}
	dup := keptConflict(sender, "pay", "h2", []byte(`{"amount":2}`))
	dup.AnsweredDuplicate = true
	mustRecordConflict(t, s, dup)
	time.Sleep(5 * time.Millisecond)
	mustRecordConflict(t, s, keptConflict(sender, "pay", "h2", []byte(`{"amount":2}`)))
	time.Sleep(5 * time.Millisecond)
	mustRecordConflict(t, s, keptConflict(sender, "pay", "h3", []byte(`{"amount":3}`)))
	mustRecordConflict(t, s, keptConflict(sender, "pay-other", "h2", []byte(`{"amount":2}`)))
	cs := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "pay"})
	if len(cs) != 3 || !cs[2].AnsweredDuplicate || cs[1].AnsweredDuplicate || cs[0].AnsweredDuplicate {
		t.Fatalf("conflicts of pay = %+v, want 3, the oldest answered as a duplicate", cs)
	}
	first, second, other := cs[2], cs[1], cs[0]

	got, err := s.AcceptConflict(ctx, sender, "pay", first.ID, "alice")
	if err != nil || got.ID != first.ID || !got.AnsweredDuplicate || got.AcceptedBy != "alice" {
		t.Fatalf("accept of the duplicate-answered conflict = %+v, %v", got, err)
	}
	acc, err := s.AcceptedConflict(ctx, sender, "pay", "h2")
	if err != nil || acc.ID != first.ID || acc.AcceptedBy != "alice" || acc.AcceptedAt.IsZero() || string(acc.Body) != `{"amount":2}` {
		t.Fatalf("AcceptedConflict(h2) = %+v, %v; want conflict %s accepted by alice", acc, err, first.ID)
	}
	for _, q := range [][2]string{{"pay", "h3"}, {"pay-other", "h2"}, {"pay", "h9"}} {
		if _, err := s.AcceptedConflict(ctx, sender, q[0], q[1]); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("AcceptedConflict(%s, %s): %v, want ErrNotFound", q[0], q[1], err)
		}
	}
	again, err := s.AcceptConflict(ctx, sender, "pay", second.ID, "bob")
	if !errors.Is(err, dedupe.ErrAccepted) || again.ID != first.ID || again.AcceptedBy != "alice" {
		t.Fatalf("accept of a second conflict with the same payload = %+v, %v; want ErrAccepted naming conflict %s by alice", again, err, first.ID)
	}
	if !strings.Contains(err.Error(), first.ID) || !strings.Contains(err.Error(), "alice") {
		t.Fatalf("refusal %q does not name the first acceptance (conflict %s, alice)", err, first.ID)
	}
	// The newest of the key has another payload: accepted on its own.
	if c, err := s.AcceptConflict(ctx, sender, "pay", "", "bob"); err != nil || c.ID != other.ID {
		t.Fatalf("accept of another payload of the key = %+v, %v", c, err)
	}
	if c, err := s.AcceptConflict(ctx, sender, "pay-other", "", "bob"); err != nil {
		t.Fatalf("accept of the same payload under another key = %+v, %v", c, err)
	}
	after := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "pay"})
	if len(after) != 3 || !after[2].Accepted() || after[1].Accepted() || !after[0].Accepted() {
		t.Fatalf("after the accepts: %+v; want the second h2 conflict unaccepted", after)
	}

	// Two conflicts with one payload, accepted concurrently: one winner.
	for i := 0; i < 2; i++ {
		mustRecordConflict(t, s, keptConflict(sender, "twin", "h7", []byte(`{"amount":7}`)))
		time.Sleep(3 * time.Millisecond)
	}
	twins := mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "twin"})
	if len(twins) != 2 {
		t.Fatalf("twins = %+v", twins)
	}
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		won, lost  int
		unexpected []error
	)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.AcceptConflict(ctx, sender, "twin", twins[i%2].ID, fmt.Sprintf("op-%d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, dedupe.ErrAccepted):
				lost++
			default:
				unexpected = append(unexpected, err)
			}
		}(i)
	}
	wg.Wait()
	if won != 1 || lost != 7 || len(unexpected) > 0 {
		t.Fatalf("8 concurrent accepts of two conflicts with one payload: %d won, %d refused, errors %v; want 1 and 7", won, lost, unexpected)
	}
	n := 0
	for _, c := range mustConflicts(t, s, dedupe.ListFilter{Sender: sender, Key: "twin"}) {
		if c.Accepted() {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d of two conflicts with one payload accepted, want 1", n)
	}
}
