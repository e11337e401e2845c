package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkPurgeLayout weighs layouts of the records table that are not
// built (issue 47: "a second table swapped by expiry day") against the
// one the store has. Today's table is clustered by (sender, key): records
// that expire together lie on random pages, so the purge writes about a
// page to the WAL (and again at the checkpoint) for each record it
// removes, whatever its pace, and every claim's commit waits behind that
// I/O. Two others:
//
//   - dayed: one table clustered by (xday, sender, key), xday the expiry's
//     UTC day, its received index (xday, received_at): a past day's records
//     lie together, but within a day the key's order and the time's are
//     two random orders, so a transaction still dirties a page of one of
//     them per record unless it removes a large share of the day at once;
//   - tables: today's table, one for each expiry day, a past day's
//     dropped whole: its pages go to the free list unwritten.
//
// All three are built here with the store's columns and indexes, filled
// with the same rows (growth-test-like: done records with their answer and
// attempts, a third expired over the last three days, the rest expiring
// over the next three), then:
//
//   - purge: the expired records removed CHUNK to a transaction at
//     synchronous=NORMAL, as the store's Purge does (16), by the store's
//     own statement (keyed) or by whole past days (dayed), or each past
//     day's table dropped (tables); the WAL frames written, summed over a
//     checkpoint every 1,024 records, per record removed (wal-B/rec), the
//     time per record (µs/rec) and per transaction, the writer's hold
//     (ms/chunk);
//   - lookup: a claim's probe of a stored key and of an absent one, by
//     (sender, key), or by (sender, key) in each day a 72 h ttl spans
//     (ns/hit, ns/miss; through database/sql, which is most of it).
//
// A day-clustered layout keeps a record up to a day past its expiry.
//
//	go test ./dedupe/sqlite -run '^$' -bench PurgeLayout
func BenchmarkPurgeLayout(b *testing.B) {
	const n = 150_000
	for _, run := range []struct {
		layout string
		chunk  int
	}{{"keyed", 16}, {"keyed", 500}, {"dayed", 16}, {"dayed", 500}, {"tables", 0}} {
		name := fmt.Sprintf("%s/chunk=%d", run.layout, run.chunk)
		if run.chunk == 0 {
			name = run.layout + "/drop"
		}
		b.Run(name, func(b *testing.B) {
			// The timer runs through the fill too: one pass takes seconds,
			// so b.Loop makes one whatever -benchtime says, and the
			// figures are the metrics below, not ns/op.
			for b.Loop() {
				db, now := fillLayout(b, run.layout, n)
				purged, frames, txs, took := purgeLayout(b, db, run.layout, now, run.chunk)
				b.ReportMetric(float64(frames*(4096+24))/float64(purged), "wal-B/rec")
				b.ReportMetric(float64(took.Microseconds())/float64(purged), "µs/rec")
				b.ReportMetric(float64(took.Microseconds())/float64(txs)/1000, "ms/chunk")
				hit, miss := lookupLayout(b, db, run.layout, now)
				b.ReportMetric(float64(hit.Nanoseconds()), "ns/hit")
				b.ReportMetric(float64(miss.Nanoseconds()), "ns/miss")
				if purged < n/3*9/10 {
					b.Fatalf("purged %d records, %d were expired", purged, n/3)
				}
			}
		})
	}
}

const dayMS = int64(24 * time.Hour / time.Millisecond)

// layoutSchema is the records table of layout (for tables, under name).
func layoutSchema(layout, name string) string {
	xday, pk := "", "PRIMARY KEY (sender, key)"
	indexes := `CREATE INDEX ` + name + `_received ON ` + name + ` (received_at);
CREATE INDEX ` + name + `_expires ON ` + name + ` (expires_at);`
	if layout == "dayed" {
		xday, pk = "xday INTEGER NOT NULL,", "PRIMARY KEY (xday, sender, key)"
		// The purge finds past days by the key; a list of the newest
		// records would read the days newest first.
		indexes = `CREATE INDEX records_received ON records (xday, received_at);`
	}
	return `CREATE TABLE ` + name + ` (` + xday + `
	sender TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL, payload_hash TEXT NOT NULL,
	owner TEXT NOT NULL DEFAULT '', lease_until INTEGER NOT NULL DEFAULT 0, received_at INTEGER NOT NULL,
	completed_at INTEGER NOT NULL DEFAULT 0, expires_at INTEGER NOT NULL, hits INTEGER NOT NULL DEFAULT 0,
	takeovers INTEGER NOT NULL DEFAULT 0, status INTEGER NOT NULL DEFAULT 0, headers BLOB, body BLOB,
	truncated INTEGER NOT NULL DEFAULT 0, request_body BLOB, attempts TEXT, request_head TEXT, fingerprint BLOB,
	pending_since INTEGER NOT NULL DEFAULT 0, pending_next_at INTEGER NOT NULL DEFAULT 0,
	pending_until INTEGER NOT NULL DEFAULT 0, pending_tries INTEGER NOT NULL DEFAULT 0,
	pending_owner TEXT NOT NULL DEFAULT '', pending_lease_until INTEGER NOT NULL DEFAULT 0,
	` + pk + `) WITHOUT ROWID;
` + indexes + `
CREATE INDEX ` + name + `_pending ON ` + name + ` (sender, pending_next_at, pending_since) WHERE pending_since > 0;`
}

// fillLayout makes a file with n records in layout: keys random (hashes,
// as event ids are) against their expiry, a third expired (over the three
// days before now), the rest expiring over the three days after.
func fillLayout(b *testing.B, layout string, n int) (*sql.DB, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "layout.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	ctx := context.Background()
	exec := func(q string, args ...any) {
		b.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	source := "records"
	if layout == "tables" {
		source = "fill" // then moved to a table per day
	}
	exec(layoutSchema(layout, source))
	now := time.Now().UnixMilli()
	xcol, xval := "", ""
	if layout == "dayed" {
		xcol, xval = "xday, ", "exp / 86400000, "
	}
	exec(`INSERT INTO `+source+` (`+xcol+`sender, key, state, payload_hash, received_at, completed_at,
		expires_at, status, headers, body, attempts)
	WITH RECURSIVE s(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM s WHERE j + 1 < ?1)
	SELECT `+xval+`'sender-' || (j % 8), 'evt_' || lower(hex(randomblob(12))), 'done', lower(hex(randomblob(32))),
		exp - 259200000, exp - 259200000 + 40, exp, 200,
		CAST('{"Content-Type":["application/json"]}' AS BLOB), CAST('{"received":true}' AS BLOB),
		'[{"at_ms":' || (exp - 259200000) || ',"by":"sender","outcome":"processed","status":200,"duration_ns":40000000,"replica":"web-1/4242"}]'
	FROM (SELECT j, CASE WHEN j % 3 = 0 THEN ?2 - 1 - (j * 7919 % (3 * 86400000)) ELSE ?2 + 60000 + (j * 7919 % (3 * 86400000)) END AS exp FROM s)`,
		n, now)
	if layout == "tables" {
		for _, d := range dayTables(b, db, "fill") {
			exec(layoutSchema(layout, fmt.Sprintf("records_d%d", d)))
			exec(fmt.Sprintf(`INSERT INTO records_d%d SELECT * FROM fill WHERE expires_at / 86400000 = ?`, d), d)
		}
		exec(`DROP TABLE fill`)
	}
	exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return db, now
}

// dayTables lists the expiry days in table from (tables: "" lists the
// records_dN tables there are).
func dayTables(b *testing.B, db *sql.DB, from string) []int64 {
	b.Helper()
	q := `SELECT DISTINCT expires_at / 86400000 FROM ` + from + ` ORDER BY 1`
	if from == "" {
		q = `SELECT CAST(substr(name, 10) AS INTEGER) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'records_d%' ORDER BY 1`
	}
	rows, err := db.Query(q)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var days []int64
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			b.Fatal(err)
		}
		days = append(days, d)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return days
}

// purgeLayout removes the expired records (chunk to a transaction, or
// each past day's table) and counts the WAL frames written.
func purgeLayout(b *testing.B, db *sql.DB, layout string, now int64, chunk int) (purged, frames, txs int64, took time.Duration) {
	b.Helper()
	ctx := context.Background()
	q := `DELETE FROM records WHERE (sender, key) IN (SELECT sender, key FROM records
		WHERE expires_at <= ?1 AND NOT (state = 'processing' AND lease_until > ?1) AND pending_since = 0 LIMIT ?2)`
	if layout == "dayed" {
		// Whole past days: every record of a day before today's has expired.
		q = `DELETE FROM records WHERE (xday, sender, key) IN (SELECT xday, sender, key FROM records
		WHERE xday < ?1 / 86400000 AND NOT (state = 'processing' AND lease_until > ?1) AND pending_since = 0 LIMIT ?2)`
	}
	var days []int64
	if layout == "tables" {
		days = dayTables(b, db, "")
	}
	c, err := db.Conn(ctx) // the pool's one connection: db waits until c is closed
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, p := range []string{`PRAGMA synchronous = NORMAL`, `PRAGMA wal_autocheckpoint = 0`} {
		if _, err := c.ExecContext(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	checkpoint := func() {
		var busy, log, done int64
		if err := c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil {
			b.Fatal(err)
		}
		frames += log
	}
	start := time.Now()
	switch layout {
	case "tables":
		// (A day's table holding a record still owed or processing would
		// have it moved to today's first; this fill has none.)
		for _, d := range days {
			if d >= now/dayMS {
				break
			}
			var n int64
			if err := c.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM records_d%d`, d)).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if _, err := c.ExecContext(ctx, fmt.Sprintf(`DROP TABLE records_d%d`, d)); err != nil {
				b.Fatal(err)
			}
			purged += n
			txs++
			checkpoint()
		}
	default:
		for {
			res, err := c.ExecContext(ctx, q, now, chunk)
			if err != nil {
				b.Fatal(err)
			}
			d, _ := res.RowsAffected()
			purged += d
			txs++
			if txs%max(1024/int64(chunk), 1) == 0 {
				checkpoint()
			}
			if d < int64(chunk) {
				break
			}
		}
		checkpoint()
	}
	took = time.Since(start)
	return purged, frames, txs, took
}

// lookupLayout times the probe of a claim for stored keys and absent ones.
func lookupLayout(b *testing.B, db *sql.DB, layout string, now int64) (hit, miss time.Duration) {
	b.Helper()
	ctx := context.Background()
	q := `SELECT state, payload_hash, expires_at FROM records WHERE sender = ?1 AND key = ?2`
	all := `SELECT sender, key FROM records`
	today := now / dayMS
	switch layout {
	case "dayed":
		days := make([]string, 5) // a 72 h ttl: today and the three after, and yesterday (not yet purged)
		for i := range days {
			days[i] = fmt.Sprint(today - 1 + int64(i))
		}
		q = `SELECT state, payload_hash, expires_at FROM records WHERE xday IN (` + strings.Join(days, ", ") + `) AND sender = ?1 AND key = ?2`
	case "tables":
		var qs, as []string
		for _, d := range dayTables(b, db, "") {
			qs = append(qs, fmt.Sprintf(`SELECT state, payload_hash, expires_at FROM records_d%d WHERE sender = ?1 AND key = ?2`, d))
			as = append(as, fmt.Sprintf(`SELECT sender, key FROM records_d%d`, d))
		}
		q, all = strings.Join(qs, " UNION ALL "), strings.Join(as, " UNION ALL ")
	}
	rows, err := db.QueryContext(ctx, `SELECT * FROM (`+all+`) ORDER BY random() LIMIT 2000`)
	if err != nil {
		b.Fatal(err)
	}
	var keys [][2]string
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	probe := func(k [2]string) bool {
		var state, hash string
		var exp int64
		err := st.QueryRowContext(ctx, k[0], k[1]).Scan(&state, &hash, &exp)
		if err != nil && err != sql.ErrNoRows {
			b.Fatal(err)
		}
		return err == nil
	}
	for _, k := range keys[:100] { // warm the pages
		probe(k)
	}
	start := time.Now()
	for _, k := range keys {
		if !probe(k) {
			b.Fatalf("stored key %v not found", k)
		}
	}
	hit = time.Since(start) / time.Duration(len(keys))
	start = time.Now()
	for i, k := range keys {
		if probe([2]string{k[0], fmt.Sprintf("evt_absent%d", i)}) {
			b.Fatal("absent key found")
		}
	}
	miss = time.Since(start) / time.Duration(len(keys))
	return hit, miss
}
