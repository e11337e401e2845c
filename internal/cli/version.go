package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
)

// Build is the version and revision hookonce was built from, as `hookonce
// version` prints them and hookonce_build_info carries them.
type Build struct {
	Version  string // a release tag (v1.2.3), a Go pseudo-version, or "dev"
	Revision string // the commit; "-modified" when built from a changed tree; "" when unknown
}

// ReadBuild returns the build's version and revision: the ones stamped with
// -ldflags "-X main.version=… -X main.revision=…" when given, else what Go
// recorded in the binary (the module version of `go install …@v1.2.3`, or
// the pseudo-version and VCS revision of a build in a git checkout).
func ReadBuild(version, revision string) Build {
	info, _ := debug.ReadBuildInfo()
	return buildFrom(version, revision, info)
}

func buildFrom(version, revision string, info *debug.BuildInfo) Build {
	b := Build{Version: version, Revision: revision}
	if info != nil {
		if v := info.Main.Version; b.Version == "" && v != "" && v != "(devel)" {
			b.Version = v
		}
		if b.Revision == "" {
			var rev, modified string
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" && modified == "true" {
				rev += "-modified"
			}
			b.Revision = rev
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}

// collector is hookonce_build_info{version,revision}, always 1, for
// dashboards that show which build each instance runs.
func (b Build) collector() prometheus.Collector {
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "hookonce_build_info",
		Help:        "The build this hookonce runs: always 1, with its version and revision (commit) as labels.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": rev},
	}, func() float64 { return 1 })
}

func versionCommand(b Build) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version and the revision (commit) this binary was built from",
		Action: func(c *cli.Context) error {
			fmt.Fprintln(c.App.Writer, "hookonce", b.Version)
			if b.Revision != "" {
				fmt.Fprintln(c.App.Writer, "revision", b.Revision)
			}
			return nil
		},
	}
}
