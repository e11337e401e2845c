package admin

import (
	"net/http"
	"net/http/pprof"

	"github.com/hookonce/hookonce/internal/problem"
)

// routeProfiling serves Go's profiles under /debug/pprof/ to a caller with
// the admin token, and to nobody when no token is configured: a profile
// tells how hookonce spends its time (curl -H "Authorization: Bearer $T"
// -o cpu.pprof '…/debug/pprof/profile?seconds=30', then go tool pprof), but
// a goroutine dump is not for whoever reaches a loopback port. /debug/pprof/cmdline is not served: the
// command line may carry a store DSN with its password.
//
// Importing net/http/pprof also registers its handlers on
// http.DefaultServeMux; hookonce never serves that mux.
func (h *Handler) routeProfiling() {
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h.o.Token == "" {
				problem.Write(w, http.StatusNotFound, "Not found", "profiling needs an admin token (--admin-token-file)")
				return
			}
			if !h.authorized(r) {
				unauthorized(w)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h.mux.Handle("GET /debug/pprof/{$}", guard(http.HandlerFunc(pprof.Index)))
	h.mux.Handle("GET /debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
	h.mux.Handle("GET /debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	h.mux.Handle("GET /debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
	h.mux.Handle("POST /debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
	for _, name := range []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"} {
		h.mux.Handle("GET /debug/pprof/"+name, guard(pprof.Handler(name)))
	}
}
