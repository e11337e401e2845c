package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

const defaultStore = "sqlite:hookonce.db"

// serveStoreFlag is serve's --store: the unit (or the command line) names
// it, and without one serve keeps its store in ./hookonce.db.
func serveStoreFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name: "store", Value: defaultStore, EnvVars: []string{"HOOKONCE_STORE"},
		Usage: "where claims and answers live: sqlite:PATH[?synchronous=normal], postgres://…, redis://…",
	}
}

// storeFlag is the operator's commands' --store; without it they look
// where operatorStore says.
func storeFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name: "store", EnvVars: []string{"HOOKONCE_STORE"},
		Usage: "where claims and answers live: sqlite:PATH[?synchronous=normal], postgres://…, redis://… " +
			"(default: HOOKONCE_STORE from the environment file, else " + host.Store +
			" with the host's config " + host.Config + ", else " + defaultStore + ")",
	}
}

// access says what a command may do to the store.
type access int

const (
	// readWrite: serve, migrate, release, purge. The backend's Open connects
	// and migrates (an SQLite file is created).
	readWrite access = iota
	// readOnly: list, lookup, conflicts. Nothing is created, migrated or
	// written, and every write fails with dedupe.ErrReadOnly.
	readOnly
)

// isSQLite says whether dsn names the embedded store.
func isSQLite(dsn string) bool { return strings.HasPrefix(dsn, "sqlite:") }

// openStore opens the backend a DSN names. It is the only place that knows
// every backend.
func openStore(ctx context.Context, dsn string, a access) (dedupe.Store, error) {
	switch {
	case isSQLite(dsn):
		// sqlite:PATH[?synchronous=full|normal]
		path, opts, err := sqlite.ParseDSN(strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "//"))
		if err != nil {
			return nil, err
		}
		if a == readOnly {
			return sqlite.OpenReadOnly(ctx, path) // writes nothing: synchronous does not apply
		}
		return sqlite.OpenWith(ctx, path, opts)
	case strings.HasPrefix(dsn, "redis://"), strings.HasPrefix(dsn, "rediss://"),
		strings.HasPrefix(dsn, "redis+"), strings.HasPrefix(dsn, "rediss+"), strings.HasPrefix(dsn, "unix://"):
		// redis(s)://, unix:///path/to/redis.sock,
		// redis(s)+sentinel://…?master_name=, redis(s)+cluster://
		if a == readOnly {
			return redis.OpenReadOnly(ctx, dsn)
		}
		return redis.Open(ctx, dsn)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if a == readOnly {
			return postgres.OpenReadOnly(ctx, dsn)
		}
		return postgres.Open(ctx, dsn)
	default:
		return nil, fmt.Errorf("unknown store %q (want sqlite:PATH, postgres://… or redis://…)", dedupe.RedactDSN(dsn))
	}
}

// withStore opens the --store of c for a one-shot command.
func withStore(c *cli.Context, a access, fn func(ctx context.Context, s dedupe.Store) error) error {
	ctx := c.Context
	dsn, err := operatorStore(c)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	s, err := openStore(ctx, dsn, a)
	if err != nil {
		return cli.Exit(err.Error(), exitRuntime)
	}
	defer s.Close()
	return fn(ctx, s)
}
