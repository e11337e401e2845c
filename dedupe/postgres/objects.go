package postgres

import (
	"context"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

var _ dedupe.ObjectLocker = (*Store)(nil)

// objectGrace is how long after its lease ended a lock that nobody freed
// (its holder died) stays in hookonce_objects before Purge removes it.
// Until then the next LockObject simply takes it over.
const objectGrace = time.Hour

// lockObjectSQL takes (scope, object) in one statement, judged by the
// database clock as claims are: the row is inserted when the object is
// free; a row that is there is taken over under its row lock only when its
// lease has ended or owner holds it already (the lease is then set anew).
// Otherwise ON CONFLICT … DO UPDATE … WHERE writes nothing and affects no
// row (RETURNING would be empty: trap 10); here that simply means "not
// taken", so the command tag's row count is the whole answer, and there is
// nothing to re-read. A row deleted by a concurrent unlock while this
// statement waited for it is retried by the server (the insert goes
// ahead), so of any number of concurrent lockers exactly one wins.
// $1 scope, $2 object, $3 owner, $4 lease in microseconds.
const lockObjectSQL = `
INSERT INTO hookonce_objects AS o (scope, object, owner, lease_until)
SELECT $1::text, $2::text, $3::text, clock_timestamp() + $4::bigint * interval '1 microsecond'
ON CONFLICT (scope, object) DO UPDATE SET
	owner = EXCLUDED.owner,
	lease_until = EXCLUDED.lease_until
WHERE o.lease_until <= clock_timestamp() OR o.owner = EXCLUDED.owner`

// renewObjectSQL and unlockObjectSQL are fenced by the owner: zero rows
// means someone else holds the object, or nobody does. Neither looks at
// the lease: a holder whose lease ended and whom nobody displaced still
// holds the object, as a claim's owner does.
const (
	renewObjectSQL = `
UPDATE hookonce_objects SET lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE scope = $1 AND object = $2 AND owner = $3`
	unlockObjectSQL = `
DELETE FROM hookonce_objects WHERE scope = $1 AND object = $2 AND owner = $3`
)

// LockObject implements dedupe.ObjectLocker: one statement (lockObjectSQL)
// sharing a batch and a commit with the claims and writes waiting at that
// moment. A lost reply leaves unknown whether the lock was taken (trap
// 12): the answer is an error wrapping dedupe.ErrUnavailable, never a
// guess, and nothing is retried; the same owner's next LockObject answers
// true if it was, and otherwise the lock frees when its lease ends.
func (s *Store) LockObject(ctx context.Context, scope, object, owner string, lease time.Duration) (bool, error) {
	n, err := s.write(ctx, true, "lock object", scope, object, lockObjectSQL, owner, micros(lease))
	return n == 1, err
}

// RenewObject implements dedupe.ObjectLocker.
func (s *Store) RenewObject(ctx context.Context, scope, object, owner string, lease time.Duration) error {
	return s.fenced(ctx, true, "renew object", scope, object, renewObjectSQL, owner, micros(lease))
}

// UnlockObject implements dedupe.ObjectLocker: the row is deleted. The
// store is no dedupe.Notifier, so nobody is told: waiters poll.
func (s *Store) UnlockObject(ctx context.Context, scope, object, owner string) error {
	return s.fenced(ctx, true, "unlock object", scope, object, unlockObjectSQL, owner)
}

// purgeObjectsSQL removes at most $1 locks whose lease ended more than
// objectGrace ago, skipping rows another transaction holds; the lease is
// re-checked under the row lock, so a lock taken over meanwhile stays.
const purgeObjectsSQL = `
WITH v AS (
	SELECT scope, object FROM hookonce_objects
	WHERE lease_until < (SELECT clock_timestamp()) - $2::bigint * interval '1 microsecond'
	ORDER BY lease_until LIMIT $1
	FOR UPDATE SKIP LOCKED
)
DELETE FROM hookonce_objects o USING v WHERE o.scope = v.scope AND o.object = v.object`
