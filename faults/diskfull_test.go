package faults_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// diskConfig: a 1s lease, so that an answer that could not be stored is
// given up (and its claim taken over) fast.
const diskConfig = `
defaults:
  lease: 1s
  wait_timeout: 2s
  store_timeout: 1s
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

// mountScript mounts a tmpfs of size $0 on $1 inside the new mount
// namespace, then becomes the command that follows. The mount lives and
// dies with the process: nothing is left mounted if the test is killed.
const mountScript = `size=$0; dir=$1; shift; mount -t tmpfs -o size=$size,mode=0755 tmpfs "$dir" || exit 97; exec "$@"`

// needMount skips (or, under CI, fails) when this process may not mount a
// tmpfs in a mount namespace of its own (not root, or no CAP_SYS_ADMIN in
// a container).
func needMount(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", mountScript, "64k", dir, "true").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("cannot mount a tmpfs in a private mount namespace (unshare + mount: %v: %s); the disk-full tests need root or CAP_SYS_ADMIN",
		err, strings.TrimSpace(string(out)))
	if testenv.CI() {
		t.Fatal(msg + " (CI is set: they must run there)")
	}
	t.Skip(msg + "; skipping (CI unset)")
}

// tmpfsServe runs `hookonce serve` on SQLite in a tmpfs of the given size,
// mounted in its own mount namespace. files is the tmpfs as the test sees
// it (through /proc/PID/root).
func tmpfsServe(t *testing.T, size, upstream, storeParams string, defaults ...string) (p *servetest.Server, dir, files string) {
	t.Helper()
	dir = t.TempDir()
	config := diskConfig
	for _, d := range defaults {
		config = strings.Replace(config, "defaults:\n", "defaults:\n  "+d+"\n", 1)
	}
	p = startServe(t, serveOpts{
		store: "sqlite:" + filepath.Join(dir, "hookonce.db") + storeParams, upstream: upstream, config: config,
		wrap: []string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c", mountScript, size, dir},
	})
	files = fmt.Sprintf("/proc/%d/root%s", p.Pid(), dir)
	return p, dir, files
}

// fill writes path until the disk is full and returns how much it wrote.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// claimChecker is the site's check that no execution happens without a
// stored claim: at every call it asks hookonce's admin API for the event's
// record, which must be there and processing.
type claimChecker struct {
	admin      atomic.Value // string: http://admin
	mu         sync.Mutex
	violations []string
}

func (c *claimChecker) check(id string) {
	admin, _ := c.admin.Load().(string)
	if admin == "" {
		return
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(admin + "/v1/events/shop/" + id)
	state := ""
	if err == nil {
		var rec struct{ State string }
		_ = json.NewDecoder(resp.Body).Decode(&rec)
		resp.Body.Close()
		state = rec.State
		if resp.StatusCode != http.StatusOK {
			state = fmt.Sprintf("HTTP %d", resp.StatusCode)
		}
	}
	if err != nil || state != "processing" {
		c.mu.Lock()
		c.violations = append(c.violations, fmt.Sprintf("%s executed with record %q (%v)", id, state, err))
		c.mu.Unlock()
	}
}

func (c *claimChecker) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

func evt(id string) string { return fmt.Sprintf(`{"id":%q,"amount":100}`, id) }

// A full disk under SQLite (a tmpfs with room for the store, then filled):
// new events are refused with 503 and never reach the site, replays still
// work, an answer that cannot be stored is logged and counted and its
// event runs at most once more, and once space is freed the same process
// serves again.
//
// Under the default synchronous=full and under ?synchronous=normal, where
// the store checkpoints off its writer (dedupe/sqlite/checkpoint.go).
func TestDiskFullFiller(t *testing.T) {
	needBinary(t)
	needMount(t)
	t.Run("full", func(t *testing.T) { diskFullFiller(t, "") })
	t.Run("normal", func(t *testing.T) { diskFullFiller(t, "?synchronous=normal") })
}

func diskFullFiller(t *testing.T, storeParams string) {
	// Expected, written down before the run.
	const (
		warm       = 3 // events processed before the disk fills: 200, 1 execution each
		refused    = 4 // new events while full: 503 each, 0 executions
		after      = 3 // new events after space is freed: 200, 1 execution each
		heldExecs  = 2 // the event at the site when the disk filled: its answer is lost, the retry runs it again
		notStored  = 1 // hookonce_answers_not_stored_total: that answer
		takeovers  = 1 // the retry takes the dead claim over
		violations = 0 // site executions without a stored claim
		heldAnswer = 400 << 10
		maxSpill   = 2000 // new events the files' free blocks may still take
	)
	var checker claimChecker
	release := make(chan struct{})
	atSite := make(chan struct{}, 1)
	s := newSite(t, func(id string, n int, w http.ResponseWriter, r *http.Request) bool {
		checker.check(id)
		if id == "held" && n == 1 {
			atSite <- struct{}{}
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
			// An answer larger than any WAL this file has had. After a
			// checkpoint that copied every frame the WAL restarts from its
			// start, and a commit that fits in the blocks the WAL file
			// already has is written over them in place: it needs no new
			// space and is stored even on a full disk. Under
			// ?synchronous=normal the store checkpoints in the background
			// (dedupe/sqlite/checkpoint.go), so that happens at once: the
			// small answer this test used to hold was stored. A commit
			// this large appends to the WAL and must fail.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"ok":true,"id":"held","n":1,"pad":%q}`, strings.Repeat("p", heldAnswer))
			return true
		}
		return false
	})
	p, _, files := tmpfsServe(t, "2m", s.URL, storeParams, "max_stored_body: 512KiB")
	checker.admin.Store(p.Admin)
	client := newClient(t, 20*time.Second)
	url := p.URL + "/hooks/shop"

	for i := range warm {
		if r := post(client, url, evt(fmt.Sprint("warm-", i))); r.status != 200 {
			t.Fatalf("warm-%d: %s", i, r)
		}
	}
	// One delivery is at the site when the disk fills.
	heldReply := make(chan reply, 1)
	go func() { heldReply <- post(client, url, evt("held")) }()
	<-atSite
	filled := fill(t, filepath.Join(files, "filler"))
	close(release)
	held := <-heldReply
	held.body = fmt.Sprintf("(%d bytes)", len(held.body))

	// A full file system still takes the commits that fit in blocks the
	// store's files already have: the WAL restarts from its start after
	// each complete checkpoint and is written over in place, and a checkpoint that needs no new page of the
	// database file completes. Those claims are stored, so their events
	// run once; new events are refused once no commit fits. Send new
	// events until the first is refused.
	spilled := 0
	for ; ; spilled++ {
		id := fmt.Sprint("spill-", spilled)
		r := post(client, url, evt(id))
		if r.status == http.StatusServiceUnavailable && s.Executions(id) == 0 {
			break
		}
		if r.status != 200 || s.Executions(id) != 1 {
			t.Fatalf("%s on a full disk: %s, executions %d; want 503 and 0, or 200 and 1", id, r, s.Executions(id))
		}
		if spilled == maxSpill {
			t.Fatalf("%d new events stored on a full disk: none refused", spilled)
		}
	}

	full := map[int]int{}
	for i := range refused {
		r := post(client, url, evt(fmt.Sprint("full-", i)))
		full[r.status]++
		if r.status != http.StatusServiceUnavailable || s.Executions(fmt.Sprint("full-", i)) != 0 {
			t.Errorf("full-%d while the disk is full: %s, executions %d; want 503 and 0", i, r, s.Executions(fmt.Sprint("full-", i)))
		}
	}
	for i := range warm {
		if r := post(client, url, evt(fmt.Sprint("warm-", i))); r.status != 200 || !r.replayed {
			t.Errorf("replay of warm-%d while the disk is full: %s", i, r)
		}
	}
	metrics := p.Metrics(t)
	gotNotStored := int(counter(metrics, "hookonce_answers_not_stored_total"))
	t.Logf("disk filled with %d bytes; the held delivery got %s; new events stored in the files' free blocks: %d; new events while full: %s; answers not stored %d, logged %d",
		filled, held, spilled, histogram(full), gotNotStored, p.CountLog("answer not stored before the lease ran out: a retry will run the handler again"))
	if held.status != 200 {
		t.Errorf("the delivery at the site when the disk filled got %s; want the site's 200", held)
	}
	if gotNotStored != notStored {
		t.Errorf("hookonce_answers_not_stored_total = %d, want %d", gotNotStored, notStored)
	}

	// Space is freed; the same process recovers.
	if err := os.Remove(filepath.Join(files, "filler")); err != nil {
		t.Fatal(err)
	}
	for i := range refused {
		id := fmt.Sprint("full-", i)
		if r, seen := retryUntilOK(client, url, evt(id), 30, 15*time.Second, 200*time.Millisecond); !r.ok() || s.Executions(id) != 1 {
			t.Errorf("%s after space was freed: %s (before: %s), executions %d; want 200 and 1", id, r, histogram(seen), s.Executions(id))
		}
	}
	if r, seen := retryUntilOK(client, url, evt("held"), 30, 15*time.Second, 200*time.Millisecond); !r.ok() {
		t.Errorf("held after space was freed: %s (before: %s)", r, histogram(seen))
	}
	for i := range after {
		id := fmt.Sprint("after-", i)
		if r := post(client, url, evt(id)); r.status != 200 || s.Executions(id) != 1 {
			t.Errorf("%s: %s, executions %d", id, r, s.Executions(id))
		}
	}
	metrics = p.Metrics(t)
	gotTakeovers := int(counter(metrics, "hookonce_requests_total", "outcome", "takeover"))
	t.Logf("after freeing: held executions %d (want %d), takeovers %d (want %d), violations %v",
		s.Executions("held"), heldExecs, gotTakeovers, takeovers, checker.seen())
	if s.Executions("held") != heldExecs || gotTakeovers != takeovers {
		t.Errorf("held: executions %d takeovers %d; want %d and %d", s.Executions("held"), gotTakeovers, heldExecs, takeovers)
	}
	if v := checker.seen(); len(v) != violations {
		t.Errorf("site executions without a stored claim: %v", v)
	}
	if got := integrityCheck(t, filepath.Join(files, "hookonce.db")); got != "ok" {
		t.Errorf("integrity_check: %s", got)
	}
	p.Terminate(t)
}

// A tmpfs so small that the WAL itself fills it in ordinary use (no
// filler): deliveries go on until the store cannot write; from then on new
// events are refused with 503 and never reach the site; an event whose
// claim was stored but whose answer could not be is logged and counted and
// runs at most once more; once the tmpfs is grown (remounted, no restart)
// the same process serves every refused event once.
func TestDiskFullWAL(t *testing.T) {
	needBinary(t)
	needMount(t)
	// Expected, written down before the run.
	const (
		maxEvents  = 200 // sent one by one until the first 503
		refused    = 5   // further new events once full: 503 each, 0 executions
		violations = 0   // site executions without a stored claim
		maxExecs   = 2   // executions of an event whose answer was lost (once more, on its retry)
	)
	var checker claimChecker
	s := newSite(t, func(id string, n int, w http.ResponseWriter, r *http.Request) bool {
		checker.check(id)
		return false
	})
	p, dir, files := tmpfsServe(t, tinySize, s.URL, "")
	checker.admin.Store(p.Admin)
	client := newClient(t, 20*time.Second)
	url := p.URL + "/hooks/shop"

	var sent []string
	firstRefused := -1
	statuses := map[int]int{}
	for i := range maxEvents {
		id := fmt.Sprint("tiny-", i)
		sent = append(sent, id)
		r := post(client, url, evt(id))
		statuses[r.status]++
		if r.status == http.StatusServiceUnavailable {
			firstRefused = i
			break
		}
		if r.status != 200 {
			t.Fatalf("%s: %s", id, r)
		}
	}
	if firstRefused < 0 {
		t.Fatalf("%d events fit in a %s tmpfs: the WAL never filled it", maxEvents, tinySize)
	}
	du := func() string {
		out, _ := exec.Command("ls", "-l", files).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	t.Logf("first 503 at event %d (%s); files:\n%s", firstRefused, histogram(statuses), du())
	for i := range refused {
		id := fmt.Sprint("refused-", i)
		sent = append(sent, id)
		if r := post(client, url, evt(id)); r.status != http.StatusServiceUnavailable || s.Executions(id) != 0 {
			t.Errorf("%s on a full disk: %s, executions %d; want 503 and 0", id, r, s.Executions(id))
		}
	}
	notStored := int(counter(p.Metrics(t), "hookonce_answers_not_stored_total"))
	lostAnswers := 0
	for _, id := range sent {
		if s.Executions(id) > 0 {
			var rec struct{ State string }
			resp, err := http.Get(p.Admin + "/v1/events/shop/" + id)
			if err == nil {
				_ = json.NewDecoder(resp.Body).Decode(&rec)
				resp.Body.Close()
			}
			if rec.State != "done" {
				lostAnswers++
				t.Logf("%s ran at the site, record %q: its answer was not stored", id, rec.State)
			}
		}
	}
	t.Logf("while full: %d executed events without a stored answer, hookonce_answers_not_stored_total %d", lostAnswers, notStored)
	if lostAnswers != notStored {
		t.Errorf("%d answers lost, %d counted: an answer was lost silently", lostAnswers, notStored)
	}

	// Grow the tmpfs under the running process.
	if out, err := exec.Command("nsenter", "--target", fmt.Sprint(p.Pid()), "--mount", "--",
		"mount", "-o", "remount,size=16m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	for _, id := range sent {
		before := s.Executions(id)
		r, seen := retryUntilOK(client, url, evt(id), 30, 15*time.Second, 200*time.Millisecond)
		if !r.ok() {
			t.Errorf("%s after the tmpfs grew: %s (before: %s)", id, r, histogram(seen))
		}
		if n := s.Executions(id); n < 1 || n > maxExecs || (n > 1 && before != 1) {
			t.Errorf("%s: %d executions (%d before the tmpfs grew)", id, n, before)
		}
	}
	if r := post(client, url, evt("grown")); r.status != 200 || s.Executions("grown") != 1 {
		t.Errorf("a new event after the tmpfs grew: %s", r)
	}
	if v := checker.seen(); len(v) != violations {
		t.Errorf("site executions without a stored claim: %v", v)
	}
	if got := integrityCheck(t, filepath.Join(files, "hookonce.db")); got != "ok" {
		t.Errorf("integrity_check: %s", got)
	}
	t.Logf("after growing: files:\n%s", du())
	p.Terminate(t)
}

const tinySize = "256k"
