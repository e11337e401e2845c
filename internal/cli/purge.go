// hookonce purge, and the one purge loop it shares with serve's background
// purge.

package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/dedupe"
)

// Purge batches bound one Purge call, so that neither serve's background
// purge nor the purge command holds the store long.
const (
	purgeBatch           = 1000
	backgroundPurgeBatch = 500
)

// purgeBatches is the one purge loop (serve's background purge and the
// purge command): Purge with req (req.Limit is the batch) until a batch
// comes back short, each call bounded by perCall (0: only ctx). It returns
// how many records were removed, also when it stops at an error. Each run
// has a new cursor (req.Cursor), so a batch carries on where the one before
// it ended, and every run starts from the beginning once and finds what an
// earlier run passed over.
func purgeBatches(ctx context.Context, s dedupe.Store, req dedupe.PurgeRequest, perCall time.Duration) (int, error) {
	total := 0
	req.Cursor = new(dedupe.PurgeCursor)
	for {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if perCall > 0 {
			cctx, cancel = context.WithTimeout(ctx, perCall)
		}
		n, err := s.Purge(cctx, req)
		cancel()
		total += n
		if err != nil {
			return total, err
		}
		if req.Limit <= 0 || n < req.Limit {
			return total, nil
		}
	}
}

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
				total, err := purgeBatches(ctx, s, req, 0)
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
