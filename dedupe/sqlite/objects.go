package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// Per-object locks (dedupe.ObjectLocker) live in the objects table (schema
// v3): one row per held (scope, object), with its owner and lease_until in
// Unix milliseconds, as a claim's lease. Every write is an item of the
// writer's group commit, so it is judged under the write lock one after
// the other like claims are, and by the same clock: this process's, read
// when the writer runs the item (trap 8: one host, one clock).
//
// SQLite announces no changes (it is not a dedupe.Notifier): a delivery
// waiting for an object polls.

// LockObject implements dedupe.ObjectLocker: one upsert that inserts the
// row, or takes it over when its lease has ended or owner holds it
// already (the lease is then extended); a row it may not take counts no
// change, and nothing is written.
func (s *Store) LockObject(ctx context.Context, scope, object, owner string, lease time.Duration) (bool, error) {
	op := "lock object " + scope + "/" + object
	var held bool
	err := s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		now := time.Now()
		res, err := s.ws.exec(ctx, tx, qLockObject, scope, object, owner, ms(now.Add(lease)), ms(now))
		if err != nil {
			return unavailable(op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return unavailable(op, err)
		}
		held = n > 0
		return nil
	})
	if err != nil {
		return false, err
	}
	return held, nil
}

// RenewObject implements dedupe.ObjectLocker. Like a claim's Renew it
// succeeds while the row is still owner's, even past its lease when no one
// took the object since (trap 7: fenced by the owner token).
func (s *Store) RenewObject(ctx context.Context, scope, object, owner string, lease time.Duration) error {
	op := "renew object " + scope + "/" + object
	return s.fenced(ctx, op, qRenewObject, ms(time.Now().Add(lease)), scope, object, owner)
}

// UnlockObject implements dedupe.ObjectLocker: the row is deleted if it is
// still owner's (an expired lease no one took since counts).
func (s *Store) UnlockObject(ctx context.Context, scope, object, owner string) error {
	op := "unlock object " + scope + "/" + object
	return s.fenced(ctx, op, qUnlockObject, scope, object, owner)
}

// staleObjectAge is how long after its lease ended a lock nobody freed
// (its holder died) stays before Purge removes it. Until then the lock is
// free to take anyway; the margin only leaves a holder that was merely
// slow its UnlockObject (which then still finds its row).
const staleObjectAge = time.Hour
