// hookonce migrate: create or upgrade a store's schema.

package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/dedupe"
)

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
