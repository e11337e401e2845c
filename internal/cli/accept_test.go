package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// A refused changed payload, end to end through a running serve: hookonce
// conflicts shows what changed and that it can be accepted (headers
// redacted in --json); hookonce list --key finds the payment by one part
// of its key; hookonce accept runs it at the site once, under its own
// Idempotency-Key, and a second accept is refused with a non-zero exit
// and runs nothing; the page's Accept button does the same for another
// conflict, and refuses a POST without its CSRF token.
func TestAcceptCommand(t *testing.T) {
	site := proxytest.NewSite(t, nil)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id }, { body: status } ]
    store_request_body: true
`)
	store := "sqlite:" + filepath.Join(dir, "h.db")
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", store)
	adminURL := s.Admin
	send := func(id, amount string) int {
		t.Helper()
		return proxytest.Post(t, s.URL+"/hooks/shop", `{"id":"`+id+`","status":"CONFIRMED","amount":`+amount+`}`,
			"X-Signature", "sig-secret-1").Status
	}
	for _, id := range []string{"8742591", "5550001"} {
		if st := send(id, "100"); st != http.StatusOK {
			t.Fatalf("first delivery of %s: %d", id, st)
		}
		if st := send(id, "250"); st != http.StatusUnprocessableEntity {
			t.Fatalf("changed delivery of %s: %d, want 422", id, st)
		}
	}
	if n := site.Executions("8742591"); n != 1 {
		t.Fatalf("executions before accept = %d, want 1", n)
	}
	key := "8742591:CONFIRMED"

	out, _, code := hookonce(t, "list", "--store", store, "--key", "8742591")
	if code != 0 || !strings.Contains(out, key) || strings.Contains(out, "5550001") {
		t.Fatalf("list --key 8742591: exit %d\n%s", code, out)
	}
	if out, _, _ := hookonce(t, "list", "--store", store, "--key", "874259"); strings.Contains(out, key) {
		t.Fatalf("list --key with a part of a part found the key:\n%s", out)
	}
	out, _, code = hookonce(t, "conflicts", "--store", store, "--sender", "shop", "--key", "8742591")
	if code != 0 || !strings.Contains(out, key) || !strings.Contains(out, "amount") || !strings.Contains(out, "ACCEPT") ||
		!strings.Contains(out, "yes") || strings.Contains(out, "5550001") {
		t.Fatalf("conflicts --key: exit %d\n%s", code, out)
	}
	out, _, _ = hookonce(t, "conflicts", "--store", store, "--json", "--key", "8742591")
	var cs []view.ConflictJSON
	if err := json.Unmarshal([]byte(out), &cs); err != nil || len(cs) != 1 {
		t.Fatalf("conflicts --json: %v\n%s", err, out)
	}
	c := cs[0]
	if !c.Acceptable || c.DiffKind != "json" || strings.Join(c.ChangedPaths, ",") != "amount" || !c.RequestKept ||
		c.Method != "POST" || c.URI != "/hooks/shop" || c.StoredSHA256 == "" || c.ReceivedSHA256 == "" || c.ID == "" {
		t.Fatalf("conflict JSON = %+v", c)
	}
	if strings.Contains(out, "sig-secret-1") || c.Headers["X-Signature"][0] != "xxxxx" {
		t.Fatalf("conflicts --json shows the signature: %v", c.Headers)
	}

	out, errOut, code := hookonce(t, "accept", "--admin", adminURL, "--by", "support", "shop", key)
	if code != 0 || !strings.Contains(out, "accepted shop "+key) || !strings.Contains(out, "processed (status 200)") {
		t.Fatalf("accept: exit %d %q %q", code, out, errOut)
	}
	if n := site.Executions("8742591"); n != 2 {
		t.Fatalf("executions after accept = %d, want 2", n)
	}
	if got, want := site.LastHeader("8742591").Get("Idempotency-Key"), "shop:"+key+":accepted-"+c.ID; got != want {
		t.Fatalf("accepted copy's Idempotency-Key = %q, want %q", got, want)
	}
	if got := site.LastHeader("8742591").Get("X-Signature"); got != "sig-secret-1" {
		t.Fatalf("accepted copy lost its signature header: %q", got)
	}
	_, errOut, code = hookonce(t, "accept", "--admin", adminURL, "shop", key)
	if code == 0 || !strings.Contains(errOut, "Already accepted") || !strings.Contains(errOut, "support") {
		t.Fatalf("second accept: exit %d %q", code, errOut)
	}
	if n := site.Executions("8742591"); n != 2 {
		t.Fatalf("executions after a second accept = %d, want still 2", n)
	}
	if _, errOut, code := hookonce(t, "accept", "--admin", adminURL, "shop", "no-such-key"); code != exitNotFound {
		t.Fatalf("accept of no conflict: exit %d %q, want %d", code, errOut, exitNotFound)
	}
	out, _, _ = hookonce(t, "conflicts", "--store", store, "--key", "8742591")
	if !strings.Contains(out, "accepted") || !strings.Contains(out, "by support") {
		t.Fatalf("conflicts after accept:\n%s", out)
	}

	// The page: an Accept button per acceptable conflict, a CSRF-tokened form.
	page := func() string {
		resp, err := http.Get(adminURL + "/ui/conflicts?sender=shop")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	html := page()
	// The form posts to a fixed path with the sender and key in its body
	// (a key never becomes part of the action's path).
	m := regexp.MustCompile(`action="/ui/accept"[^>]*>\s*<input type="hidden" name="csrf" value="([0-9a-f]+)">\s*<input type="hidden" name="sender" value="shop">\s*<input type="hidden" name="key" value="5550001:CONFIRMED">\s*<input type="hidden" name="id" value="([^"]+)">`).FindStringSubmatch(html)
	if m == nil || !strings.Contains(html, "accepted-"+c.ID) {
		t.Fatalf("conflicts page has no Accept form for 5550001, or does not show the accepted one:\n%s", html)
	}
	post := func(form url.Values) int {
		form.Set("sender", "shop")
		form.Set("key", "5550001:CONFIRMED")
		req, _ := http.NewRequest(http.MethodPost, adminURL+"/ui/accept", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", adminURL)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(url.Values{"id": {m[2]}}); st != http.StatusForbidden || site.Executions("5550001") != 1 {
		t.Fatalf("Accept without the CSRF token: %d, executions %d", st, site.Executions("5550001"))
	}
	if st := post(url.Values{"csrf": {m[1]}, "id": {m[2]}}); st != http.StatusSeeOther || site.Executions("5550001") != 2 {
		t.Fatalf("Accept button: %d, executions %d", st, site.Executions("5550001"))
	}
	if st := post(url.Values{"csrf": {m[1]}, "id": {m[2]}}); st != http.StatusSeeOther || site.Executions("5550001") != 2 {
		t.Fatalf("Accept button pressed again: %d, executions %d (want still 2)", st, site.Executions("5550001"))
	}
	if html := page(); !strings.Contains(html, "accepted-"+m[2]) {
		t.Fatalf("page does not show the accepted conflict:\n%s", html)
	}

	// The events page searches by a part of the key too.
	resp, err := http.Get(adminURL + "/ui/events?key=8742591")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if events := string(b); resp.StatusCode != 200 || !strings.Contains(events, ">8742591:CONFIRMED<") ||
		!strings.Contains(events, ">8742591:CONFIRMED:accepted-"+c.ID+"<") || strings.Contains(events, "5550001") {
		t.Fatalf("events page searched for 8742591: %d\n%s", resp.StatusCode, events)
	}
}
