package contract_test

// Paddle's official Node SDK (@paddle/paddle-node-sdk, in
// testdata/oracle-paddle) as the oracle for the paddle preset's
// signature: for generated deliveries (valid, tampered, wrong secret,
// changed ts, stale, malformed), hookonce's verdict must equal the SDK's
// paddle.webhooks.isSignatureValid. The sender here takes the SDK's 5 s
// tolerance. Two cases are left out on purpose, as hookonce's choices:
// several h1 (the SDK checks only the last one; hookonce accepts any, for
// a secret's rotation) and upper-case hex (Paddle sends lower case; the
// SDK compares the text, hookonce the bytes).

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

const paddleOracleDir = "testdata/oracle-paddle"

func paddleOracle(t *testing.T, cases []map[string]any) []bool {
	t.Helper()
	const setup = "(cd contract/testdata/oracle-paddle && npm ci --no-audit --no-fund)"
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "Paddle SDK oracle unavailable: node is not installed", setup)
	} else if _, err := os.Stat(filepath.Join(paddleOracleDir, "node_modules")); err != nil {
		testenv.Missing(t, "Paddle SDK oracle unavailable: run "+setup, setup)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "oracle.js")
	cmd.Dir = paddleOracleDir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node oracle.js: %v\n%s", err, stderr.String())
	}
	var verdicts []bool
	if err := json.Unmarshal(out, &verdicts); err != nil || len(verdicts) != len(cases) {
		t.Fatalf("oracle answered %q (%v), want %d verdicts", out, err, len(cases))
	}
	return verdicts
}

func TestPaddleSDKOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 43))
	now := time.Now()
	var cases []map[string]any
	var ours []error
	var what []string
	for i := range npmOracleRounds {
		secret := "pdl_ntfset_" + lowerWord(r, 8+r.IntN(24))
		t.Setenv("HOOKONCE_ORACLE", secret)
		s := mustSender(t, "preset: paddle", "signature: {secret_env: HOOKONCE_ORACLE, tolerance: 5s}")
		body := `{"event_id":"evt_` + lowerWord(r, 10) + `","event_type":"transaction.completed","occurred_at":"2026-01-15T11:00:00Z","notification_id":"ntf_` +
			strconv.Itoa(i) + `","data":{"note":` + strconv.Quote(oracleText(r, r.IntN(40))) + `}}`
		ts := now.Unix()
		sigBody, sigSecret, sigTS := body, secret, ts
		kind := []string{"valid", "tampered body", "wrong secret", "ts changed", "stale", "truncated h1", "wrong h1 first", "no ts", "short h1"}[i%9]
		switch kind {
		case "tampered body":
			body = strings.Replace(body, "transaction.completed", "transaction.paid", 1)
		case "wrong secret":
			sigSecret = secret + "x"
		case "stale":
			ts, sigTS = now.Add(-time.Minute).Unix(), now.Add(-time.Minute).Unix()
		}
		h1 := paddleHex(sigSecret, sigTS, sigBody)
		header := "ts=" + strconv.FormatInt(ts, 10) + ";h1=" + h1
		switch kind {
		case "ts changed":
			header = "ts=" + strconv.FormatInt(ts-1, 10) + ";h1=" + h1
		case "truncated h1":
			header = "ts=" + strconv.FormatInt(ts, 10) + ";h1=" + h1[:62]
		case "wrong h1 first":
			header = "ts=" + strconv.FormatInt(ts, 10) + ";h1=" + paddleHex("other", ts, body) + ";h1=" + h1
		case "no ts":
			header = "h1=" + h1
		case "short h1":
			header = "ts=" + strconv.FormatInt(ts, 10) + ";h1=" + h1[:10]
		}
		cases = append(cases, map[string]any{"body": body, "secret": secret, "signature": header})
		ours = append(ours, s.Verify(paddleReq(t, body, now, header), now))
		what = append(what, kind)
	}
	compareVerdicts(t, ours, paddleOracle(t, cases), what)
}

func paddleHex(secret string, ts int64, body string) string {
	s := signPaddle(secret, ts, body)
	return s[strings.Index(s, "h1=")+3:]
}
