package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckWooCommercePing: check says what the proxy does with
// WooCommerce's unsigned ping (answered 200 by hookonce, never
// forwarded), and that a ping-shaped body with more in it is judged as a
// delivery, refused without a signature.
func TestCheckWooCommercePing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WC_SECRET", "wc-secret")
	cfg := filepath.Join(dir, "hookonce.yaml")
	if err := os.WriteFile(cfg, []byte("upstream: http://127.0.0.1:9\nsenders:\n  - name: wc\n    preset: woocommerce\n"+
		"    match: { path: /wc/hook.php }\n    signature: { secret_env: WC_SECRET }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, body, want string
		code             int
	}{
		{"ping", "webhook_id=17", "sender: wc\nping: woocommerce ping sent when a webhook is saved", 0},
		{"more than a ping", "webhook_id=17&x=1", "sender: wc\n", 1},
	} {
		req := filepath.Join(dir, tt.name+".http")
		raw := "POST /wc/hook.php HTTP/1.1\nHost: shop\nUser-Agent: WooCommerce/9.4.2 Hookshot (WordPress/6.7)\n" +
			"Content-Type: application/x-www-form-urlencoded\n\n" + tt.body
		if err := os.WriteFile(req, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := hookonce(t, "check", "--config", cfg, "--request", req)
		if code != tt.code || !strings.HasPrefix(stdout, tt.want) {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.name, code, tt.code, stdout, stderr)
		}
		if tt.code == 0 && !strings.HasSuffix(stdout, "verdict: taken: answered 200 by hookonce itself; the site never sees it\n") {
			t.Errorf("%s: verdict:\n%s", tt.name, stdout)
		}
		if tt.code == 1 && !strings.HasSuffix(stdout, "verdict: refused 401: the signature does not hold\n") {
			t.Errorf("%s: verdict:\n%s", tt.name, stdout)
		}
	}
}
