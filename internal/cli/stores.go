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

// openStore opens the backend a DSN names. It is the only place that knows
// every backend.
func openStore(ctx context.Context, dsn string, a access) (dedupe.Store, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
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

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "create or upgrade the store's schema (serve also does this on start)",
		Flags: []cli.Flag{storeFlag()},
		Action: func(c *cli.Context) error {
			ctx := c.Context
			dsn, err := operatorStore(c)
			if err != nil {
				return cli.Exit("migrate: "+err.Error(), exitUsage)
			}
			// Open migrates; Migrate again and Ping only to say so.
			s, err := openStore(ctx, dsn, readWrite)
			if err != nil {
				return cli.Exit("migrate: "+err.Error(), exitRuntime)
			}
			defer s.Close()
			if m, ok := s.(dedupe.Migrator); ok {
				if err := m.Migrate(ctx); err != nil {
					return cli.Exit("migrate: "+err.Error(), exitRuntime)
				}
			}
			if err := s.Ping(ctx); err != nil {
				return cli.Exit("migrate: "+err.Error(), exitRuntime)
			}
			fmt.Fprintln(c.App.Writer, "store is migrated:", dedupe.RedactDSN(dsn))
			// What serve will warn about at start (PostgreSQL behind a
			// pooler: the role's session settings), said here first.
			if w, ok := s.(storeWarner); ok {
				for _, msg := range w.Warnings(ctx) {
					fmt.Fprintln(c.App.ErrWriter, "warning:", msg)
				}
			}
			return nil
		},
	}
}
