package main

import (
	"strings"
	"testing"
)

// README, "Configuration": every flag also reads an env var HOOKONCE_<FLAG>.
func TestEveryFlagHasItsEnvVar(t *testing.T) {
	for _, cmd := range newApp().Commands {
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			want := "HOOKONCE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			ev, ok := f.(interface{ GetEnvVars() []string })
			if !ok {
				t.Errorf("%s --%s: flag type %T has no env vars", cmd.Name, name, f)
				continue
			}
			found := false
			for _, e := range ev.GetEnvVars() {
				found = found || e == want
			}
			if !found {
				t.Errorf("%s --%s: reads %v, want %s", cmd.Name, name, ev.GetEnvVars(), want)
			}
		}
	}
}
