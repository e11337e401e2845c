package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check refuses ack: durable where hookonce cannot build the sender's
// success answer from the request (exit 2, the file, sender and field
// named), takes it with ack_answer, and warns for a payment sender.
func TestCheckDurableAck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("CHECK_ACK_PASS2", "robo-password-2")
	refused := write("refused.yaml", `upstream: http://127.0.0.1:8000
senders:
  - name: bitrix-sale
    match: { path: /bitrix/tools/sale_ps_result.php }
    key: [ { form: ORDER_ID } ]
    ack: durable
    success: { body_matches: "^OK" }
`)
	_, stderr, code := hookonce(t, "check", "--config", refused)
	if code != 2 || !strings.Contains(stderr, refused) || !strings.Contains(stderr, `sender "bitrix-sale"`) ||
		!strings.Contains(stderr, "field ack") || !strings.Contains(stderr, "ack_answer") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	taken := write("taken.yaml", strings.Replace(string(must(os.ReadFile(refused))), "ack: durable", "ack: durable\n    ack_answer: { status: 200, body: OK }", 1))
	if stdout, stderr, code := hookonce(t, "check", "--config", taken); code != 0 {
		t.Fatalf("with ack_answer: exit %d\n%s%s", code, stdout, stderr)
	}
	robo := write("robo.yaml", `upstream: http://127.0.0.1:8000
senders:
  - name: robokassa
    preset: robokassa
    match: { path: /bitrix/tools/sale_ps_result.php }
    signature: { secret_env: CHECK_ACK_PASS2 }
    ack: durable
`)
	_, stderr, code = hookonce(t, "check", "--config", robo)
	if code != 0 || !strings.Contains(stderr, "warning: ") || !strings.Contains(stderr, "before the shop has applied the payment") {
		t.Fatalf("payment sender: exit %d, stderr:\n%s", code, stderr)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
