package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// schemaV1 is the schema hookonce shipped as user_version 1, frozen here so
// the test keeps proving that files written by that release still open.
const schemaV1 = `
CREATE TABLE IF NOT EXISTS records (
	sender       TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	state        TEXT    NOT NULL,
	payload_hash TEXT    NOT NULL,
	owner        TEXT    NOT NULL DEFAULT '',
	lease_until  INTEGER NOT NULL DEFAULT 0,
	received_at  INTEGER NOT NULL,
	completed_at INTEGER NOT NULL DEFAULT 0,
	expires_at   INTEGER NOT NULL,
	hits         INTEGER NOT NULL DEFAULT 0,
	takeovers    INTEGER NOT NULL DEFAULT 0,
	status       INTEGER NOT NULL DEFAULT 0,
	headers      BLOB,
	body         BLOB,
	truncated    INTEGER NOT NULL DEFAULT 0,
	request_body BLOB,
	PRIMARY KEY (sender, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_received ON records (received_at);
CREATE INDEX IF NOT EXISTS records_expires ON records (expires_at);
CREATE TABLE IF NOT EXISTS conflicts (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	sender        TEXT    NOT NULL,
	key           TEXT    NOT NULL,
	stored_hash   TEXT    NOT NULL,
	received_hash TEXT    NOT NULL,
	received_at   INTEGER NOT NULL,
	changed_paths TEXT    NOT NULL DEFAULT '',
	expires_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS conflicts_sender ON conflicts (sender, id);
CREATE INDEX IF NOT EXISTS conflicts_expires ON conflicts (expires_at);
PRAGMA user_version = 1;
`

// v1File writes a version-1 database with a done record and a processing
// claim held by "o1", as the previous release left them: in WAL mode,
// which that release's Open set, as this one's does. (Concurrent Opens of
// a file still in rollback mode race to convert it, and the loser's BEGIN
// can fail with SQLITE_BUSY despite busy_timeout; hookonce never writes
// such a file.)
func v1File(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	stmts := []struct {
		q    string
		args []any
	}{
		{`PRAGMA journal_mode = WAL`, nil},
		{schemaV1, nil},
		{`INSERT INTO records (sender, key, state, payload_hash, received_at, completed_at, expires_at, hits, status, headers, body, request_body)
			VALUES ('s', 'done', 'done', 'h1', ?, ?, ?, 3, 201, ?, ?, ?)`,
			[]any{now.UnixMilli(), now.UnixMilli(), now.Add(time.Hour).UnixMilli(), []byte(`{"Content-Type":["text/plain"]}`), []byte("ok"), []byte(`{"a":1}`)}},
		{`INSERT INTO records (sender, key, state, payload_hash, owner, lease_until, received_at, expires_at)
			VALUES ('s', 'busy', 'processing', 'h1', 'o1', ?, ?, ?)`,
			[]any{now.Add(time.Minute).UnixMilli(), now.UnixMilli(), now.Add(time.Hour).UnixMilli()}},
	}
	for _, st := range stmts {
		if _, err := db.Exec(st.q, st.args...); err != nil {
			t.Fatalf("write v1 file: %v", err)
		}
	}
	return path
}

// A file written by the previous release is migrated in place by Open: its
// records read as before, with no attempts and no request head, and its
// claims can be released and completed under the new contract.
func TestMigrateV1InPlace(t *testing.T) {
	path := v1File(t)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open v1 file: %v", err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after migration: %v", err)
	}
	done, err := s.Get(ctx, "s", "done")
	if err != nil {
		t.Fatal(err)
	}
	if done.State != dedupe.StateDone || done.Hits != 3 || done.Response == nil || done.Response.Status != 201 ||
		string(done.Response.Body) != "ok" || done.Response.Header.Get("Content-Type") != "text/plain" ||
		string(done.RequestBody) != `{"a":1}` || done.Attempts != nil || done.Request != nil {
		t.Fatalf("done record after migration = %+v", done)
	}
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: "done", PayloadHash: "h1", Owner: "o2", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Found != dedupe.Duplicate {
		t.Fatalf("Claim of the migrated done record = %v, %v; want duplicate", res.Found, err)
	}

	a := dedupe.Attempt{At: time.Now().Truncate(time.Millisecond), By: dedupe.AttemptBySender, Outcome: "released", Status: 502,
		Duration: 1234567 * time.Nanosecond, Replica: "r1"}
	if err := s.Release(ctx, "s", "busy", "o1", a); err != nil {
		t.Fatalf("Release of a claim taken before the migration: %v", err)
	}
	busy, err := s.Get(ctx, "s", "busy")
	if err != nil {
		t.Fatal(err)
	}
	if busy.State != dedupe.StateReleased || len(busy.Attempts) != 1 || busy.Attempts[0].Duration != a.Duration ||
		!busy.Attempts[0].At.Equal(a.At) || busy.Attempts[0].Replica != "r1" {
		t.Fatalf("released record = %+v", busy)
	}

	// Opening again finds nothing to do.
	s2, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	s2.Close()
}

// Several processes opening one old file at once: each migration step runs
// once, and every Open succeeds.
func TestMigrateConcurrentOpens(t *testing.T) {
	path := v1File(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := sqlite.Open(context.Background(), path)
			if err != nil {
				errs <- err
				return
			}
			errs <- errors.Join(s.Ping(context.Background()), s.Close())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open of a v1 file: %v", err)
		}
	}
}

// A file from a newer release is refused rather than written with an
// older schema's idea of a record.
func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "future.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := sqlite.Open(context.Background(), path); err == nil {
		s.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
}

// Claiming a released record: the new claim's hash, request and times,
// and the event's history (attempts, takeovers) kept.
func TestReclaimReleasedKeepsHistory(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claim := func(owner, hash string, lease time.Duration, body []byte, head *dedupe.StoredRequest) dedupe.ClaimResult {
		t.Helper()
		res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: "evt", PayloadHash: hash, Owner: owner,
			Lease: lease, TTL: time.Hour, RequestBody: body, Request: head})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := claim("o1", "h1", 50*time.Millisecond, []byte("one"), &dedupe.StoredRequest{Method: "POST", URI: "/a"})
	time.Sleep(150 * time.Millisecond)
	if res := claim("o2", "h1", time.Minute, nil, nil); res.Found != dedupe.TakenOver {
		t.Fatalf("takeover = %v", res.Found)
	}
	if err := s.Release(ctx, "s", "evt", "o2", dedupe.Attempt{At: time.Now(), Outcome: "released", Status: 503}); err != nil {
		t.Fatal(err)
	}
	head := &dedupe.StoredRequest{Method: "PUT", URI: "/b?x=1", Header: http.Header{"X-Sig": {"v"}}}
	before := time.Now().Add(-time.Millisecond)
	res := claim("o3", "h2", time.Minute, []byte("two"), head)
	if res.Found != dedupe.Claimed {
		t.Fatalf("claim of a released record = %v, want claimed", res.Found)
	}
	got, err := s.Get(ctx, "s", "evt")
	if err != nil {
		t.Fatal(err)
	}
	for name, rec := range map[string]dedupe.Record{"claim result": res.Record, "Get": got} {
		if rec.State != dedupe.StateProcessing || rec.Owner != "o3" || rec.PayloadHash != "h2" ||
			string(rec.RequestBody) != "two" || rec.Request == nil || rec.Request.URI != "/b?x=1" || rec.Request.Header.Get("X-Sig") != "v" {
			t.Fatalf("%s: re-claimed record = %+v", name, rec)
		}
		if rec.ReceivedAt.Before(before) || !rec.ReceivedAt.After(first.Record.ReceivedAt) ||
			rec.ExpiresAt.Sub(rec.ReceivedAt) != time.Hour || !rec.LeaseUntil.After(rec.ReceivedAt) {
			t.Fatalf("%s: times received %v lease %v expires %v, want those of a new claim", name, rec.ReceivedAt, rec.LeaseUntil, rec.ExpiresAt)
		}
		if rec.Takeovers != 1 || len(rec.Attempts) != 1 || rec.Attempts[0].Status != 503 || !rec.CompletedAt.IsZero() || rec.Response != nil {
			t.Fatalf("%s: history not kept: %+v", name, rec)
		}
	}
	// Without store_request_body the new claim keeps no request either.
	if err := s.Release(ctx, "s", "evt", "o3", dedupe.Attempt{At: time.Now(), Outcome: "released"}); err != nil {
		t.Fatal(err)
	}
	claim("o4", "h3", time.Minute, nil, nil)
	if rec, err := s.Get(ctx, "s", "evt"); err != nil || rec.RequestBody != nil || rec.Request != nil || len(rec.Attempts) != 2 {
		t.Fatalf("re-claim without a request kept %q %+v, attempts %d (%v)", rec.RequestBody, rec.Request, len(rec.Attempts), err)
	}
}

// schemaV2 is what user_version 2 added to schemaV1, frozen like it.
const schemaV2 = `
ALTER TABLE records ADD COLUMN attempts TEXT;
ALTER TABLE records ADD COLUMN request_head TEXT;
PRAGMA user_version = 2;
`

// v2File is v1File upgraded to version 2, as the release before the object
// locks left it.
func v2File(t *testing.T) string {
	t.Helper()
	path := v1File(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(schemaV2); err != nil {
		t.Fatalf("write v2 file: %v", err)
	}
	return path
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Files of version 1 and 2 get the object lock table in place: the locks
// work at once, the records read and settle as before, and the file is at
// the current version.
func TestMigrateToObjectLocks(t *testing.T) {
	for name, file := range map[string]func(*testing.T) string{"v1": v1File, "v2": v2File} {
		t.Run(name, func(t *testing.T) {
			path := file(t)
			ctx := context.Background()
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatalf("Open %s file: %v", name, err)
			}
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("Ping after migration: %v", err)
			}
			if ok, err := s.LockObject(ctx, "orders", "42", "a", time.Minute); err != nil || !ok {
				t.Fatalf("LockObject after migration = %v, %v", ok, err)
			}
			if ok, err := s.LockObject(ctx, "orders", "42", "b", time.Minute); err != nil || ok {
				t.Fatalf("LockObject of a held object after migration = %v, %v", ok, err)
			}
			if err := s.UnlockObject(ctx, "orders", "42", "a"); err != nil {
				t.Fatal(err)
			}
			if rec, err := s.Get(ctx, "s", "done"); err != nil || rec.State != dedupe.StateDone || rec.Hits != 3 {
				t.Fatalf("done record after migration = %+v, %v", rec, err)
			}
			if err := s.Complete(ctx, "s", "busy", "o1", dedupe.Response{Status: 200}, dedupe.Attempt{At: time.Now()}); err != nil {
				t.Fatalf("Complete of a claim taken before the migration: %v", err)
			}
			if _, err := s.Purge(ctx, dedupe.PurgeRequest{}); err != nil {
				t.Fatalf("Purge after migration: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if v := userVersion(t, path); v != sqlite.SchemaVersion {
				t.Fatalf("user_version after migration = %d, want %d", v, sqlite.SchemaVersion)
			}
			// Opening again finds nothing to do and keeps the lock table.
			s2, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatalf("second Open: %v", err)
			}
			defer s2.Close()
			if ok, err := s2.LockObject(ctx, "orders", "42", "b", time.Minute); err != nil || !ok {
				t.Fatalf("LockObject after reopening = %v, %v", ok, err)
			}
		})
	}
}

// schemaV3 is what user_version 3 added to schemaV2, frozen like it.
const schemaV3 = `
CREATE TABLE IF NOT EXISTS objects (
	scope       TEXT    NOT NULL,
	object      TEXT    NOT NULL,
	owner       TEXT    NOT NULL,
	lease_until INTEGER NOT NULL,
	PRIMARY KEY (scope, object)
) WITHOUT ROWID;
PRAGMA user_version = 3;
`

// v3File is v2File upgraded to version 3, as the release before conflicts
// kept their payload left it, with a conflict recorded by that release.
func v3File(t *testing.T) string {
	t.Helper()
	path := v2File(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(schemaV3); err != nil {
		t.Fatalf("write v3 file: %v", err)
	}
	now := time.Now()
	if _, err := db.Exec(`INSERT INTO conflicts (sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at)
		VALUES ('s', 'done', 'h1', 'h2', ?, 'amount', ?)`, now.UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
		t.Fatalf("write v3 conflict: %v", err)
	}
	return path
}

// A file of version 3 gets the conflicts' new columns in place: its old
// conflict reads back as before (hashes, changed paths) with an id and
// no kept payload, so accepting it is refused as not kept; a conflict
// recorded now keeps its payload and is accepted once.
func TestMigrateToConflictPayloads(t *testing.T) {
	path := v3File(t)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open v3 file: %v", err)
	}
	defer s.Close()
	if v := userVersion(t, path); v != sqlite.SchemaVersion {
		t.Fatalf("user_version after migration = %d, want %d", v, sqlite.SchemaVersion)
	}
	cs, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: "s", Key: "done"})
	if err != nil || len(cs) != 1 {
		t.Fatalf("old conflict after migration: %+v, %v", cs, err)
	}
	old := cs[0]
	if old.ID == "" || old.ReceivedHash != "h2" || len(old.ChangedPaths) != 1 || old.Request != nil || old.Body != nil || old.Accepted() || old.Shadow {
		t.Fatalf("old conflict read back as %+v", old)
	}
	if _, err := s.AcceptConflict(ctx, "s", "done", "", "op"); !errors.Is(err, dedupe.ErrNotAcceptable) {
		t.Fatalf("accept of a conflict recorded before the migration: %v, want ErrNotAcceptable", err)
	}
	c := dedupe.Conflict{Sender: "s", Key: "done", StoredHash: "h1", ReceivedHash: "h3", ReceivedAt: time.Now(),
		ExpiresAt: time.Now().Add(time.Hour), Request: &dedupe.StoredRequest{Method: "POST", URI: "/x", Header: http.Header{}},
		Body: []byte(`{"amount":3}`), DiffKind: dedupe.DiffJSON, ChangedPaths: []string{"amount"}}
	if err := s.RecordConflict(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.AcceptConflict(ctx, "s", "done", "", "op")
	if err != nil || got.ReceivedHash != "h3" || got.ID == old.ID {
		t.Fatalf("accept of a new conflict after migration = %+v, %v", got, err)
	}
	if _, err := s.AcceptConflict(ctx, "s", "done", got.ID, "op"); !errors.Is(err, dedupe.ErrAccepted) {
		t.Fatalf("second accept after migration: %v, want ErrAccepted", err)
	}
}
