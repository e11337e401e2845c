package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

func waitChecked(t *testing.T, s *sqlite.Store) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if done, bad := s.Checked(); done {
			return bad
		}
		if time.Now().After(deadline) {
			t.Fatal("the integrity check never finished")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A file damaged past its first pages opens (nothing at start reads that
// far), but the background check finds it and Probe, so /readyz, fails
// saying so; a sound file passes.
func TestDamagedFileFailsTheProbe(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookonce.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if bad := waitChecked(t, s); bad != "" {
		t.Fatalf("a new file: %s", bad)
	}
	// Enough records for many pages.
	body := []byte(strings.Repeat("x", 2000))
	for i := range 400 {
		key := fmt.Sprint("k", i)
		req := dedupe.ClaimRequest{Sender: "s", Key: key, PayloadHash: "h", Owner: "o" + key, Lease: time.Minute, TTL: time.Hour, RequestBody: body}
		if _, err := s.Claim(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Probe(ctx); err != nil {
		t.Fatalf("probe of a sound file: %v", err)
	}
	s.Close()

	// Damage a page in the middle of the file.
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := info.Size() / page
	if pages < 20 {
		t.Fatalf("only %d pages", pages)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", page/4)), (pages/2)*page); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("a file damaged past its first pages no longer opens (fine, but this test wants the other case): %v", err)
	}
	defer s.Close()
	if bad := waitChecked(t, s); bad == "" {
		t.Fatal("the check found nothing wrong with a damaged page")
	}
	err = s.Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("probe of a damaged file: %v", err)
	}
	t.Log(err)
}
