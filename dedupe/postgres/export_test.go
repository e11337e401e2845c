package postgres

import (
	"context"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// OpenReadOnlyUnwrapped is OpenReadOnly without the dedupe.ReadOnly guard,
// so that a test can see that the server refuses the session's writes too.
var OpenReadOnlyUnwrapped = openReadOnly

// ClaimBatches says how many batches (round trips, commits) the store's
// batcher sent, and how many statements (claims, fenced writes) they
// carried.
func ClaimBatches(s *Store) (batches, claims int64) {
	return s.batcher.batches.Load(), s.batcher.claims.Load()
}

// ClaimStatements runs the claim statement of each request through the
// batcher, all queued at once (one batch of up to maxClaimBatch), and
// answers each one's record or error as Claim's batch step sees it:
// pgx.ErrNoRows for no row, ErrSolo for "retry alone".
func ClaimStatements(ctxs []context.Context, s *Store, reqs []dedupe.ClaimRequest) ([]dedupe.Record, []error) {
	items := make([]*claimItem, len(reqs))
	for i, req := range reqs {
		items[i] = &claimItem{ctx: ctxs[i], done: make(chan struct{}, 1), args: []any{req.Sender, req.Key,
			req.PayloadHash, req.Owner, micros(req.Lease), micros(req.TTL), req.RequestBody, nil, req.Fingerprint}}
	}
	s.enqueue(items...)
	recs := make([]dedupe.Record, len(reqs))
	errs := make([]error, len(reqs))
	for i, it := range items {
		<-it.done
		recs[i], errs[i] = it.rec, it.err
	}
	return recs, errs
}

var ErrSolo = errSolo

// SetStallAfter sets how long the store's batcher waits for a batch to be
// sent before a claim starts another flusher (stallAfter); set it before
// use.
func SetStallAfter(s *Store, d time.Duration) { s.batcher.stall = d }

// SetClaimBatching turns claim batching off (each claim statement alone,
// its own commit, as before batching) or on; set it before use.
func SetClaimBatching(s *Store, on bool) { s.solo = !on }

// LoopReads says how many reads Claim made after its batched first try.
func LoopReads(s *Store) int64 { return s.loopReads.Load() }

// PurgeSQL is Purge's record and conflict DELETE; PurgeObjectsSQL its
// object-lock DELETE.
var PurgeSQL = purgeSQL

const PurgeObjectsSQL = purgeObjectsSQL

// Exec runs sql as the store runs its statements (read-only opens: in a
// read-only transaction).
func Exec(ctx context.Context, s *Store, sql string) error {
	_, err := s.db.Exec(ctx, sql)
	return err
}

// The durable deliveries' statements (pending.go) and List's.
var (
	TakeDueSQL = takeDueSQL
	DeferSQL   = deferSQL
	ListSQL    = listSQL
)

const PendingCountsSQL = pendingCountsSQL
