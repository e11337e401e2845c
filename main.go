// Command hookonce is a reverse-proxy sidecar that makes webhook delivery
// idempotent for a site that was never written for it. The commands live
// in internal/cli.
package main

import (
	"os"

	"github.com/hookonce/hookonce/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(cli.Run(version, os.Args))
}
