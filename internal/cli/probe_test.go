package cli

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// TestProbeExitCodes: `hookonce probe` for a form-signed preset exits 0
// against a hookonce whose shop answers as Robokassa's handler does, 1
// when the deployment refuses (a wrong secret, a handler answering 403),
// and 2 for a preset it cannot test, naming it. The shop counts the
// executions: a refused probe ran nothing there.
func TestProbeExitCodes(t *testing.T) {
	t.Setenv("ROBO_PROBE_SECRET", "robo-pass-2")
	store := servetest.OpenStore(t, "sqlite:"+filepath.Join(t.TempDir(), "hookonce.db"))
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/forbidden.php" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_ = r.ParseForm()
		_, _ = io.WriteString(w, "OK"+r.PostForm.Get("InvId"))
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - { name: robokassa, preset: robokassa, match: { path: /robokassa.php }, signature: { secret_env: ROBO_PROBE_SECRET } }
  - { name: locked, preset: robokassa, match: { path: /forbidden.php }, signature: { secret_env: ROBO_PROBE_SECRET } }
`)
	for _, tc := range []struct {
		name, path, sender, scheme, secret string
		code                               int
		want                               string
		runs                               int // the shop's executions this probe adds
	}{
		{"Passes", "/robokassa.php", "robokassa", "robokassa", "robo-pass-2", 0, "0 failed", 2},
		{"WrongSecret", "/robokassa.php", "robokassa", "robokassa", "wrong", 1, "FAIL", 0},
		{"Forbidden", "/forbidden.php", "locked", "robokassa", "robo-pass-2", 1, "FAIL", 8},
		{"Refused", "/robokassa.php", "robokassa", "yookassa", "x", 2, "yookassa", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := site.Total()
			out, errOut, code := hookonce(t, "probe", "--target", px.URL, "--path", tc.path, "--sender", tc.sender,
				"--preset", tc.scheme, "--secret", tc.secret, "--parallel", "5")
			t.Logf("%s%s", out, errOut)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want %d with %q", code, tc.code, tc.want)
			}
			if tc.code == 1 && strings.Contains(out, "new event  ") && !strings.Contains(out, "FAIL") {
				t.Error("a refusing deployment printed no FAIL")
			}
			if n := site.Total() - before; n != tc.runs {
				t.Errorf("the shop ran %d times, want %d", n, tc.runs)
			}
			if strings.Contains(out+errOut, "robo-pass-2") {
				t.Error("the output holds the secret")
			}
		})
	}
}
