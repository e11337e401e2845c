package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

// The admin root leads to the overview: without a session to the sign-in
// form (which goes on to the overview), with one to the page itself; with
// no token the overview opens straight away. Nothing but the redirect is
// answered at / itself, and other methods there are still unknown routes.
func TestAdminRootShowsTheOverview(t *testing.T) {
	f := newFixture(t, testToken)
	status, h, body := get(t, f.srv.URL+"/", nil, "")
	if status != http.StatusSeeOther || h.Get("Location") != "/ui/overview" {
		t.Fatalf("GET /: %d Location=%q %q, want 303 to /ui/overview", status, h.Get("Location"), body)
	}
	status, _, body = get(t, f.srv.URL+"/ui/overview", nil, "")
	if status != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) || !strings.Contains(body, `value="/ui/overview"`) {
		t.Fatalf("/ui/overview without a session: %d, want the sign-in form going on to it:\n%s", status, body)
	}
	status, _, body = get(t, f.srv.URL+"/ui/overview", nil, testToken)
	if status != http.StatusOK || !strings.Contains(body, "Overview") {
		t.Fatalf("/ui/overview with the token: %d\n%s", status, body)
	}
	if r := do(t, http.MethodPost, f.srv.URL+"/", testToken); r.status == http.StatusSeeOther || r.status == http.StatusOK {
		t.Fatalf("POST /: %d, want no page", r.status)
	}

	open := newFixture(t, "")
	req, _ := http.NewRequest(http.MethodGet, open.srv.URL+"/", nil)
	status, _, body = page(t, http.DefaultClient, req) // follows the redirect
	if status != http.StatusOK || !strings.Contains(body, "Overview") {
		t.Fatalf("GET / without a token, followed: %d\n%s", status, body)
	}
}
