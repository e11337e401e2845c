package admin_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// pageForm is one POST form of a rendered page: its action as written
// and its hidden fields.
type pageForm struct {
	action string
	fields url.Values
}

var (
	formRe  = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)"[^>]*>(.*?)</form>`)
	inputRe = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// postForms reads the POST forms of the page at path, with the session.
func postForms(t *testing.T, base, path string, jar []*http.Cookie) []pageForm {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	for _, c := range jar {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	var out []pageForm
	for _, m := range formRe.FindAllStringSubmatch(string(body), -1) {
		f := pageForm{action: html.UnescapeString(m[1]), fields: url.Values{}}
		for _, in := range inputRe.FindAllStringSubmatch(m[2], -1) {
			f.fields.Add(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
		}
		out = append(out, f)
	}
	return out
}

// A key the sender chose, such as ../../release/shop/o1, never turns a
// page's button into another operation: the forms post to fixed paths
// with the sender and key in their bodies. The conflict's Accept form,
// posted as the page renders it (its action resolved as a browser
// resolves it), accepts that conflict: its payload runs once, and the
// event shop/o1 is neither released nor run again. The event page's
// forms carry the key the same way.
func TestPageFormsCarryKeyInBody(t *testing.T) {
	site := proxytest.NewSite(t, nil)
	store := openStore(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    store_request_body: true
`)
	crafted := "../../release/shop/o1"
	hook := px.URL + "/hooks/shop"
	if r := proxytest.Post(t, hook, `{"id":"o1","amount":1}`); r.Status != 200 {
		t.Fatalf("o1: %d", r.Status)
	}
	if r := proxytest.Post(t, hook, fmt.Sprintf(`{"id":%q,"amount":1}`, crafted)); r.Status != 200 {
		t.Fatalf("crafted: %d %s", r.Status, r.Body)
	}
	if r := proxytest.Post(t, hook, fmt.Sprintf(`{"id":%q,"amount":2}`, crafted)); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("crafted, changed: %d %s", r.Status, r.Body)
	}
	h, err := admin.New(admin.Options{Store: store, Token: testToken, Logger: slog.New(slog.DiscardHandler),
		Accept: func(ctx context.Context, sender, key, id, by string) (admin.Acceptance, error) {
			res, err := px.Proxy.Accept(ctx, sender, key, id, by)
			if errors.Is(err, proxy.ErrNoSender) {
				err = fmt.Errorf("%w: %w", admin.ErrRefused, err)
			}
			return admin.Acceptance{Conflict: view.Conflict(res.Conflict),
				Redelivery: admin.Redelivery{Outcome: res.Outcome, Status: res.Status}}, err
		},
		Redeliver: func(ctx context.Context, sender, key string, force bool) (admin.Redelivery, error) {
			res, err := px.Proxy.Redeliver(ctx, sender, key, force)
			return admin.Redelivery{Outcome: res.Outcome, Status: res.Status}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	t.Cleanup(adm.Close)
	jar := newSession(t, adm.URL)

	forms := postForms(t, adm.URL, "/ui/conflicts?sender=shop", jar)
	if len(forms) != 1 {
		t.Fatalf("conflicts page forms = %+v, want one Accept form", forms)
	}
	f := forms[0]
	// Posted as a browser posts it: the action resolved against the page.
	page, _ := url.Parse(adm.URL + "/ui/conflicts?sender=shop")
	action, err := url.Parse(f.action)
	if err != nil {
		t.Fatal(err)
	}
	if got := postForm(t, page.ResolveReference(action).String(), jar, f.fields); got != http.StatusSeeOther {
		t.Fatalf("posting the Accept form (action %q): %d, want 303", f.action, got)
	}
	if rec, err := store.Get(context.Background(), "shop", "o1"); err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("o1 after the crafted key's Accept = %+v, %v; want done, untouched", rec, err)
	}
	if cs, _ := store.Conflicts(context.Background(), dedupe.ListFilter{Sender: "shop", Key: crafted}); len(cs) != 1 || !cs[0].Accepted() {
		t.Fatalf("the crafted key's conflict = %+v, want accepted", cs)
	}
	if r := proxytest.Post(t, hook, `{"id":"o1","amount":1}`); r.Status != 200 || !r.Replayed() {
		t.Fatalf("o1's retry: %d replayed=%v; want replayed", r.Status, r.Replayed())
	}
	if n := site.Executions("o1"); n != 1 {
		t.Fatalf("o1 ran %d times, want 1", n)
	}
	if n := site.Executions(crafted); n != 2 {
		t.Fatalf("the crafted key's event ran %d times, want 2 (its first payload and the accepted one)", n)
	}
	if f.action != "/ui/accept" || f.fields.Get("sender") != "shop" || f.fields.Get("key") != crafted || f.fields.Get("csrf") == "" {
		t.Fatalf("Accept form = %+v; want action /ui/accept with sender, key and csrf in the body", f)
	}

	// The event page of the crafted key: its link is escaped, its
	// Redeliver form posts to a fixed path with the key in the body.
	evPath := "/ui/events/shop/" + url.PathEscape(crafted)
	if !strings.Contains(evPath, "..%2F") {
		t.Fatalf("event link %q", evPath)
	}
	forms = postForms(t, adm.URL, evPath, jar)
	if len(forms) != 1 || forms[0].action != "/ui/redeliver" || forms[0].fields.Get("key") != crafted || forms[0].fields.Get("sender") != "shop" {
		t.Fatalf("event page forms = %+v; want the Redeliver form at /ui/redeliver with the key in its body", forms)
	}
	for _, f := range forms {
		if strings.Contains(f.action, "..") || strings.Contains(f.action, "o1") {
			t.Fatalf("a form's action holds the key: %q", f.action)
		}
	}
}
