// hookonce release: an operator frees a held or stuck event.

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/dedupe"
)

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
