package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// BenchmarkSummary100k measures the overview page's aggregate on 100,000
// records (8 senders, received evenly over the last 7 days, each with two
// attempts, a tenth with hits, 1,000 conflicts) on the tests' throwaway
// server (reads only: fsync does not matter): "24h" is the window the page shows first (about 14,300
// records), "all" every kept record. The fill takes a few seconds, so it
// runs only with -bench:
//
//	go test ./dedupe/postgres -run '^$' -bench Summary100k -benchtime 20x
func BenchmarkSummary100k(b *testing.B) {
	dsn := pgtest.Shared(b).NewDatabase(b)
	s := mustNew(b, dsn)
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, `
		INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, completed_at, expires_at, hits, resp_status, attempts)
		SELECT 'sender-' || (i % 8), 'evt-' || i,
			(ARRAY['done','done','done','done','done','done','released','unknown','processing','done'])[1 + i % 10],
			md5(i::text), t, t, t + interval '30 days', CASE WHEN i % 10 = 0 THEN 2 ELSE 0 END, 200,
			jsonb_build_array(
				jsonb_build_object('at', t, 'by', 'sender', 'outcome', 'not_success', 'status', 500,
					'duration_ns', (i % 97) * 1000000, 'replica', 'r'),
				jsonb_build_object('at', t + interval '1 second', 'by', 'sender', 'outcome', 'processed', 'status', 200,
					'duration_ns', (i % 389) * 1000000, 'replica', 'r'))
		FROM (SELECT i, now() - (i * interval '6048 milliseconds') AS t FROM generate_series(1, 100000) i) g`)
	if err != nil {
		b.Fatal(err)
	}
	_, err = s.Pool().Exec(ctx, `
		INSERT INTO hookonce_conflicts (sender, key, stored_hash, received_hash, received_at, expires_at)
		SELECT 'sender-' || (i % 8), 'evt-' || i, 'a', 'b', now() - (i * interval '604 seconds'), now() + interval '30 days'
		FROM generate_series(1, 1000) i`)
	if err != nil {
		b.Fatal(err)
	}
	for _, table := range []string{"hookonce_records", "hookonce_conflicts"} {
		if _, err := s.Pool().Exec(ctx, `VACUUM ANALYZE `+table); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		since func() time.Time
		want  int64
	}{
		{"24h", func() time.Time { return time.Now().Add(-24 * time.Hour) }, 14285},
		{"all", func() time.Time { return time.Time{} }, 100000},
	} {
		b.Run(c.name, func(b *testing.B) {
			var records int64
			for b.Loop() {
				sums, err := s.Summary(ctx, c.since())
				if err != nil {
					b.Fatal(err)
				}
				records = 0
				for _, x := range sums {
					records += x.Records
				}
			}
			if records < c.want-10 || records > c.want+10 {
				b.Fatalf("summarised %d records, want about %d", records, c.want)
			}
			b.ReportMetric(float64(records), "records")
		})
	}
}

// BenchmarkKeyPart100k: a support search by one part of the key
// (ListFilter.KeyPart) in 100,000 records of 8 senders, T-Bank-like keys
// PaymentId:Status; the payment searched for is among the oldest, so the
// search reads the whole table (its worst case) or the sender's eighth:
//
//	go test ./dedupe/postgres -run '^$' -bench KeyPart100k -benchtime 20x
func BenchmarkKeyPart100k(b *testing.B) {
	s := mustNew(b, pgtest.Shared(b).NewDatabase(b))
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `
		INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, expires_at)
		SELECT 'sender-' || (i % 8), (8000000 + i)::text || ':CONFIRMED', 'done', md5(i::text),
			now() - i * interval '1 second', now() + interval '30 days'
		FROM generate_series(1, 100000) i`); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `VACUUM ANALYZE hookonce_records`); err != nil {
		b.Fatal(err)
	}
	for _, sender := range []string{"", "sender-1"} {
		b.Run("sender="+sender, func(b *testing.B) {
			for b.Loop() {
				recs, err := s.List(ctx, dedupe.ListFilter{Sender: sender, KeyPart: "8099993", Limit: 50})
				if err != nil || len(recs) != 1 {
					b.Fatalf("List = %d records, %v", len(recs), err)
				}
			}
		})
	}
}
