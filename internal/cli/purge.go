// hookonce purge: dedupe/retention's purge loop, flat out.

package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/retention"
)

// purgeBatch bounds one Purge call of the purge command, so that it
// never holds the store long (serve's: retention.BackgroundBatch).
const purgeBatch = 1000

func purgeCommand() *cli.Command {
	return &cli.Command{
		Name: "purge",
		Usage: "delete records past their sender's ttl, or with --older-than those received longer ago; " +
			"a claim whose lease is alive is never touched",
		Flags: []cli.Flag{storeFlag(), jsonFlag(),
			&cli.DurationFlag{Name: "older-than", EnvVars: []string{"HOOKONCE_OLDER_THAN"}, Usage: "delete records received longer ago than this (e.g. 72h) instead of those past their ttl"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cli.Exit("usage: hookonce purge [--store DSN] [--older-than DURATION]", exitUsage)
			}
			req := dedupe.PurgeRequest{Limit: purgeBatch}
			if c.IsSet("older-than") {
				d := c.Duration("older-than")
				if d <= 0 {
					return cli.Exit(fmt.Sprintf("--older-than %s: want a positive duration such as 72h", d), exitUsage)
				}
				req.ReceivedBefore = time.Now().Add(-d)
			}
			return withStore(c, readWrite, func(ctx context.Context, s dedupe.Store) error {
				total, err := (&retention.Purger{Store: s}).Run(ctx, req) // flat out
				if err != nil {
					return cli.Exit(fmt.Sprintf("purge: %v (%d records removed before the failure)", err, total), exitRuntime)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, map[string]int{"purged": total})
				}
				fmt.Fprintf(c.App.Writer, "purged %d records\n", total)
				return nil
			})
		},
	}
}
