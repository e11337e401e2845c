// hookonce conflicts: the changed payloads refused under a stored key.

package cli

import (
	"context"
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
