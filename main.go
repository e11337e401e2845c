// Command hookonce is a reverse-proxy sidecar that makes webhook delivery
// idempotent for a site that was never written for it. This file only wires
// the command line to the packages.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Exit codes (README, "Configuration").
const (
	exitOK       = 0
	exitRuntime  = 1
	exitUsage    = 2
	exitNotFound = 3
)

func newApp() *cli.App {
	return &cli.App{
		Name:    "hookonce",
		Usage:   "one execution of your site's webhook handler per business event",
		Version: version,
		Commands: []*cli.Command{
			serveCommand(),
			lookupCommand(),
			listCommand(),
			conflictsCommand(),
			releaseCommand(),
			redeliverCommand(),
			purgeCommand(),
			migrateCommand(),
			checkCommand(),
			versionCommand(),
			probeCommand(),
			healthCommand(),
		},
		// Exit codes are decided in main, not inside the library.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit("usage: "+err.Error(), exitUsage)
		},
	}
}

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	err := newApp().Run(args)
	if err == nil {
		return exitOK
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "hookonce:", msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "hookonce:", err)
	return exitUsage
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version",
		Action: func(c *cli.Context) error {
			fmt.Fprintln(c.App.Writer, "hookonce", version)
			return nil
		},
	}
}
