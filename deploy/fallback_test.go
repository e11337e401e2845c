package deploy_test

// nginx/hookonce-fallback.conf, for real: the front nginx (hookonce.conf
// with the fallback included and error_page in the webhook location), a
// hookonce this test starts, stops and breaks, and the site's PHP, where
// the runs are counted.

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
)

// withFallback is the front's text with the fallback switched on as the
// file's own comment says: included at the server level, and error_page
// in each webhook location.
func withFallback(t *testing.T, front string) string {
	t.Helper()
	const name = "nginx/hookonce.conf"
	front = mustReplace(t, name, front, "include hookonce-webhook.conf;\n    }",
		"include hookonce-webhook.conf;\n        error_page 502 = @hookonce_down;\n    }")
	return mustReplace(t, name, front, "    merge_slashes on;\n", "    merge_slashes on;\n    include hookonce-fallback.conf;\n")
}

// TestFallbackOnlyWhenHookonceIsDown: with hookonce not listening, a
// delivery reaches PHP through the fallback (once); with hookonce up and
// the site down, hookonce's own 502 reaches the sender and PHP runs
// nothing; with hookonce up, a repeat is replayed; when hookonce breaks
// the connection after it forwarded the delivery, nginx's 502 is not
// turned into a second run; and after hookonce stops, the fallback takes
// over again.
func TestFallbackOnlyWhenHookonceIsDown(t *testing.T) {
	const path = "/api/webhooks/x.php"
	t.Setenv("SITE_TEST_STRIPE_SECRET", stripeSecret)
	site := sitetest.Start(t, sitetest.Options{
		Scripts: shopScripts,
		Server:  func(c sitetest.Conf) string { return siteConf(t, c) },
	})
	live := startHookonce(t, site.URL, shopConfig)
	// hookonce with its site unreachable: a port taken and given back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadSite := "http://" + ln.Addr().String()
	ln.Close()
	dead := startHookonce(t, deadSite, shopConfig)

	// hookonce's address, where this test serves one of the proxies, a
	// broken one, or nothing.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var serving atomic.Pointer[http.Handler]
	var srv *httptest.Server
	up := func(h http.Handler) {
		serving.Store(&h)
		if srv != nil {
			return
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("hookonce's address %s: %v", addr, err)
		}
		srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			(*serving.Load()).ServeHTTP(w, r)
		})}}
		srv.Start()
	}
	down := func() {
		if srv != nil {
			srv.Close() // closes the idle keep-alive connections nginx holds too
			srv = nil
		}
	}
	t.Cleanup(down)

	fallback := strings.ReplaceAll(string(readFile(t, "nginx/hookonce-fallback.conf")), "unix:/run/php/php8.2-fpm.sock", site.FastCGI)
	front := sitetest.StartNginx(t, sitetest.NginxOptions{
		HTTP: func(listen string) string {
			return withFallback(t, frontConf(t, listen, addr, site.Root, site.FastCGI, []string{path}))
		},
		Files: map[string]string{
			// nginx gives up on hookonce after 1s here, not 40s: the
			// timeout case below.
			"hookonce-webhook.conf": mustReplace(t, "nginx/hookonce-webhook.conf", string(readFile(t, "nginx/hookonce-webhook.conf")),
				"proxy_read_timeout 40s;", "proxy_read_timeout 1s;"),
			"hookonce-fallback.conf": fallback,
		},
	})
	deliver := func(id string) reply {
		t.Helper()
		return send(t, front.URL, "127.0.0.1", "POST", path, `{"id":"`+id+`"}`, "X-Event-Id", id)
	}
	runs := func(id string) int { t.Helper(); return len(runsOf(t, site, id)) }

	t.Run("HookonceDown", func(t *testing.T) {
		r := deliver("while-down")
		if r.status != 200 || runs("while-down") != 1 {
			t.Fatalf("hookonce down: %d %q, PHP ran %d times; want the fallback's 200 and one run", r.status, r.body, runs("while-down"))
		}
		if strings.Contains(live.Logs.String(), "while-down") {
			t.Fatal("hookonce saw the delivery")
		}
	})

	t.Run("SiteDownBehindHookonce", func(t *testing.T) {
		up(dead.Proxy)
		r := deliver("site-down")
		if r.status != http.StatusBadGateway || !strings.Contains(r.header.Get("Content-Type"), "problem+json") {
			t.Fatalf("site down: %d %s %q; want hookonce's own 502", r.status, r.header.Get("Content-Type"), r.body)
		}
		if n := runs("site-down"); n != 0 {
			t.Fatalf("the fallback ran PHP %d times after hookonce's 502", n)
		}
	})

	t.Run("Duplicate", func(t *testing.T) {
		up(live.Proxy)
		first, again := deliver("through"), deliver("through")
		if first.status != 200 || again.status != 200 || !again.replayed() || runs("through") != 1 {
			t.Fatalf("through hookonce: %d, then %d replayed=%v; PHP ran %d times, want 1", first.status, again.status, again.replayed(), runs("through"))
		}
	})

	t.Run("ConnectionBrokenAfterTheForward", func(t *testing.T) {
		// hookonce forwards the delivery (PHP runs it), then its
		// connection to nginx breaks before an answer: a crash mid-delivery.
		up(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			live.Proxy.ServeHTTP(httptest.NewRecorder(), r)
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, as a killed process leaves it
			}
			c.Close()
		}))
		r := deliver("broken")
		if r.status != http.StatusBadGateway {
			t.Fatalf("broken connection: %d %q, want nginx's 502", r.status, r.body)
		}
		if n := runs("broken"); n != 1 {
			t.Fatalf("PHP ran %d times, want 1: the fallback ran a delivery hookonce had forwarded", n)
		}
	})

	t.Run("NginxTimesOut", func(t *testing.T) {
		// hookonce forwards the delivery (PHP runs it) and is still busy
		// when nginx stops waiting: nginx's own 504, never a second run.
		up(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			live.Proxy.ServeHTTP(httptest.NewRecorder(), r)
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}))
		r := deliver("slow")
		if r.status != http.StatusGatewayTimeout {
			t.Fatalf("hookonce too slow: %d %q, want nginx's 504", r.status, r.body)
		}
		if n := runs("slow"); n != 1 {
			t.Fatalf("PHP ran %d times, want 1: the fallback ran a delivery hookonce had forwarded", n)
		}
	})

	t.Run("HookonceStoppedAfterServing", func(t *testing.T) {
		up(live.Proxy)
		if r := deliver("before-stop"); r.status != 200 {
			t.Fatalf("before the stop: %d", r.status)
		}
		down()
		time.Sleep(200 * time.Millisecond) // nginx drops the keep-alive connections hookonce closed
		r := deliver("after-stop")
		if r.status != 200 || runs("after-stop") != 1 || runs("before-stop") != 1 {
			t.Fatalf("after the stop: %d %q, PHP ran it %d times; want the fallback's 200 and one run", r.status, r.body, runs("after-stop"))
		}
	})
	if t.Failed() {
		t.Logf("front nginx error log:\n%s\naccess log:\n%s", front.ErrorLog(), front.AccessLog())
	}
}
