package probe_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/hookonce/hookonce/dedupe"
)

// probetestAdmin serves the admin API's event endpoints (DESIGN.md, "Admin
// listener") straight from a store, so the probe's admin phases are tested
// without depending on the admin package.
func probetestAdmin(store dedupe.Store, token string) http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	filter := func(r *http.Request) dedupe.ListFilter {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		return dedupe.ListFilter{Sender: r.URL.Query().Get("sender"), State: dedupe.State(r.URL.Query().Get("status")), Limit: limit}
	}
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		recs, err := store.List(r.Context(), filter(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := []dedupe.RecordJSON{}
		for _, rec := range recs {
			out = append(out, rec.JSON())
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /v1/conflicts", func(w http.ResponseWriter, r *http.Request) {
		cs, err := store.Conflicts(r.Context(), filter(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := []dedupe.ConflictJSON{}
		for _, c := range cs {
			out = append(out, c.JSON())
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /v1/events/{sender}/{key}", func(w http.ResponseWriter, r *http.Request) {
		rec, err := store.Get(r.Context(), r.PathValue("sender"), r.PathValue("key"))
		if errors.Is(err, dedupe.ErrNotFound) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, rec.JSON())
	})
	mux.HandleFunc("DELETE /v1/events/{sender}/{key}", func(w http.ResponseWriter, r *http.Request) {
		err := store.Forget(r.Context(), r.PathValue("sender"), r.PathValue("key"))
		if errors.Is(err, dedupe.ErrNotFound) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
