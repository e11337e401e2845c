package tests

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// openSQLite opens the store file the CLI under test is pointed at.
func openSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// httpGet fetches u with an optional bearer token.
func httpGet(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
