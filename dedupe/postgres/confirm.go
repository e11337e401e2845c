package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Commits that are not confirmed (#36, ARCHITECTURE trap 35).
//
// Under synchronous replication a commit waits, after its WAL is flushed
// locally, until a standby has it. When that wait is cancelled (hookonce's
// own store_timeout: pgx closes the connection and sends a cancel request;
// or an operator's pg_cancel_backend), PostgreSQL does not roll back: it
// keeps the commit, locally only, visible at once to every session on the
// primary, and says so in a WARNING ("canceling wait for synchronous
// replication … has already committed locally, but might not have been
// replicated to the standby"). A cancel that reaches the server while the
// client still listens turns into a COMMIT that pgx reports as a success,
// the WARNING its only sign. After a failover the commit is gone.
//
// So hookonce never takes the primary's word for such a write:
//
//   - a statement or batch whose connection received a WARNING answers
//     errUnconfirmed (not a server error, so it is ambiguous: a claim is
//     not forwarded, a completion is not counted as stored);
//   - whether a completion whose reply was lost did land is read with
//     GetConfirmed, never with Get: a no-op UPDATE of the row, RETURNING
//     it, whose own commit must be acknowledged without a WARNING. WAL is
//     ordered: the standby that acknowledged that commit has every commit
//     the UPDATE saw.

// warningsKey counts, in a connection's CustomData, the WARNING notices it
// received.
const warningsKey = "hookonce.warnings"

// errUnconfirmed answers a write whose commit the server made locally but
// did not confirm.
var errUnconfirmed = fmt.Errorf("%w: the server warned (its wait for synchronous replication was cancelled?) that it may have committed locally only", dedupe.ErrNotConfirmed)

// countWarnings is the connections' OnNotice handler (set by open); next is
// the one the configuration had, if any. It runs on the goroutine reading
// the connection, the one that then looks at the count.
func countWarnings(next pgconn.NoticeHandler) pgconn.NoticeHandler {
	return func(c *pgconn.PgConn, n *pgconn.Notice) {
		sev := n.SeverityUnlocalized
		if sev == "" {
			sev = n.Severity
		}
		if sev == "WARNING" {
			d := c.CustomData()
			w, _ := d[warningsKey].(int64)
			d[warningsKey] = w + 1
		}
		if next != nil {
			next(c, n)
		}
	}
}

func warnings(c *pgconn.PgConn) int64 {
	w, _ := c.CustomData()[warningsKey].(int64)
	return w
}

// withWarnings installs countWarnings on cfg's connections.
func withWarnings(cfg *pgxpool.Config) {
	cfg.ConnConfig.OnNotice = countWarnings(cfg.ConnConfig.OnNotice)
}

// confirmed runs fn on a connection of its own and answers errUnconfirmed
// when the connection received a WARNING meanwhile (fn's commit may be
// the primary's alone).
// On a read-only store (OpenReadOnly) fn's statements run read-only there
// too, as every other statement of it does.
func (s *Store) confirmed(ctx context.Context, fn func(q querier) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	var q querier = c
	if _, ro := s.db.(readOnlyPool); ro {
		q = readOnlyPool{c}
	}
	before := warnings(c.Conn().PgConn())
	if err := fn(q); err != nil {
		return err
	}
	if warnings(c.Conn().PgConn()) > before {
		return errUnconfirmed
	}
	return nil
}

// confirmSQL is GetConfirmed's write: it changes nothing, but it is an
// UPDATE, so it waits for the row lock of a write still in flight, writes
// a new row version (WAL), and its commit waits for synchronous
// replication. (A transaction id alone would not do: a commit that wrote
// no WAL but its own commit record waits for no standby.)
var confirmSQL = `UPDATE hookonce_records SET hits = hits WHERE sender = $1 AND key = $2 RETURNING ` + recordPendingCols

// GetConfirmed implements dedupe.ConfirmedReader: the record as a write
// of its own (confirmSQL) finds it, in its own transaction, answered only
// when that commit is acknowledged without a WARNING. Its commit record
// comes after that of every write it saw, so a standby that has it has
// them. Any other end (a timeout, a cancelled wait) is an error wrapping
// dedupe.ErrUnavailable. ErrNotFound is the primary's word alone (there
// was no row to write): the caller must take it as "not stored", never as
// a confirmed absence.
func (s *Store) GetConfirmed(ctx context.Context, sender, key string) (dedupe.Record, error) {
	op := "confirmed get " + sender + "/" + key
	var rec dedupe.Record
	err := s.confirmed(ctx, func(c querier) (err error) {
		rec, err = scanRecordPending(c.QueryRow(ctx, confirmSQL, sender, key))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return dedupe.Record{}, fmt.Errorf("postgres %s: %w", op, dedupe.ErrNotFound)
	}
	if err != nil {
		return dedupe.Record{}, fail(op, err) // errUnconfirmed included: ErrUnavailable
	}
	return rec, nil
}
