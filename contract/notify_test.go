package contract_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

func envOf(m map[string]string) contract.LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// notify: is decoded with its secrets from the environment, and every
// problem is named by field and line, never quoting a secret.
func TestNotifyBlock(t *testing.T) {
	env := envOf(map[string]string{"TG": "123:AAsecret-token", "WH": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "PW": "pass-word"})
	c, err := contract.ParseEnv([]byte(`
notify:
  telegram: { token_env: TG, chat_id: -1001234567890 }
  email: { smtp: "smtp.example.com:587", from: a@shop.example, to: [b@shop.example], password_env: PW }
  webhook: { url: "https://ops.example/h", secret_env: WH }
  digest_wait: 5s
  refusals: { count: 3, within: 1m }
`), "h.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Notify
	if n == nil || n.Telegram.Token() != "123:AAsecret-token" || n.Telegram.ChatID != "-1001234567890" || n.Email.Password() != "pass-word" ||
		n.Email.PlainText || len(n.Webhook.Secret()) == 0 || n.RefusalCount != 3 || n.DigestWait.Seconds() != 5 {
		t.Fatalf("notify = %+v", n)
	}
	if c, err := contract.ParseEnv([]byte("senders: []\n"), "h.yaml", env); err != nil || c.Notify != nil {
		t.Fatalf("no notify: block: %v %+v", err, c)
	}

	_, err = contract.ParseEnv([]byte(`
notify:
  telegram: { token_env: NOPE }
  email: { smtp: smtp.example.com, from: x, to: [], tls: maybe }
  webhook: { url: "ftp://x", secret_env: TG }
  queue: 0
`), "h.yaml", env)
	if err == nil {
		t.Fatal("a bad notify: block was taken")
	}
	msg := err.Error()
	for _, want := range []string{"notify.telegram.token_env", "NOPE is not set", "notify.telegram.chat_id", "notify.email.smtp", "notify.email.from",
		"notify.email.to", "notify.email.tls", "notify.webhook.url", "not a standard-webhooks secret", "notify.queue", "h.yaml:3: field notify.telegram.token_env"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the problems do not name %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "AAsecret") {
		t.Fatalf("a problem quotes the secret:\n%s", msg)
	}
	if _, err := contract.ParseEnv([]byte("notify:\n  telegramm: {}\n"), "h.yaml", env); err == nil || !strings.Contains(err.Error(), "telegram") {
		t.Fatalf("a misspelt channel: %v", err)
	}
}

// digest_wait: 0s means send at once, not notify's default wait.
func TestNotifyDigestWaitZero(t *testing.T) {
	env := envOf(map[string]string{"TG": "123:AAsecret-token"})
	c, err := contract.ParseEnv([]byte("notify:\n  telegram: { token_env: TG, chat_id: 1 }\n  digest_wait: 0s\n"), "h.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Notify.DigestWait; w <= 0 || w > time.Millisecond {
		t.Fatalf("digest_wait 0s = %v, want the shortest wait (send at once)", w)
	}
}
