package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/pgtest"
)

// Purge finds what is expired through the index, as an index condition:
// with the cut-off a filter (clock_timestamp() is volatile, never an index
// condition) the scan went on through every live row whenever fewer than a
// batch were expired, the whole table on the last call of every purge.
// (bench/growth_test.go measured it: 10 M records.)
func TestPurgeCutOffIsAnIndexCondition(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// An empty table is cheapest to scan whole: ask for the index.
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rec, conf := postgres.PurgeSQL(false)
	for _, c := range []struct {
		name, sql, want string
		args            []any
	}{
		{"records", rec, "Index Cond: (expires_at <= $", []any{500}},
		{"conflicts", conf, "Index Cond: (expires_at <= $", []any{500}},
		{"objects", postgres.PurgeObjectsSQL, "Index Cond: (lease_until < ($", []any{500, int64(3600e6)}},
	} {
		rows, err := conn.Query(ctx, "EXPLAIN "+c.sql, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(plan, "\n"); !strings.Contains(p, c.want) {
			t.Errorf("%s: purge plan has no %q:\n%s", c.name, c.want, p)
		}
	}
}
