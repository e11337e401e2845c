// Package cli is hookonce's command line: one file per command, the app
// that holds them, and Main, the serve command as a value that tests run
// in-process. Only package main imports it.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

// Exit codes (docs/configuration.md). exitCode is the one place that
// turns an error into one of them.
const (
	exitOK       = 0
	exitRuntime  = 1
	exitUsage    = 2
	exitNotFound = 3
)

// Run runs the command line args (args[0] is the program name) as build b
// of hookonce, printing errors to stderr, and returns the process's exit
// code.
func Run(b Build, args []string) int {
	return run(newBuildApp(b, os.Stdout, os.Stderr), args, os.Stderr)
}

func run(app *cli.App, args []string, stderr io.Writer) int {
	err := app.Run(args)
	code := exitCode(err)
	if err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(stderr, "hookonce:", msg)
		}
	}
	return code
}

// exitCode maps an error to the process's exit code: a command says what
// went wrong with cli.Exit (runtime 1, usage or config 2, not found 3); an
// error a command returns bare is a runtime failure; an error from before
// any command ran (a flag or env var that does not parse) is a usage error.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	var rf runtimeFailure
	if errors.As(err, &rf) {
		return exitRuntime
	}
	return exitUsage
}

// runtimeFailure marks an error a command's action returned without an
// exit code.
type runtimeFailure struct{ error }

func (r runtimeFailure) Unwrap() error { return r.error }

func newApp(version string, stdout, stderr io.Writer) *cli.App {
	return newBuildApp(Build{Version: version}, stdout, stderr)
}

func newBuildApp(b Build, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "hookonce",
		Usage:     "one execution of your site's webhook handler per business event",
		Version:   b.Version,
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			serveCommand(b),
			lookupCommand(),
			listCommand(),
			conflictsCommand(),
			releaseCommand(),
			redeliverCommand(),
			acceptCommand(),
			purgeCommand(),
			migrateCommand(),
			checkCommand(),
			versionCommand(b),
			probeCommand(),
			healthCommand(),
			readinessCommand(),
			notifyCommand(),
		},
		// Exit codes are decided by exitCode, not inside the library.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit("usage: "+err.Error(), exitUsage)
		},
	}
	for _, cmd := range app.Commands {
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			err := action(c)
			var ec cli.ExitCoder
			if err != nil && !errors.As(err, &ec) {
				return runtimeFailure{err}
			}
			return err
		}
	}
	return app
}
