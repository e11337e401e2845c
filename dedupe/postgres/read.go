package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
)

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, sender, key string) (dedupe.Record, error) {
	rec, err := scanRecordPending(s.db.QueryRow(ctx,
		`SELECT `+recordPendingCols+` FROM hookonce_records WHERE sender = $1 AND key = $2`, sender, key))
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

// List implements dedupe.Store. ListFilter.Pending is a condition written
// into the statement, not a parameter, so that the planner can read the
// few records with a delivery owed from hookonce_records_pending rather
// than walk every record newest first.
func (s *Store) List(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Record, error) {
	out, err := listPages(ctx, s, f, listSQL(f.Pending), slices.Concat([]any{f.Sender, string(f.State)}, keyArgs(f)),
		scanRecordPending, func(r dedupe.Record) string { return r.Key })
	if err != nil {
		return nil, fail("list", err)
	}
	return out, nil
}

// listSQL is List's statement: $1 sender, $2 state, $3-$5 keyArgs, $6
// limit, $7 offset.
func listSQL(pending bool) string {
	cond := ""
	if pending {
		cond = ` AND pending_since IS NOT NULL`
	}
	return `SELECT ` + recordPendingCols + ` FROM hookonce_records
		WHERE ($1 = '' OR sender = $1) AND ($2 = '' OR state = $2)` + keyCond(3) + cond + `
		ORDER BY received_at DESC, key DESC LIMIT $6 OFFSET $7`
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
