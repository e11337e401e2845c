package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier is what the store's statements run on: the pool itself, or, for
// the operator's read-only commands, readOnlyPool.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	_ querier = (*pgxpool.Pool)(nil)
	_ querier = readOnlyPool{}
	_ querier = (*pgxpool.Conn)(nil)
)

// readOnlyPool runs every statement in a read-only transaction of its own:
// BEGIN READ ONLY, the statement, COMMIT, sent together in one batch (one
// round trip, as the statement alone). Read-only is a property of each
// transaction, never of the session: a session setting
// (SET default_transaction_read_only) would stay on a server connection
// that PgBouncer's transaction pooling then hands to serve's writes, and
// as a startup parameter it would fail a failover DSN's
// target_session_attrs=read-write check on every host.
type readOnlyPool struct{ pool batchBeginner }

// batchBeginner is what readOnlyPool runs on: the pool, or one connection
// of it (Store.confirmed).
type batchBeginner interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// readOnly wraps queries between BEGIN READ ONLY and COMMIT.
func readOnly(qs ...*pgx.QueuedQuery) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue("BEGIN READ ONLY")
	b.QueuedQueries = append(b.QueuedQueries, qs...)
	b.Queue("COMMIT")
	return b
}

// send sends b's queries inside a read-only transaction; the results
// answer them (the BEGIN is read here, the COMMIT by Close).
func (p readOnlyPool) send(ctx context.Context, qs ...*pgx.QueuedQuery) (pgx.BatchResults, error) {
	br := p.pool.SendBatch(ctx, readOnly(qs...))
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

func (p readOnlyPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := p.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (p readOnlyPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := p.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &readOnlyRows{Rows: rows, br: br}, nil
}

func (p readOnlyPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	return readOnlyRow{rows: rows, err: err}
}

func (p readOnlyPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, err := p.send(ctx, b.QueuedQueries...)
	if err != nil {
		return failedBatch{err}
	}
	return br
}

func (p readOnlyPool) Begin(ctx context.Context) (pgx.Tx, error) {
	return p.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
}

// readOnlyRows are a query's rows; once they are done (Next answers false,
// or Close), the transaction's COMMIT is read and the connection goes back.
type readOnlyRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error // of the COMMIT
}

func (r *readOnlyRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *readOnlyRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *readOnlyRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// readOnlyRow is QueryRow's row, as pgx's: the first row's values, or
// pgx.ErrNoRows.
type readOnlyRow struct {
	rows pgx.Rows
	err  error
}

func (r readOnlyRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// failedBatch answers err for everything.
type failedBatch struct{ err error }

func (b failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b failedBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b failedBatch) QueryRow() pgx.Row                { return readOnlyRow{err: b.err} }
func (b failedBatch) Close() error                     { return b.err }
func (b failedBatch) Tx() pgx.Tx                       { return nil }
