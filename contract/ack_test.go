package contract_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

func parseAck(t *testing.T, sender string) (*contract.Contract, error) {
	t.Helper()
	t.Setenv("ACK_SECRET", "s3cret-word")
	return contract.Parse([]byte("senders:\n"+sender), "ack.yaml")
}

func mustAck(t *testing.T, sender string) *contract.Sender {
	t.Helper()
	c, err := parseAck(t, sender)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c.Senders[0]
}

// TestAckAnswerFromSuccessRule: a durable sender is answered what the
// site answers when it succeeds, built from the request alone.
func TestAckAnswerFromSuccessRule(t *testing.T) {
	s := mustAck(t, `  - name: robokassa
    preset: robokassa
    match: { path: /result.php }
    signature: { secret_env: ACK_SECRET }
    ack: durable
`)
	if !s.Durable() || s.RetryFor != contract.DefaultRetryFor || s.AckBacklog != contract.DefaultAckBacklog || !s.StoreRequestBody {
		t.Fatalf("durable sender = %+v", s)
	}
	st, h, body := s.Acknowledgement(delivery(t, "POST", "/result.php", "application/x-www-form-urlencoded", "OutSum=10.00&InvId=77&SignatureValue=x", ""))
	if st != 200 || string(body) != "OK77" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("answer = %d %v %q, want 200 OK77", st, h, body)
	}

	s = mustAck(t, `  - name: crm
    match: { path: /crm }
    key: [{ body: id }]
    ack: durable
    success: { status: "201", json: { result: ok, data.accepted: true } }
`)
	st, h, body = s.Acknowledgement(delivery(t, "POST", "/crm", "application/json", `{"id":1}`, ""))
	if st != 201 || string(body) != `{"data":{"accepted":true},"result":"ok"}` || h.Get("Content-Type") != "application/json" {
		t.Fatalf("json answer = %d %v %s", st, h, body)
	}

	s = mustAck(t, `  - name: plain
    match: { path: /p }
    key: [{ body: id }]
    ack: durable
`)
	if st, _, body := s.Acknowledgement(delivery(t, "POST", "/p", "application/json", `{"id":1}`, "")); st != 200 || len(body) != 0 {
		t.Fatalf("status-only answer = %d %q", st, body)
	}

	s = mustAck(t, `  - name: own
    match: { path: /o }
    key: [{ body: id }]
    ack: durable
    ack_answer: { status: 202, body: "accepted {body.id}" }
    success: { body_matches: "^done" }
`)
	if st, _, body := s.Acknowledgement(delivery(t, "POST", "/o", "application/json", `{"id":"a7"}`, "")); st != 202 || string(body) != "accepted a7" {
		t.Fatalf("ack_answer = %d %q", st, body)
	}
}

// TestAckRefusedWhenUncomputable: check (and serve) refuse a durable
// sender whose success answer cannot be built from the request, naming
// the sender and the field; ack_answer lifts it.
func TestAckRefusedWhenUncomputable(t *testing.T) {
	for _, tc := range []struct{ name, sender, want string }{
		{"body_matches", `  - name: bx
    match: { path: /bx }
    key: [{ form: ORDER_ID }]
    ack: durable
    success: { body_matches: "^OK" }
`, `sender "bx": field ack: durable: hookonce answers the sender itself`},
		{"json pattern", `  - name: js
    match: { path: /js }
    key: [{ body: id }]
    ack: durable
    success: { json: { "items.#.ok": true } }
`, `is a pattern`},
		{"bad ack", `  - name: typo
    match: { path: /t }
    key: [{ body: id }]
    ack: durabel
`, `did you mean`},
		{"ack_answer 500", `  - name: st
    match: { path: /s }
    key: [{ body: id }]
    ack: durable
    ack_answer: { status: 500 }
`, `ack_answer.status`},
		{"keeps no request", `  - name: nokeep
    match: { path: /n }
    key: [{ body: id }]
    ack: durable
    store_request_body: false
`, `store_request_body`},
		{"short retry_for", `  - name: rf
    match: { path: /r }
    key: [{ body: id }]
    ack: durable
    retry_for: 10s
`, `retry_for`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseAck(t, tc.sender)
			var ce *contract.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a ConfigError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ack.yaml") {
				t.Fatalf("err = %v, want it to name the file and %q", err, tc.want)
			}
		})
	}
}

// TestAckWarnings: check warns that a payment is answered before the
// shop applied it, and that a late delivery meets a site's own timestamp
// check.
func TestAckWarnings(t *testing.T) {
	c, err := parseAck(t, `  - name: stripe
    preset: stripe
    match: { path: /stripe }
    signature: { secret_env: ACK_SECRET }
    ack: durable
    ack_after: 2s
`)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(c.Warnings, "\n")
	if !strings.Contains(all, "before the shop has applied the payment") || !strings.Contains(all, "within 5m0s") {
		t.Fatalf("warnings = %s", all)
	}
	if s := c.Senders[0]; s.AckAfter != 2*time.Second {
		t.Fatalf("ack_after = %v", s.AckAfter)
	}
	c, err = parseAck(t, `  - name: site
    preset: stripe
    match: { path: /stripe }
    signature: { secret_env: ACK_SECRET }
`)
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(c.Warnings, "\n"); strings.Contains(all, "durable") {
		t.Fatalf("ack: site warned: %s", all)
	}
}
