// Command hookonce is a reverse-proxy sidecar that makes webhook delivery
// idempotent for a site that was never written for it. The commands live
// in internal/cli.
package main

import (
	"os"

	"github.com/hookonce/hookonce/internal/cli"
)

// version and revision may be stamped at build time:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.revision=$(git rev-parse HEAD)"
//
// Unstamped, `hookonce version` reports what Go recorded in the binary: the
// module version and the git commit it was built from (cli.ReadBuild).
var version, revision string

func main() {
	os.Exit(cli.Run(cli.ReadBuild(version, revision), os.Args))
}
