package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/hookonce/hookonce/dedupe"
)

// Group commit. Every Claim, Complete, Release, Hold, Renew,
// RecordConflict, Free, object lock write (objects.go) and durable
// delivery write (pending.go) is a writeReq
// handed to the one goroutine that owns the write transactions (writer).
// It takes one request, then whatever else is already waiting, without
// blocking, up to maxBatch, and runs them all in
// one BEGIN IMMEDIATE transaction: N concurrent writes cost one commit.
// Nothing waits on a timer: a lone request is run at once, and under load a
// batch forms by itself while the previous one commits.
//
// Items run in the order they were taken, each inside its own SAVEPOINT
// (but for a lone item, which has the transaction to itself), so
// two claims of one key in one batch are judged one after the other as two
// transactions would judge them, and an item that fails is rolled back
// alone: the others keep their writes and their answers. A failed BEGIN or
// COMMIT answers every item of the batch with an error wrapping
// dedupe.ErrUnavailable: nothing of the batch is known to be written.

// maxBatch bounds the items of one transaction.
const maxBatch = 128

// errClosed answers the writes sent after Close.
var errClosed = errors.New("store closed")

type writeReq struct {
	ctx context.Context
	op  string
	// run does the item's work in the batch's transaction. Its statements
	// use the context it is given, not the caller's: an interrupted
	// statement would roll back the whole transaction, and with it the
	// other items. Any result goes back through the closure; the error is
	// the item's answer (rolled back to its savepoint when not nil).
	run  func(ctx context.Context, tx *sql.Tx) error
	done chan error
	// synced: the item's commit must be on disk before it is answered
	// even under synchronous=normal (a durable acknowledgement: the
	// sender is answered on its strength). See runBatch.
	synced bool
}

// write runs fn as one item of a group-committed transaction and returns
// its answer once the transaction has committed (or failed).
func (s *Store) write(ctx context.Context, op string, fn func(context.Context, *sql.Tx) error) error {
	return s.send(ctx, &writeReq{ctx: ctx, op: op, run: fn, done: make(chan error, 1)})
}

// writeSynced is write for an item whose commit must be synced to the
// disk whatever the store's synchronous setting (writeReq.synced).
func (s *Store) writeSynced(ctx context.Context, op string, fn func(context.Context, *sql.Tx) error) error {
	return s.send(ctx, &writeReq{ctx: ctx, op: op, run: fn, done: make(chan error, 1), synced: true})
}

func (s *Store) send(ctx context.Context, r *writeReq) error {
	op := r.op
	if err := ctx.Err(); err != nil {
		return unavailable(op, err)
	}
	s.queued.Add(1)
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		s.queued.Add(-1)
		return unavailable(op, ctx.Err())
	case <-s.quit:
		s.queued.Add(-1)
		return unavailable(op, errClosed)
	}
	// Taken: the writer answers it (done has room, so it never waits for
	// us). If ctx ends first the caller stops waiting, as with any store
	// that does not answer in time: the writer skips the item if it has
	// not run it yet, and otherwise its write may still commit, which is
	// what ErrUnavailable allows (nothing is known to have been written).
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		select {
		case err := <-r.done: // answered meanwhile: that answer stands
			return err
		default:
			return unavailable(op, ctx.Err())
		}
	}
}

// writer owns the write transactions until Close.
func (s *Store) writer() {
	defer close(s.writerDone)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-s.quit:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.queued.Add(-int64(len(batch)))
		s.runBatch(batch)
		clear(batch) // let the answered requests go
		s.writerCheckpoint()
	}
}

// runBatch runs the items of batch in one transaction and answers each.
func (s *Store) runBatch(batch []*writeReq) {
	ctx := context.Background() // see writeReq.run
	// pending: the items run in the transaction.
	pending := make([]*writeReq, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- unavailable(r.op, err)
			continue
		}
		pending = append(pending, r)
	}
	if len(pending) == 0 {
		return
	}
	fail := func(err error) {
		for _, r := range pending {
			r.done <- unavailable(r.op, err)
		}
	}
	if s.syncNormal && slices.ContainsFunc(pending, func(r *writeReq) bool { return r.synced }) {
		// Under synchronous=normal a commit reaches the disk only at the
		// next checkpoint. An item that must be there before it is
		// answered makes this one batch's commit sync the WAL, as every
		// commit does under full (the earlier commits' frames with it);
		// the connection goes back to normal once the transaction is over
		// (deferred before the Rollback below, so it runs after it: the
		// pool's one connection is the transaction's until then).
		if _, err := s.w.ExecContext(ctx, `PRAGMA synchronous = FULL`); err != nil {
			fail(err)
			return
		}
		s.syncedBatches.Add(1)
		defer func() { _, _ = s.w.ExecContext(ctx, `PRAGMA synchronous = NORMAL`) }()
	}
	tx, err := s.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see _txlock)
	if err != nil {
		fail(err)
		return
	}
	defer tx.Rollback()
	if len(pending) == 1 {
		// A lone item needs no savepoint: when it fails, the whole
		// transaction is rolled back (by the deferred Rollback), as
		// before group commit.
		r := pending[0]
		if err := r.ctx.Err(); err != nil { // done while it waited for the lock
			r.done <- unavailable(r.op, err)
			return
		}
		if err := r.run(ctx, tx); err != nil {
			r.done <- err
			return
		}
		if err := tx.Commit(); err != nil {
			_, _ = s.w.ExecContext(ctx, `ROLLBACK`) // see below
			r.done <- unavailable(r.op, err)
			return
		}
		s.commits.Add(1)
		s.kickCheckpoint()
		r.done <- nil
		return
	}
	answers := make([]error, 0, len(pending))
	for _, r := range pending {
		if err := r.ctx.Err(); err != nil { // done while the batch waited for the lock
			answers = append(answers, unavailable(r.op, err))
			continue
		}
		if _, err := s.ws.exec(ctx, tx, qSavepoint); err != nil {
			fail(err)
			return
		}
		itemErr := r.run(ctx, tx)
		if itemErr != nil {
			if _, err := s.ws.exec(ctx, tx, qRollbackSavepoint); err != nil {
				// The item's error ended the whole transaction (SQLite
				// rolls back on a full disk or an I/O error, say).
				fail(fmt.Errorf("%w (after: %w)", err, itemErr))
				return
			}
		}
		if _, err := s.ws.exec(ctx, tx, qReleaseSavepoint); err != nil {
			fail(err)
			return
		}
		answers = append(answers, itemErr)
	}
	if err := tx.Commit(); err != nil {
		// A COMMIT refused for a deferred constraint leaves the
		// transaction open on the connection: end it, or the next BEGIN
		// fails too. (No transaction left is fine: nothing to do.)
		_, _ = s.w.ExecContext(ctx, `ROLLBACK`)
		fail(err)
		return
	}
	s.commits.Add(1)
	s.kickCheckpoint()
	for i, r := range pending {
		r.done <- answers[i]
	}
}

// notOwner is the answer to a fenced write the owner no longer holds.
func notOwner(op string) error { return fmt.Errorf("sqlite %s: %w", op, dedupe.ErrNotOwner) }
