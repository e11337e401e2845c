package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// fenced runs one write that must touch exactly the owner's row (a
// processing claim, an object lock), as an item of a group commit:
// ErrNotOwner when it touched none.
func (s *Store) fenced(ctx context.Context, op, query string, args ...any) error {
	return s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		res, err := s.ws.exec(ctx, tx, query, args...)
		if err != nil {
			return unavailable(op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return unavailable(op, err)
		}
		if n == 0 {
			return notOwner(op)
		}
		return nil
	})
}

// settle ends the owner's processing claim, as an item of a group commit:
// it reads the attempts of the claim the owner still holds, appends att
// (keeping the latest dedupe.MaxAttempts) and runs query (an UPDATE whose
// parameters are args, then the attempts, then ownerClause's). ErrNotOwner,
// and nothing written, when the owner no longer holds it.
func (s *Store) settle(ctx context.Context, op, sender, key, owner string, att dedupe.Attempt, query string, args ...any) error {
	return s.settleFenced(ctx, op, qSelectAttempts, sender, key, owner, att, query, args...)
}

// settleFenced is settle with the fence's read: sel reads the attempts of
// the row owner holds (qSelectAttempts: a claim; qSelectPendingAttempts: a
// pending delivery), and query ends with the same clause.
func (s *Store) settleFenced(ctx context.Context, op, sel, sender, key, owner string, att dedupe.Attempt, query string, args ...any) error {
	return s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		var raw []byte
		err := s.ws.queryRow(ctx, tx, sel, sender, key, owner).Scan(&raw)
		if errors.Is(err, sql.ErrNoRows) {
			return notOwner(op)
		}
		if err != nil {
			return unavailable(op, err)
		}
		attempts, err := appendAttempt(raw, att)
		if err != nil {
			return fmt.Errorf("sqlite %s: %w", op, err)
		}
		res, err := s.ws.exec(ctx, tx, query, append(args[:len(args):len(args)], attempts, sender, key, owner)...)
		if err != nil {
			return unavailable(op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return unavailable(op, err)
		} else if n == 0 {
			return notOwner(op) // cannot happen: the transaction holds the write lock
		}
		return nil
	})
}

// Complete implements dedupe.Store.
func (s *Store) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	headers, err := json.Marshal(resp.Header)
	if err != nil {
		return fmt.Errorf("complete %s/%s: encode headers: %w", sender, key, err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	return s.settle(ctx, "complete "+sender+"/"+key, sender, key, owner, att,
		qComplete, ms(time.Now()), resp.Status, headers, body, resp.Truncated)
}

// Release implements dedupe.Store: the record stays, released, with its
// payload hash, request and attempts, until a delivery claims it again or
// it expires.
func (s *Store) Release(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.settle(ctx, "release "+sender+"/"+key, sender, key, owner, att, qRelease)
}

// Hold implements dedupe.Store.
func (s *Store) Hold(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.settle(ctx, "hold "+sender+"/"+key, sender, key, owner, att, qHold)
}

// Renew implements dedupe.Store.
func (s *Store) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	return s.fenced(ctx, "renew "+sender+"/"+key, qRenew, ms(time.Now().Add(lease)), sender, key, owner)
}

// RecordConflict implements dedupe.Store.
func (s *Store) RecordConflict(ctx context.Context, c dedupe.Conflict) error {
	op := "record conflict " + c.Sender + "/" + c.Key
	head, err := encodeHead(c.Request)
	if err != nil {
		return fmt.Errorf("sqlite %s: %w", op, err)
	}
	var body any
	if c.Request != nil {
		body = nonNil(c.Body)
	}
	return s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.ws.exec(ctx, tx, qInsertConflict,
			c.Sender, c.Key, c.StoredHash, c.ReceivedHash, ms(c.ReceivedAt), strings.Join(c.ChangedPaths, "\n"), ms(c.ExpiresAt),
			c.DiffKind, c.Shadow, head, body, c.BodyTruncated, c.AnsweredDuplicate)
		if err != nil {
			return unavailable(op, err)
		}
		return nil
	})
}

// AddHits implements dedupe.Store.
func (s *Store) AddHits(ctx context.Context, hits []dedupe.Hit) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return unavailable("add hits", err)
	}
	defer tx.Rollback()
	for _, h := range hits {
		if _, err := s.ws.exec(ctx, tx, qAddHits, h.N, h.Sender, h.Key); err != nil {
			return unavailable("add hits", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return unavailable("add hits", err)
	}
	return nil
}
