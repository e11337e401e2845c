package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookonce/hookonce/dedupe"
)

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
	if f.Pending {
		where += ` AND pending_since > 0`
	}
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
