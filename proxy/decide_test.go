package proxy

import (
	"testing"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

func sender(t *testing.T, extra string) *contract.Sender {
	t.Helper()
	c, err := contract.Parse([]byte("senders:\n  - name: s\n    match: {path: /s}\n    key: [{header: X-Id}]\n"+extra), "decide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c.Senders[0]
}

// The decision table from the claim on, row by row (docs/decision-table.md's numbering).
func TestDecideClaim(t *testing.T) {
	done := dedupe.Record{State: dedupe.StateDone, Response: &dedupe.Response{Status: 201}}
	for _, tt := range []struct {
		row, cfg string
		res      dedupe.ClaimResult
		canWait  bool
		want     claimDecision
	}{
		{"5", "", dedupe.ClaimResult{Found: dedupe.Claimed}, true, claimDecision{"5", OutcomeProcessed, 0, actForward, false}},
		{"9", "", dedupe.ClaimResult{Found: dedupe.TakenOver}, true, claimDecision{"9", OutcomeTakeover, 0, actForward, false}},
		{"6", "", dedupe.ClaimResult{Found: dedupe.Duplicate, Record: done}, true, claimDecision{"6", OutcomeDuplicate, 201, actReplay, false}},
		{"6 duplicate: 200", "    duplicate: \"200\"\n", dedupe.ClaimResult{Found: dedupe.Duplicate, Record: done}, true, claimDecision{"6", OutcomeDuplicate, 200, actReplay, false}},
		{"7", "", dedupe.ClaimResult{Found: dedupe.Conflicting}, true, claimDecision{"7", OutcomeConflict, 422, actConflict, true}},
		{"7 conflict 409", "    conflict: {status: 409}\n", dedupe.ClaimResult{Found: dedupe.Conflicting}, true, claimDecision{"7", OutcomeConflict, 409, actConflict, true}},
		{"8 wait", "", dedupe.ClaimResult{Found: dedupe.InProgress}, true, claimDecision{"8", OutcomeInProgress, 0, actWait, false}},
		{"8 waited out", "", dedupe.ClaimResult{Found: dedupe.InProgress}, false, claimDecision{"8", OutcomeInProgress, 409, actInProgress, false}},
		{"8 reject", "    in_progress: reject\n", dedupe.ClaimResult{Found: dedupe.InProgress}, true, claimDecision{"8", OutcomeInProgress, 409, actInProgress, false}},
		{"10a held", "", dedupe.ClaimResult{Found: dedupe.Held}, true, claimDecision{"10a", OutcomeInProgress, 409, actHeld, false}},
		{"shadow 6", "    mode: shadow\n", dedupe.ClaimResult{Found: dedupe.Duplicate, Record: done}, true, claimDecision{"6", OutcomeDuplicate, 0, actPlain, false}},
		{"shadow 7 still records", "    mode: shadow\n", dedupe.ClaimResult{Found: dedupe.Conflicting}, true, claimDecision{"7", OutcomeConflict, 0, actPlain, true}},
		{"shadow 8", "    mode: shadow\n", dedupe.ClaimResult{Found: dedupe.InProgress}, true, claimDecision{"8", OutcomeInProgress, 0, actPlain, false}},
		{"shadow 5 forwards under the claim", "    mode: shadow\n", dedupe.ClaimResult{Found: dedupe.Claimed}, true, claimDecision{"5", OutcomeProcessed, 0, actForward, false}},
	} {
		t.Run(tt.row, func(t *testing.T) {
			if got := decideClaim(sender(t, tt.cfg), tt.res, tt.canWait); got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecideForward(t *testing.T) {
	yes, no := func() bool { return true }, func() bool { return false }
	for _, tt := range []struct {
		row, cfg  string
		how       ending
		status    int
		takeover  bool
		succeeded func() bool
		want      forwardDecision
	}{
		{"11", "", answered, 201, false, yes, forwardDecision{"11", OutcomeProcessed, 201, storeComplete, replySite}},
		{"11 other 4xx", "", answered, 422, false, yes, forwardDecision{"11", OutcomeProcessed, 422, storeComplete, replySite}},
		{"9 after takeover", "", answered, 200, true, yes, forwardDecision{"9", OutcomeTakeover, 200, storeComplete, replySite}},
		{"10 5xx", "", answered, 503, false, yes, forwardDecision{"10", OutcomeReleased, 503, storeRelease, replySite}},
		{"10 429", "", answered, 429, false, yes, forwardDecision{"10", OutcomeReleased, 429, storeRelease, replySite}},
		{"10 unreachable", "", unreachable, 0, false, yes, forwardDecision{"10", OutcomeReleased, 502, storeRelease, replyUnreachable}},
		{"10 shutdown before sending", "", aborted, 0, false, yes, forwardDecision{"10", OutcomeReleased, 503, storeRelease, replyShutdown}},
		{"10a timeout", "", timedOut, 0, false, yes, forwardDecision{"10a", OutcomeAmbiguous, 504, storeRelease, replyAmbiguous}},
		{"10a broken, hold", "    ambiguous: hold\n", broken, 0, false, yes, forwardDecision{"10a", OutcomeAmbiguous, 502, storeHold, replyAmbiguous}},
		{"10a shutdown at the site, hold", "    ambiguous: hold\n", abortedAtSite, 0, false, yes, forwardDecision{"10a", OutcomeAmbiguous, 503, storeHold, replyAmbiguous}},
		{"10b", "", answered, 200, false, no, forwardDecision{"10b", OutcomeNotSuccess, 200, storeRelease, replySite}},
		{"final_statuses 2xx: 404 released", "    final_statuses: 2xx\n", answered, 404, false, yes, forwardDecision{"10", OutcomeReleased, 404, storeRelease, replySite}},
	} {
		t.Run(tt.row, func(t *testing.T) {
			if got := decideForward(sender(t, tt.cfg), tt.how, tt.status, tt.takeover, tt.succeeded); got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Row 7 by changed_payload: judgeChanged reads a Conflicting claim, then
// decideClaim decides as for any claim.
func TestJudgeChanged(t *testing.T) {
	done := dedupe.Record{State: dedupe.StateDone, PayloadHash: "a", Response: &dedupe.Response{Status: 201}}
	busy := dedupe.Record{State: dedupe.StateProcessing, PayloadHash: "a"}
	held := dedupe.Record{State: dedupe.StateUnknown, PayloadHash: "a"}
	for _, tt := range []struct {
		row, cfg string
		rec      dedupe.Record
		rekey    bool
		want     claimDecision
	}{
		{"7 conflict (default)", "", done, false, claimDecision{"7", OutcomeConflict, 422, actConflict, true}},
		{"7 conflict", "    changed_payload: conflict\n", done, false, claimDecision{"7", OutcomeConflict, 422, actConflict, true}},
		{"7 duplicate, first done: replayed", "    changed_payload: duplicate\n", done, false, claimDecision{"6", OutcomeDuplicate, 201, actReplay, false}},
		{"7 duplicate, first at the site: waits", "    changed_payload: duplicate\n", busy, false, claimDecision{"8", OutcomeInProgress, 0, actWait, false}},
		{"7 duplicate, first held", "    changed_payload: duplicate\n", held, false, claimDecision{"10a", OutcomeInProgress, 409, actHeld, false}},
		{"7 new_event: claimed again", "    changed_payload: new_event\n", done, true, claimDecision{}},
	} {
		t.Run(tt.row, func(t *testing.T) {
			s := sender(t, tt.cfg)
			j := judgeChanged(s, dedupe.ClaimResult{Found: dedupe.Conflicting, Record: tt.rec})
			if j.rekey != tt.rekey {
				t.Fatalf("rekey %v, want %v", j.rekey, tt.rekey)
			}
			if tt.rekey {
				return
			}
			if got := decideClaim(s, j.res, true); got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// Any other outcome is left as it is.
	s := sender(t, "    changed_payload: duplicate\n")
	if j := judgeChanged(s, dedupe.ClaimResult{Found: dedupe.Claimed}); j.rekey || j.res.Found != dedupe.Claimed {
		t.Errorf("a new claim judged as changed: %+v", j)
	}
}
