package cli

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildFrom(t *testing.T) {
	vcs := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/hookonce/hookonce", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name              string
		version, revision string
		info              *debug.BuildInfo
		want              Build
	}{
		{"stamps win", "v1.2.3", "abc", vcs("v0.0.0-20260101000000-0123456789ab", "vcs.revision", sha), Build{"v1.2.3", "abc"}},
		{"stamped version, revision from git", "v1.2.3", "", vcs("(devel)", "vcs.revision", sha, "vcs.modified", "false"), Build{"v1.2.3", sha}},
		{"go install @version", "", "", vcs("v1.4.0"), Build{"v1.4.0", ""}},
		{"checkout build", "", "", vcs("v0.0.0-20260101000000-0123456789ab+dirty", "vcs.revision", sha, "vcs.modified", "true"),
			Build{"v0.0.0-20260101000000-0123456789ab+dirty", sha + "-modified"}},
		{"devel with a revision", "", "", vcs("(devel)", "vcs.revision", sha), Build{"dev", sha}},
		{"nothing known", "", "", vcs("(devel)"), Build{"dev", ""}},
		{"no build info", "", "", nil, Build{"dev", ""}},
	} {
		if got := buildFrom(c.version, c.revision, c.info); got != c.want {
			t.Errorf("%s: buildFrom = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	for _, c := range []struct {
		b    Build
		want string
	}{
		{Build{"v1.2.3", "abc-modified"}, "hookonce v1.2.3\nrevision abc-modified\n"},
		{Build{"v1.2.3", ""}, "hookonce v1.2.3\n"},
	} {
		var out strings.Builder
		if code := run(newBuildApp(c.b, &out, &out), []string{"hookonce", "version"}, &out); code != exitOK || out.String() != c.want {
			t.Errorf("version of %+v: exit %d %q, want %q", c.b, code, out.String(), c.want)
		}
	}
}

func TestBuildInfoCollector(t *testing.T) {
	for _, c := range []struct {
		b             Build
		labelRevision string
	}{
		{Build{"v1.2.3", "abc"}, "abc"},
		{Build{"dev", ""}, "unknown"},
	} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c.b.collector())
		want := `# HELP hookonce_build_info The build this hookonce runs: always 1, with its version and revision (commit) as labels.
# TYPE hookonce_build_info gauge
hookonce_build_info{revision="` + c.labelRevision + `",version="` + c.b.Version + `"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
			t.Errorf("%+v: %v", c.b, err)
		}
	}
}
