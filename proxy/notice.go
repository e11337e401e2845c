package proxy

import (
	"fmt"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// Notices: the decisions an operator may need to hear about without
// reading metrics (serve hands them to the notify package). The proxy
// only says what happened; gathering, rate limits and sending are not
// its business, and Options.Notice must never wait.

// Notice is one such decision.
type Notice struct {
	// What: an outcome as counted (OutcomeRejectedSignature,
	// OutcomeConflict, OutcomeMissingKey, OutcomeStoreError), NoticeHeld
	// or NoticeUnretried.
	What   string
	Sender string
	Key    string
	// Detail says more in the operator's words (never a body, a secret
	// or a signature).
	Detail string
}

// What a Notice is about, beside the outcomes.
const (
	// NoticeHeld: an ambiguous outcome of a sender under ambiguous: hold,
	// kept unknown for an operator.
	NoticeHeld = "held"
	// NoticeUnretried: an event newly found unretried (WatchUnretried).
	NoticeUnretried = "unretried"
	// NoticeGivenUp: a durable delivery hookonce stopped trying (retry_for
	// ran out, or the site refused it): the sender was told it was
	// delivered, and the site never took it.
	NoticeGivenUp = "given_up"
	// NoticeBacklogOld: a durable sender's oldest owed delivery has
	// waited longer than BacklogOldAfter: the site has not taken its
	// deliveries for that long (Key is empty).
	NoticeBacklogOld = "backlog_old"
)

// BacklogOldAfter is when an owed delivery's age is told (NoticeBacklogOld,
// at most once an hour per sender).
const BacklogOldAfter = time.Hour

// notice tells Options.Notice about a sender's delivery decided as
// outcome, when it is one an operator acts on; shadow mode's would_…
// outcomes and operators' redeliveries are not.
func (d *delivery) notice(outcome string) {
	if d.p.onNotice == nil || d.s == nil || d.by != dedupe.AttemptBySender {
		return
	}
	n := Notice{What: outcome, Sender: d.s.Name, Key: d.key}
	switch outcome {
	case OutcomeRejectedSignature, OutcomeConflict, OutcomeMissingKey, OutcomeStoreError:
	case OutcomeAmbiguous:
		if d.s.Ambiguous != contract.AmbiguousHold {
			return
		}
		n.What = NoticeHeld
		n.Detail = fmt.Sprintf("The shop had it for %s; its answer never came back whole.", d.siteTime.Round(time.Millisecond))
	default:
		return
	}
	d.p.onNotice(n)
}

// noticeUnretried tells Options.Notice about an event newly unretried.
func (p *Proxy) noticeUnretried(r dedupe.Record) {
	if p.onNotice == nil {
		return
	}
	last := r.LastAttempt()
	detail := fmt.Sprintf("Last tried %s", lastTry(r).UTC().Format("2006-01-02 15:04 UTC"))
	if last.Outcome != "" {
		detail += fmt.Sprintf(": %s", last.Outcome)
		if last.Status != 0 {
			detail += fmt.Sprintf(", answered %d", last.Status)
		}
	}
	detail += fmt.Sprintf("; %d attempts; the record is %s.", len(r.Attempts), r.State)
	p.onNotice(Notice{What: NoticeUnretried, Sender: r.Sender, Key: r.Key, Detail: detail})
}

// noticeGivenUp tells Options.Notice about a durable delivery given up
// after att, its last try.
func (p *Proxy) noticeGivenUp(sender, key string, att dedupe.Attempt) {
	if p.onNotice == nil {
		return
	}
	detail := "The sender was answered for it; the shop never took it."
	if att.Status != 0 {
		detail = fmt.Sprintf("The sender was answered for it; the shop's last answer was %d.", att.Status)
	}
	p.onNotice(Notice{What: NoticeGivenUp, Sender: sender, Key: key, Detail: detail})
}

// noticeBacklogOld tells Options.Notice that sender's oldest owed
// delivery waits since oldest, n owed in all; once an hour per sender.
func (p *Proxy) noticeBacklogOld(sender string, n int64, oldest time.Time) {
	if p.onNotice == nil {
		return
	}
	if !p.durable.hourly(p.durable.toldOld, sender) {
		return
	}
	p.onNotice(Notice{What: NoticeBacklogOld, Sender: sender,
		Detail: fmt.Sprintf("%d deliveries are waiting for the shop; the oldest since %s.", n, oldest.UTC().Format("2006-01-02 15:04 UTC"))})
}
