package cli

import (
	"fmt"
	"strings"

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
