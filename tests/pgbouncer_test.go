package tests

import (
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/pgbouncertest"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// The operator's commands through PgBouncer in transaction pooling mode
// with pooler=transaction: migrate migrates and warns that the role lacks
// the session settings hookonce no longer sends (with the ALTER ROLE, and
// never the password), and lookup reads through the same DSN.
func TestCommandsThroughPgBouncer(t *testing.T) {
	srv := pgtest.Start(t) // trust authentication: any password is accepted
	b := pgbouncertest.Start(t, srv, pgbouncertest.Options{})
	dsn := strings.Replace(b.Via(srv.NewDatabase(t)), "postgres@", "postgres:pw-bouncer-1@", 1) + "&pooler=transaction"

	out, code := runBounded(t, "migrate", "--store", dsn)
	if code != 0 || !strings.Contains(out, "store is migrated") {
		t.Fatalf("migrate through PgBouncer: exit %d\n%s", code, out)
	}
	for _, want := range []string{"warning:", "pooler=transaction", `ALTER ROLE "postgres" SET statement_timeout = '30s';`} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate's output lacks %q:\n%s", want, out)
		}
	}
	noSecret(t, "migrate", out, "pw-bouncer-1")

	out, code = runBounded(t, "lookup", "--store", dsn, "shop", "nothing-here")
	if code == 0 || !strings.Contains(out, "no record for sender") {
		t.Fatalf("lookup of a missing record through PgBouncer: exit %d\n%s", code, out)
	}
	noSecret(t, "lookup", out, "pw-bouncer-1")
}
