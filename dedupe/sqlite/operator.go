package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// AcceptConflict implements dedupe.Store: one item of the writer's group
// commit, so the read and the mark are one step no other write enters.
func (s *Store) AcceptConflict(ctx context.Context, sender, key, id, by string) (dedupe.Conflict, error) {
	op := "accept conflict " + sender + "/" + key
	var out dedupe.Conflict
	n, ok := conflictID(id)
	if !ok {
		return out, fmt.Errorf("sqlite %s: no conflict %q: %w", op, id, dedupe.ErrNotFound)
	}
	err := s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		c, err := scanConflict(tx.QueryRowContext(ctx, `SELECT `+conflictCols+` FROM conflicts
			WHERE sender = ? AND key = ? AND (? = 0 OR id = ?) ORDER BY id DESC LIMIT 1`, sender, key, n, n))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite %s: %w", op, dedupe.ErrNotFound)
		}
		if err != nil {
			return unavailable(op, err)
		}
		out = c
		if err := c.Acceptable(); err != nil {
			return fmt.Errorf("sqlite %s: %w", op, err)
		}
		// Once per payload: another conflict of the key with this payload
		// accepted already (in this same step, so no rival enters between).
		first, err := acceptedConflict(ctx, tx, sender, key, c.ReceivedHash)
		if err == nil {
			out = first
			return fmt.Errorf("sqlite %s: %w", op, dedupe.PayloadAccepted(first))
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return unavailable(op, err)
		}
		at := ms(time.Now())
		if _, err := tx.ExecContext(ctx, `UPDATE conflicts SET accepted_at = ?, accepted_by = ? WHERE id = ? AND accepted_at = 0`,
			at, by, c.ID); err != nil {
			return unavailable(op, err)
		}
		out.AcceptedAt, out.AcceptedBy = fromMS(at), by
		return nil
	})
	return out, err
}

// queryRower is a *sql.DB or a *sql.Tx.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// acceptedConflict is the first accepted conflict of (sender, key) whose
// payload has hash; sql.ErrNoRows when none. The (sender, key, id) index
// finds the key's conflicts.
func acceptedConflict(ctx context.Context, q queryRower, sender, key, hash string) (dedupe.Conflict, error) {
	return scanConflict(q.QueryRowContext(ctx, `SELECT `+conflictCols+` FROM conflicts
		WHERE sender = ? AND key = ? AND received_hash = ? AND accepted_at <> 0 ORDER BY accepted_at, id LIMIT 1`, sender, key, hash))
}

// findAccepted implements dedupe.Reader's AcceptedConflict on db.
func findAccepted(ctx context.Context, db *sql.DB, sender, key, hash string) (dedupe.Conflict, error) {
	op := "accepted conflict " + sender + "/" + key
	c, err := acceptedConflict(ctx, db, sender, key, hash)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("sqlite %s: %w", op, dedupe.ErrNotFound)
	}
	if err != nil {
		return c, unavailable(op, err)
	}
	return c, nil
}

// AcceptedConflict implements dedupe.Reader.
func (s *Store) AcceptedConflict(ctx context.Context, sender, key, hash string) (dedupe.Conflict, error) {
	return findAccepted(ctx, s.r, sender, key, hash)
}

// Free implements dedupe.Store, as an item of a group commit.
func (s *Store) Free(ctx context.Context, sender, key string, att dedupe.Attempt) (dedupe.State, error) {
	op := "free " + sender + "/" + key
	var was dedupe.State
	err := s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		var state string
		var raw []byte
		err := s.ws.queryRow(ctx, tx, qSelectStateAttempts, sender, key).Scan(&state, &raw)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite %s: %w", op, dedupe.ErrNotFound)
		}
		if err != nil {
			return unavailable(op, err)
		}
		attempts, err := appendAttempt(raw, att)
		if err != nil {
			return fmt.Errorf("sqlite %s: %w", op, err)
		}
		if _, err := s.ws.exec(ctx, tx, qFree, attempts, sender, key); err != nil {
			return unavailable(op, err)
		}
		was = dedupe.State(state)
		return nil
	})
	return was, err
}

// Forget implements dedupe.Store.
func (s *Store) Forget(ctx context.Context, sender, key string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM records WHERE sender = ? AND key = ?`, sender, key)
	if err != nil {
		return unavailable("forget "+sender+"/"+key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("forget %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	return nil
}

// Purge implements dedupe.Store. A record with a delivery still owed
// (pending_since > 0) is never removed, whatever its expires_at: it goes
// once the delivery is settled and it expires again. It also removes the object locks whose
// lease ended more than staleObjectAge ago (objects.go).
func (s *Store) Purge(ctx context.Context, req dedupe.PurgeRequest) (int, error) {
	now := ms(time.Now())
	where := `expires_at <= ?`
	cut := now
	if !req.ReceivedBefore.IsZero() {
		where, cut = `received_at < ?`, ms(req.ReceivedBefore)
	}
	lim := req.Limit
	if lim <= 0 {
		lim = -1 // SQLite: no limit
	}
	defer s.purgeStart(ctx)()
	// Records go purgeChunk at a time, each chunk its own transaction: the
	// file has one writer, and claims wait for the purge's transaction to
	// commit, so a long one is every waiting claim's latency.
	var n int64
	for lim < 0 || n < int64(lim) {
		chunk := int64(purgeChunk)
		if lim > 0 {
			chunk = min(chunk, int64(lim)-n)
		}
		s.yieldToClaims(ctx)
		d, err := s.deleteChunk(ctx, `DELETE FROM records WHERE (sender, key) IN (SELECT sender, key FROM records
			WHERE `+where+` AND NOT (state = 'processing' AND lease_until > ?) AND pending_since = 0 LIMIT ?)`, cut, now, chunk)
		if err != nil {
			return int(n), unavailable("purge", err)
		}
		n += d
		if d < chunk {
			break
		}
	}
	cwhere := `expires_at <= ?`
	if !req.ReceivedBefore.IsZero() {
		cwhere = `received_at < ?`
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM conflicts WHERE id IN (SELECT id FROM conflicts WHERE `+cwhere+` LIMIT ?)`, cut, lim); err != nil {
		return int(n), unavailable("purge conflicts", err)
	}
	// Object locks whose holder died without unlocking, whatever req says
	// of records: they are not records and are not counted.
	if _, err := s.w.ExecContext(ctx, `DELETE FROM objects WHERE (scope, object) IN (SELECT scope, object FROM objects
		WHERE lease_until <= ? LIMIT ?)`, ms(time.Now().Add(-staleObjectAge)), lim); err != nil {
		return int(n), unavailable("purge objects", err)
	}
	return int(n), nil
}

// purgeChunk is how many records one transaction of Purge removes.
const purgeChunk = 16

// yieldToClaims waits, before a purge chunk, until no write waits for the
// writer (at most purgeYieldMax): a claim that arrives behind a chunk waits
// for it, one that arrives before it does not.
func (s *Store) yieldToClaims(ctx context.Context) {
	deadline := time.Now().Add(purgeYieldMax)
	for s.queued.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Microsecond)
	}
}

// purgeYieldMax bounds how long a purge chunk gives way to claims.
const purgeYieldMax = 50 * time.Millisecond

// deleteChunk runs one chunk of Purge, its own transaction, and answers the
// records it removed. Under synchronous=full the chunk commits without
// syncing the WAL: the writer connection is pinned, set to NORMAL for the
// chunk and back to FULL before any claim may use it again. A claim waits
// for the purge's transaction (one writer), and an fsync of its own for
// every chunk was most of that wait. Nothing a sender was told rests on a
// purge: a purge lost to a power cut leaves expired records that the next
// purge removes, and the next claim's commit syncs the WAL, the purge's
// frames with it (an fsync covers the whole file). When FULL cannot be
// set again the connection is dropped, so the pool opens a new one from
// the DSN, under FULL.
func (s *Store) deleteChunk(ctx context.Context, query string, args ...any) (int64, error) {
	if s.syncNormal {
		res, err := s.w.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	c, err := s.w.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return 0, err
	}
	res, err := c.ExecContext(ctx, query, args...)
	if _, rerr := c.ExecContext(context.Background(), `PRAGMA synchronous = FULL`); rerr != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn }) // never serve a claim unsynced
		return 0, errors.Join(err, fmt.Errorf("set synchronous back to FULL: %w", rerr))
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
