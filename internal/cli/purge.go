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

// backgroundPurgeDuty is the share of its time serve's background purge
// spends deleting: after each batch it pauses for the batch's time × (1 −
// duty) / duty. Measured on 2 cores at 1,000 new events/s with 334 k of 1 M
// records expired (bench TestGrowth), a flat-out purge raised the claims'
// p99 on PostgreSQL by +2.2 to +11.5 ms from run to run, one at 0.3 by +1.8
// to +2.8 ms (SQLite: +15.4 → +8.5 to +10.8 ms); at 0.3 it still deletes ~30,000
// PostgreSQL records a second, far above what any sender's events expire
// at. The purge command, run by an operator, goes flat out.
const backgroundPurgeDuty = 0.3

// purgeBatches is the one purge loop (serve's background purge and the
// purge command): Purge with req (req.Limit is the batch) until a batch
// comes back short, each call bounded by perCall (0: only ctx), pausing
// after each full batch so that deleting takes duty of the time (0 or 1:
// no pause; purgePause). It returns how many records were removed, also
// when it stops at an error or when ctx ends during a pause. Each run
// has a new cursor (req.Cursor), so a batch carries on where the one before
// it ended, and every run starts from the beginning once and finds what an
// earlier run passed over.
func purgeBatches(ctx context.Context, s dedupe.Store, req dedupe.PurgeRequest, perCall time.Duration, duty float64) (int, error) {
	total := 0
	req.Cursor = new(dedupe.PurgeCursor)
	for {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if perCall > 0 {
			cctx, cancel = context.WithTimeout(ctx, perCall)
		}
		start := time.Now()
		n, err := s.Purge(cctx, req)
		cancel()
		total += n
		if err != nil {
			return total, err
		}
		if req.Limit <= 0 || n < req.Limit {
			return total, nil
		}
		if d := purgePause(time.Since(start), duty); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return total, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// purgePause is how long to pause after a batch that took busy, so that
// batches take duty of the time; none for a duty of 0 or at least 1.
func purgePause(busy time.Duration, duty float64) time.Duration {
	if duty <= 0 || duty >= 1 {
		return 0
	}
	return time.Duration(float64(busy) * (1 - duty) / duty)
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
				total, err := purgeBatches(ctx, s, req, 0, 0)
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
