// The admin token: the bearer check every API route and /metrics go
// through.

package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/hookonce/hookonce/internal/problem"
)

// authorized reports whether r carries the bearer token (or no token is
// configured).
func (h *Handler) authorized(r *http.Request) bool {
	if h.o.Token == "" {
		return true
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	// Hashing first makes the comparison independent of the length of
	// either side.
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// bearer guards next with the admin token.
func (h *Handler) bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			unauthorized(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="hookonce admin"`)
	problem.Write(w, http.StatusUnauthorized, "Unauthorized", "send Authorization: Bearer <admin token>")
}
