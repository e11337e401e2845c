// Command storm is the demo's delivery storm: for each of a fixed number of
// events it sends several copies at once (a sender that timed out and
// retried while the first delivery was still running) and then repeats
// (later redeliveries). It is bounded in deliveries and in time.
//
//	storm fire --target URL [--events 20 --copies 4 --repeats 2 --concurrency 2 --deadline 60s]
//	storm fire --mode orders --target URL [--events 8 …]
//	                        for each of --events orders, three different events
//	                        about it (order.created, order.paid, order.updated)
//	                        at once, each with its copies and repeats
//	storm bitrix --target URL [--site URL --payments 6 --copies 3 --attempts 10 --together …]
//	                        signed payment notifications from several providers
//	                        on the demo Bitrix site's dispatcher (see bitrix.go)
//	storm freeport          print a free 127.0.0.1 port
//	storm wait URL [--timeout 20s]   wait until URL answers any HTTP status
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: storm fire|bitrix|freeport|wait …")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "fire":
		err = fire(os.Args[2:])
	case "bitrix":
		err = bitrixStorm(os.Args[2:])
	case "freeport":
		err = freePort()
	case "wait":
		err = wait(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

func freePort() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

func wait(args []string) error {
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 20*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: storm wait URL")
	}
	deadline := time.Now().Add(*timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(fs.Arg(0))
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s: %v", fs.Arg(0), *timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// orderEvents are the different events storm fire --mode orders sends
// about one order, each with its own event id: "<order>-<type>".
var orderEvents = []string{"order.created", "order.paid", "order.updated"}

func fire(args []string) error {
	fs := flag.NewFlagSet("fire", flag.ContinueOnError)
	target := fs.String("target", "", "webhook URL")
	events := fs.Int("events", 20, "distinct events, or orders in orders mode (at most 500)")
	copies := fs.Int("copies", 4, "copies of each event sent at once (at most 20)")
	repeats := fs.Int("repeats", 2, "sequential redeliveries after the burst (at most 10)")
	conc := fs.Int("concurrency", 2, "events in flight at once")
	deadline := fs.Duration("deadline", 60*time.Second, "stop sending after")
	run := fs.String("run", "demo", "event id prefix")
	mode := fs.String("mode", "payments", "payments: one payment event each; orders: three different events about each order, at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode != "payments" && *mode != "orders" {
		return fmt.Errorf("--mode %q: payments or orders", *mode)
	}
	if *target == "" || *events < 1 || *events > 500 || *copies < 1 || *copies > 20 || *repeats < 0 || *repeats > 10 || *conc < 1 {
		return errors.New("usage: storm fire --target URL [--mode payments|orders --events 1..500 --copies 1..20 --repeats 0..10 --concurrency N]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()
	client := &http.Client{Timeout: 30 * time.Second}

	var mu sync.Mutex
	statuses := map[string]int{}
	sent := 0
	deliver := func(body string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *target, bytes.NewBufferString(body))
		if err != nil {
			return
		}
		req.GetBody = nil // no transport-level resends: every delivery is counted here
		req.Header.Set("Content-Type", "application/json")
		outcome := "error"
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			outcome = fmt.Sprint(resp.StatusCode)
			if resp.Header.Get("Idempotent-Replayed") == "true" {
				outcome += " replayed"
			}
		}
		mu.Lock()
		sent++
		statuses[outcome]++
		mu.Unlock()
	}

	// burst sends one event as a retrying sender does: copies at once, then
	// repeats one after another. In orders mode an order's three events
	// leave together (gate), so their bursts overlap at the site.
	burst := func(gate <-chan struct{}, body string) {
		<-gate
		var at sync.WaitGroup
		for range *copies {
			at.Add(1)
			go func() {
				defer at.Done()
				deliver(body)
			}()
		}
		at.Wait()
		for range *repeats {
			deliver(body)
		}
	}
	sem := make(chan struct{}, *conc)
	var all sync.WaitGroup
	start := time.Now()
	for e := 0; e < *events && ctx.Err() == nil; e++ {
		var bodies []string
		if *mode == "orders" {
			order := fmt.Sprintf("%s-ord-%04d", *run, e)
			for _, typ := range orderEvents {
				bodies = append(bodies, fmt.Sprintf(`{"id":%q,"type":%q,"order":%q,"amount":%d}`, order+"-"+typ, typ, order, 100+e))
			}
		} else {
			bodies = []string{fmt.Sprintf(`{"id":%q,"amount":%d,"type":"payment.succeeded"}`, fmt.Sprintf("%s-evt-%04d", *run, e), 100+e)}
		}
		sem <- struct{}{}
		all.Add(1)
		go func() {
			defer all.Done()
			defer func() { <-sem }()
			var evs sync.WaitGroup
			gate := make(chan struct{})
			for _, body := range bodies {
				evs.Add(1)
				go func() {
					defer evs.Done()
					burst(gate, body)
				}()
			}
			close(gate)
			evs.Wait()
		}()
	}
	all.Wait()

	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if *mode == "orders" {
		fmt.Printf("orders=%d events=%d deliveries=%d seconds=%.1f", *events, *events*len(orderEvents), sent, time.Since(start).Seconds())
	} else {
		fmt.Printf("events=%d deliveries=%d seconds=%.1f", *events, sent, time.Since(start).Seconds())
	}
	for _, k := range keys {
		fmt.Printf(" [%s]=%d", k, statuses[k])
	}
	fmt.Println()
	if ctx.Err() != nil {
		return fmt.Errorf("deadline %s reached after %d deliveries", *deadline, sent)
	}
	return nil
}
