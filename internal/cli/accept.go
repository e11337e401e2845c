package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/user"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/admin"
)

// acceptCommand asks a running hookonce serve (through its admin API) to
// accept a conflict: the refused payload goes to the site once, as an
// event of its own (KEY:accepted-ID), through the redelivery path.
func acceptCommand() *cli.Command {
	return &cli.Command{
		Name: "accept",
		Usage: "send the refused payload of a conflict to the site once, as an event of its own " +
			"(Idempotency-Key SENDER:KEY:accepted-ID), through the running serve; needs store_request_body",
		ArgsUsage: "SENDER KEY",
		Flags: append(adminFlags(),
			&cli.StringFlag{Name: "id", EnvVars: []string{"HOOKONCE_ID"}, Usage: "the conflict to accept, by its ID (hookonce conflicts); default: the newest of the key"},
			&cli.StringFlag{Name: "by", EnvVars: []string{"HOOKONCE_BY"}, Usage: "who accepts, as recorded with the conflict (default: user@host)"},
			jsonFlag(),
		),
		Action: runAccept,
	}
}

func runAccept(c *cli.Context) error {
	const usage = "usage: hookonce accept [--admin URL] [--id ID] SENDER KEY"
	if c.NArg() != 2 {
		return cli.Exit(usage, exitUsage)
	}
	sender, key := c.Args().Get(0), c.Args().Get(1)
	api, err := newAdminClient(c)
	if err != nil {
		return err
	}
	by := c.String("by")
	if by == "" {
		by = operatorName()
	}
	res, err := api.accept(c.Context, sender, key, c.String("id"), by)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			return cli.Exit(fmt.Sprintf("%s %s: %v (hookonce conflicts --sender %s --key %s lists them)", sender, key, err, sender, key), exitNotFound)
		}
		return cli.Exit(fmt.Sprintf("%s %s: not accepted: %v", sender, key, err), exitRuntime)
	}
	if c.Bool("json") {
		if err := printJSON(c.App.Writer, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.App.Writer, "accepted %s %s (conflict %s) by %s: sent to the site as %s %s: %s (status %d)\n",
			sender, key, res.Conflict.ID, res.Conflict.AcceptedBy, sender, res.Conflict.AcceptedKey, res.Outcome, res.Status)
	}
	if res.Outcome != "processed" && res.Outcome != "duplicate" {
		return cli.Exit(fmt.Sprintf("the site did not complete the accepted payload (%s, status %d): see hookonce lookup %s %s; "+
			"hookonce redeliver %s %s sends it again", res.Outcome, res.Status, sender, res.Conflict.AcceptedKey, sender, res.Conflict.AcceptedKey), exitRuntime)
	}
	return nil
}

// operatorName is who runs the command, as user@host.
func operatorName() string {
	name := "operator"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if host, err := os.Hostname(); err == nil {
		name += "@" + host
	}
	return name
}

func (a adminClient) accept(ctx context.Context, sender, key, id, by string) (admin.Acceptance, error) {
	q := url.Values{"by": {by}}
	if id != "" {
		q.Set("id", id)
	}
	var out admin.Acceptance
	return out, a.do(ctx, http.MethodPost, "/v1/accept/"+url.PathEscape(sender)+"/"+url.PathEscape(key)+"?"+q.Encode(), &out)
}
