// Package problem writes RFC 9457 problem+json answers: the one format in
// which hookonce (the proxy and the admin listener alike) tells a client
// what went wrong. It never includes a body, a secret or a signature: the
// detail is hookonce's own text.
package problem

import (
	"encoding/json"
	"net/http"
)

// Write answers status with a problem+json body of title and detail.
func Write(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": title, "status": status, "detail": detail,
	})
}
