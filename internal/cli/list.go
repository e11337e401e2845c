// hookonce list: the records of a sender, state or key part.

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

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy"
)

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list recent records, newest first",
		Flags: []cli.Flag{storeFlag(), jsonFlag(),
			&cli.StringFlag{Name: "sender", EnvVars: []string{"HOOKONCE_SENDER"}, Usage: "only this sender"},
			keyPartFlag(),
			&cli.StringFlag{Name: "status", Aliases: []string{"state"}, EnvVars: []string{"HOOKONCE_STATUS"}, Usage: "only this state: processing, done, unknown, released, unretried (released or unknown past the sender's retry window), or pending (a durable delivery still owed to the site)"},
			&cli.StringFlag{Name: "config", EnvVars: []string{"HOOKONCE_CONFIG"}, Usage: "with --status unretried: the senders' retry windows (default: ./hookonce.yaml, else /etc/hookonce/hookonce.yaml; without one: " + contract.DefaultUnretriedAfter.String() + " for all)"},
			&cli.IntFlag{Name: "limit", EnvVars: []string{"HOOKONCE_LIMIT"}, Value: 50, Usage: "at most this many"},
			&cli.StringFlag{Name: "value", EnvVars: []string{"HOOKONCE_VALUE"}, Usage: "only records whose delivery had this value in any field of its query or body (the shop's order number, an email), found by the records' field fingerprints; scans the newest " + fmt.Sprint(valueScan) + " records"},
			&cli.StringFlag{Name: "field", EnvVars: []string{"HOOKONCE_FIELD"}, Usage: "with --value: only in this field (a JSON path such as object.metadata.order_id, or a form or query field)"},
		},
		Action: func(c *cli.Context) error {
			if c.String("field") != "" && c.String("value") == "" {
				return cli.Exit("--field names where --value is looked for: give --value too", exitUsage)
			}
			status, err := dedupe.ParseStatus(c.String("status"))
			state, unretried := status.State, status.Unretried
			if err != nil {
				return cli.Exit(fmt.Sprintf("--status %q: %v", c.String("status"), err), exitUsage)
			}
			ct := contract.Empty()
			path := c.String("config")
			if unretried && path == "" {
				// The senders' retry windows from the config an operator's
				// commands find (operatorConfig).
				if path, err = operatorConfig(c); err != nil {
					return cli.Exit(err.Error(), exitUsage)
				}
			}
			if path != "" {
				var err error
				if ct, err = contract.Load(path); err != nil {
					return cli.Exit(err.Error(), exitUsage)
				}
			}
			return withStore(c, readOnly, func(ctx context.Context, s dedupe.Store) error {
				var recs []dedupe.Record
				if unretried {
					for _, st := range []dedupe.State{dedupe.StateReleased, dedupe.StateUnknown} {
						some, err := s.List(ctx, dedupe.ListFilter{Sender: c.String("sender"), KeyPart: c.String("key"), State: st, Limit: c.Int("limit")})
						if err != nil {
							return cli.Exit(err.Error(), exitRuntime)
						}
						for _, r := range some {
							after := contract.DefaultUnretriedAfter
							if snd := ct.Sender(r.Sender); snd != nil {
								after = snd.UnretriedAfter()
							}
							if proxy.IsUnretried(r, after, time.Now()) {
								recs = append(recs, r)
							}
						}
					}
				} else if v := c.String("value"); v != "" {
					if recs, err = findByValue(ctx, s, dedupe.ListFilter{Sender: c.String("sender"), KeyPart: c.String("key"), State: state, Pending: status.Pending},
						c.String("field"), v, c.Int("limit")); err != nil {
						return err
					}
				} else {
					var err error
					recs, err = s.List(ctx, dedupe.ListFilter{Sender: c.String("sender"), KeyPart: c.String("key"), State: state, Pending: status.Pending, Limit: c.Int("limit")})
					if err != nil {
						return cli.Exit(err.Error(), exitRuntime)
					}
				}
				if c.Bool("json") {
					out := make([]view.RecordJSON, 0, len(recs))
					for _, r := range recs {
						out = append(out, view.Record(r))
					}
					return printJSON(c.App.Writer, out)
				}
				printRecordTable(c.App.Writer, recs, time.Now())
				return nil
			})
		},
	}
}

func printRecordTable(w io.Writer, recs []dedupe.Record, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SENDER\tKEY\tSTATE\tSTATUS\tAGE\tHITS\tTAKEOVERS\tATTEMPTS")
	for _, r := range recs {
		status := "-"
		if r.Response != nil {
			status = fmt.Sprint(r.Response.Status)
		} else if a := r.LastAttempt(); a.Status != 0 {
			status = fmt.Sprintf("(%d)", a.Status)
		}
		state := view.OwedState(r)
		if p := r.Pending; p != nil {
			state += " (" + owedShort(p, now) + ")"
		} else if r.LeaseExpired(now) {
			state += " (lease expired)"
		} else if r.State == dedupe.StateProcessing && !r.LeaseUntil.IsZero() {
			state += " (lease " + admin.Age(r.LeaseUntil, now) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.Sender, r.Key, state, status, admin.Age(now, r.ReceivedAt), r.Hits, r.Takeovers, len(r.Attempts))
	}
	tw.Flush()
}

// owedShort is an owed delivery in a table cell: its failed tries and
// whether a try holds it now, or when the next is due.
func owedShort(p *dedupe.Pending, now time.Time) string {
	var parts []string
	if f := view.FailedTries(p); f != "" {
		parts = append(parts, f)
	}
	switch {
	case view.PendingHeld(p, now):
		parts = append(parts, "trying now")
	case !p.NextAt.After(now):
		parts = append(parts, "next try due now")
	default:
		parts = append(parts, "next try in "+admin.Age(p.NextAt, now))
	}
	return strings.Join(parts, ", ")
}

// valueScan bounds the records list --value reads (newest first).
const valueScan = 10000

// findByValue is list --value: the newest records (at most limit, among
// the newest valueScan that f keeps) whose fingerprint holds value, in
// field or in any field, digested with the install's key as the proxy
// digested the deliveries. The value never leaves this process.
func findByValue(ctx context.Context, s dedupe.Store, f dedupe.ListFilter, field, value string, limit int) ([]dedupe.Record, error) {
	k, ok := s.(dedupe.FingerprintKeyer)
	if !ok {
		return nil, cli.Exit("this store keeps no field fingerprints", exitRuntime)
	}
	key, err := k.FingerprintKey(ctx)
	if errors.Is(err, dedupe.ErrNotFound) {
		return nil, nil // no key made yet: no record has a fingerprint
	}
	if err != nil {
		return nil, cli.Exit(err.Error(), exitRuntime)
	}
	f.Limit = valueScan
	all, err := s.List(ctx, f)
	if err != nil {
		return nil, cli.Exit(err.Error(), exitRuntime)
	}
	var out []dedupe.Record
	for _, r := range all {
		if len(out) >= limit {
			break
		}
		if dedupe.FingerprintHas(r.Fingerprint, key, field, value) {
			out = append(out, r)
		}
	}
	return out, nil
}
