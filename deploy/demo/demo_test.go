// Package demo_test runs deploy/demo/demo.sh: the naive shop bare and
// behind hookonce, under one storm, counted in each shop's own database;
// then three different events about each order at once, bare, behind
// hookonce and behind hookonce with serialize, counted in shipments.
package demo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

func TestDemoShowsDuplicatesOnlyWithoutHookonce(t *testing.T) {
	needPHP(t)
	runDemo(t, "")
}

// The compose topology without containers: hookonce on PostgreSQL.
func TestDemoOnPostgres(t *testing.T) {
	needPHP(t)
	if _, err := pgtest.BinDir(); err != nil {
		testenv.Missing(t, fmt.Sprintf("PostgreSQL is not installed: %v", err), "apt-get install postgresql")
	}
	srv, err := pgtest.StartServer(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	runDemo(t, srv.DSN("postgres"))
}

// needPHP skips the test when php or its SQLite driver is missing, and
// fails it instead under CI=true.
func needPHP(t *testing.T) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("php"); err != nil {
		missing = "php is missing"
	} else if exec.Command("php", "-r", `exit(in_array("sqlite", PDO::getAvailableDrivers()) ? 0 : 1);`).Run() != nil {
		missing = "php has no pdo_sqlite"
	}
	if missing == "" {
		return
	}
	testenv.Missing(t, missing, "apt-get install php-cli php-sqlite3")
}

// runDemo runs demo.sh with hookonce on store ("" for its SQLite default)
// and checks the orders each shop's database holds.
func runDemo(t *testing.T, store string) {
	t.Helper()
	const events, orders = 12, 6
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./demo.sh")
	cmd.Env = append(os.Environ(), "EVENTS="+strconv.Itoa(events), "COPIES=4", "REPEATS=2",
		"ORDERS="+strconv.Itoa(orders))
	if store != "" {
		cmd.Env = append(cmd.Env, "DEMO_STORE="+store)
	}
	// demo.sh stops its servers by PID on TERM; give it time to.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("demo.sh:\n%s", out)
	if err != nil {
		t.Fatalf("demo.sh: %v", err)
	}
	m := regexp.MustCompile(`RESULT events=(\d+) bare_orders=(\d+) bare_events=(\d+) hookonce_orders=(\d+) hookonce_events=(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatal("no RESULT line")
	}
	n := func(i int) int { v, _ := strconv.Atoi(string(m[i])); return v }
	sent, bareOrders, bareEvents, hoOrders, hoEvents := n(1), n(2), n(3), n(4), n(5)
	if sent != events {
		t.Fatalf("events = %d, want %d", sent, events)
	}
	// Every event reached both shops.
	if bareEvents != events || hoEvents != events {
		t.Errorf("events with an order: bare %d, behind hookonce %d; want %d each", bareEvents, hoEvents, events)
	}
	if bareOrders <= events {
		t.Errorf("bare shop: %d orders for %d events; the storm should have made duplicates", bareOrders, events)
	}
	if hoOrders != events {
		t.Errorf("behind hookonce: %d orders for %d events; want exactly one each", hoOrders, events)
	}

	// The order storm: created, paid and updated about one order at once.
	m = regexp.MustCompile(`RESULT orders=(\d+) bare_shipments=(\d+) bare_shipped=(\d+) hookonce_shipments=(\d+) hookonce_shipped=(\d+) serialized_shipments=(\d+) serialized_shipped=(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatal("no RESULT line for the order storm")
	}
	if n(1) != orders {
		t.Fatalf("orders = %d, want %d", n(1), orders)
	}
	bareShip, hoShip, serShip := n(2), n(4), n(6)
	if n(3) != orders || n(5) != orders || n(7) != orders {
		t.Errorf("orders shipped: bare %d, behind hookonce %d, with serialize %d; want %d each", n(3), n(5), n(7), orders)
	}
	if bareShip <= orders {
		t.Errorf("bare shop: %d shipments for %d orders; the storm should have made duplicates", bareShip, orders)
	}
	// The control: the events are distinct, so the event key lets each
	// through, and together they race as they do bare.
	if hoShip <= orders {
		t.Errorf("behind hookonce without serialize: %d shipments for %d orders; distinct events at once should still race", hoShip, orders)
	}
	if serShip != orders {
		t.Errorf("behind hookonce with serialize: %d shipments for %d orders; want exactly one each", serShip, orders)
	}
}
