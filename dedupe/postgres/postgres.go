// Package postgres is the PostgreSQL dedupe.Store (pgx/v5, pgxpool): one
// database shared by any number of hookonce replicas.
//
// Every decision about time is taken by the database clock
// (clock_timestamp()), every claim is one statement under READ COMMITTED in
// a short transaction that commits at once (concurrent claims share one:
// see claimBatcher), and no transaction is ever held open across the
// forward to the site. Writes after a claim are fenced by the owner token.
// A store call that cannot reach the database, or does not get an answer
// before its context ends, fails with an error wrapping
// dedupe.ErrUnavailable; it never guesses.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ dedupe.Store = (*Store)(nil)
var _ dedupe.Migrator = (*Store)(nil)
var _ dedupe.ConfirmedReader = (*Store)(nil)

// Session defaults, applied unless the DSN sets them (any runtime parameter
// can be given as a DSN query parameter, e.g. ?lock_timeout=2s).
var defaultRuntimeParams = map[string]string{
	"application_name": "hookonce",
	// A claim waits on another claimer's uncommitted insert only for the
	// length of one statement; anything longer is a stuck lock.
	"lock_timeout": "5s",
	// No transaction here stays open; if one ever does (a client that
	// vanished mid-transaction), the server ends it.
	"idle_in_transaction_session_timeout": "15s",
	// A server-side backstop only: the real bound is the caller's context,
	// which also works when the server is frozen or the network is cut.
	"statement_timeout": "30s",
	// Server-side keepalives, so that backends of dead clients go away.
	"tcp_keepalives_idle":     "30",
	"tcp_keepalives_interval": "10",
	"tcp_keepalives_count":    "3",
}

// poolerParam is hookonce's own DSN parameter for a connection pooler in
// between (pooler=transaction: PgBouncer's pool_mode=transaction, and
// poolers like it), where a server connection serves a client only for
// one transaction. Then hookonce
//   - sends, of its session defaults, only those in poolerStartupParams
//     (PgBouncer refuses a startup parameter it does not know, and a
//     session SET would stay on the server connection for whichever client
//     gets it next): the others are the role's to set (ALTER ROLE … SET,
//     docs/stores.md);
//   - uses default_query_exec_mode=exec unless the DSN says another:
//     unnamed statements, parameter types from the SQL, one round trip,
//     no server-side prepared statement that the next transaction's
//     server connection would not have (or would have twice). It refuses
//     describe_exec, which does not work there; cache_statement works only
//     with PgBouncer >= 1.21's max_prepared_statements.
//
// Without it nothing changes.
const poolerParam = "pooler"

// poolerStartupParams are the session defaults still sent with
// pooler=transaction: those PgBouncer accepts at startup (it tracks them
// per client and sets them on whichever server connection serves it).
var poolerStartupParams = map[string]bool{"application_name": true}

// RoleSettings are the session defaults that, with pooler=transaction,
// the database role must carry (ALTER ROLE … SET), as hookonce cannot
// send them; Warnings reports the missing ones.
var RoleSettings = []string{"lock_timeout", "idle_in_transaction_session_timeout", "statement_timeout"}

const (
	// defaultConnectTimeout bounds a connection attempt that pgxpool makes
	// in the background (it outlives the caller's context) when the DSN sets
	// no connect_timeout.
	defaultConnectTimeout = 5 * time.Second
	// defaultMinPool is the smallest default pool (pool_max_conns unset).
	defaultMinPool = 16
	// defaultListLimit is ListFilter.Limit 0.
	defaultListLimit = 100
	// purgeBatch bounds one DELETE when PurgeRequest.Limit is 0.
	purgeBatch = 1000
	// claimAttempts bounds the claim loop when rows vanish or change between
	// the claim statement and the follow-up read.
	claimAttempts = 5
)

// Store is a dedupe.Store on PostgreSQL.
type Store struct {
	pool      *pgxpool.Pool
	db        querier // the pool, or readOnlyPool around it
	begin     string  // the claim batches' BEGIN
	pooler    bool    // the DSN says pooler=transaction
	closeOnce sync.Once
	batcher   claimBatcher
	solo      bool         // every claim statement alone (tests: the baseline)
	loopReads atomic.Int64 // reads of Claim's loop (after the first try)
}

// Open opens the store and applies pending migrations (see Migrate), as
// every backend's Open does. A database that is already current needs no
// DDL, so a role without CREATE can open a database a stronger role
// migrated.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, pooler, err := config(dsn)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.pooler = pooler
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func open(ctx context.Context, cfg *pgxpool.Config) (*Store, error) {
	withWarnings(cfg) // a commit the server warns about is not confirmed (confirm.go)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return &Store{pool: pool, db: pool, begin: "BEGIN"}, nil
}

// OpenReadOnly opens the store for the operator's read-only commands, as
// the other backends' OpenReadOnly do: it migrates and writes nothing, and
// fails unless the database answers with a current schema (see Ping).
// Every write of the returned Store fails with dedupe.ErrReadOnly, and the
// server refuses them as well: every statement runs in a read-only
// transaction of its own (see readOnlyPool), whatever the DSN says. It is
// never a session setting, which would fail a failover DSN's
// target_session_attrs=read-write check as a startup parameter, and would
// stay, set once a session is open, on a server connection that
// PgBouncer's transaction pooling then hands to serve's writes.
func OpenReadOnly(ctx context.Context, dsn string) (dedupe.Store, error) {
	s, err := openReadOnly(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return dedupe.ReadOnly(s), nil
}

func openReadOnly(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	// A DSN's own default_transaction_read_only=on (a startup parameter)
	// is left out for the same reason; off changes nothing here.
	delete(cfg.ConnConfig.RuntimeParams, "default_transaction_read_only")
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = 4 // one command, a query at a time
	}
	s, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.db, s.begin = readOnlyPool{s.pool}, "BEGIN READ ONLY"
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Config parses a postgres:// or postgresql:// DSN into a pool configuration
// with hookonce's defaults for whatever the DSN leaves unset, and
// hookonce's own pooler=transaction applied (see poolerParam).
func Config(dsn string) (*pgxpool.Config, error) {
	cfg, _, err := config(dsn)
	return cfg, err
}

// config is Config, and whether the DSN says pooler=transaction.
func config(dsn string) (*pgxpool.Config, bool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: invalid DSN %s (want postgres://user:password@host:port/db?…): %s",
			dedupe.RedactDSN(dsn), parseReason(err))
	}
	cc := cfg.ConnConfig
	pooler, set := cc.RuntimeParams[poolerParam]
	delete(cc.RuntimeParams, poolerParam) // hookonce's, not the server's
	if set && pooler != "transaction" {
		return nil, false, fmt.Errorf("postgres: invalid DSN %s: %s=%q (want %s=transaction, for PgBouncer's pool_mode=transaction and poolers like it, or no %s)",
			dedupe.RedactDSN(dsn), poolerParam, pooler, poolerParam, poolerParam)
	}
	for k, v := range defaultRuntimeParams {
		if _, ok := cc.RuntimeParams[k]; !ok && (!set || poolerStartupParams[k]) {
			cc.RuntimeParams[k] = v
		}
	}
	if set && !strings.Contains(dsn, "default_query_exec_mode") {
		cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if set && cc.DefaultQueryExecMode == pgx.QueryExecModeDescribeExec {
		// It prepares the unnamed statement in one transaction and
		// executes it in the next, which the pooler may send to another
		// server connection ("bind message supplies 3 parameters, but
		// prepared statement "" requires 0").
		return nil, false, fmt.Errorf("postgres: invalid DSN %s: default_query_exec_mode=describe_exec does not work with %s=transaction (use exec, the default there, simple_protocol or cache_describe)",
			dedupe.RedactDSN(dsn), poolerParam)
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = defaultConnectTimeout
	}
	dialer := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3,
	}}
	cc.DialFunc = dialer.DialContext
	if !strings.Contains(dsn, "pool_max_conns") {
		// A claim or a completion holds a connection only for one
		// statement, but much of that is spent waiting for the commit's
		// fsync; more connections let more commits share one flush.
		cfg.MaxConns = int32(max(defaultMinPool, 4*runtime.NumCPU()))
	}
	return cfg, set, nil
}

// parseReason says why a DSN did not parse without quoting the DSN, which
// may hold a password (pgconn's and net/url's errors quote it whole).
func parseReason(err error) string {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return "unparsable"
	}
	// Error() is "cannot parse `<dsn>`: <msg>[ (<inner error>)]".
	msg := pce.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	}
	inner := errors.Unwrap(pce)
	if inner == nil {
		return msg
	}
	msg = strings.TrimSuffix(msg, " ("+inner.Error()+")")
	var ue *url.Error
	if errors.As(inner, &ue) {
		inner = ue.Err
	}
	return msg + ": " + inner.Error()
}

// Warnings implements what serve logs at start: with pooler=transaction,
// the RoleSettings that the sessions lack (0, the server's default: no
// limit), with the ALTER ROLE that sets them. A read that fails is left
// to the store's first real use to report.
func (s *Store) Warnings(ctx context.Context) []string {
	if !s.pooler {
		return nil
	}
	var role string
	var missing []string
	err := s.db.QueryRow(ctx, `SELECT current_user, COALESCE(array_agg(name ORDER BY name) FILTER (WHERE setting = '0'), '{}')
		FROM pg_settings WHERE name = ANY($1::text[])`, RoleSettings).Scan(&role, &missing)
	if err != nil || len(missing) == 0 {
		return nil
	}
	var set []string
	for _, name := range missing {
		set = append(set, fmt.Sprintf("ALTER ROLE %s SET %s = '%s';", pgx.Identifier{role}.Sanitize(), name, defaultRuntimeParams[name]))
	}
	return []string{fmt.Sprintf("postgres store: with pooler=transaction hookonce sends no session settings, and the role %s has no %s: "+
		"nothing on the server bounds a stuck lock, statement or idle transaction (store_timeout still ends hookonce's wait); set them on the role (docs/stores.md, PgBouncer): %s",
		role, strings.Join(missing, ", "), strings.Join(set, " "))}
}

// Close closes the pool; safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// Pool exposes the connection pool (for tests and tools).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// fail translates a driver error into the store's error: connection
// failures, timeouts and cancellations wrap dedupe.ErrUnavailable.
func fail(op string, err error) error {
	if isUnavailable(err) {
		return fmt.Errorf("postgres %s: %w: %w", op, dedupe.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres %s: %w", op, err)
}

func isUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		// Not an answer from the server: dial errors, EOF, resets, timeouts,
		// a closed pool. Nothing is known to have been written.
		return true
	}
	switch pgErr.Code[:2] {
	case "08", // connection exception
		"53", // insufficient resources (too many connections, disk full)
		"57": // operator intervention: query_canceled, admin_shutdown, cannot_connect_now
		return true
	}
	switch pgErr.Code {
	case "55P03", // lock_not_available (lock_timeout)
		"25P03",          // idle_in_transaction_session_timeout
		"40001", "40P01": // serialization failure, deadlock: transient
		return true
	}
	return false
}

// Column list shared by every read of a record.
const recordCols = `sender, key, state, payload_hash, COALESCE(owner, ''), lease_until,
	received_at, completed_at, expires_at, hits, takeovers,
	resp_status, resp_headers, resp_body, resp_truncated, request_body,
	request_head, attempts`

// attemptJSON is one element of the attempts column. Times keep every digit
// Go gives them (RFC 3339 with nanoseconds), durations are whole
// nanoseconds: every field round-trips exactly.
type attemptJSON struct {
	At         time.Time `json:"at"`
	By         string    `json:"by"`
	Outcome    string    `json:"outcome"`
	Status     int       `json:"status"`
	DurationNS int64     `json:"duration_ns"`
	Replica    string    `json:"replica"`
	WaitNS     int64     `json:"wait_ns,omitempty"`
}

// requestHeadJSON is the request_head column.
type requestHeadJSON struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header"`
}

func encodeAttempt(a dedupe.Attempt) (string, error) {
	s, err := jsonParam(attemptJSON{At: a.At.UTC(), By: a.By, Outcome: a.Outcome, Status: a.Status,
		DurationNS: int64(a.Duration), Replica: a.Replica, WaitNS: int64(a.Wait)})
	if err != nil {
		return "", fmt.Errorf("encode attempt: %w", err)
	}
	return s, nil
}

// JSON parameters (the jsonb columns) are passed as a Go string, or as
// nil for SQL NULL, never as []byte: in the exec modes that send no
// statement description (default_query_exec_mode=exec, simple_protocol,
// which work behind PgBouncer's transaction pooling) pgx encodes a []byte
// as bytea text (\x7b22…), which the server then fails to parse as JSON.
// A string is the JSON text itself in every mode.

// jsonParam is v marshalled to JSON, as a string parameter.
func jsonParam(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// encodeRequestHead answers nil (SQL NULL) when no request is to be kept,
// else the JSON text as a string (see jsonParam).
func encodeRequestHead(r *dedupe.StoredRequest) (any, error) {
	if r == nil {
		return nil, nil
	}
	s, err := jsonParam(requestHeadJSON{Method: r.Method, URI: r.URI, Header: r.Header})
	if err != nil {
		return nil, fmt.Errorf("encode request head: %w", err)
	}
	return s, nil
}

// scanRecord scans recordCols, after the extra destinations given first.
func scanRecord(row pgx.Row, extra ...any) (dedupe.Record, error) {
	var (
		r                  dedupe.Record
		state              string
		lease, completed   *time.Time
		status             *int32
		headers, body, req []byte
		head, attempts     []byte
		truncated          bool
	)
	dest := append(extra, &r.Sender, &r.Key, &state, &r.PayloadHash, &r.Owner, &lease,
		&r.ReceivedAt, &completed, &r.ExpiresAt, &r.Hits, &r.Takeovers,
		&status, &headers, &body, &truncated, &req, &head, &attempts)
	if err := row.Scan(dest...); err != nil {
		return dedupe.Record{}, err
	}
	r.State = dedupe.State(state)
	if lease != nil {
		r.LeaseUntil = *lease
	}
	if completed != nil {
		r.CompletedAt = *completed
	}
	r.RequestBody = req
	if head != nil {
		var h requestHeadJSON
		if err := json.Unmarshal(head, &h); err != nil {
			return dedupe.Record{}, fmt.Errorf("decode stored request head: %w", err)
		}
		r.Request = &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header}
	}
	if len(attempts) > 0 {
		var as []attemptJSON
		if err := json.Unmarshal(attempts, &as); err != nil {
			return dedupe.Record{}, fmt.Errorf("decode stored attempts: %w", err)
		}
		if len(as) > 0 {
			r.Attempts = make([]dedupe.Attempt, len(as))
			for i, a := range as {
				r.Attempts[i] = dedupe.Attempt{At: a.At, By: a.By, Outcome: a.Outcome, Status: a.Status,
					Duration: time.Duration(a.DurationNS), Replica: a.Replica, Wait: time.Duration(a.WaitNS)}
			}
		}
	}
	if status != nil {
		resp := &dedupe.Response{Status: int(*status), Body: body, Truncated: truncated}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &resp.Header); err != nil {
				return dedupe.Record{}, fmt.Errorf("decode stored headers: %w", err)
			}
		}
		r.Response = resp
	}
	return r, nil
}

// micros passes a duration to SQL as `$n::bigint * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

// The conditions under which a stored row gives way to a claim, judged at
// time T: the record is past its ttl (and no live lease protects it), it was
// released (any payload hash), or it is processing under an expired lease
// with the same payload hash.
func freshCond(r, t string) string {
	return fmt.Sprintf("(%[1]s.expires_at <= %[2]s AND NOT (%[1]s.state = 'processing' AND %[1]s.lease_until > %[2]s))", r, t)
}

func releasedCond(r string) string {
	return fmt.Sprintf("(%s.state = 'released')", r)
}

// newCond: the claim starts the record afresh (an expired or a released
// one) rather than taking over a claim in flight.
func newCond(r, t string) string {
	return "(" + freshCond(r, t) + " OR " + releasedCond(r) + ")"
}

func takeoverCond(r, t, hash string) string {
	return fmt.Sprintf("(%[1]s.state = 'processing' AND %[1]s.lease_until <= %[2]s AND %[1]s.payload_hash = %[3]s)", r, t, hash)
}

// readSQL reads the row a claim is about, and whether it would give way to
// this claim now (by the database clock), in Claim's loop (after a first
// try, firstSQL, that found a record giving way or found nothing). Nothing
// is written or locked.
var readSQL = `
SELECT (` + newCond("r", "n.t") + ` OR ` + takeoverCond("r", "n.t", "$3::text") + `), ` + recordCols + `
FROM hookonce_records r, (SELECT clock_timestamp() AS t) n
WHERE r.sender = $1::text AND r.key = $2::text`

// claimSQL takes the claim in one statement, run only when the read found
// no row or one that gives way. Its ON CONFLICT … DO UPDATE re-decides on the
// latest committed row version under the row lock, so that of any number of
// concurrent claimers (in any number of processes) exactly one wins a free
// key, a released record or an expired lease; the others get no row back.
// EXCLUDED.received_at is the database clock at the insert.
//
// A released record is claimed as a new one: payload hash, request body and
// head are the new delivery's, received_at and expires_at are set as for a
// new record (now, now + ttl: the retry is a delivery of its own, and its
// answer must be kept a full ttl), hits and takeovers start again from 0
// (they count replays and takeovers of the claim at hand); only the
// attempts are kept. A record past its ttl is gone as far as the contract
// goes: it starts with no attempts, released or not.
var claimSQL = `
INSERT INTO hookonce_records AS r
	(sender, key, state, payload_hash, owner, lease_until, received_at, expires_at, request_body, request_head)
SELECT $1::text, $2::text, 'processing', $3::text, $4::text,
	n.t + $5::bigint * interval '1 microsecond', n.t,
	n.t + $6::bigint * interval '1 microsecond', $7::bytea, $8::jsonb
FROM (SELECT clock_timestamp() AS t) n
ON CONFLICT (sender, key) DO UPDATE SET
	state = 'processing',
	owner = EXCLUDED.owner,
	lease_until = EXCLUDED.lease_until,
	payload_hash = EXCLUDED.payload_hash,
	received_at = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.received_at ELSE r.received_at END,
	expires_at = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.expires_at ELSE r.expires_at END,
	completed_at = NULL,
	hits = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN 0 ELSE r.hits END,
	takeovers = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN 0 ELSE r.takeovers + 1 END,
	resp_status = NULL, resp_headers = NULL, resp_body = NULL, resp_truncated = false,
	request_body = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.request_body ELSE r.request_body END,
	request_head = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.request_head ELSE r.request_head END,
	attempts = CASE WHEN ` + freshCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.attempts ELSE r.attempts END
WHERE ` + newCond("r", "EXCLUDED.received_at") + ` OR ` + takeoverCond("r", "EXCLUDED.received_at", "EXCLUDED.payload_hash") + `
RETURNING ` + recordCols

// firstSQL is a delivery's first try at a claim, one statement: it inserts
// the record when the key is free (won) and otherwise reads the row that is
// there, with whether it gives way to this claim now (claimable), as
// readSQL does. ON CONFLICT DO NOTHING neither writes nor locks the row
// that is there. Its parameters are claimSQL's.
//
// It answers no row at all when the key was inserted by a transaction that
// committed after this statement's snapshot was taken (the insert waited
// for it, and the read cannot see it): Claim then reads again in a
// statement of its own.
var firstSQL = `
WITH ins AS (
` + claimSQL[:strings.Index(claimSQL, "ON CONFLICT")] + `ON CONFLICT (sender, key) DO NOTHING
RETURNING ` + recordCols + `
)
SELECT true, false, ins.* FROM ins
UNION ALL
SELECT false, (` + newCond("r", "n.t") + ` OR ` + takeoverCond("r", "n.t", "$3::text") + `), ` + recordCols + `
FROM hookonce_records r, (SELECT clock_timestamp() AS t) n
WHERE r.sender = $1::text AND r.key = $2::text AND NOT EXISTS (SELECT 1 FROM ins)`

// Claim implements dedupe.Store.
//
// The first try (firstSQL, batched: see claimBatcher) claims a new key or
// reads the row that is there, in one statement and one round trip shared
// with the claims and writes waiting at the same moment.
// A row that does not give way is answered from that read: nothing is
// written or locked. Only an expired or released record or an expired
// lease goes on to the loop below, as does a first try whose batch failed:
// a read, then the claim statement, which re-decides atomically. When that
// statement returns no row (another claimer won, or the row changed in
// between), the loop reads again in a new statement; a row that vanished or
// expired in between is tried again, at most claimAttempts times.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	op := "claim " + req.Sender + "/" + req.Key
	head, err := encodeRequestHead(req.Request)
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("postgres %s: %w", op, err)
	}
	if !s.solo {
		args := []any{req.Sender, req.Key, req.PayloadHash,
			req.Owner, micros(req.Lease), micros(req.TTL), req.RequestBody, head}
		it, err := s.first(ctx, args)
		switch {
		case err == nil && it.won:
			return ownClaim(it.rec), nil
		case err == nil && it.found && !it.claimable:
			return dedupe.ClaimResult{Outcome: dedupe.Standing(it.rec, req.PayloadHash), Record: it.rec}, nil
		case err == nil, errors.Is(err, errSolo):
			// A record that gives way, one that vanished between the two
			// statements, or a batch to try again alone: the loop.
		default:
			return dedupe.ClaimResult{}, s.ambiguousClaim(ctx, op, req, err)
		}
	}
	for range claimAttempts {
		var claimable bool
		s.loopReads.Add(1)
		rec, err := scanRecord(s.db.QueryRow(ctx, readSQL, req.Sender, req.Key, req.PayloadHash), &claimable)
		switch {
		case err == nil && !claimable:
			return dedupe.ClaimResult{Outcome: dedupe.Standing(rec, req.PayloadHash), Record: rec}, nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return dedupe.ClaimResult{}, fail(op, err)
		}
		args := []any{req.Sender, req.Key, req.PayloadHash,
			req.Owner, micros(req.Lease), micros(req.TTL), req.RequestBody, head}
		err = errSolo
		if !s.solo {
			rec, err = s.claim(ctx, args)
		}
		if errors.Is(err, errSolo) {
			err = s.confirmed(ctx, func(c querier) (err error) {
				rec, err = scanRecord(c.QueryRow(ctx, claimSQL, args...))
				return err
			})
		}
		switch {
		case err == nil:
			return ownClaim(rec), nil
		case !errors.Is(err, pgx.ErrNoRows):
			return dedupe.ClaimResult{}, s.ambiguousClaim(ctx, op, req, err)
		}
	}
	return dedupe.ClaimResult{}, fmt.Errorf("postgres %s: %w: the record kept changing under %d attempts", op, dedupe.ErrUnavailable, claimAttempts)
}

func ownClaim(rec dedupe.Record) dedupe.ClaimResult {
	if rec.Takeovers > 0 {
		return dedupe.ClaimResult{Outcome: dedupe.TakenOver, Record: rec}
	}
	return dedupe.ClaimResult{Outcome: dedupe.Claimed, Record: rec}
}

// ambiguousClaim handles an error from the claim statement. When the
// connection broke after the statement was sent, or the commit was not
// confirmed (errUnconfirmed: it may be the primary's alone), the claim may
// have been committed under our owner token; if the context still allows a
// read, look, and say so. Either way the answer is an error, never a
// guess, and never ownership: what the read sees may not survive a
// failover (trap 35). The caller does not forward, and a claim that did
// land frees after its lease.
func (s *Store) ambiguousClaim(ctx context.Context, op string, req dedupe.ClaimRequest, err error) error {
	if ctx.Err() != nil || !isUnavailable(err) {
		return fail(op, err)
	}
	rec, rerr := s.Get(ctx, req.Sender, req.Key)
	if rerr == nil && rec.State == dedupe.StateProcessing && rec.Owner == req.Owner {
		return fmt.Errorf("postgres %s: %w: %w (the claim is on the server, not confirmed; it frees after its lease)", op, dedupe.ErrUnavailable, err)
	}
	return fail(op, err)
}

// fenced runs a write that applies only while owner holds the row (a
// processing claim; an object lock when objects is set); zero rows means
// someone else does (or nobody): ErrNotOwner. Its parameters are $1 sender
// (scope), $2 key (object), then args.
func (s *Store) fenced(ctx context.Context, objects bool, op, sender, key, query string, args ...any) error {
	n, err := s.write(ctx, objects, op, sender, key, query, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("postgres %s %s/%s: %w", op, sender, key, dedupe.ErrNotOwner)
	}
	return nil
}

// write runs a write of hookonce_records (of hookonce_objects when objects
// is set; $1 sender or scope, $2 key or object, then args) through the
// batcher, so that concurrent writes share a commit (claimBatcher), or
// alone when its batch aborted or batching is off, and answers how many
// rows it wrote. It returns when ctx ends, whatever the batch is doing.
func (s *Store) write(ctx context.Context, objects bool, op, sender, key, query string, args ...any) (int64, error) {
	args = append([]any{sender, key}, args...)
	tag, err := pgconn.CommandTag{}, errSolo
	if !s.solo {
		tag, err = s.exec(ctx, objects, query, args)
	}
	if errors.Is(err, errSolo) {
		err = s.confirmed(ctx, func(c querier) (err error) {
			tag, err = c.Exec(ctx, query, args...)
			return err
		})
	}
	if err != nil {
		return 0, fail(op+" "+sender+"/"+key, err)
	}
	return tag.RowsAffected(), nil
}

const ownerWhere = ` WHERE sender = $1 AND key = $2 AND owner = $3 AND state = 'processing'`

// appendAttempt is the attempts column with the attempt in parameter p
// appended and only the latest dedupe.MaxAttempts kept, oldest first. It
// runs in the fenced UPDATE itself, on the row it locked: no read-modify-
// write from the client. Below the bound (nearly always) it is a plain
// append; only a full list is taken apart to drop its oldest.
func appendAttempt(p string) string {
	return fmt.Sprintf(`CASE WHEN jsonb_array_length(attempts) < %[2]d THEN attempts || jsonb_build_array(%[1]s::jsonb)
		ELSE (SELECT COALESCE(jsonb_agg(a.e ORDER BY a.i), '[]'::jsonb)
		FROM jsonb_array_elements(attempts || jsonb_build_array(%[1]s::jsonb)) WITH ORDINALITY AS a(e, i)
		WHERE a.i > jsonb_array_length(attempts) + 1 - %[2]d) END`, p, dedupe.MaxAttempts)
}

// Complete implements dedupe.Store.
func (s *Store) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	var headers any // SQL NULL, or the JSON text (see jsonParam)
	if len(resp.Header) > 0 {
		h, err := jsonParam(resp.Header)
		if err != nil {
			return fmt.Errorf("postgres complete %s/%s: encode headers: %w", sender, key, err)
		}
		headers = h
	}
	a, err := encodeAttempt(att)
	if err != nil {
		return fmt.Errorf("postgres complete %s/%s: %w", sender, key, err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	return s.fenced(ctx, false, "complete", sender, key, completeSQL,
		owner, int32(resp.Status), headers, body, resp.Truncated, a)
}

// completeSQL is Complete's fenced UPDATE: $1 sender, $2 key, $3 owner,
// $4 status, $5 response headers (JSON, or NULL), $6 response body, $7
// truncated, $8 the attempt (JSON), appended to the record's attempts.
var completeSQL = `
UPDATE hookonce_records SET state = 'done', owner = NULL, lease_until = NULL,
	completed_at = clock_timestamp(), resp_status = $4, resp_headers = $5::jsonb,
	resp_body = $6, resp_truncated = $7, attempts = ` + appendAttempt("$8") + ownerWhere

// NewEventStatements answers the two statements a new event costs the
// store, as the store sends them, for benchmarks that want a reference
// doing exactly the same work outside hookonce (bench/compare runs them
// under pgbench). The store sends them inside group-committed batches
// (see claimBatcher); a reference that runs each in a transaction of its
// own pays a commit per statement.
//
// first is a delivery's first try (firstSQL), which claims a key that is
// not there: $1 sender, $2 key, $3 payload hash, $4 owner, $5 lease and
// $6 ttl in microseconds, $7 the request body (bytea), $8 the request
// head (JSON, or NULL). It answers a row of two booleans (inserted,
// claimable) and the record.
//
// complete is Complete's UPDATE, fenced by the owner: $1 sender, $2 key,
// $3 owner, $4 status, $5 the response headers (JSON, or NULL), $6 the
// response body (bytea), $7 truncated, $8 the attempt (JSON, as the
// attempts column holds each). It updates one row when $3 holds the
// processing claim, none otherwise.
func NewEventStatements() (first, complete string) {
	return firstSQL, completeSQL
}

// Release implements dedupe.Store: the record stays, released, with its
// payload hash, request and attempts; the next delivery claims it as new.
func (s *Store) Release(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.endClaim(ctx, "release", releaseSQL, sender, key, owner, att)
}

// Hold implements dedupe.Store.
func (s *Store) Hold(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.endClaim(ctx, "hold", holdSQL, sender, key, owner, att)
}

// endClaimSQL ends owner's processing claim in state, the attempt ($4)
// appended.
func endClaimSQL(state string) string {
	return `UPDATE hookonce_records SET state = '` + state + `', owner = NULL, lease_until = NULL,
		attempts = ` + appendAttempt("$4") + ownerWhere
}

var (
	releaseSQL = endClaimSQL("released")
	holdSQL    = endClaimSQL("unknown")
)

func (s *Store) endClaim(ctx context.Context, op, query, sender, key, owner string, att dedupe.Attempt) error {
	a, err := encodeAttempt(att)
	if err != nil {
		return fmt.Errorf("postgres %s %s/%s: %w", op, sender, key, err)
	}
	return s.fenced(ctx, false, op, sender, key, query, owner, a)
}

// Renew implements dedupe.Store.
func (s *Store) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	return s.fenced(ctx, false, "renew", sender, key,
		`UPDATE hookonce_records SET lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'`+ownerWhere,
		owner, micros(lease))
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// RecordConflict implements dedupe.Store. A zero ReceivedAt means now; a
// zero ExpiresAt means 72h after it.
func (s *Store) RecordConflict(ctx context.Context, c dedupe.Conflict) error {
	op := "record conflict " + c.Sender + "/" + c.Key
	head, err := encodeRequestHead(c.Request)
	if err != nil {
		return fmt.Errorf("postgres %s: %w", op, err)
	}
	var body []byte
	if c.Request != nil {
		body = c.Body
		if body == nil {
			body = []byte{}
		}
	}
	_, err = s.db.Exec(ctx, `
		INSERT INTO hookonce_conflicts (sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at,
			diff_kind, shadow, request_head, request_body, body_truncated)
		SELECT $1, $2, $3, $4, n.t, $6, COALESCE($7::timestamptz, n.t + interval '72 hours'), $8, $9, $10, $11, $12
		FROM (SELECT COALESCE($5::timestamptz, clock_timestamp()) AS t) n`,
		c.Sender, c.Key, c.StoredHash, c.ReceivedHash, optTime(c.ReceivedAt), c.ChangedPaths, optTime(c.ExpiresAt),
		c.DiffKind, c.Shadow, head, body, c.BodyTruncated)
	if err != nil {
		return fail(op, err)
	}
	return nil
}

const conflictCols = `id, sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at,
	diff_kind, shadow, request_head, request_body, body_truncated, accepted_at, coalesce(accepted_by, '')`

func scanConflict(row pgx.Row) (dedupe.Conflict, error) {
	var (
		c          dedupe.Conflict
		id         int64
		head, body []byte
		accepted   *time.Time
	)
	if err := row.Scan(&id, &c.Sender, &c.Key, &c.StoredHash, &c.ReceivedHash, &c.ReceivedAt, &c.ChangedPaths, &c.ExpiresAt,
		&c.DiffKind, &c.Shadow, &head, &body, &c.BodyTruncated, &accepted, &c.AcceptedBy); err != nil {
		return c, err
	}
	c.ID = strconv.FormatInt(id, 10)
	if accepted != nil {
		c.AcceptedAt = *accepted
	}
	if head != nil {
		var h requestHeadJSON
		if err := json.Unmarshal(head, &h); err != nil {
			return c, fmt.Errorf("decode conflict request head: %w", err)
		}
		c.Request = &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header}
		c.Body = body
		if c.Body == nil {
			c.Body = []byte{}
		}
	}
	return c, nil
}

// newestConflict is the conflict AcceptConflict means: $3 names it by id,
// or 0 means the newest of (sender $1, key $2), found by
// hookonce_conflicts_key.
const newestConflict = `(SELECT id FROM hookonce_conflicts WHERE sender = $1 AND key = $2 AND ($3::bigint = 0 OR id = $3)
	ORDER BY id DESC LIMIT 1)`

// AcceptConflict implements dedupe.Store: one UPDATE marks the conflict if
// it is acceptable and not yet accepted. Of two concurrent UPDATEs the
// second waits for the first's row lock and then finds accepted_at set, so
// it changes nothing; a read then says why.
func (s *Store) AcceptConflict(ctx context.Context, sender, key, id, by string) (dedupe.Conflict, error) {
	op := "accept conflict " + sender + "/" + key
	var n int64
	if id != "" {
		v, err := strconv.ParseInt(id, 10, 64)
		if err != nil || v <= 0 {
			return dedupe.Conflict{}, fmt.Errorf("postgres %s: no conflict %q: %w", op, id, dedupe.ErrNotFound)
		}
		n = v
	}
	c, err := scanConflict(s.db.QueryRow(ctx, `
		UPDATE hookonce_conflicts SET accepted_at = clock_timestamp(), accepted_by = $4
		WHERE id = `+newestConflict+` AND accepted_at IS NULL AND NOT shadow AND NOT body_truncated
			AND request_head IS NOT NULL AND request_body IS NOT NULL
		RETURNING `+conflictCols, sender, key, n, by))
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return dedupe.Conflict{}, fail(op, err)
	}
	c, err = scanConflict(s.db.QueryRow(ctx, `SELECT `+conflictCols+` FROM hookonce_conflicts WHERE id = `+newestConflict, sender, key, n))
	if errors.Is(err, pgx.ErrNoRows) {
		return dedupe.Conflict{}, fmt.Errorf("postgres %s: %w", op, dedupe.ErrNotFound)
	}
	if err != nil {
		return dedupe.Conflict{}, fail(op, err)
	}
	if err := c.Acceptable(); err != nil {
		return c, fmt.Errorf("postgres %s: %w", op, err)
	}
	// A newer conflict arrived between the two statements: say so rather
	// than mark one the operator did not see.
	return c, fmt.Errorf("postgres %s: a newer conflict arrived meanwhile; run accept again: %w", op, dedupe.ErrNotFound)
}

// AddHits implements dedupe.Store: the whole batch is one statement. Rows are
// locked in key order so that two replicas flushing overlapping batches
// cannot deadlock.
func (s *Store) AddHits(ctx context.Context, hits []dedupe.Hit) error {
	if len(hits) == 0 {
		return nil
	}
	senders := make([]string, len(hits))
	keys := make([]string, len(hits))
	ns := make([]int64, len(hits))
	for i, h := range hits {
		senders[i], keys[i], ns[i] = h.Sender, h.Key, h.N
	}
	_, err := s.db.Exec(ctx, `
		WITH h AS (
			SELECT s, k, sum(n)::bigint AS n
			FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(s, k, n)
			GROUP BY s, k
		), l AS (
			SELECT r.sender, r.key, h.n FROM hookonce_records r
			JOIN h ON r.sender = h.s AND r.key = h.k
			ORDER BY r.sender, r.key
			FOR UPDATE OF r
		)
		UPDATE hookonce_records r SET hits = r.hits + l.n
		FROM l WHERE r.sender = l.sender AND r.key = l.key`,
		senders, keys, ns)
	if err != nil {
		return fail(fmt.Sprintf("add hits (%d)", len(hits)), err)
	}
	return nil
}

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, sender, key string) (dedupe.Record, error) {
	rec, err := scanRecord(s.db.QueryRow(ctx,
		`SELECT `+recordCols+` FROM hookonce_records WHERE sender = $1 AND key = $2`, sender, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return dedupe.Record{}, fmt.Errorf("postgres get %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	if err != nil {
		return dedupe.Record{}, fail("get "+sender+"/"+key, err)
	}
	return rec, nil
}

func limit(n int) int {
	if n <= 0 {
		return defaultListLimit
	}
	return n
}

// keyArgs are the key filter's parameters of List and Conflicts: the exact
// key, and up to two needles of the key part ("" when unused). strpos
// walks every row the other conditions leave (the received_at or id order
// stops once the limit is kept): the cost of a key-part search is a scan
// of the sender's (or every) record, paid only by the search.
func keyArgs(f dedupe.ListFilter) []any {
	needles := append(dedupe.KeyPartNeedles(f.KeyPart), "", "")
	if f.KeyPart == "" {
		needles = []string{"", ""}
	}
	return []any{f.Key, needles[0], needles[1]}
}

// keyCond is keyArgs' condition; $n is the first of its three parameters.
func keyCond(n int) string {
	return fmt.Sprintf(` AND ($%d = '' OR key = $%d) AND ($%d = '' OR strpos(key, $%d) > 0 OR ($%d <> '' AND strpos(key, $%d) > 0))`,
		n, n, n+1, n+1, n+2, n+2)
}

// List implements dedupe.Store.
func (s *Store) List(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Record, error) {
	q := `SELECT ` + recordCols + ` FROM hookonce_records
		WHERE ($1 = '' OR sender = $1) AND ($2 = '' OR state = $2)` + keyCond(3) + `
		ORDER BY received_at DESC, key DESC LIMIT $6 OFFSET $7`
	out, err := listPages(ctx, s, f, q, slices.Concat([]any{f.Sender, string(f.State)}, keyArgs(f)),
		func(r pgx.Row) (dedupe.Record, error) { return scanRecord(r) }, func(r dedupe.Record) string { return r.Key })
	if err != nil {
		return nil, fail("list", err)
	}
	return out, nil
}

// Conflicts implements dedupe.Store.
func (s *Store) Conflicts(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Conflict, error) {
	q := `SELECT ` + conflictCols + ` FROM hookonce_conflicts WHERE ($1 = '' OR sender = $1)` + keyCond(2) + `
		ORDER BY received_at DESC, id DESC LIMIT $5 OFFSET $6`
	out, err := listPages(ctx, s, f, q, slices.Concat([]any{f.Sender}, keyArgs(f)),
		scanConflict, func(c dedupe.Conflict) string { return c.Key })
	if err != nil {
		return nil, fail("conflicts", err)
	}
	return out, nil
}

// listPages reads q (its last two parameters LIMIT and OFFSET) page by
// page (dedupe.Pages) and keeps the rows whose key holds f's key part, up
// to f's limit.
func listPages[T any](ctx context.Context, s *Store, f dedupe.ListFilter, q string, args []any,
	scan func(pgx.Row) (T, error), key func(T) string) ([]T, error) {
	want := limit(f.Limit)
	var out []T
	err := dedupe.Pages(f, want, func(lim, off int) (int, error) {
		rows, err := s.db.Query(ctx, q, slices.Concat(args, []any{lim, off})...)
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

// Free implements dedupe.Store: one statement, which locks the row, reads
// the state it had and releases it.
func (s *Store) Free(ctx context.Context, sender, key string, att dedupe.Attempt) (dedupe.State, error) {
	a, err := encodeAttempt(att)
	if err != nil {
		return "", fmt.Errorf("postgres free %s/%s: %w", sender, key, err)
	}
	var was string
	err = s.db.QueryRow(ctx, `
		WITH old AS (
			SELECT state FROM hookonce_records WHERE sender = $1 AND key = $2 FOR UPDATE
		)
		UPDATE hookonce_records r SET state = 'released', owner = NULL, lease_until = NULL,
			completed_at = NULL, resp_status = NULL, resp_headers = NULL, resp_body = NULL,
			resp_truncated = false, attempts = `+appendAttempt("$3")+`
		FROM old WHERE r.sender = $1 AND r.key = $2
		RETURNING old.state`, sender, key, a).Scan(&was)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("postgres free %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	if err != nil {
		return "", fail("free "+sender+"/"+key, err)
	}
	return dedupe.State(was), nil
}

// Forget implements dedupe.Store.
func (s *Store) Forget(ctx context.Context, sender, key string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM hookonce_records WHERE sender = $1 AND key = $2`, sender, key)
	if err != nil {
		return fail("forget "+sender+"/"+key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres forget %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	return nil
}

// purgeSQL is Purge's DELETE of one batch of records and of conflicts
// ($1 the batch; $2 the run's cursor, the lower bound; $3 the cut-off when
// byReceived); each answers how many rows went and the largest expires_at
// (received_at) among them, the next call's lower bound.
//
// The expiry cut-off is the database clock read once by a sub-select:
// clock_timestamp() itself is volatile, and a volatile comparison is never
// an index condition, so `expires_at <= clock_timestamp()` walked the
// expires_at index as a filter, fetching every live row's heap tuple,
// whenever fewer than a batch were expired (the last call of every purge:
// the whole table, every minute). The sub-select is an InitPlan, evaluated
// once: an index condition.
//
// The lower bound is an index condition too. The index entries of the rows
// earlier batches deleted stay in the index, dead, until vacuum removes
// them; from the index's start every batch stepped over all of them, so a
// day's purge slowed as it went, the more the larger the store
// (docs/performance.md, "Cost as the store grows"). It is >=, not >: rows
// share an expires_at, and a batch may end among them.
func purgeSQL(byReceived bool) (recSQL, confSQL string) {
	const live = `NOT (state = 'processing' AND lease_until > clock_timestamp())`
	col, before := `expires_at`, `<= (SELECT clock_timestamp())`
	if byReceived {
		col, before = `received_at`, `< $3`
	}
	recWhere := col + ` >= $2 AND ` + col + ` ` + before
	recSQL = `
		WITH v AS (
			SELECT sender, key FROM hookonce_records
			WHERE ` + recWhere + ` AND ` + live + `
			ORDER BY ` + col + ` LIMIT $1
			FOR UPDATE SKIP LOCKED
		), d AS (
			DELETE FROM hookonce_records r USING v WHERE r.sender = v.sender AND r.key = v.key
			RETURNING r.` + col + `
		)
		SELECT count(*), max(` + col + `) FROM d`
	confSQL = `
		WITH d AS (
			DELETE FROM hookonce_conflicts WHERE id IN (
				SELECT id FROM hookonce_conflicts WHERE ` + recWhere + `
				ORDER BY ` + col + ` LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING ` + col + `
		)
		SELECT count(*), max(` + col + `) FROM d`
	return recSQL, confSQL
}

// Purge implements dedupe.Store. Each DELETE removes at most one batch
// (req.Limit, or purgeBatch when unbounded, repeated), skips rows another
// transaction holds, and re-checks under the row lock that no live lease
// protects the row. Whatever req says, it also removes object locks whose
// lease ended more than objectGrace ago (their holders died); they are not
// counted.
//
// Each batch starts where the run's cursor (req.Cursor, or one of this
// call's own when nil) says the previous one ended, and advances it. The
// cursor only narrows what a batch looks at, never what it may delete: a
// row it passes over (locked, under a live lease) is left for the next run,
// which starts from the index's start. Two replicas purging at once each
// have their own cursor; SKIP LOCKED splits the rows between them, and a
// row one of them passed because the other held it is deleted by the other
// or, if that transaction fails, found by the next run.
func (s *Store) Purge(ctx context.Context, req dedupe.PurgeRequest) (int, error) {
	byReceived := !req.ReceivedBefore.IsZero()
	recSQL, confSQL := purgeSQL(byReceived)
	cur := req.Cursor
	if cur == nil {
		cur = new(dedupe.PurgeCursor)
	}
	batch := req.Limit
	if batch <= 0 {
		batch = purgeBatch
	}
	// run deletes batches from *from on, moving it to the largest value
	// deleted, until one comes back short (one only when req.Limit is set).
	run := func(what, sql string, from *time.Time) (int, error) {
		removed := 0
		for {
			args := []any{batch, lowerBound(*from)}
			if byReceived {
				args = append(args, req.ReceivedBefore)
			}
			var n int
			var last *time.Time
			err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
				// A purge's commit need not wait for its WAL to reach the
				// disk: a deletion a crash loses is made again by the next
				// run, and a record past its ttl gives way to a claim
				// whether or not it is still there. The claims' commits,
				// which must wait, then share their flushes with fewer.
				if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
					return err
				}
				return tx.QueryRow(ctx, sql, args...).Scan(&n, &last)
			})
			if err != nil {
				return removed, fail(what, err)
			}
			removed += n
			if last != nil {
				*from = *last
			}
			if req.Limit > 0 || n < batch {
				return removed, nil
			}
		}
	}
	removed, err := run("purge", recSQL, &cur.Records)
	if err != nil {
		return removed, err
	}
	if _, err := run("purge conflicts", confSQL, &cur.Conflicts); err != nil {
		return removed, err
	}
	if err := s.purgeObjects(ctx, batch, req.Limit > 0); err != nil {
		return removed, err
	}
	return removed, nil
}

// lowerBound is t as a timestamptz parameter, the zero time (a purge
// cursor with no row removed yet, a summary of every kept record) as
// -infinity, before every row: one plan shape either way.
func lowerBound(t time.Time) any {
	if t.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	return t
}

// Ping implements dedupe.Store: the database answers and the schema is at
// the version this binary expects.
func (s *Store) Ping(ctx context.Context) error {
	var v *int32
	err := s.db.QueryRow(ctx, `SELECT max(version) FROM hookonce_schema_migrations`).Scan(&v)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return errors.New("postgres ping: schema not migrated (run hookonce migrate)")
		}
		return fail("ping", err)
	}
	want := latestVersion()
	if v == nil || int(*v) < want {
		return fmt.Errorf("postgres ping: schema at version %v, want %d (run hookonce migrate)", derefOr(v), want)
	}
	return nil
}

// Probe implements dedupe.Store: a record of dedupe.ProbeSender inserted
// and deleted in one transaction, committed as a claim is. It needs only
// what claims need (INSERT and DELETE on hookonce_records), never shows to
// another transaction, and fails, wrapping dedupe.ErrUnavailable, where a
// claim would: a read-only transaction mode, a standby, a full disk, a
// stopped server.
func (s *Store) Probe(ctx context.Context) error {
	key := rand.Text()
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, expires_at)
			VALUES ($1, $2, 'processing', '', clock_timestamp(), clock_timestamp())`, dedupe.ProbeSender, key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM hookonce_records WHERE sender = $1 AND key = $2`, dedupe.ProbeSender, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres probe: %w: %w", dedupe.ErrUnavailable, err)
	}
	return nil
}

func derefOr(v *int32) int32 {
	if v == nil {
		return 0
	}
	return *v
}
