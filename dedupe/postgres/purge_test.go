package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// Purge finds what is expired through the index, as an index condition:
// with the cut-off a filter (clock_timestamp() is volatile, never an index
// condition) the scan went on through every live row whenever fewer than a
// batch were expired, the whole table on the last call of every purge.
// (bench/growth_test.go measured it: 10 M records.) The run's cursor, the
// lower bound, is one too, for both kinds of purge.
func TestPurgeCutOffIsAnIndexCondition(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	conn := indexOnly(t, s)
	rec, conf := postgres.PurgeSQL(false)
	recRcv, confRcv := postgres.PurgeSQL(true)
	from := time.Now().Add(-time.Hour) // a run's cursor after its first batch
	for _, c := range []struct {
		name, sql, want string
		args            []any
	}{
		{"records", rec, "AND (expires_at <= $", []any{500, from}},
		{"conflicts", conf, "AND (expires_at <= $", []any{500, from}},
		{"records, --older-than", recRcv, "Index Cond: ((received_at >= ", []any{500, from, time.Now()}},
		{"conflicts, --older-than", confRcv, "Index Cond: ((received_at >= ", []any{500, from, time.Now()}},
		{"objects", postgres.PurgeObjectsSQL, "Index Cond: (lease_until < ($", []any{500, int64(3600e6)}},
	} {
		if p := explain(t, conn, c.sql, c.args...); !strings.Contains(p, c.want) {
			t.Errorf("%s: purge plan has no %q:\n%s", c.name, c.want, p)
		}
	}
}

// The DELETE takes the rows its sub-select locked by their ctid: finding
// them again through the primary key was a B-tree probe per row, five
// sixths of a batch's time at 1 M records, and a claim beside it waited
// the batch out (docs/performance.md, round 7).
func TestPurgeDeletesTheLockedRowsByTID(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	conn := indexOnly(t, s)
	for _, byReceived := range []bool{false, true} {
		rec, _ := postgres.PurgeSQL(byReceived)
		args := []any{500, time.Now().Add(-time.Hour)}
		if byReceived {
			args = append(args, time.Now())
		}
		p := explain(t, conn, rec, args...)
		if !strings.Contains(p, "Tid Scan on hookonce_records") || strings.Contains(p, "hookonce_records_pkey") {
			t.Errorf("byReceived=%v: the DELETE does not take its rows by ctid:\n%s", byReceived, p)
		}
	}
}

func explain(t *testing.T, conn *pgxpool.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN "+sql, args...)
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
	return strings.Join(plan, "\n")
}

// A batch of a run starts where the one before it ended: the cursor is an
// index condition, so a batch does not step over the index entries of the
// rows earlier batches deleted (dead until vacuum). From the index's start,
// a day's purge slowed as it went (docs/performance.md, "Cost as the store
// grows").
func TestPurgeBatchStartsWhereTheLastEnded(t *testing.T) {
	ctx := context.Background()
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	// Five rows a second apart, then four sharing one expires_at: a batch
	// ends among them, and the next must not pass the rest (>=, not >).
	for i := range 5 {
		insertExpired(t, s, fmt.Sprintf("a%d", i), base.Add(time.Duration(i)*time.Second))
	}
	for i := range 4 {
		insertExpired(t, s, fmt.Sprintf("tie%d", i), base.Add(10*time.Second))
	}
	cur := new(dedupe.PurgeCursor)
	req := dedupe.PurgeRequest{Limit: 3, Cursor: cur}
	if n, err := s.Purge(ctx, req); n != 3 || err != nil {
		t.Fatalf("first batch: %d, %v; want 3", n, err)
	}
	if want := base.Add(2 * time.Second); !cur.Records.Equal(want) {
		t.Fatalf("cursor after the first batch %v, want %v (the third row's expires_at)", cur.Records, want)
	}

	// The second batch's plan: the cursor bounds the index scan.
	conn := indexOnly(t, s)
	rec, _ := postgres.PurgeSQL(false)
	if p := explain(t, conn, rec, 3, cur.Records); !strings.Contains(p, "Index Cond: ((expires_at >= ") {
		t.Errorf("second batch's plan has no lower bound in its Index Cond:\n%s", p)
	}

	// A row behind the cursor is not looked at again in this run: only a
	// batch that started from the index's start would remove it.
	insertExpired(t, s, "behind", base.Add(-time.Minute))
	total := 0
	for {
		n, err := s.Purge(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n < req.Limit {
			break
		}
	}
	if total != 6 {
		t.Fatalf("the rest of the run removed %d, want 6 (two a-rows, four sharing an expires_at)", total)
	}
	if !cur.Records.Equal(base.Add(10 * time.Second)) {
		t.Fatalf("cursor at the end %v, want %v", cur.Records, base.Add(10*time.Second))
	}
	if _, err := s.Get(ctx, "s", "behind"); err != nil {
		t.Fatalf("the row behind the cursor: %v, want it still there", err)
	}
	// The next run starts from the index's start.
	if n, err := s.Purge(ctx, dedupe.PurgeRequest{Limit: 3, Cursor: new(dedupe.PurgeCursor)}); n != 1 || err != nil {
		t.Fatalf("next run: %d, %v; want the row behind", n, err)
	}
}

// What a run passes over (a row another transaction holds: SKIP LOCKED; a
// row under a live lease) lies behind its cursor; the next run, from the
// index's start, removes it. Never skipped for good.
func TestPurgeNextRunFindsWhatOneSkipped(t *testing.T) {
	ctx := context.Background()
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 10 {
		insertExpired(t, s, fmt.Sprintf("k%d", i), base.Add(time.Duration(i)*time.Second))
	}
	// k1 held by another transaction (a replica's purge, a claim).
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM hookonce_records WHERE key = 'k1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// k2 under a live lease, past its ttl.
	if _, err := s.Pool().Exec(ctx, `UPDATE hookonce_records SET state = 'processing', owner = 'o',
		lease_until = clock_timestamp() + interval '1 second' WHERE key = 'k2'`); err != nil {
		t.Fatal(err)
	}
	run := func() int {
		t.Helper()
		req := dedupe.PurgeRequest{Limit: 2, Cursor: new(dedupe.PurgeCursor)}
		total := 0
		for {
			n, err := s.Purge(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if n < req.Limit {
				return total
			}
		}
	}
	if n := run(); n != 8 {
		t.Fatalf("first run removed %d, want 8 (all but the held and the leased)", n)
	}
	for _, k := range []string{"k1", "k2"} {
		if _, err := s.Get(ctx, "s", k); err != nil {
			t.Fatalf("%s after the first run: %v, want it kept", k, err)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // k2's lease ends
	if n := run(); n != 2 {
		t.Fatalf("second run removed %d, want the two the first passed over", n)
	}
}

// insertExpired writes a done record of sender "s" that expired at exp.
// indexOnly is a connection of s's pool on which the planner takes an
// index wherever one serves: a small table is cheapest to scan whole, and
// the plans under test are those of a large one.
func indexOnly(t *testing.T, s *postgres.Store) *pgxpool.Conn {
	t.Helper()
	conn, err := s.Pool().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(context.Background(), `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	return conn
}

func insertExpired(t *testing.T, s *postgres.Store, key string, exp time.Time) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), `
		INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, expires_at)
		VALUES ('s', $1, 'done', 'h', $2::timestamptz - interval '1 day', $2)`, key, exp); err != nil {
		t.Fatal(err)
	}
}
