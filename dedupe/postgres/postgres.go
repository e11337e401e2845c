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
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
