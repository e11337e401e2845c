package demo_test

// Runs deploy/demo/bitrix.sh in its short form: the demo 1C-Bitrix site
// bare and behind hookonce, under one storm of signed notifications from
// six providers on one URL, counted in each site's own database.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBitrixDemoNoDoubleOrLostPaymentsBehindHookonce(t *testing.T) {
	needPHP(t)
	const payments = 5 // per provider
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./bitrix.sh")
	cmd.Env = append(os.Environ(), "PAYMENTS="+strconv.Itoa(payments), "COPIES=3", "ATTEMPTS=10",
		"CONCURRENCY=4", "DELAY_MS=120", "FAIL_SHARE=0.3", "FAIL_HANDLERS=robokassa,tbank,cloudpayments")
	// bitrix.sh stops its servers by PID on TERM; give it time to.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("bitrix.sh:\n%s", out)
	if err != nil {
		t.Fatalf("bitrix.sh: %v", err)
	}
	res := parseResults(t, out)
	providers := []string{"robokassa", "yookassa", "tbank", "cloudpayments", "rbs", "bitrix24"}
	for _, setup := range []string{"bare", "hookonce"} {
		for _, p := range providers {
			r, ok := res[setup][p]
			if !ok {
				t.Fatalf("no RESULT for %s %s", setup, p)
			}
			if r["payments"] != payments || r["sent"] != payments {
				t.Errorf("%s %s: %d payments on the site, %d paid by the storm; want %d", setup, p, r["payments"], r["sent"], payments)
			}
			// The site's PHP accepted every signature the storm made (and
			// hookonce passed on only what it accepted).
			if r["rejected_runs"] != 0 {
				t.Errorf("%s %s: the site rejected %d notifications", setup, p, r["rejected_runs"])
			}
		}
	}
	for _, p := range providers {
		r := res["hookonce"][p]
		if r["doubles"] != 0 || r["lost"] != 0 || r["once"] != payments {
			t.Errorf("behind hookonce, %s: %d applied once, %d double, %d lost; want all %d once", p, r["once"], r["doubles"], r["lost"], payments)
		}
		if r["gave_up"] != 0 {
			t.Errorf("behind hookonce, %s gave up on %d notifications", p, r["gave_up"])
		}
	}
	bare, guarded := res["bare"]["total"], res["hookonce"]["total"]
	if bare["doubles"] == 0 {
		t.Errorf("bare site: no double payments; the overlapping copies should have made some")
	}
	if guarded["replayed"] == 0 {
		t.Errorf("behind hookonce: no answer was replayed; the copies should have been")
	}
	// The failure switch was on: some order saves failed (and behind
	// hookonce the provider's retry ran them again, or lost would show it).
	if bare["failed_runs"]+guarded["failed_runs"] == 0 {
		t.Errorf("no handler run failed with FAIL_SHARE=0.3")
	}
	t.Logf("bare: %d of %d payments applied more than once, %d never; behind hookonce: %d and %d (%d failed saves retried)",
		bare["doubles"], bare["payments"], bare["lost"], guarded["doubles"], guarded["lost"], guarded["failed_runs"])
}

// T-Bank's AUTHORIZED and CONFIRMED about one payment, sent at once to a
// site that pays on either: two different events, so hookonce's event key
// passes both and they race as they do bare; serialize, keyed by OrderId,
// runs them one after the other and the second finds the payment paid.
func TestBitrixDemoSerializeTBankStatuses(t *testing.T) {
	needPHP(t)
	const payments = 12
	bin := filepath.Join(t.TempDir(), "hookonce")
	build := exec.Command("go", "build", "-o", bin, "../..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(serialize string) map[string]map[string]map[string]int {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "./bitrix.sh")
		cmd.Env = append(os.Environ(), "HOOKONCE_BIN="+bin, "PROVIDERS=tbank", "PAYMENTS="+strconv.Itoa(payments),
			"COPIES=3", "ATTEMPTS=10", "CONCURRENCY=4", "DELAY_MS=120", "FAIL_SHARE=0",
			"TOGETHER=1", "TBANK_PAID_ON=AUTHORIZED,CONFIRMED", "SERIALIZE="+serialize)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 15 * time.Second
		out, err := cmd.CombinedOutput()
		t.Logf("SERIALIZE=%s bitrix.sh:\n%s", serialize, out)
		if err != nil {
			t.Fatalf("bitrix.sh: %v", err)
		}
		return parseResults(t, out)
	}
	without, with := run("0"), run("1")
	for _, r := range []map[string]map[string]map[string]int{without, with} {
		for _, setup := range []string{"bare", "hookonce"} {
			if got := r[setup]["tbank"]; got["payments"] != payments || got["notifications"] != 2*payments || got["rejected_runs"] != 0 {
				t.Fatalf("%s: %v; want %d payments, %d notifications, none rejected", setup, got, payments, 2*payments)
			}
		}
		if r["bare"]["tbank"]["doubles"] == 0 {
			t.Errorf("bare site: no double payments; AUTHORIZED and CONFIRMED at once should have made some")
		}
	}
	if n := without["hookonce"]["tbank"]["doubles"]; n == 0 {
		t.Errorf("behind hookonce without serialize: no double payments; the two statuses are distinct events and should still race")
	}
	if r := with["hookonce"]["tbank"]; r["doubles"] != 0 || r["lost"] != 0 || r["once"] != payments || r["gave_up"] != 0 {
		t.Errorf("behind hookonce with serialize: %d once, %d double, %d lost, %d given up; want all %d once", r["once"], r["doubles"], r["lost"], r["gave_up"], payments)
	}
}

// parseResults reads "RESULT setup=S provider=P k=v …" lines into
// setup → provider → k → v.
func parseResults(t *testing.T, out []byte) map[string]map[string]map[string]int {
	t.Helper()
	res := map[string]map[string]map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "RESULT" {
			continue
		}
		var setup, prov string
		vals := map[string]int{}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "setup":
				setup = v
			case "provider":
				prov = v
			default:
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("bad RESULT line %q", line)
				}
				vals[k] = n
			}
		}
		if res[setup] == nil {
			res[setup] = map[string]map[string]int{}
		}
		res[setup][prov] = vals
	}
	return res
}

// The storm signs every notification on its own, from the providers'
// documentation: were it to use hookonce's contract package, the demo
// would check hookonce's signatures against themselves.
func TestStormDoesNotImportHookonce(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./storm").Output()
	if err != nil {
		t.Fatalf("go list ./storm: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/hookonce/hookonce/") && !strings.HasPrefix(dep, "github.com/hookonce/hookonce/deploy/demo/storm") {
			t.Errorf("the storm imports %s", dep)
		}
	}
}
