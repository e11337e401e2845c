// hookonce lookup: one record and the answer stored for it.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
)

func lookupCommand() *cli.Command {
	return &cli.Command{
		Name:      "lookup",
		Usage:     "show one record and the answer stored for it",
		ArgsUsage: "SENDER KEY",
		Flags:     []cli.Flag{storeFlag(), jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("usage: hookonce lookup [--store DSN] [--json] SENDER KEY", exitUsage)
			}
			sender, key := c.Args().Get(0), c.Args().Get(1)
			return withStore(c, readOnly, func(ctx context.Context, s dedupe.Store) error {
				rec, err := s.Get(ctx, sender, key)
				if errors.Is(err, dedupe.ErrNotFound) {
					return cli.Exit(fmt.Sprintf("no record for sender %q key %q", sender, key), exitNotFound)
				}
				if err != nil {
					return cli.Exit(err.Error(), exitRuntime)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, view.Record(rec))
				}
				printRecord(c.App.Writer, rec)
				return nil
			})
		},
	}
}

func printRecord(w io.Writer, r dedupe.Record) {
	j := view.Record(r)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	row("sender", j.Sender)
	row("key", j.Key)
	row("state", view.OwedState(r))
	if r.Pending != nil {
		row("owed_since", j.Pending.Since.Format(time.RFC3339)+" (the sender was answered then)")
		row("owed", view.PendingText(r.Pending, time.Now()))
	}
	row("payload_sha256", j.PayloadSHA256)
	row("received_at", j.ReceivedAt.Format(time.RFC3339))
	if j.CompletedAt != nil {
		row("completed_at", j.CompletedAt.Format(time.RFC3339))
	}
	if j.LeaseUntil != nil {
		lease := j.LeaseUntil.Format(time.RFC3339)
		if r.LeaseExpired(time.Now()) {
			lease += " (expired: the next delivery takes the claim over)"
		}
		row("lease_until", lease)
	}
	row("expires_at", j.ExpiresAt.Format(time.RFC3339))
	row("hits", j.Hits)
	row("takeovers", j.Takeovers)
	row("request_kept", j.RequestKept)
	tw.Flush()
	if len(j.Attempts) > 0 {
		fmt.Fprintln(w, "attempts:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  AT\tBY\tOUTCOME\tSTATUS\tDURATION\tWAITED\tREPLICA")
		for _, a := range j.Attempts {
			by := a.By
			if by == dedupe.AttemptByDurable {
				by += " (durable try)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%dms\t%dms\t%s\n", a.At.Format(time.RFC3339), by, a.Outcome, a.Status, a.DurationMS, a.WaitMS, a.Replica)
		}
		tw.Flush()
	}
	if j.Response == nil {
		fmt.Fprintln(w, "response: (none yet)")
		return
	}
	fmt.Fprintf(w, "response: %d", j.Response.Status)
	if r.Pending != nil {
		fmt.Fprint(w, " (hookonce's answer to the sender; the site has not taken the delivery yet)")
	}
	if j.Response.Truncated {
		fmt.Fprint(w, " (body truncated when stored)")
	}
	fmt.Fprintln(w)
	for k, vs := range j.Response.Headers {
		fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(vs, ", "))
	}
	if j.Response.BodyText != nil {
		fmt.Fprintf(w, "\n%s\n", *j.Response.BodyText)
	} else {
		fmt.Fprintf(w, "\n(binary body, base64) %s\n", j.Response.BodyBase64)
	}
}
