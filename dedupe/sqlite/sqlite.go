// Package sqlite is the embedded dedupe.Store: one file, no server, one host.
//
// Writes go through a single connection (SQLite has one writer anyway) in
// BEGIN IMMEDIATE transactions, so a claim never upgrades a read lock and
// never sees SQLITE_BUSY without waiting for busy_timeout. The writes of the
// hot path (claims, completions, releases, holds, renewals, conflicts) are
// group-committed: those waiting at once share one transaction (batch.go). Reads use a small
// pool of their own, which WAL lets run beside the writer. The file must sit
// on a local disk: WAL does not work over a network filesystem.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

var _ dedupe.Store = (*Store)(nil)
var _ dedupe.Migrator = (*Store)(nil)
var _ dedupe.ObjectLocker = (*Store)(nil)

// migrations take the schema from one version to the next: migrations[i]
// moves a database at PRAGMA user_version i to i+1. A released step is never
// edited; a change of schema is a new step at the end, applied in place by
// Open to every existing file.
var migrations = [...]string{
	schemaV1,
	// v2: released records keep their attempts and the request's head
	// (method, target, headers) beside request_body. Both are JSON; NULL
	// means none.
	`ALTER TABLE records ADD COLUMN attempts TEXT;
	ALTER TABLE records ADD COLUMN request_head TEXT;`,
	// v3: per-object locks (dedupe.ObjectLocker, objects.go). A row is a
	// held lock: owner and lease as a claim's (lease_until in Unix
	// milliseconds by the store's clock); unlocking deletes it.
	schemaObjects,
	// v4: a conflict keeps the refused request (head and body, under the
	// rules of store_request_body), what its diff holds, whether it was
	// recorded in shadow mode, and when and by whom it was accepted
	// (accepted_at in Unix ms, 0 until then). Accept finds a key's
	// conflicts by (sender, key), newest first.
	schemaConflictsV4,
	// v5: the traffic counters of the readiness report (traffic.go).
	schemaTraffic,
}

const schemaConflictsV4 = `
ALTER TABLE conflicts ADD COLUMN diff_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE conflicts ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conflicts ADD COLUMN request_head TEXT;
ALTER TABLE conflicts ADD COLUMN request_body BLOB;
ALTER TABLE conflicts ADD COLUMN body_truncated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conflicts ADD COLUMN accepted_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conflicts ADD COLUMN accepted_by TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS conflicts_key ON conflicts (sender, key, id);
`

// purgeChunk is how many records one transaction of Purge removes.
const purgeChunk = 50

// schemaVersion is stored in PRAGMA user_version once migrated.
const schemaVersion = len(migrations)

const schemaV1 = `
CREATE TABLE IF NOT EXISTS records (
	sender       TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	state        TEXT    NOT NULL,
	payload_hash TEXT    NOT NULL,
	owner        TEXT    NOT NULL DEFAULT '',
	lease_until  INTEGER NOT NULL DEFAULT 0,
	received_at  INTEGER NOT NULL,
	completed_at INTEGER NOT NULL DEFAULT 0,
	expires_at   INTEGER NOT NULL,
	hits         INTEGER NOT NULL DEFAULT 0,
	takeovers    INTEGER NOT NULL DEFAULT 0,
	status       INTEGER NOT NULL DEFAULT 0,
	headers      BLOB,
	body         BLOB,
	truncated    INTEGER NOT NULL DEFAULT 0,
	request_body BLOB,
	PRIMARY KEY (sender, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_received ON records (received_at);
CREATE INDEX IF NOT EXISTS records_expires ON records (expires_at);
CREATE TABLE IF NOT EXISTS conflicts (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	sender        TEXT    NOT NULL,
	key           TEXT    NOT NULL,
	stored_hash   TEXT    NOT NULL,
	received_hash TEXT    NOT NULL,
	received_at   INTEGER NOT NULL,
	changed_paths TEXT    NOT NULL DEFAULT '',
	expires_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS conflicts_sender ON conflicts (sender, id);
CREATE INDEX IF NOT EXISTS conflicts_expires ON conflicts (expires_at);
`

// schemaObjects is the table of per-object locks (v3). It holds only the
// objects locked now and those whose holder died without unlocking, which
// Purge removes an hour after their lease ended; so small that Purge's
// scan needs no index, and lock writes maintain none.
const schemaObjects = `
CREATE TABLE IF NOT EXISTS objects (
	scope       TEXT    NOT NULL,
	object      TEXT    NOT NULL,
	owner       TEXT    NOT NULL,
	lease_until INTEGER NOT NULL,
	PRIMARY KEY (scope, object)
) WITHOUT ROWID;
`

// Store is a dedupe.Store in one SQLite file.
type Store struct {
	path string
	w, r *sql.DB // w: the single writer connection; r: readers
	// ws, rs: the statements of every delivery, prepared on w and r (stmts.go).
	ws, rs *stmts

	// Group commit (batch.go): reqs carries the writes to the writer
	// goroutine, which stops when quit is closed and then closes writerDone.
	reqs       chan *writeReq
	quit       chan struct{}
	writerDone chan struct{}
	queued     atomic.Int64 // writes sent and not yet taken by the writer
	commits    atomic.Int64 // transactions the writer committed

	// check is the file's integrity, checked in the background (check.go).
	check integrity

	closeOnce sync.Once
	closeErr  error
}

// Open opens the database at path for serving: it creates the file if
// needed and migrates it, as every backend's Open does. Read-only tools use
// OpenReadOnly, which creates, migrates and writes nothing.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	dsn := func(extra string) string {
		q := url.Values{}
		for _, p := range []string{"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(ON)"} {
			q.Add("_pragma", p)
		}
		if extra != "" {
			q.Add("_pragma", extra)
		}
		q.Set("_txlock", "immediate")
		return fileURI(path, q)
	}
	w, err := sql.Open("sqlite", dsn(""))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate sqlite %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn("query_only(ON)"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4) // the default keeps 2: under load the others were reopened for every read
	ws, err := prepareAll(ctx, w, writerQueries)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	rs, err := prepareAll(ctx, r, readerQueries)
	if err != nil {
		ws.close()
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	s := &Store{path: path, w: w, r: r, ws: ws, rs: rs,
		reqs: make(chan *writeReq), quit: make(chan struct{}), writerDone: make(chan struct{})}
	go s.writer()
	s.startCheck()
	return s, nil
}

// fileURI is the SQLite URI filename of path with the driver's and
// SQLite's parameters q. Characters that a URI gives a meaning to are
// escaped, so the path names the same file in every mode it is opened in.
func fileURI(path string, q url.Values) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	return "file:" + esc + "?" + q.Encode()
}

// Migrate applies pending migrations (Open already has): nothing to do on
// a current file.
func (s *Store) Migrate(ctx context.Context) error {
	if err := migrate(ctx, s.w); err != nil {
		return fmt.Errorf("migrate sqlite %s: %w", s.path, err)
	}
	return nil
}

// migrate applies the pending steps in one BEGIN IMMEDIATE transaction, so
// two processes opening one file at once take turns: the second reads the
// version the first committed and has nothing left to do.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("database schema version %d is newer than this binary's %d", v, schemaVersion)
	}
	for i := v; i < schemaVersion; i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("schema version %d to %d: %w", i, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// Close stops the writer, once the batch it is running is answered, then
// closes both pools; safe to call twice. Writes after Close fail with
// dedupe.ErrUnavailable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.writerDone
		s.stopCheck()
		s.closeErr = errors.Join(s.rs.close(), s.ws.close(), s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// unavailable wraps a driver error so callers can tell "store down" apart.
func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, dedupe.ErrUnavailable, err)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

const recordCols = `sender, key, state, payload_hash, owner, lease_until, received_at, completed_at,
	expires_at, hits, takeovers, status, headers, body, truncated, request_body, attempts, request_head`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (dedupe.Record, error) {
	var (
		rec                                         dedupe.Record
		state                                       string
		lease, received, completed, expires, status int64
		headers, body, reqBody, attempts, head      []byte
		truncated                                   bool
	)
	err := row.Scan(&rec.Sender, &rec.Key, &state, &rec.PayloadHash, &rec.Owner, &lease, &received, &completed,
		&expires, &rec.Hits, &rec.Takeovers, &status, &headers, &body, &truncated, &reqBody, &attempts, &head)
	if err != nil {
		return rec, err
	}
	rec.State = dedupe.State(state)
	rec.LeaseUntil, rec.ReceivedAt, rec.CompletedAt, rec.ExpiresAt = fromMS(lease), fromMS(received), fromMS(completed), fromMS(expires)
	rec.RequestBody = reqBody
	if rec.Attempts, err = decodeAttempts(attempts); err != nil {
		return rec, err
	}
	if rec.Request, err = decodeHead(head); err != nil {
		return rec, err
	}
	if rec.State == dedupe.StateDone {
		h := http.Header{}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &h); err != nil {
				return rec, fmt.Errorf("decode stored headers: %w", err)
			}
		}
		if body == nil {
			body = []byte{}
		}
		rec.Response = &dedupe.Response{Status: int(status), Header: h, Body: body, Truncated: truncated}
	}
	return rec, nil
}

// attemptJSON is an Attempt as the attempts column keeps it: At in Unix
// milliseconds like every other time here (0 for the zero time), Duration
// in nanoseconds so it round-trips exactly.
type attemptJSON struct {
	At       int64  `json:"at_ms"`
	By       string `json:"by,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Status   int    `json:"status,omitempty"`
	Duration int64  `json:"duration_ns,omitempty"`
	Replica  string `json:"replica,omitempty"`
	Wait     int64  `json:"wait_ns,omitempty"`
}

func decodeAttempts(raw []byte) ([]dedupe.Attempt, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var stored []attemptJSON
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, fmt.Errorf("decode stored attempts: %w", err)
	}
	if len(stored) == 0 {
		return nil, nil
	}
	out := make([]dedupe.Attempt, len(stored))
	for i, a := range stored {
		out[i] = dedupe.Attempt{At: fromMS(a.At), By: a.By, Outcome: a.Outcome, Status: a.Status,
			Duration: time.Duration(a.Duration), Replica: a.Replica, Wait: time.Duration(a.Wait)}
	}
	return out, nil
}

// appendAttempt adds att to the stored attempts and keeps the latest
// dedupe.MaxAttempts, oldest first. The result is TEXT, like request_head.
func appendAttempt(raw []byte, att dedupe.Attempt) (string, error) {
	var stored []attemptJSON
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &stored); err != nil {
			return "", fmt.Errorf("decode stored attempts: %w", err)
		}
	}
	at := int64(0)
	if !att.At.IsZero() {
		at = ms(att.At)
	}
	stored = append(stored, attemptJSON{At: at, By: att.By, Outcome: att.Outcome, Status: att.Status,
		Duration: int64(att.Duration), Replica: att.Replica, Wait: int64(att.Wait)})
	if n := len(stored) - dedupe.MaxAttempts; n > 0 {
		stored = stored[n:]
	}
	b, err := json.Marshal(stored)
	return string(b), err
}

// headJSON is a StoredRequest as the request_head column keeps it.
type headJSON struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header,omitempty"`
}

// encodeHead returns the request_head value: NULL when nothing is kept.
func encodeHead(r *dedupe.StoredRequest) (any, error) {
	if r == nil {
		return nil, nil
	}
	b, err := json.Marshal(headJSON{Method: r.Method, URI: r.URI, Header: r.Header})
	if err != nil {
		return nil, fmt.Errorf("encode request head: %w", err)
	}
	return string(b), nil // TEXT, so the sqlite3 shell's JSON functions read it
}

func decodeHead(raw []byte) (*dedupe.StoredRequest, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var h headJSON
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode stored request head: %w", err)
	}
	return &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header}, nil
}

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
	rec, err := scanRecord(s.rs.dbQueryRow(ctx, s.r, qSelectRecord, req.Sender, req.Key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return dedupe.ClaimResult{}, unavailable(op, err)
	case rec.State == dedupe.StateDone && rec.PayloadHash == req.PayloadHash && time.Now().Before(rec.ExpiresAt):
		return dedupe.ClaimResult{Outcome: dedupe.Duplicate, Record: rec}, nil
	}

	head, err := encodeHead(req.Request)
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("%s: %w", op, err)
	}
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
	rec, err := scanRecord(s.ws.queryRow(ctx, tx, qSelectRecord, req.Sender, req.Key))
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return dedupe.ClaimResult{}, unavailable(op, err)
	}
	var outcome dedupe.Outcome
	switch {
	case !found || !now.Before(rec.ExpiresAt):
		outcome = dedupe.Claimed
		rec = dedupe.Record{
			Sender: req.Sender, Key: req.Key, State: dedupe.StateProcessing, PayloadHash: req.PayloadHash,
			Owner: req.Owner, LeaseUntil: now.Add(req.Lease), ReceivedAt: now, ExpiresAt: now.Add(req.TTL),
			RequestBody: req.RequestBody, Request: req.Request,
		}
		_, err = s.ws.exec(ctx, tx, qInsertClaim,
			rec.Sender, rec.Key, string(rec.State), rec.PayloadHash, rec.Owner, ms(rec.LeaseUntil), ms(rec.ReceivedAt), ms(rec.ExpiresAt),
			rec.RequestBody, head)
	case rec.State == dedupe.StateReleased:
		outcome = dedupe.Claimed
		rec.State, rec.PayloadHash, rec.Owner = dedupe.StateProcessing, req.PayloadHash, req.Owner
		rec.LeaseUntil, rec.ReceivedAt, rec.ExpiresAt = now.Add(req.Lease), now, now.Add(req.TTL)
		rec.CompletedAt, rec.Response = time.Time{}, nil
		rec.RequestBody, rec.Request = req.RequestBody, req.Request
		_, err = s.ws.exec(ctx, tx, qReclaimReleased,
			string(rec.State), rec.PayloadHash, rec.Owner, ms(rec.LeaseUntil), ms(rec.ReceivedAt), ms(rec.ExpiresAt),
			rec.RequestBody, head, req.Sender, req.Key)
	case rec.PayloadHash != req.PayloadHash || rec.State != dedupe.StateProcessing || now.Before(rec.LeaseUntil):
		return dedupe.ClaimResult{Outcome: dedupe.Standing(rec, req.PayloadHash), Record: rec}, nil
	default: // processing, same payload, lease over: take it
		outcome = dedupe.TakenOver
		rec.Owner, rec.LeaseUntil = req.Owner, now.Add(req.Lease)
		rec.Takeovers++
		_, err = s.ws.exec(ctx, tx, qTakeOver, rec.Owner, ms(rec.LeaseUntil), req.Sender, req.Key)
	}
	if err != nil {
		return dedupe.ClaimResult{}, unavailable(op, err)
	}
	return dedupe.ClaimResult{Outcome: outcome, Record: rec}, nil
}

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
	return s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		var raw []byte
		err := s.ws.queryRow(ctx, tx, qSelectAttempts, sender, key, owner).Scan(&raw)
		if errors.Is(err, sql.ErrNoRows) {
			return notOwner(op)
		}
		if err != nil {
			return unavailable(op, err)
		}
		attempts, err := appendAttempt(raw, att)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
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
		return fmt.Errorf("%s: %w", op, err)
	}
	var body any
	if c.Request != nil {
		body = nonNil(c.Body)
	}
	return s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.ws.exec(ctx, tx, qInsertConflict,
			c.Sender, c.Key, c.StoredHash, c.ReceivedHash, ms(c.ReceivedAt), strings.Join(c.ChangedPaths, "\n"), ms(c.ExpiresAt),
			c.DiffKind, c.Shadow, head, body, c.BodyTruncated)
		if err != nil {
			return unavailable(op, err)
		}
		return nil
	})
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// AcceptConflict implements dedupe.Store: one item of the writer's group
// commit, so the read and the mark are one step no other write enters.
func (s *Store) AcceptConflict(ctx context.Context, sender, key, id, by string) (dedupe.Conflict, error) {
	op := "accept conflict " + sender + "/" + key
	var out dedupe.Conflict
	n, ok := conflictID(id)
	if !ok {
		return out, fmt.Errorf("%s: no conflict %q: %w", op, id, dedupe.ErrNotFound)
	}
	err := s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		c, err := scanConflict(tx.QueryRowContext(ctx, `SELECT `+conflictCols+` FROM conflicts
			WHERE sender = ? AND key = ? AND (? = 0 OR id = ?) ORDER BY id DESC LIMIT 1`, sender, key, n, n))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s: %w", op, dedupe.ErrNotFound)
		}
		if err != nil {
			return unavailable(op, err)
		}
		out = c
		if err := c.Acceptable(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
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

// conflictID reads a conflict id as AcceptConflict takes it: "" is 0 (the
// newest), else a positive row id.
func conflictID(id string) (int64, bool) {
	if id == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil && n > 0
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

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, sender, key string) (dedupe.Record, error) {
	return getRecord(ctx, s.r, s.rs, sender, key)
}

// The reads below are shared by Store and the read-only reader.

// getRecord reads one record from db, with its prepared statements p when
// it has them (the read-only reader prepares nothing).
func getRecord(ctx context.Context, db *sql.DB, p *stmts, sender, key string) (dedupe.Record, error) {
	rec, err := scanRecord(p.dbQueryRow(ctx, db, qSelectRecord, sender, key))
	if errors.Is(err, sql.ErrNoRows) {
		return rec, fmt.Errorf("get %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	if err != nil {
		return rec, unavailable("get "+sender+"/"+key, err)
	}
	return rec, nil
}

func limit(n int) int {
	if n <= 0 {
		return 100
	}
	return n
}

// List implements dedupe.Store.
func (s *Store) List(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Record, error) {
	return listRecords(ctx, s.r, f)
}

func listRecords(ctx context.Context, db *sql.DB, f dedupe.ListFilter) ([]dedupe.Record, error) {
	where, args := keyWhere(f)
	order := `received_at DESC, key DESC`
	if f.KeyPart != "" {
		// Read the table (or the sender's range of its primary key) and
		// sort the few rows that match, rather than walk records_received
		// and look every record up to test its key.
		order = `received_at + 0 DESC, key DESC`
	}
	q := `SELECT ` + recordCols + ` FROM records WHERE (? = '' OR sender = ?) AND (? = '' OR state = ?)` + where + `
		ORDER BY ` + order + ` LIMIT ? OFFSET ?`
	out, err := listPages(ctx, db, f, q, slices.Concat([]any{f.Sender, f.Sender, string(f.State), string(f.State)}, args),
		scanRecord, func(r dedupe.Record) string { return r.Key })
	if err != nil {
		return nil, unavailable("list", err)
	}
	return out, nil
}

// listPages reads q (its last two parameters LIMIT and OFFSET) page by
// page (dedupe.Pages) and keeps the rows whose key holds f's key part, up
// to f's limit.
func listPages[T any](ctx context.Context, db *sql.DB, f dedupe.ListFilter, q string, args []any,
	scan func(scanner) (T, error), key func(T) string) ([]T, error) {
	want := limit(f.Limit)
	var out []T
	err := dedupe.Pages(f, want, func(lim, off int) (int, error) {
		rows, err := db.QueryContext(ctx, q, slices.Concat(args, []any{lim, off})...)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
			v, err := scan(rows)
			if err != nil {
				return n, err
			}
			if f.Keeps(key(v)) && len(out) < want {
				out = append(out, v)
			}
		}
		return n, rows.Err()
	}, func() int { return len(out) })
	return out, err
}

// keyWhere narrows a query by f's Key and KeyPart: an exact key, or the
// keys holding one of the part's needles (instr: a scan of the sender's
// keys, or of every key; the caller keeps only whole parts).
func keyWhere(f dedupe.ListFilter) (string, []any) {
	var where string
	var args []any
	if f.Key != "" {
		where += ` AND key = ?`
		args = append(args, f.Key)
	}
	if f.KeyPart != "" {
		var or []string
		for _, n := range dedupe.KeyPartNeedles(f.KeyPart) {
			or = append(or, `instr(key, ?) > 0`)
			args = append(args, n)
		}
		where += ` AND (` + strings.Join(or, " OR ") + `)`
	}
	return where, args
}

// Conflicts implements dedupe.Store.
func (s *Store) Conflicts(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Conflict, error) {
	return listConflicts(ctx, s.r, f)
}

const conflictCols = `id, sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at,
	diff_kind, shadow, request_head, request_body, body_truncated, accepted_at, accepted_by`

func scanConflict(row scanner) (dedupe.Conflict, error) {
	var (
		c                          dedupe.Conflict
		id, received, expires, acc int64
		paths                      string
		head, body                 []byte
	)
	err := row.Scan(&id, &c.Sender, &c.Key, &c.StoredHash, &c.ReceivedHash, &received, &paths, &expires,
		&c.DiffKind, &c.Shadow, &head, &body, &c.BodyTruncated, &acc, &c.AcceptedBy)
	if err != nil {
		return c, err
	}
	c.ID = strconv.FormatInt(id, 10)
	c.ReceivedAt, c.ExpiresAt, c.AcceptedAt = fromMS(received), fromMS(expires), fromMS(acc)
	if paths != "" {
		c.ChangedPaths = strings.Split(paths, "\n")
	}
	if c.Request, err = decodeHead(head); err != nil {
		return c, err
	}
	if c.Request != nil {
		c.Body = nonNil(body)
	}
	return c, nil
}

func listConflicts(ctx context.Context, db *sql.DB, f dedupe.ListFilter) ([]dedupe.Conflict, error) {
	where, args := keyWhere(f)
	q := `SELECT ` + conflictCols + ` FROM conflicts WHERE (? = '' OR sender = ?)` + where + ` ORDER BY id DESC LIMIT ? OFFSET ?`
	out, err := listPages(ctx, db, f, q, slices.Concat([]any{f.Sender, f.Sender}, args),
		scanConflict, func(c dedupe.Conflict) string { return c.Key })
	if err != nil {
		return nil, unavailable("conflicts", err)
	}
	return out, nil
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
			return fmt.Errorf("%s: %w", op, dedupe.ErrNotFound)
		}
		if err != nil {
			return unavailable(op, err)
		}
		attempts, err := appendAttempt(raw, att)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
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

// Purge implements dedupe.Store. It also removes the object locks whose
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
	// Records go purgeChunk at a time, each chunk its own transaction: the
	// file has one writer, and claims wait for the purge's transaction to
	// commit, so a long one is every waiting claim's latency.
	var n int64
	for lim < 0 || n < int64(lim) {
		chunk := int64(purgeChunk)
		if lim > 0 {
			chunk = min(chunk, int64(lim)-n)
		}
		res, err := s.w.ExecContext(ctx, `DELETE FROM records WHERE (sender, key) IN (SELECT sender, key FROM records
			WHERE `+where+` AND NOT (state = 'processing' AND lease_until > ?) LIMIT ?)`, cut, now, chunk)
		if err != nil {
			return int(n), unavailable("purge", err)
		}
		d, _ := res.RowsAffected()
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

// Ping implements dedupe.Store: reachable and migrated.
func (s *Store) Ping(ctx context.Context) error {
	return ping(ctx, s.r)
}

func ping(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return unavailable("ping", err)
	}
	if v != schemaVersion {
		return fmt.Errorf("ping: schema version %d, want %d: %w", v, schemaVersion, dedupe.ErrUnavailable)
	}
	return nil
}

// Probe implements dedupe.Store: a record of dedupe.ProbeSender inserted
// and deleted in one committed write transaction on the writer connection,
// as a claim commits (a rolled-back transaction would write nothing to the
// WAL, and so find nothing out). It fails at once when the background
// integrity check (check.go) found the file damaged.
//
// First it checks that the file and its directory are still writable by
// this process. The open connection would go on writing to a file made
// read-only under it, but the next connection (after an error, or a
// restart) could not open it for writing, nor create its -wal and -shm.
func (s *Store) Probe(ctx context.Context) error {
	if err := s.corruption(); err != nil {
		return unavailable("probe", err)
	}
	for _, p := range []string{s.path, filepath.Dir(s.path)} {
		if err := writable(p); err != nil {
			return unavailable("probe", fmt.Errorf("%s is not writable: %w", p, err))
		}
	}
	key := rand.Text()
	tx, err := s.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see _txlock)
	if err != nil {
		return unavailable("probe", err)
	}
	defer tx.Rollback()
	now := ms(time.Now())
	if _, err := tx.ExecContext(ctx, `INSERT INTO records (sender, key, state, payload_hash, received_at, expires_at)
		VALUES (?, ?, 'processing', '', ?, ?)`, dedupe.ProbeSender, key, now, now); err != nil {
		return unavailable("probe", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE sender = ? AND key = ?`, dedupe.ProbeSender, key); err != nil {
		return unavailable("probe", err)
	}
	if err := tx.Commit(); err != nil {
		return unavailable("probe", err)
	}
	return nil
}
