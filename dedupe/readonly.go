package dedupe

import (
	"context"
	"fmt"
	"time"
)

// ReadOnly makes a Store of a Reader: reads go to r, and every call that
// would write (Claim, Complete, Release, Hold, Renew, RecordConflict,
// AcceptConflict, AddHits, Forget, Purge, Probe, and the ObjectLocker's LockObject,
// RenewObject, UnlockObject) fails with ErrReadOnly without reaching the
// backend. The backends' OpenReadOnly constructors return their readers
// wrapped in it, so a read-only handle cannot write by mistake whatever its
// backend allows.
func ReadOnly(r Reader) Store { return readOnly{r} }

type readOnly struct{ Reader }

func refuse(op string) error { return fmt.Errorf("%s: %w", op, ErrReadOnly) }

func (readOnly) Claim(context.Context, ClaimRequest) (ClaimResult, error) {
	return ClaimResult{}, refuse("claim")
}
func (readOnly) Complete(context.Context, string, string, string, Response, Attempt) error {
	return refuse("complete")
}
func (readOnly) Release(context.Context, string, string, string, Attempt) error {
	return refuse("release")
}
func (readOnly) Hold(context.Context, string, string, string, Attempt) error { return refuse("hold") }
func (readOnly) Renew(context.Context, string, string, string, time.Duration) error {
	return refuse("renew")
}
func (readOnly) RecordConflict(context.Context, Conflict) error { return refuse("record conflict") }
func (readOnly) AcceptConflict(context.Context, string, string, string, string) (Conflict, error) {
	return Conflict{}, refuse("accept conflict")
}
func (readOnly) AddHits(context.Context, []Hit) error         { return refuse("add hits") }
func (readOnly) Forget(context.Context, string, string) error { return refuse("forget") }
func (readOnly) Free(context.Context, string, string, Attempt) (State, error) {
	return "", refuse("free")
}
func (readOnly) Purge(context.Context, PurgeRequest) (int, error) {
	return 0, refuse("purge")
}
func (readOnly) Probe(context.Context) error { return refuse("probe") }

var _ ObjectLocker = readOnly{}

func (readOnly) LockObject(context.Context, string, string, string, time.Duration) (bool, error) {
	return false, refuse("lock object")
}
func (readOnly) RenewObject(context.Context, string, string, string, time.Duration) error {
	return refuse("renew object")
}
func (readOnly) UnlockObject(context.Context, string, string, string) error {
	return refuse("unlock object")
}

// Summary passes the call on to the Reader when it is a Summarizer (a
// summary only reads); ErrNoSummary otherwise.
func (r readOnly) Summary(ctx context.Context, since time.Time) ([]SenderSummary, error) {
	if s, ok := r.Reader.(Summarizer); ok {
		return s.Summary(ctx, since)
	}
	return nil, fmt.Errorf("summary: %w", ErrNoSummary)
}
