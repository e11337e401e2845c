package contract_test

import "testing"

// The README points new users at this file: it must stay valid.
func TestExampleConfigIsValid(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "change-me") // the example's secrets
	t.Setenv("TBANK_PASSWORD", "change-me")
	c := mustLoad(t, "../hookonce.example.yaml")
	if len(c.Senders) == 0 {
		t.Fatal("example config has no senders")
	}
}
