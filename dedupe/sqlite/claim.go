package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Claim implements dedupe.Store.
//
// A released record is claimed as a new one, whatever its payload hash:
// state, owner, lease, payload hash, request body and head become the new
// claim's, ReceivedAt is now and ExpiresAt now + TTL (the event is kept a
// full TTL from the delivery that may complete it, so its answer is
// replayed as long as any other), and the attempts, hits and takeovers
// stay with the event. An expired record, released or not, is replaced
// outright: nothing of it is kept.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	op := "claim " + req.Sender + "/" + req.Key
	// Fast path, no write lock: a done record with the same hash is a
	// duplicate, and it can only stop being one by expiring or being purged,
	// which the read also sees. This keeps replays off the single writer.
	// The whole record is read only for what the probe finds a duplicate
	// (a new key, most claims that reach the store, costs a read of three
	// columns: the driver makes each column's name and type anew for each
	// query).
	pr, err := probeClaim(s.rs.dbQueryRow(ctx, s.r, qClaimProbe, req.Sender, req.Key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return dedupe.ClaimResult{}, unavailable(op, err)
	case pr.state == string(dedupe.StateDone) && pr.hash == req.PayloadHash && time.Now().Before(fromMS(pr.expires)):
		rec, err := scanRecord(s.rs.dbQueryRow(ctx, s.r, qSelectRecord, req.Sender, req.Key))
		switch {
		case errors.Is(err, sql.ErrNoRows): // gone since: the writer judges
		case err != nil:
			return dedupe.ClaimResult{}, unavailable(op, err)
		case rec.State == dedupe.StateDone && rec.PayloadHash == req.PayloadHash && time.Now().Before(rec.ExpiresAt):
			return dedupe.ClaimResult{Found: dedupe.Duplicate, Record: rec}, nil
		}
	}

	head, err := encodeHead(req.Request)
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("sqlite %s: %w", op, err)
	}
	req.ClaimFingerprint() // made outside the writer's transaction
	var res dedupe.ClaimResult
	err = s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		res, err = s.claimTx(ctx, tx, op, req, head)
		return err
	})
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	return res, nil
}

// claimTx judges req inside the writer's transaction and writes the claim
// when it wins; head is req.Request encoded.
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, op string, req dedupe.ClaimRequest, head any) (dedupe.ClaimResult, error) {
	now := time.Now()
	// A key that is free or past its ttl is written without reading its
	// record: the probe's three columns tell. Any other is read whole.
	var rec dedupe.Record
	pr, err := probeClaim(s.ws.queryRow(ctx, tx, qClaimProbe, req.Sender, req.Key))
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return dedupe.ClaimResult{}, unavailable(op, err)
	}
	if exists && now.Before(fromMS(pr.expires)) {
		rec, err = scanRecord(s.ws.queryRow(ctx, tx, qSelectRecord, req.Sender, req.Key))
		exists = err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return dedupe.ClaimResult{}, unavailable(op, err)
		}
	}
	var found dedupe.Found
	switch {
	case !exists || !now.Before(rec.ExpiresAt):
		found = dedupe.Claimed
		rec = dedupe.Record{
			Sender: req.Sender, Key: req.Key, State: dedupe.StateProcessing, PayloadHash: req.PayloadHash,
			Owner: req.Owner, LeaseUntil: now.Add(req.Lease), ReceivedAt: now, ExpiresAt: now.Add(req.TTL),
			RequestBody: req.RequestBody, Request: req.Request, Fingerprint: req.Fingerprint,
		}
		_, err = s.ws.exec(ctx, tx, qInsertClaim,
			rec.Sender, rec.Key, string(rec.State), rec.PayloadHash, rec.Owner, ms(rec.LeaseUntil), ms(rec.ReceivedAt), ms(rec.ExpiresAt),
			rec.RequestBody, head, rec.Fingerprint)
	case rec.State == dedupe.StateReleased:
		found = dedupe.Claimed
		rec.State, rec.PayloadHash, rec.Owner = dedupe.StateProcessing, req.PayloadHash, req.Owner
		rec.LeaseUntil, rec.ReceivedAt, rec.ExpiresAt = now.Add(req.Lease), now, now.Add(req.TTL)
		rec.CompletedAt, rec.Response = time.Time{}, nil
		rec.RequestBody, rec.Request, rec.Fingerprint = req.RequestBody, req.Request, req.Fingerprint
		_, err = s.ws.exec(ctx, tx, qReclaimReleased,
			string(rec.State), rec.PayloadHash, rec.Owner, ms(rec.LeaseUntil), ms(rec.ReceivedAt), ms(rec.ExpiresAt),
			rec.RequestBody, head, rec.Fingerprint, req.Sender, req.Key)
	case rec.PayloadHash != req.PayloadHash || rec.State != dedupe.StateProcessing || now.Before(rec.LeaseUntil):
		return dedupe.ClaimResult{Found: dedupe.Standing(rec, req.PayloadHash), Record: rec}, nil
	default: // processing, same payload, lease over: take it
		found = dedupe.TakenOver
		rec.Owner, rec.LeaseUntil = req.Owner, now.Add(req.Lease)
		rec.Takeovers++
		_, err = s.ws.exec(ctx, tx, qTakeOver, rec.Owner, ms(rec.LeaseUntil), req.Sender, req.Key)
	}
	if err != nil {
		return dedupe.ClaimResult{}, unavailable(op, err)
	}
	return dedupe.ClaimResult{Found: found, Record: rec}, nil
}

// claimProbe is what a claim reads of a record before it reads the whole
// of it (qClaimProbe): its state, payload hash and expiry.
type claimProbe struct {
	state, hash string
	expires     int64
}

func probeClaim(row *sql.Row) (claimProbe, error) {
	var pr claimProbe
	err := row.Scan(&pr.state, &pr.hash, &pr.expires)
	return pr, err
}
