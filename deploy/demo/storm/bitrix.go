package main

// storm bitrix: payment notifications from several providers on the one
// dispatcher URL of the demo 1C-Bitrix site, each sent the way its provider
// sends it — signed, several copies at once (a provider that timed out and
// sent again while the first delivery still ran), and retried until the
// provider hears its own success answer, a bounded number of times. Then
// it reads the site's own count of applied payments. With --together a
// payment's notifications (T-Bank's AUTHORIZED and CONFIRMED) leave at
// once, as different events about one payment that overlap.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// providerStats is what one provider saw from its side.
type providerStats struct {
	payments      int
	notifications int
	deliveries    int
	replayed      int // answers hookonce replayed
	gaveUp        int // notifications never answered with success
	answers       map[string]int
}

// siteReport is one pay system's line of the site's /demo/report.
type siteReport struct {
	Payments     int            `json:"payments"`
	AppliedOnce  int            `json:"applied_once"`
	AppliedMore  int            `json:"applied_more"`
	Never        int            `json:"never_applied"`
	Applications int            `json:"applications"`
	Runs         map[string]int `json:"runs"`
}

func bitrixStorm(args []string) error {
	fs := flag.NewFlagSet("bitrix", flag.ContinueOnError)
	target := fs.String("target", "", "base URL notifications go to: the site, or hookonce in front of it")
	site := fs.String("site", "", "base URL of the site itself, for installing payments and the report (default: --target)")
	names := fs.String("providers", "robokassa,yookassa,tbank,cloudpayments,rbs,bitrix24", "providers, comma-separated")
	perProvider := fs.Int("payments", 6, "payments per provider (at most 500)")
	copies := fs.Int("copies", 3, "copies of a notification's first delivery sent at once (at most 20)")
	attempts := fs.Int("attempts", 10, "deliveries a provider makes before it gives up on a notification, the copies counting as one (at most 50; RBS makes 3, Bitrix24 1)")
	backoff := fs.Duration("backoff", 40*time.Millisecond, "pause before the second attempt; doubles each time, up to 8×")
	conc := fs.Int("concurrency", 4, "payments in flight at once")
	deadline := fs.Duration("deadline", 90*time.Second, "stop sending after")
	run := fs.String("run", "demo", "varies the providers' ids between runs")
	label := fs.String("label", "", "names the run in RESULT lines (setup=LABEL)")
	seed := fs.Uint64("seed", 1, "order in which payments are paid")
	together := fs.Bool("together", false, "send a payment's notifications (T-Bank's AUTHORIZED and CONFIRMED, …) at once, each with its copies and retries, instead of one after another")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" || *perProvider < 1 || *perProvider > 500 || *copies < 1 || *copies > 20 ||
		*attempts < 1 || *attempts > 50 || *conc < 1 || fs.NArg() > 0 {
		return errors.New("usage: storm bitrix --target URL [--site URL --providers LIST --payments 1..500 --copies 1..20 --attempts 1..50 --concurrency N]")
	}
	if *site == "" {
		*site = *target
	}
	var chosen []provider
	for _, n := range strings.Split(*names, ",") {
		p, ok := providerByName(strings.TrimSpace(n))
		if !ok {
			return fmt.Errorf("unknown provider %q", n)
		}
		chosen = append(chosen, p)
	}
	sec, err := secretsFromEnv()
	if err != nil {
		return err
	}

	// The payments awaiting payment, installed on the site first.
	var pays []payment
	for _, pr := range chosen {
		for i := range *perProvider {
			id := pr.psID*1000 + i + 1
			p := payment{Provider: pr.name, ID: id, Sum: fmt.Sprintf("%d.00", 100+(id*37)%900)}
			n := extID(*run, id)
			switch pr.name {
			case "yookassa", "rbs":
				p.ext = uuidLike(n, id)
			default:
				p.ext = strconv.FormatUint(n%9_000_000_000+1_000_000_000, 10)
			}
			pays = append(pays, p)
		}
	}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
	}
	if err := install(client, *site, pays); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(*seed, 0))
	r.Shuffle(len(pays), func(i, j int) { pays[i], pays[j] = pays[j], pays[i] })

	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()
	var mu sync.Mutex
	stats := map[string]*providerStats{}
	for _, pr := range chosen {
		stats[pr.name] = &providerStats{payments: *perProvider, answers: map[string]int{}}
	}
	deliver := func(pr string, n notification) bool {
		req, err := http.NewRequestWithContext(ctx, n.method, strings.TrimSuffix(*target, "/")+n.target, bytes.NewReader(n.body))
		if err != nil {
			return false
		}
		req.GetBody = nil // no transport-level resends: every delivery is counted here
		if n.body == nil {
			req.Body = http.NoBody
		}
		req.Header = n.header.Clone()
		// As the site's front nginx would pass it on.
		req.Header.Set("X-Forwarded-For", providerAddr[pr])
		req.Header.Set("X-Real-IP", providerAddr[pr])
		outcome, ok, replayed := "error", false, false
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			ok = n.ok(resp.StatusCode, body)
			replayed = resp.Header.Get("Idempotent-Replayed") == "true"
			outcome = strconv.Itoa(resp.StatusCode)
			switch {
			case ok:
				outcome += " success"
			case resp.StatusCode == http.StatusOK && len(bytes.TrimSpace(body)) == 0:
				outcome += " empty"
			case resp.StatusCode == http.StatusOK:
				outcome += " other"
			}
		}
		mu.Lock()
		st := stats[pr]
		st.deliveries++
		st.answers[outcome]++
		if replayed {
			st.replayed++
		}
		mu.Unlock()
		return ok
	}
	// send delivers one notification as its provider does: copies at once,
	// then one at a time after a growing pause, until one succeeds.
	send := func(pr provider, n notification) {
		pause, limit := *backoff, *attempts
		if pr.attempts > 0 {
			limit = min(limit, pr.attempts)
		}
		for attempt := 1; attempt <= limit && ctx.Err() == nil; attempt++ {
			k := 1
			if attempt == 1 && pr.attempts != 1 {
				// A provider that never resends (Bitrix24) sends no
				// copies either: a second delivery is another event.
				k = *copies
			}
			var wg sync.WaitGroup
			var okAny sync.Once
			done := false
			gate := make(chan struct{})
			for range k {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					if deliver(pr.name, n) {
						okAny.Do(func() { done = true })
					}
				}()
			}
			close(gate)
			wg.Wait()
			if done {
				return
			}
			if attempt == limit {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, 8**backoff)
		}
		mu.Lock()
		stats[pr.name].gaveUp++
		mu.Unlock()
	}

	start := time.Now()
	sem := make(chan struct{}, *conc)
	var all sync.WaitGroup
	for _, p := range pays {
		if ctx.Err() != nil {
			break
		}
		pr, _ := providerByName(p.Provider)
		sem <- struct{}{}
		all.Add(1)
		go func() {
			defer all.Done()
			defer func() { <-sem }()
			notes := pr.notify(sec, p, *run)
			mu.Lock()
			stats[pr.name].notifications += len(notes)
			mu.Unlock()
			if !*together {
				for _, n := range notes {
					send(pr, n)
				}
				return
			}
			var each sync.WaitGroup
			for _, n := range notes {
				each.Add(1)
				go func() {
					defer each.Done()
					send(pr, n)
				}()
			}
			each.Wait()
		}()
	}
	all.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		return fmt.Errorf("deadline %s reached before every payment was notified", *deadline)
	}

	report, err := fetchReport(client, *site)
	if err != nil {
		return err
	}
	printBitrix(os.Stdout, *label, chosen, stats, report, elapsed)
	return nil
}

func install(client *http.Client, site string, pays []payment) error {
	body, _ := json.Marshal(map[string]any{"payments": pays})
	resp, err := client.Post(strings.TrimSuffix(site, "/")+"/demo/install", "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("install payments on the site: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("install payments on the site: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func fetchReport(client *http.Client, site string) (map[string]siteReport, error) {
	resp, err := client.Get(strings.TrimSuffix(site, "/") + "/demo/report")
	if err != nil {
		return nil, fmt.Errorf("read the site's report: %w", err)
	}
	defer resp.Body.Close()
	var report map[string]siteReport
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the site's report: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		return nil, fmt.Errorf("read the site's report: %w", err)
	}
	return report, nil
}

// printBitrix writes the table and one RESULT line per provider (and the
// total) for scripts and tests to read.
func printBitrix(w io.Writer, label string, chosen []provider, stats map[string]*providerStats, report map[string]siteReport, elapsed time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "provider\tpayments\tapplied once\tdouble\tlost\tapplications\thandler runs\tfailed runs\tdeliveries\treplayed\tgave up\t")
	var total siteReport
	var tst providerStats
	total.Runs = map[string]int{}
	line := func(name string, rep siteReport, st providerStats) {
		runs := 0
		for _, n := range rep.Runs {
			runs += n
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, rep.Payments, rep.AppliedOnce, rep.AppliedMore,
			rep.Never, rep.Applications, runs, rep.Runs["failed"], st.deliveries, st.replayed, st.gaveUp)
	}
	var results []string
	result := func(name string, rep siteReport, st providerStats) {
		runs := 0
		for _, n := range rep.Runs {
			runs += n
		}
		s := "RESULT"
		if label != "" {
			s += " setup=" + label
		}
		results = append(results, fmt.Sprintf("%s provider=%s payments=%d sent=%d notifications=%d once=%d doubles=%d lost=%d applications=%d runs=%d failed_runs=%d rejected_runs=%d deliveries=%d replayed=%d gave_up=%d",
			s, name, rep.Payments, st.payments, st.notifications, rep.AppliedOnce, rep.AppliedMore, rep.Never, rep.Applications, runs,
			rep.Runs["failed"], rep.Runs["rejected"]+rep.Runs["not_found"], st.deliveries, st.replayed, st.gaveUp))
	}
	for _, pr := range chosen {
		rep, st := report[pr.name], *stats[pr.name]
		line(pr.name, rep, st)
		result(pr.name, rep, st)
		total.Payments += rep.Payments
		total.AppliedOnce += rep.AppliedOnce
		total.AppliedMore += rep.AppliedMore
		total.Never += rep.Never
		total.Applications += rep.Applications
		for k, n := range rep.Runs {
			total.Runs[k] += n
		}
		tst.payments += st.payments
		tst.notifications += st.notifications
		tst.deliveries += st.deliveries
		tst.replayed += st.replayed
		tst.gaveUp += st.gaveUp
	}
	if none, ok := report["none"]; ok { // requests no pay system claimed
		for k, n := range none.Runs {
			total.Runs[k] += n
		}
	}
	line("total", total, tst)
	tw.Flush()
	fmt.Fprintf(w, "\nanswers the providers got (%.1fs):\n", elapsed.Seconds())
	for _, pr := range chosen {
		st := stats[pr.name]
		keys := make([]string, 0, len(st.answers))
		for k := range st.answers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("[%s]=%d", k, st.answers[k]))
		}
		fmt.Fprintf(w, "  %-14s %s\n", pr.name, strings.Join(parts, " "))
	}
	result("total", total, tst)
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintln(w, r)
	}
}
