package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
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

func conflictsCommand() *cli.Command {
	return &cli.Command{
		Name:  "conflicts",
		Usage: "list deliveries that reused a known key with another payload, newest first",
		Flags: []cli.Flag{storeFlag(), jsonFlag(),
			&cli.StringFlag{Name: "sender", EnvVars: []string{"HOOKONCE_SENDER"}, Usage: "only this sender"},
			keyPartFlag(),
			&cli.IntFlag{Name: "limit", EnvVars: []string{"HOOKONCE_LIMIT"}, Value: 50, Usage: "at most this many"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cli.Exit("usage: hookonce conflicts [--store DSN] [--json] [--sender S] [--key K] [--limit N]", exitUsage)
			}
			if c.Int("limit") < 1 {
				return cli.Exit("--limit: want a positive number", exitUsage)
			}
			return withStore(c, readOnly, func(ctx context.Context, s dedupe.Store) error {
				cs, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: c.String("sender"), KeyPart: c.String("key"), Limit: c.Int("limit")})
				if err != nil {
					return cli.Exit(err.Error(), exitRuntime)
				}
				if c.Bool("json") {
					out := make([]view.ConflictJSON, 0, len(cs))
					for _, cf := range cs {
						out = append(out, view.Conflict(cf))
					}
					return printJSON(c.App.Writer, out)
				}
				printConflictTable(c.App.Writer, cs, time.Now())
				return nil
			})
		},
	}
}

func printConflictTable(w io.Writer, cs []dedupe.Conflict, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SENDER\tKEY\tAGE\tSTORED\tRECEIVED\tCHANGED\tID\tANSWERED\tACCEPT")
	why := map[string]bool{}
	for _, cf := range cs {
		changed := "-"
		if len(cf.ChangedPaths) > 0 {
			changed = strings.Join(cf.ChangedPaths, ",")
			if cf.DiffKind == dedupe.DiffForm {
				changed = "form:" + changed
			}
		}
		accept := "yes"
		switch {
		case cf.Accepted():
			accept = fmt.Sprintf("accepted %s ago by %s as %s", admin.Age(now, cf.AcceptedAt), cf.AcceptedBy, cf.AcceptedKey())
		case cf.Acceptable() != nil:
			accept = "no: " + shortRefusal(cf)
			why[cf.Acceptable().Error()] = true
		}
		// How the sender was answered: refused (the conflict status), or
		// with the original's answer (changed_payload: duplicate).
		answered := "refused"
		switch {
		case cf.Shadow:
			answered = "forwarded (shadow)"
		case cf.AnsweredDuplicate:
			answered = "as duplicate"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cf.Sender, cf.Key, admin.Age(now, cf.ReceivedAt),
			view.ShortHash(cf.StoredHash), view.ShortHash(cf.ReceivedHash), changed, cf.ID, answered, accept)
	}
	tw.Flush()
	for _, reason := range slices.Sorted(maps.Keys(why)) {
		fmt.Fprintln(w, "not accepted:", reason)
	}
}

// shortRefusal is why a conflict cannot be accepted, in a table's words.
func shortRefusal(cf dedupe.Conflict) string {
	switch {
	case cf.Shadow:
		return "shadow mode"
	case cf.Request == nil || cf.Body == nil:
		return "payload not kept"
	case cf.BodyTruncated:
		return "payload cut short"
	}
	return "see --json"
}

func releaseCommand() *cli.Command {
	return &cli.Command{
		Name:      "release",
		Usage:     "free a stuck claim (processing or unknown) so the next delivery runs the site's handler; the record stays, released, with its history",
		ArgsUsage: "SENDER KEY",
		Flags:     []cli.Flag{storeFlag(), jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("usage: hookonce release [--store DSN] SENDER KEY", exitUsage)
			}
			sender, key := c.Args().Get(0), c.Args().Get(1)
			return withStore(c, readWrite, func(ctx context.Context, s dedupe.Store) error {
				// The record stays, released, with its attempts and the
				// operator's: an event whose sender has given up is still
				// listed as unretried, not gone.
				was, err := s.Free(ctx, sender, key, dedupe.OperatorRelease(time.Now()))
				if errors.Is(err, dedupe.ErrNotFound) {
					return cli.Exit(fmt.Sprintf("no record for sender %q key %q", sender, key), exitNotFound)
				}
				if err != nil {
					return cli.Exit(err.Error(), exitRuntime)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, map[string]any{"sender": sender, "key": key, "released": true, "state": was})
				}
				fmt.Fprintf(c.App.Writer, "released %s/%s (was %s)\n", sender, key, was)
				if was == dedupe.StateDone {
					fmt.Fprintln(c.App.ErrWriter, "note: the record was done; the next delivery of this event runs the site's handler again")
				}
				return nil
			})
		},
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
