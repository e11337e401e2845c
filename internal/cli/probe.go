package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/probe"
)

func probeCommand() *cli.Command {
	return &cli.Command{
		Name:  "probe",
		Usage: "run the acceptance protocol against a live deployment's sandbox sender",
		Description: "Sends a new event, its exact repeat, the same id with another body and N parallel\n" +
			"deliveries of one new id, as the --scheme's sender sends them, and prints check,\n" +
			"expected, observed, PASS/FAIL. A refusal (4xx/5xx) where the site's answer is due fails.\n" +
			"With --admin it also counts the store's records per phase and releases the test\n" +
			"events (keys start with --prefix) afterwards. Exit 1 when any check fails.\n" +
			"Point it at a sandbox sender only: each test event reaches the site once.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "target", EnvVars: []string{"HOOKONCE_TARGET"}, Usage: "URL senders reach, e.g. https://shop.example/bitrix/tools/stripe.php"},
			&cli.StringFlag{Name: "path", EnvVars: []string{"HOOKONCE_PATH"}, Usage: "replace the target's path with this webhook path"},
			&cli.StringFlag{Name: "sender", EnvVars: []string{"HOOKONCE_SENDER"}, Usage: "the sender's name in hookonce.yaml"},
			&cli.StringFlag{Name: "key-header", EnvVars: []string{"HOOKONCE_KEY_HEADER"}, Usage: "send the event id in this header (default: the JSON body field --key-field)"},
			&cli.StringFlag{Name: "key-field", EnvVars: []string{"HOOKONCE_KEY_FIELD"}, Usage: "JSON body field (dotted path) that carries the event id (default id, or the --scheme's own)"},
			&cli.StringFlag{Name: "secret", EnvVars: []string{"HOOKONCE_SECRET"}, Usage: "the sender's secret, to sign deliveries as it does (needs --scheme)"},
			&cli.StringFlag{Name: "scheme", Aliases: []string{"preset"}, EnvVars: []string{"HOOKONCE_SCHEME"}, Usage: "the sender's preset, sent and signed as that sender does: " +
				strings.Join(probe.SchemeNames(), ", ") + " (hmac-sha256: hex in X-Signature); yookassa and woocommerce are refused (see docs/deployment.md)"},
			&cli.StringFlag{Name: "admin", EnvVars: []string{"HOOKONCE_ADMIN"}, Usage: "admin listener base URL, e.g. http://127.0.0.1:9090"},
			&cli.StringFlag{Name: "admin-token", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN"}, Usage: "bearer token for the admin API (prefer --admin-token-file; on an installed host the host's token is found)"},
			&cli.StringFlag{Name: "admin-token-file", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN_FILE"}, Usage: "file holding the admin token"},
			&cli.IntFlag{Name: "parallel", Value: probe.DefaultParallel, EnvVars: []string{"HOOKONCE_PARALLEL"}, Usage: "parallel deliveries of one new id"},
			&cli.StringFlag{Name: "prefix", Value: probe.DefaultPrefix, EnvVars: []string{"HOOKONCE_PREFIX"}, Usage: "test event key prefix"},
			&cli.DurationFlag{Name: "timeout", Value: probe.DefaultTimeout, EnvVars: []string{"HOOKONCE_TIMEOUT"}, Usage: "per request"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("usage: hookonce probe --target URL --sender NAME [flags]", exitUsage)
			}
			cfg := probe.Config{
				Target: c.String("target"), Path: c.String("path"), Sender: c.String("sender"),
				KeyHeader: c.String("key-header"), KeyField: c.String("key-field"),
				Secret: c.String("secret"), Scheme: c.String("scheme"),
				Admin: c.String("admin"), AdminToken: c.String("admin-token"),
				Parallel: c.Int("parallel"), Prefix: c.String("prefix"), Timeout: c.Duration("timeout"),
			}
			if cfg.Admin != "" {
				// The token as redeliver finds it: flags, environment, the host's file.
				token, err := operatorAdminToken(c)
				if err != nil {
					return cli.Exit("probe: "+err.Error(), exitUsage)
				}
				cfg.AdminToken = token
			}
			if cfg.Secret != "" && cfg.Scheme == "" {
				return cli.Exit("probe: --secret needs --scheme (the sender's preset)", exitUsage)
			}
			if err := cfg.Validate(); err != nil {
				return cli.Exit("probe: "+err.Error(), exitUsage)
			}
			res, err := probe.Run(c.Context, cfg)
			if err != nil {
				return cli.Exit("probe: "+err.Error(), exitUsage)
			}
			res.Print(c.App.Writer)
			if len(res.Keys) > 0 && !res.Released {
				fmt.Fprintf(c.App.Writer, "test events not released (no --admin, or release failed): sender %q keys %s\n",
					cfg.Sender, strings.Join(res.Keys, " "))
			}
			if !res.Passed() {
				return cli.Exit("", exitRuntime)
			}
			return nil
		},
	}
}

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
