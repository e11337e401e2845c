package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
)

// Prepared statements. SQLite parses and plans a statement each time it is
// prepared, and for the short statements of a claim or a completion that
// was most of their cost (about half the CPU of the claim path, profiled
// under bench/compare). The statements the writer and the readers run for
// every delivery are prepared once, at Open, and run as prepared; anything
// else (operator commands, migrations) is prepared as it runs.
//
// They are prepared on the *sql.DB, never inside the writer's transaction:
// the writer pool has one connection, which the transaction holds, so a
// DB-level prepare there would wait for itself. Tx.StmtContext then runs
// the DB-level statement on the transaction's connection, reusing what was
// prepared on it (database/sql prepares it again on a new connection, as
// after a connection error).

// Statements of the write path (the writer's transactions).
const (
	qSelectRecord = `SELECT ` + recordCols + ` FROM records WHERE sender = ? AND key = ?`
	qClaimProbe   = `SELECT state, payload_hash, expires_at FROM records WHERE sender = ? AND key = ?`
	qInsertClaim  = `INSERT OR REPLACE INTO records
			(sender, key, state, payload_hash, owner, lease_until, received_at, expires_at, request_body, request_head, fingerprint)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qReclaimReleased = `UPDATE records SET state = ?, payload_hash = ?, owner = ?, lease_until = ?,
			received_at = ?, completed_at = 0, expires_at = ?, status = 0, headers = NULL, body = NULL, truncated = 0,
			request_body = ?, request_head = ?, fingerprint = ?
			WHERE sender = ? AND key = ? AND state = 'released'`
	qTakeOver = `UPDATE records SET owner = ?, lease_until = ?, takeovers = takeovers + 1
			WHERE sender = ? AND key = ?`
	ownerClause     = ` WHERE sender = ? AND key = ? AND owner = ? AND state = 'processing'`
	qSelectAttempts = `SELECT attempts FROM records` + ownerClause
	qComplete       = `UPDATE records SET state = 'done', owner = '', lease_until = 0, completed_at = ?, status = ?,
			headers = ?, body = ?, truncated = ?, attempts = ?` + ownerClause
	qRelease        = `UPDATE records SET state = 'released', owner = '', lease_until = 0, attempts = ?` + ownerClause
	qHold           = `UPDATE records SET state = 'unknown', owner = '', lease_until = 0, attempts = ?` + ownerClause
	qRenew          = `UPDATE records SET lease_until = ?` + ownerClause
	qInsertConflict = `INSERT INTO conflicts
			(sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at,
			diff_kind, shadow, request_head, request_body, body_truncated, answered_duplicate) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qAddHits             = `UPDATE records SET hits = hits + ? WHERE sender = ? AND key = ?`
	qSelectStateAttempts = `SELECT state, attempts FROM records WHERE sender = ? AND key = ?`
	qFree                = `UPDATE records SET state = 'released', owner = '', lease_until = 0, completed_at = 0,
			status = 0, headers = NULL, body = NULL, truncated = 0, ` + clearPending + `, attempts = ? WHERE sender = ? AND key = ?`
	// Durable deliveries (pending.go; schema v8). qDefer ends the owner's
	// processing claim as done with the acknowledgement as its answer and
	// sets the pending columns; its parameters after the answer's are
	// expires_at's floor (until), since, next_at, until, the owner and the
	// lease ('' and 0 when not held).
	qDefer = `UPDATE records SET state = 'done', owner = '', lease_until = 0, completed_at = ?, status = ?,
			headers = ?, body = ?, truncated = ?, expires_at = max(expires_at, ?),
			pending_since = ?, pending_next_at = ?, pending_until = ?, pending_tries = 0,
			pending_owner = ?, pending_lease_until = ?` + ownerClause
	// qTakeDue leases up to LIMIT due, unheld deliveries of a sender,
	// found through records_pending in next_at order; the writer runs one
	// statement at a time, so two takes never lease one row. Parameters:
	// owner, lease until, sender, now, now, limit.
	qTakeDue = `UPDATE records SET pending_owner = ?, pending_lease_until = ?
			WHERE (sender, key) IN (SELECT sender, key FROM records WHERE sender = ? AND pending_since > 0
				AND pending_next_at <= ? AND (pending_owner = '' OR pending_lease_until <= ?)
				ORDER BY pending_next_at LIMIT ?)
			RETURNING ` + recordCols
	// pendingClause fences a deliverer's write: the delivery is still
	// owed and still the owner's (an expired lease nobody took since
	// counts, as for a claim).
	pendingClause          = ` WHERE sender = ? AND key = ? AND pending_owner = ? AND pending_owner <> '' AND pending_since > 0`
	clearPending           = `pending_since = 0, pending_next_at = 0, pending_until = 0, pending_tries = 0, pending_owner = '', pending_lease_until = 0`
	qRenewPending          = `UPDATE records SET pending_lease_until = ?` + pendingClause
	qSelectPendingAttempts = `SELECT attempts FROM records` + pendingClause
	qSettleDelivered       = `UPDATE records SET ` + clearPending + `, attempts = ?` + pendingClause
	qSettleDeliveredAnswer = `UPDATE records SET ` + clearPending + `, completed_at = ?, status = ?, headers = ?, body = ?,
			truncated = ?, attempts = ?` + pendingClause
	qSettleRetry = `UPDATE records SET pending_owner = '', pending_lease_until = 0, pending_next_at = ?,
			pending_tries = pending_tries + 1, attempts = ?` + pendingClause
	qSettleGiveUp = `UPDATE records SET state = 'released', completed_at = 0, status = 0, headers = NULL, body = NULL,
			truncated = 0, ` + clearPending + `, attempts = ?` + pendingClause
	qSettleHold = `UPDATE records SET state = 'unknown', completed_at = 0, status = 0, headers = NULL, body = NULL,
			truncated = 0, ` + clearPending + `, attempts = ?` + pendingClause
	// Object locks (objects.go). qLockObject inserts, or takes over when
	// the lease has ended (lease_until <= its fifth parameter, now) or the
	// owner already holds the object; a conflicting row it may not take is
	// left alone and counts no change.
	qLockObject = `INSERT INTO objects (scope, object, owner, lease_until) VALUES (?, ?, ?, ?)
			ON CONFLICT (scope, object) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
			WHERE objects.owner = excluded.owner OR objects.lease_until <= ?`
	qRenewObject       = `UPDATE objects SET lease_until = ? WHERE scope = ? AND object = ? AND owner = ?`
	qUnlockObject      = `DELETE FROM objects WHERE scope = ? AND object = ? AND owner = ?`
	qSavepoint         = `SAVEPOINT item`
	qRollbackSavepoint = `ROLLBACK TO item`
	qReleaseSavepoint  = `RELEASE item`
)

var writerQueries = []string{qSelectRecord, qClaimProbe, qInsertClaim, qReclaimReleased, qTakeOver, qSelectAttempts,
	qComplete, qRelease, qHold, qRenew, qInsertConflict, qAddHits, qSavepoint, qRollbackSavepoint, qReleaseSavepoint,
	qSelectStateAttempts, qFree, qLockObject, qRenewObject, qUnlockObject,
	qDefer, qTakeDue, qRenewPending, qSelectPendingAttempts, qSettleDelivered, qSettleDeliveredAnswer,
	qSettleRetry, qSettleGiveUp, qSettleHold}

var readerQueries = []string{qSelectRecord, qClaimProbe}

// stmts are the statements prepared on one *sql.DB, by query text.
type stmts struct {
	m      map[string]*sql.Stmt
	misses atomic.Int64 // statements run that were not prepared (tests)
}

func prepareAll(ctx context.Context, db *sql.DB, queries []string) (*stmts, error) {
	p := &stmts{m: make(map[string]*sql.Stmt, len(queries))}
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("prepare %.40q: %w", q, err)
		}
		p.m[q] = st
	}
	return p, nil
}

func (p *stmts) close() error {
	var errs []error
	for _, st := range p.m {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// exec runs q in tx, prepared when it was at Open.
func (p *stmts) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st, ok := p.m[q]; ok {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	p.misses.Add(1)
	return tx.ExecContext(ctx, q, args...)
}

// queryRow runs q in tx, prepared when it was at Open.
func (p *stmts) queryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) *sql.Row {
	if st, ok := p.m[q]; ok {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	p.misses.Add(1)
	return tx.QueryRowContext(ctx, q, args...)
}

// query runs q in tx, prepared when it was at Open.
func (p *stmts) query(ctx context.Context, tx *sql.Tx, q string, args ...any) (*sql.Rows, error) {
	if st, ok := p.m[q]; ok {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	p.misses.Add(1)
	return tx.QueryContext(ctx, q, args...)
}

// dbQueryRow runs q on db, the pool p was prepared on; a nil p prepares
// nothing (the read-only reader).
func (p *stmts) dbQueryRow(ctx context.Context, db *sql.DB, q string, args ...any) *sql.Row {
	if p == nil {
		return db.QueryRowContext(ctx, q, args...)
	}
	if st, ok := p.m[q]; ok {
		return st.QueryRowContext(ctx, args...)
	}
	p.misses.Add(1)
	return db.QueryRowContext(ctx, q, args...)
}
