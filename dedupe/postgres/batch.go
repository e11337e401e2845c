package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxClaimBatch bounds the claims one round trip carries.
const maxClaimBatch = 64

// One flusher sends the batches while they move: measured on 2 cores
// (bench/compare, new events through the proxy), one flusher gave 2,860
// events/s at 142 µs of server CPU each, four gave 2,380 at 236 µs (smaller
// batches, more commits). But one batch stalled on a row lock or a slow
// commit would hold up every claim of the process, so when no batch has
// been sent for stallAfter and claims wait, the next claim starts another
// flusher, up to maxFlushers (each on a connection of its own).
const (
	maxFlushers = 4
	stallAfter  = 20 * time.Millisecond
)

// errSolo answers a batched claim that must be tried again on its own: the
// batch's transaction aborted on another claim's statement (or on this
// one's), so nothing of it was written.
var errSolo = errors.New("postgres: claim batch aborted; retry alone")

// itemKind is what a batch item runs.
type itemKind int

const (
	// itemClaim: claimSQL; rec is the row it returned (pgx.ErrNoRows:
	// none, the claim lost).
	itemClaim itemKind = iota
	// itemFirst: a delivery's first try, firstSQL, so that a new key is
	// claimed, and any other key read, in the one statement. won: the
	// insert made the record (rec). Otherwise found says whether the read
	// found a row, rec is it and claimable says whether it gives way to
	// this claim now.
	itemFirst
	// itemExec: a fenced write (sql); tag is its command tag.
	itemExec
)

// claimItem is one statement waiting for a batch. args begin with sender
// and key.
type claimItem struct {
	ctx  context.Context
	kind itemKind
	sql  string // itemExec
	args []any
	// objects: the item writes hookonce_objects (args begin with scope and
	// object), not hookonce_records. Within one (first, second argument) it
	// sorts after the records' items, so the lock order stays total.
	objects bool
	rec     dedupe.Record
	tag     pgconn.CommandTag
	// itemFirst
	won, found, claimable bool

	err  error         // nil, pgx.ErrNoRows, errSolo, or the batch's error
	done chan struct{} // one value when answered (capacity 1)
	// argBuf holds args (getItem): up to the claim statements' nine.
	argBuf [9]any
	// abandoned: the caller left before the answer (wait); the caller's
	// alone to write and read, never the batcher's.
	abandoned bool
	// batch is the batch of more than one item that carries it, once
	// sent (leftEarly: its caller left before); whichever of the caller
	// leaving and the batcher setting it comes second counts the leave.
	batch atomic.Pointer[batchWait]
}

// batchWait ends the context of a batch of several items when the last of
// their callers has left (its context ended while it waited): the batch
// lasts while any of them still waits. The callers count themselves out
// (wait), so the batch registers nothing on their contexts.
type batchWait struct {
	waiting atomic.Int64
	cancel  context.CancelFunc
}

// leftEarly marks an item whose caller left before its batch was sent.
var leftEarly = new(batchWait)

func (w *batchWait) leave() {
	if w.waiting.Add(-1) == 0 {
		w.cancel()
	}
}

// claimBatcher group-commits claim statements: the claims waiting at the
// moment a batch is taken (up to maxClaimBatch) go to the server as one
// pgx.Batch, BEGIN; claim…; COMMIT, in one round trip and one commit.
// Flushers run only while claims wait: a claim that finds none running
// (and the last batch of one statement: light load) is sent at once by its
// own caller, as a batch of one (sendAlone), and while it is at the server
// that caller is the flusher; otherwise a claim that finds none running
// starts a flusher goroutine. A claim that finds one running queues, and
// starts another only when the running ones have sent nothing for
// stallAfter (see maxFlushers). A flusher goroutine takes what queued
// (behind a caller's batch too) and ends when the queue is empty (no timer, nothing when idle; under load batches form
// while the flusher's batch is at the server).
// Each claim is still its own statement, judged in queue order within the
// transaction, so two claims of one key in one batch are decided one after
// the other exactly as two commits would be; across batches the server's
// row locks decide. The transaction commits at once: none is ever held
// across a forward.
//
// The fenced writes after a claim (Complete, Release, Hold, Renew) and the
// object locks (LockObject, RenewObject, UnlockObject) share the same
// batches: each is its own statement, its rows-affected its answer.
type claimBatcher struct {
	mu       sync.Mutex
	queue    []*claimItem
	running  int       // flushers
	lastSent time.Time // when a flusher last took a batch
	lastSize int       // how many statements the last batch taken carried
	// stall replaces stallAfter when set (tests: SetStallAfter).
	stall time.Duration

	batches atomic.Int64 // round trips (and commits) sent
	claims  atomic.Int64 // statements they carried
}

// The callers of claim, first and exec own the item they pass (getItem)
// and give it back (putItem) when they are done with its args; an item
// whose caller left before its answer stays the batcher's (putItem does
// not take it back). An item answered may be sent again.

// claim runs claimSQL with it's args through the batcher and answers the
// row it returned, pgx.ErrNoRows, errSolo or an error. It returns when its
// context ends, whatever the batch is doing; a claim that its batch then
// commits is an ambiguous one, for the caller to report as such.
func (s *Store) claim(ctx context.Context, it *claimItem) (dedupe.Record, error) {
	it.kind = itemClaim
	if err := s.wait(ctx, it); err != nil {
		return dedupe.Record{}, err
	}
	return it.rec, it.err
}

// first runs a delivery's first try (itemFirst) through the batcher; it's
// args are claimSQL's. Its answer is in it (won, found, claimable, rec).
func (s *Store) first(ctx context.Context, it *claimItem) error {
	it.kind = itemFirst
	if err := s.wait(ctx, it); err != nil {
		return err
	}
	return it.err
}

// exec runs a fenced write (args begin with sender and key, or with scope
// and object when it writes hookonce_objects) through the batcher, as
// claim does, and answers its command tag.
func (s *Store) exec(ctx context.Context, objects bool, sql string, it *claimItem) (pgconn.CommandTag, error) {
	it.kind, it.sql, it.objects = itemExec, sql, objects
	if err := s.wait(ctx, it); err != nil {
		return pgconn.CommandTag{}, err
	}
	return it.tag, it.err
}

// wait queues it under ctx and waits for its answer (nil: read it from
// it) or for ctx to end (ctx's cause: it is left to the batcher, which
// may still answer it, and never reused).
func (s *Store) wait(ctx context.Context, it *claimItem) error {
	it.ctx = ctx
	it.rec, it.tag, it.err = dedupe.Record{}, pgconn.CommandTag{}, nil
	it.won, it.found, it.claimable = false, false, false
	it.batch.Store(nil)
	if s.sendAlone(it) {
		<-it.done // answered, by this goroutine
		if it.err != nil && !errors.Is(it.err, pgx.ErrNoRows) && ctx.Err() != nil {
			// As a caller that left while its batch was at the server.
			return context.Cause(ctx)
		}
		return nil
	}
	s.enqueue(it)
	select {
	case <-it.done:
		return nil
	case <-ctx.Done():
		it.abandoned = true
		if w := it.batch.Swap(leftEarly); w != nil {
			w.leave()
		}
		return context.Cause(ctx)
	}
}

// Items are pooled, each with its answer's channel (buffered: the batcher
// answers an item once, never blocking, whether or not its caller still
// waits) and room for its arguments: a claim or a write would otherwise
// allocate all three.
var itemPool = sync.Pool{New: func() any { return &claimItem{done: make(chan struct{}, 1)} }}

// getItem is a pooled item whose args are args.
func getItem(args ...any) *claimItem {
	it := itemPool.Get().(*claimItem)
	it.args = append(it.argBuf[:0], args...)
	return it
}

// putItem gives back an item whose caller is done with it, unless the
// batcher may still answer it (its caller left first).
func putItem(it *claimItem) {
	if it.abandoned {
		return
	}
	*it = claimItem{done: it.done}
	itemPool.Put(it)
}

func (s *Store) enqueue(items ...*claimItem) {
	b := &s.batcher
	b.mu.Lock()
	b.queue = append(b.queue, items...)
	start := b.running == 0 ||
		(b.running < maxFlushers && time.Since(b.lastSent) > cmp.Or(b.stall, stallAfter))
	if start {
		b.running++
		b.lastSent = time.Now() // the new flusher counts as progress
	}
	b.mu.Unlock()
	if start {
		go s.flushClaims()
	}
}

// sendAlone sends it as a batch of its own, on the caller's goroutine, when
// no flusher runs (so no batch is forming: the queue is empty) and the last
// batch carried one statement (the load is light), and answers true;
// otherwise it leaves it to be queued (false). A lone claim or write
// then costs no goroutine start and no hand-off to one and back: it runs
// as the flusher goroutine would have run its batch of one, under its
// caller's context. While it is at the server this caller counts as the
// running flusher, so the claims that arrive meanwhile queue (and, once
// stallAfter has passed without a batch, start another flusher, as behind
// a stalled flusher goroutine); when it is answered, a flusher goroutine
// takes what queued meanwhile, and this caller returns with its answer
// rather than waiting for theirs.
func (s *Store) sendAlone(it *claimItem) bool {
	b := &s.batcher
	b.mu.Lock()
	if b.running != 0 || b.lastSize > 1 {
		// A flusher runs, or the last batch carried several statements:
		// under load, the callers a batch answers come back together, and
		// the first of them sent alone would cost the rest a commit more
		// (measured: BenchmarkNewEvent32/complete 4-6% fewer events/s).
		// A flusher goroutine's start lets them queue first.
		b.mu.Unlock()
		return false
	}
	b.running++
	b.lastSent = time.Now()
	b.mu.Unlock()

	f := flushers.Get().(*flusher)
	f.items = append(f.items[:0], it)
	s.sendClaims(f)
	clear(f.items[:1])
	flushers.Put(f)

	b.mu.Lock()
	more := len(b.queue) > 0
	if !more {
		b.running--
	}
	b.mu.Unlock()
	if more {
		go s.flushClaims() // it takes over this caller's count in running
	}
	return true
}

// flushClaims sends batches until the queue is empty.
func (s *Store) flushClaims() {
	b := &s.batcher
	f := flushers.Get().(*flusher)
	defer flushers.Put(f)
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxClaimBatch)
		if n == 0 {
			b.running--
			if cap(b.queue) > 4*maxClaimBatch {
				b.queue = nil // a burst's queue is not kept
			}
			b.mu.Unlock()
			return
		}
		b.lastSize = n
		f.items = append(f.items[:0], b.queue[:n]...)
		// The rest moves to the front: the queue keeps its array, so a
		// claim queued after a quiet moment does not allocate a new one.
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.lastSent = time.Now()
		b.mu.Unlock()
		s.sendClaims(f)
		clear(f.items[:n]) // the items go back to their callers' pool
	}
}

// flusher is what one flushClaims reuses from batch to batch: the items
// taken, their answers, and the batch's queued statements.
type flusher struct {
	items  []*claimItem
	ans    []answer
	batch  pgx.Batch
	queued []pgx.QueuedQuery
}

var flushers = sync.Pool{New: func() any { return new(flusher) }}

// queue adds a statement to f's batch, in a QueuedQuery of f's own (the
// literal zeroes what pgx kept in it from the previous batch).
func (f *flusher) queue(sql string, args []any) {
	f.queued = append(f.queued, pgx.QueuedQuery{SQL: sql, Arguments: args})
}

// answer is one item's answer, written to the item only once the batch
// has committed.
type answer struct {
	rec                   dedupe.Record
	tag                   pgconn.CommandTag
	won, found, claimable bool
	err                   error
}

// sendClaims sends one batch of f.items and answers each of them.
func (s *Store) sendClaims(f *flusher) {
	// An item whose caller is gone is answered, not sent.
	items := f.items[:0]
	for _, it := range f.items {
		if err := it.ctx.Err(); err != nil {
			it.err = context.Cause(it.ctx) // the caller wraps it in ErrUnavailable
			it.done <- struct{}{}
			continue
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return
	}
	// The batch lasts while any of its callers still waits: a batch of one
	// runs under its caller's context, a larger one under a context of its
	// own that ends when the last of them leaves.
	ctx := items[0].ctx
	if len(items) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		w := &batchWait{cancel: cancel}
		w.waiting.Store(int64(len(items)))
		for _, it := range items {
			if it.batch.Swap(w) == leftEarly {
				w.leave()
			}
		}
	}

	// Rows are locked in key order, so that two batches (two replicas)
	// claiming overlapping keys cannot deadlock; claims of one key keep
	// their queue order. An object lock whose (scope, object) equals a
	// record's (sender, key) comes after it: one order over both tables.
	slices.SortStableFunc(items, func(a, b *claimItem) int {
		return cmp.Or(strings.Compare(a.args[0].(string), b.args[0].(string)),
			strings.Compare(a.args[1].(string), b.args[1].(string)),
			boolCmp(a.objects, b.objects))
	})

	f.queued = f.queued[:0]
	f.queue(s.begin, nil)
	for _, it := range items {
		switch it.kind {
		case itemClaim:
			f.queue(claimSQL, it.args)
		case itemFirst:
			f.queue(firstSQL, it.args)
		case itemExec:
			f.queue(it.sql, it.args)
		}
	}
	f.queue("COMMIT", nil)
	f.batch.QueuedQueries = f.batch.QueuedQueries[:0]
	for i := range f.queued {
		f.batch.QueuedQueries = append(f.batch.QueuedQueries, &f.queued[i])
	}
	batch := &f.batch
	defer func() {
		clear(f.queued) // no arguments kept past the batch
		clear(f.batch.QueuedQueries)
	}()
	s.batcher.batches.Add(1)
	s.batcher.claims.Add(int64(len(items)))

	f.ans = append(f.ans[:0], make([]answer, len(items))...)
	ans := f.ans
	defer clear(ans)
	err := func() error {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		// A connection left inside the transaction (an error midway) is
		// destroyed by Release, not reused.
		defer conn.Release()
		warned := warnings(conn.Conn().PgConn())
		br := conn.SendBatch(ctx, batch)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		for i, it := range items {
			a := &ans[i]
			switch it.kind {
			case itemExec:
				if a.tag, err = br.Exec(); err != nil {
					return err
				}
			case itemClaim:
				a.rec, a.err = scanRecord(br.QueryRow())
				if a.err != nil && !errors.Is(a.err, pgx.ErrNoRows) {
					return a.err
				}
			case itemFirst:
				rec, err := scanFirst(br.QueryRow(), &a.won, &a.claimable)
				switch {
				case err == nil:
					a.rec, a.found = rec, true
				case !errors.Is(err, pgx.ErrNoRows):
					return err
				}
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.String() != "COMMIT" {
			return fmt.Errorf("claim batch ended with %q", tag.String())
		}
		if err := br.Close(); err != nil {
			return err
		}
		if warnings(conn.Conn().PgConn()) > warned {
			// The server committed, but warned: its wait for
			// synchronous replication was cancelled, and the batch may
			// be the primary's alone (trap 35). Ambiguous, as a lost
			// reply is.
			return errUnconfirmed
		}
		return nil
	}()
	var pgErr *pgconn.PgError
	for i, it := range items {
		switch {
		case err == nil:
			a := ans[i]
			it.rec, it.tag, it.err = a.rec, a.tag, a.err
			it.won, it.found, it.claimable = a.won, a.found, a.claimable
		case errors.As(err, &pgErr):
			// The server refused a statement (or the commit): the
			// transaction rolled back and nothing of it was written. Each
			// claim is tried again alone, so that one bad claim fails alone
			// and a deadlock or lock timeout costs a retry, not an outage.
			it.err = errSolo
		default:
			// No answer (a broken connection, a cancelled batch), or a
			// commit not confirmed (errUnconfirmed): the commit may or may
			// not have happened, or not everywhere. Each caller looks
			// (ambiguousClaim), as after a claim statement of its own.
			it.err = err
		}
		it.done <- struct{}{}
	}
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
