package postgres_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgbouncertest"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// Stock PgBouncer (transaction pooling, no ignore_startup_parameters)
// refuses the session settings hookonce sends as startup parameters by
// default; with pooler=transaction the store opens, migrates and serves.
func TestPgBouncerNeedsPoolerParameter(t *testing.T) {
	b := pgbouncertest.Start(t, pgtest.Shared(t), pgbouncertest.Options{})
	dsn := b.Via(pgtest.Shared(t).NewDatabase(t))
	if s, err := postgres.Open(ctxFor(t, 10*time.Second), dsn); err == nil {
		s.Close()
		t.Fatal("Open through PgBouncer without pooler=transaction worked: the test proves nothing")
	} else if !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Logf("Open without pooler=transaction: %v", err)
	}
	s := mustNew(t, dsn+"&pooler=transaction")
	if err := s.Ping(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// The conformance suites through a real PgBouncer in transaction pooling
// mode, two server connections shared by every pool: with
// pooler=transaction (default_query_exec_mode=exec), and with the other
// exec modes that work there. (describe_exec does not: it binds, in a
// transaction of its own, the unnamed statement it prepared in the one
// before, which another client's transaction may have replaced; Config
// refuses it with pooler=transaction.)
func TestPgBouncerConformance(t *testing.T) {
	b := pgbouncertest.Start(t, pgtest.Shared(t), pgbouncertest.Options{})
	for _, mode := range []string{"", "simple_protocol", "cache_describe"} {
		name, query := "pooler", ""
		if mode != "" {
			name, query = mode, "&default_query_exec_mode="+mode
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := b.Database(t, query)
			dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
			t.Run("pending", func(t *testing.T) {
				dsn := b.Database(t, query)
				dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
			})
			if mode == "" {
				// The other suites in the mode pooler=transaction picks;
				// traffic's reads through a read-only store.
				t.Run("objects", func(t *testing.T) {
					dsn := b.Database(t, query)
					dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
				})
				t.Run("summary", func(t *testing.T) {
					dsn := b.Database(t, query)
					dedupetest.RunSummaryConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
				})
				t.Run("traffic", func(t *testing.T) {
					dsn := b.Database(t, query)
					dedupetest.RunTrafficConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) }, openReadOnly(dsn))
				})
			}
		})
	}
}

// The operator's read-only commands through PgBouncer leave nothing on the
// server connection: PgBouncer's one server connection serves a read-only
// store's reads, then another store's writes, which still succeed (a
// session-level default_transaction_read_only would have stayed on it).
// The read-only store's own writes are refused by the server.
func TestPgBouncerReadOnlyDoesNotPoisonPool(t *testing.T) {
	b := pgbouncertest.Start(t, pgtest.Shared(t), pgbouncertest.Options{PoolSize: 1})
	dsn := b.Database(t, "")
	rw := mustNew(t, dsn)
	ctx := ctxFor(t, 20*time.Second)
	first := claimReq("before", "h")
	if _, err := rw.Claim(ctx, first); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ro, err := postgres.OpenReadOnlyUnwrapped(ctx, dsn)
		if err != nil {
			t.Fatalf("OpenReadOnly through PgBouncer: %v", err)
		}
		// lookup, list, and a write the server must refuse.
		if rec, err := ro.Get(ctx, "s", "before"); err != nil || rec.Owner != first.Owner {
			t.Fatalf("lookup through PgBouncer: %+v %v", rec, err)
		}
		if recs, err := ro.List(ctx, dedupe.ListFilter{Sender: "s"}); err != nil || len(recs) == 0 {
			t.Fatalf("list through PgBouncer: %d records, %v", len(recs), err)
		}
		if err := postgres.Exec(ctx, ro, `DELETE FROM hookonce_records`); err == nil {
			t.Fatal("a DELETE through the read-only store succeeded")
		}
		ro.Close()
		// The same server connection now serves serve's sessions, which
		// must not have become read-only. (A claim alone would not tell:
		// the batch that fails leaves its connection mid-transaction, and
		// PgBouncer then drops the poisoned server connection; the claim,
		// tried again alone, gets a fresh one.)
		var mode string
		if err := rw.Pool().QueryRow(ctx, `SHOW default_transaction_read_only`).Scan(&mode); err != nil || mode != "off" {
			t.Fatalf("after a read-only open through PgBouncer, serve's session has default_transaction_read_only = %q (%v), want off", mode, err)
		}
		req := claimReq(fmt.Sprintf("after-%d", i), "h")
		if _, err := rw.Claim(ctx, req); err != nil {
			t.Fatalf("claim after a read-only open through PgBouncer: %v", err)
		}
		if err := rw.Complete(ctx, "s", req.Key, req.Owner, dedupe.Response{Status: 200, Header: http.Header{"A": {"b"}}}, testAttempt("processed")); err != nil {
			t.Fatalf("complete after a read-only open through PgBouncer: %v", err)
		}
		if err := rw.Probe(ctx); err != nil {
			t.Fatalf("probe after a read-only open through PgBouncer: %v", err)
		}
	}
	servers, err := b.Show(ctx, "SERVERS")
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 {
		t.Fatalf("PgBouncer had %d server connections, want the one: %v", len(servers), servers)
	}
}

// With pooler=transaction hookonce sends no session settings: Warnings
// (logged by serve at start) names those the role lacks, with the ALTER
// ROLE that sets them, and nothing once the role has them.
func TestPgBouncerRoleSettings(t *testing.T) {
	srv := pgtest.Shared(t)
	b := pgbouncertest.Start(t, srv, pgbouncertest.Options{})
	bare := mustNew(t, b.Database(t, ""))
	got := strings.Join(bare.Warnings(ctxFor(t, 5*time.Second)), "\n")
	for _, want := range []string{"idle_in_transaction_session_timeout, lock_timeout, statement_timeout",
		`ALTER ROLE "postgres" SET lock_timeout = '5s';`} {
		if !strings.Contains(got, want) {
			t.Errorf("Warnings without role settings = %q, want it to hold %q", got, want)
		}
	}

	// The role's settings in one database (as ALTER ROLE … IN DATABASE;
	// the tests share the server's role), set before PgBouncer opens a
	// server connection to it.
	direct := srv.NewDatabase(t)
	db := direct[strings.LastIndex(direct, "/")+1 : strings.Index(direct, "?")]
	admin := mustNew(t, direct)
	for _, name := range postgres.RoleSettings {
		if _, err := admin.Pool().Exec(ctxFor(t, 5*time.Second), fmt.Sprintf(`ALTER ROLE postgres IN DATABASE %q SET %s = '10s'`, db, name)); err != nil {
			t.Fatal(err)
		}
	}
	set := mustNew(t, b.Via(direct)+"&pooler=transaction")
	if w := set.Warnings(ctxFor(t, 5*time.Second)); len(w) != 0 {
		t.Errorf("Warnings with the role's settings: %q", w)
	}
	// Without pooler=transaction hookonce sends them itself: nothing to say.
	if w := mustNew(t, srv.NewDatabase(t)).Warnings(ctxFor(t, 5*time.Second)); len(w) != 0 {
		t.Errorf("Warnings without a pooler: %q", w)
	}
}
