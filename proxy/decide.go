package proxy

import (
	"net/http"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// This file holds the decision table (docs/decision-table.md)
// from the claim onwards as pure functions: what a delivery's facts mean,
// row by row. proxy.go acts on the decisions; decide_test.go covers every
// row.

// act is what a delivery does after its claim was judged.
type act int

const (
	actForward    act = iota + 1 // the claim is ours: call the site (rows 5, 9)
	actReplay                    // answer the stored response (row 6)
	actConflict                  // record the conflict, answer the conflict contract (row 7)
	actHeld                      // the outcome is unknown and held: 409 (row 10a, hold)
	actInProgress                // another delivery is at the site: 409 + Retry-After (row 8)
	actWait                      // wait for the other delivery, then claim again (row 8, wait)
	actPlain                     // shadow mode: forward without a claim
)

// claimDecision is the judgement of one Claim answer.
type claimDecision struct {
	row     string // the row in docs/decision-table.md
	outcome string // as counted and logged (shadow adds "would_" when logging)
	status  int    // the answer's status; 0 when the site or a wait decides it
	act     act
	record  bool // record a conflict (also in shadow mode)
}

// decideClaim judges what a Claim found for sender s. canWait says whether
// the delivery may still wait for another one (in_progress: wait, before
// wait_timeout). Shadow mode turns every refusal into a plain forward, in
// this one place.
func decideClaim(s *contract.Sender, res dedupe.ClaimResult, canWait bool) claimDecision {
	var d claimDecision
	switch res.Found {
	case dedupe.Claimed:
		return claimDecision{row: "5", outcome: OutcomeProcessed, act: actForward}
	case dedupe.TakenOver:
		return claimDecision{row: "9", outcome: OutcomeTakeover, act: actForward}
	case dedupe.Duplicate:
		d = claimDecision{row: "6", outcome: OutcomeDuplicate, act: actReplay, status: s.DuplicateStatus}
		if d.status == 0 && res.Record.Response != nil {
			d.status = res.Record.Response.Status
		}
	case dedupe.Conflicting:
		d = claimDecision{row: "7", outcome: OutcomeConflict, act: actConflict, status: s.ConflictStatus, record: true}
	case dedupe.Held:
		d = claimDecision{row: "10a", outcome: OutcomeInProgress, act: actHeld, status: http.StatusConflict}
	case dedupe.InProgress:
		d = claimDecision{row: "8", outcome: OutcomeInProgress, act: actInProgress, status: http.StatusConflict}
		if s.InProgress == contract.InProgressWait && canWait {
			d.act, d.status = actWait, 0
		}
	default:
		return claimDecision{row: "4", outcome: OutcomeStoreError, status: http.StatusServiceUnavailable}
	}
	if s.Shadow() {
		d.act, d.status = actPlain, 0
	}
	return d
}

// storeAct is what becomes of the claim after the site was called.
type storeAct int

const (
	storeComplete storeAct = iota + 1 // keep the answer: done
	storeRelease                      // free the claim: the sender's retry runs the handler
	storeHold                         // keep the claim as unknown (ambiguous: hold)
)

// reply is which answer the sender gets after a forward.
type reply int

const (
	replySite        reply = iota + 1 // the site's answer, as it came
	replyUnreachable                  // 502: the request never reached the site
	replyShutdown                     // 503: shutting down before the site had it
	replyAmbiguous                    // 504/502/503: the handler may have run
)

// forwardDecision is the judgement of one forward.
type forwardDecision struct {
	row     string
	outcome string
	status  int // the answer's status
	store   storeAct
	reply   reply
}

// decideForward judges how a forward ended (rows 10, 10a, 10b, 11). how is
// the transport's classification, status the site's status when it
// answered, succeeded the sender's success rule on the answer (called only
// for a final status), takeover whether the claim was taken over.
func decideForward(s *contract.Sender, how ending, status int, takeover bool, succeeded func() bool) forwardDecision {
	switch how {
	case answered:
		switch {
		case !s.Final(status):
			return forwardDecision{row: "10", outcome: OutcomeReleased, status: status, store: storeRelease, reply: replySite}
		case !succeeded():
			return forwardDecision{row: "10b", outcome: OutcomeNotSuccess, status: status, store: storeRelease, reply: replySite}
		}
		d := forwardDecision{row: "11", outcome: OutcomeProcessed, status: status, store: storeComplete, reply: replySite}
		if takeover {
			d.row, d.outcome = "9", OutcomeTakeover
		}
		return d
	case unreachable:
		return forwardDecision{row: "10", outcome: OutcomeReleased, status: http.StatusBadGateway, store: storeRelease, reply: replyUnreachable}
	case aborted:
		return forwardDecision{row: "10", outcome: OutcomeReleased, status: http.StatusServiceUnavailable, store: storeRelease, reply: replyShutdown}
	}
	d := forwardDecision{row: "10a", outcome: OutcomeAmbiguous, status: http.StatusBadGateway, store: storeRelease, reply: replyAmbiguous}
	switch how {
	case timedOut:
		d.status = http.StatusGatewayTimeout
	case abortedAtSite:
		d.status = http.StatusServiceUnavailable
	}
	if s.Ambiguous == contract.AmbiguousHold {
		d.store = storeHold
	}
	return d
}

// changedJudgement is what a changed payload under a stored key means
// (row 7), by the sender's changed_payload.
type changedJudgement struct {
	res   dedupe.ClaimResult // the claim's result as the sender reads it
	rekey bool               // claim again under contract.ChangedKey
}

// judgeChanged reads a Conflicting claim by the sender's changed_payload:
// conflict keeps it (422, recorded); duplicate reads it as the stored
// payload's own standing (done: its answer is replayed; at the site: wait;
// held: 409); new_event claims the payload as its own event, once (a key
// already extended never conflicts by its hash, so this cannot loop).
func judgeChanged(s *contract.Sender, res dedupe.ClaimResult) changedJudgement {
	if res.Found != dedupe.Conflicting {
		return changedJudgement{res: res}
	}
	switch s.ChangedPayload {
	case contract.ChangedDuplicate:
		res.Found = dedupe.Standing(res.Record, res.Record.PayloadHash)
		return changedJudgement{res: res}
	case contract.ChangedNewEvent:
		return changedJudgement{res: res, rekey: true}
	}
	return changedJudgement{res: res}
}
