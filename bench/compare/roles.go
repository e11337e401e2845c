//go:build benchcompare

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// The deployment mode runs the site and the bare proxy as processes of
// their own: this program started again with roleEnv set.
const (
	roleEnv         = "HOOKONCE_COMPARE_ROLE"
	roleListenEnv   = "HOOKONCE_COMPARE_LISTEN"
	roleUpstreamEnv = "HOOKONCE_COMPARE_UPSTREAM"
	roleSite        = "site"
	roleBare        = "bare"
	// countPath answers how many webhooks (POSTs) the site has executed.
	countPath = "/__compare/count"
)

// runRole serves role on the listen address until SIGTERM; it reports
// whether this process was started in a role.
func runRole() (bool, error) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return false, nil
	}
	var h http.Handler
	switch role {
	case roleSite:
		var runs atomic.Int64
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == countPath {
				_, _ = io.WriteString(w, strconv.FormatInt(runs.Load(), 10))
				return
			}
			if r.Method == http.MethodPost {
				runs.Add(1)
			}
			upstreamHandler(w, r)
		})
	case roleBare:
		up, err := url.Parse(os.Getenv(roleUpstreamEnv))
		if err != nil {
			return true, err
		}
		// A transport keeping as many idle connections as hookonce's
		// (the default keeps 2 per host).
		h = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up); pr.SetXForwarded() },
			Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true,
				IdleConnTimeout: 90 * time.Second},
		}
	default:
		return true, fmt.Errorf("unknown role %q", role)
	}
	l, err := net.Listen("tcp", os.Getenv(roleListenEnv))
	if err != nil {
		return true, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != http.ErrServerClosed {
		return true, err
	}
	return true, nil
}
