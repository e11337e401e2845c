// hookonce health: an admin listener's /healthz or /readyz, for container
// health checks.

package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"
)

// healthCommand is the container health check: the runtime image has no
// shell and no curl, so the binary checks itself.
func healthCommand() *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "exit 0 when the admin listener answers 200 (for container health checks); --ready asks /readyz and prints what it says",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", EnvVars: []string{"HOOKONCE_URL", "HOOKONCE_HEALTH_URL"}, Usage: "health endpoint (default: /healthz of the admin listener redeliver finds)"},
			&cli.BoolFlag{Name: "ready", EnvVars: []string{"HOOKONCE_READY"}, Usage: "ask /readyz (the store, and a report of the site) instead of /healthz, and print its answer"},
			&cli.DurationFlag{Name: "timeout", Value: 3 * time.Second, EnvVars: []string{"HOOKONCE_TIMEOUT"}, Usage: "give up after"},
		},
		Action: func(c *cli.Context) error {
			u := c.String("url")
			if u == "" {
				base, err := operatorAdmin(c)
				if err != nil {
					return cli.Exit("health: "+err.Error(), exitUsage)
				}
				u = base + "/healthz"
				if c.Bool("ready") {
					u = base + "/readyz"
				}
			}
			ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return cli.Exit("health: "+err.Error(), exitRuntime)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return cli.Exit("health: "+err.Error(), exitRuntime)
			}
			defer resp.Body.Close()
			if c.Bool("ready") {
				_, _ = io.Copy(c.App.Writer, io.LimitReader(resp.Body, 64<<10))
			}
			if resp.StatusCode != http.StatusOK {
				return cli.Exit(fmt.Sprintf("health: %s answered %d", u, resp.StatusCode), exitRuntime)
			}
			return nil
		},
	}
}
