package postgres_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/jackc/pgx/v5"
)

// pooler=transaction sends only the startup parameters PgBouncer accepts,
// uses the exec mode that needs no server-side prepared statement unless
// the DSN names another, and is not sent to the server itself. Without it
// nothing changes.
func TestPoolerDSN(t *testing.T) {
	const base = "postgres://u:s3cret@127.0.0.1:6432/db?sslmode=disable"
	cases := []struct {
		dsn    string
		mode   pgx.QueryExecMode
		params []string // RuntimeParams keys, sorted
	}{
		{base, pgx.QueryExecModeCacheStatement, []string{"application_name", "idle_in_transaction_session_timeout",
			"lock_timeout", "statement_timeout", "tcp_keepalives_count", "tcp_keepalives_idle", "tcp_keepalives_interval"}},
		{base + "&pooler=transaction", pgx.QueryExecModeExec, []string{"application_name"}},
		{base + "&pooler=transaction&default_query_exec_mode=simple_protocol", pgx.QueryExecModeSimpleProtocol, []string{"application_name"}},
		{base + "&pooler=transaction&default_query_exec_mode=cache_statement", pgx.QueryExecModeCacheStatement, []string{"application_name"}},
		// What the DSN sets itself is sent (the operator's choice; PgBouncer
		// needs it in ignore_startup_parameters, and then ignores it).
		{base + "&pooler=transaction&lock_timeout=2s", pgx.QueryExecModeExec, []string{"application_name", "lock_timeout"}},
	}
	for _, tc := range cases {
		cfg, err := postgres.Config(tc.dsn)
		if err != nil {
			t.Fatalf("Config(%s): %v", tc.dsn, err)
		}
		var keys []string
		for k := range cfg.ConnConfig.RuntimeParams {
			keys = append(keys, k)
		}
		if strings.Join(sorted(keys), ",") != strings.Join(tc.params, ",") {
			t.Errorf("%s: startup parameters %v, want %v", tc.dsn, sorted(keys), tc.params)
		}
		if cfg.ConnConfig.DefaultQueryExecMode != tc.mode {
			t.Errorf("%s: exec mode %v, want %v", tc.dsn, cfg.ConnConfig.DefaultQueryExecMode, tc.mode)
		}
	}
	for _, dsn := range []string{base + "&pooler=session", base + "&pooler=transaction&default_query_exec_mode=describe_exec"} {
		_, err := postgres.Config(dsn)
		if err == nil || !strings.Contains(err.Error(), "pooler") {
			t.Errorf("Config(%s) = %v, want an error naming pooler", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Config error shows the password: %v", err)
		}
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
