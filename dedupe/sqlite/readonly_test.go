package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/internal/testkit/unprivileged"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustOpen(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(ctxT(t), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustOpenReadOnly(t *testing.T, path string) dedupe.Store {
	t.Helper()
	s, err := sqlite.OpenReadOnly(ctxT(t), path)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// names lists a directory, to show that a read created nothing.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// seedDone stores one done record.
func seedDone(t *testing.T, s dedupe.Store, sender, key string) {
	t.Helper()
	o := "o-" + key
	if _, err := s.Claim(ctxT(t), dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: o,
		Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctxT(t), sender, key, o, dedupe.Response{Status: 200, Body: []byte("answer " + key)}, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "complete"}); err != nil {
		t.Fatal(err)
	}
}

func listKeys(t *testing.T, s dedupe.Reader, sender string) []string {
	t.Helper()
	recs, err := s.List(ctxT(t), dedupe.ListFilter{Sender: sender})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Key)
	}
	slices.Sort(out)
	return out
}

func TestReadOnlyConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookonce.db")
	rw := mustOpen(t, path)
	dedupetest.RunReadOnly(t, rw, func(t *testing.T) dedupe.Store { return mustOpenReadOnly(t, path) })
}

// A missing file is an error that says so, and nothing is created: not the
// database, not a -wal or -shm.
func TestOpenReadOnlyCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing.db")
	_, err := sqlite.OpenReadOnly(ctxT(t), path)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("OpenReadOnly of a missing file: %v, want an error saying it does not exist", err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Fatalf("OpenReadOnly of a missing file left %v", got)
	}

	// An empty file and a file of another program are not migrated stores;
	// neither is migrated (nor touched).
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.OpenReadOnly(ctxT(t), empty); err == nil || !strings.Contains(err.Error(), "not migrated") {
		t.Fatalf("OpenReadOnly of an empty file: %v, want not migrated", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("the empty file was written to: %v, %v", fi.Size(), err)
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.OpenReadOnly(ctxT(t), junk); err == nil {
		t.Fatal("OpenReadOnly of a file that is no database succeeded")
	}
	if got := names(t, dir); !slices.Equal(got, []string{"empty.db", "junk.db"}) {
		t.Fatalf("directory holds %v after failed opens", got)
	}
	if _, err := sqlite.OpenReadOnly(ctxT(t), dir); err == nil {
		t.Fatal("OpenReadOnly of a directory succeeded")
	}
}

// A store whose file and directory are read-only to this user reads,
// whether it was closed cleanly (no -wal: nothing can be created beside
// it) or a writer has it open (its -wal and -shm are not writable here),
// and the read creates nothing. Root ignores permissions, so as root the
// test runs again as nobody.
func TestReadOnlyFileAndDirectory(t *testing.T) {
	if unprivileged.Rerun(t) {
		return
	}
	readOnly := func(t *testing.T, dir, path string) {
		t.Helper()
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) }) // so that the temporary directory can go
	}

	t.Run("closed store", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "h.db")
		rw := mustOpen(t, path)
		seedDone(t, rw, "shop", "a")
		seedDone(t, rw, "shop", "b")
		rw.Close()
		readOnly(t, dir, path)
		before := names(t, dir)

		ro := mustOpenReadOnly(t, path)
		if got := listKeys(t, ro, "shop"); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("List = %v, want [a b]", got)
		}
		if rec, err := ro.Get(ctxT(t), "shop", "b"); err != nil || string(rec.Response.Body) != "answer b" {
			t.Fatalf("Get = %+v, %v", rec, err)
		}
		if err := ro.Forget(ctxT(t), "shop", "a"); !errors.Is(err, dedupe.ErrReadOnly) {
			t.Fatalf("Forget on a read-only store: %v", err)
		}
		ro.Close()
		if got := names(t, dir); !slices.Equal(got, before) {
			t.Fatalf("directory %v became %v", before, got)
		}
	})

	t.Run("beside a running writer", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "h.db")
		rw := mustOpen(t, path)
		seedDone(t, rw, "shop", "a")
		readOnly(t, dir, path) // the writer keeps its open files
		before := names(t, dir)
		if !slices.Contains(before, "h.db-wal") {
			t.Fatalf("a running writer without a -wal: %v", before)
		}

		ro := mustOpenReadOnly(t, path)
		if got := listKeys(t, ro, "shop"); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("List = %v, want [a]", got)
		}
		seedDone(t, rw, "shop", "b") // committed in the WAL only
		if got := listKeys(t, ro, "shop"); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("List after the writer's commit = %v, want [a b]", got)
		}
		ro.Close()
		if got := names(t, dir); !slices.Equal(got, before) {
			t.Fatalf("directory %v became %v", before, got)
		}
	})
}

// A read-only handle opened while nobody had the file open reads it without
// locks; when a writer starts afterwards, the handle notices and reads what
// the writer committed.
func TestReadOnlyNoticesAWriterThatStartsLater(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.db")
	rw := mustOpen(t, path)
	seedDone(t, rw, "shop", "a")
	rw.Close()
	if got := names(t, dir); !slices.Equal(got, []string{"h.db"}) {
		t.Fatalf("a cleanly closed store left %v", got)
	}
	ro := mustOpenReadOnly(t, path)
	if got := listKeys(t, ro, "shop"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("List = %v, want [a]", got)
	}

	rw = mustOpen(t, path)
	seedDone(t, rw, "shop", "b")
	if got := listKeys(t, ro, "shop"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("List after a writer started = %v, want [a b]", got)
	}
	seedDone(t, rw, "shop", "c")
	if rec, err := ro.Get(ctxT(t), "shop", "c"); err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("Get of the writer's latest record: %+v, %v", rec, err)
	}
	// The writer closes (checkpointing into the file, deleting the -wal):
	// the handle reads the file as it is now.
	rw.Close()
	seedDoneFresh(t, path, "d")
	if got := listKeys(t, ro, "shop"); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("List after the writer closed = %v, want [a b c d]", got)
	}
}

// seedDoneFresh opens the store, adds a record and closes it again.
func seedDoneFresh(t *testing.T, path, key string) {
	t.Helper()
	s, err := sqlite.Open(ctxT(t), path)
	if err != nil {
		t.Fatal(err)
	}
	seedDone(t, s, "shop", key)
	s.Close()
}

func TestProbeFailsWhenWritesFail(t *testing.T) {
	t.Run("another connection holds the write lock", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "h.db")
		s := mustOpen(t, path)
		if err := s.Probe(ctxT(t)); err != nil {
			t.Fatalf("Probe: %v", err)
		}
		other, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		conn, err := other.Conn(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctxT(t), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		began := time.Now()
		if err := s.Probe(ctx); !errors.Is(err, dedupe.ErrUnavailable) {
			t.Fatalf("Probe while another connection holds the write lock: %v, want ErrUnavailable", err)
		} else if took := time.Since(began); took > 3*time.Second {
			t.Fatalf("Probe took %v past its context's 300ms", took)
		}
		if err := s.Ping(ctxT(t)); err != nil {
			t.Fatalf("Ping while writes wait: %v", err)
		}
		if _, err := conn.ExecContext(ctxT(t), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if err := s.Probe(ctxT(t)); err != nil {
			t.Fatalf("Probe once the lock is gone: %v", err)
		}
	})
}

// A store whose file and directory are made read-only under it still
// answers Ping, and its open connection could even go on writing, but the
// next one could not: Probe says so, and says it no more once they are
// writable again. As root (which ignores modes) the test runs as nobody.
func TestProbeSeesAReadOnlyFile(t *testing.T) {
	if unprivileged.Rerun(t) {
		return
	}
	for _, which := range []string{"file", "directory"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "h.db")
			s := mustOpen(t, path)
			if err := s.Probe(ctxT(t)); err != nil {
				t.Fatalf("Probe: %v", err)
			}
			target, mode := path, os.FileMode(0o444)
			if which == "directory" {
				target, mode = dir, 0o555
			}
			if err := os.Chmod(target, mode); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(target, 0o755) })
			err := s.Probe(ctxT(t))
			if !errors.Is(err, dedupe.ErrUnavailable) || !strings.Contains(err.Error(), "not writable") {
				t.Fatalf("Probe with the %s read-only: %v, want ErrUnavailable saying not writable", which, err)
			}
			if err := s.Ping(ctxT(t)); err != nil {
				t.Fatalf("Ping with the %s read-only: %v", which, err)
			}
			if err := os.Chmod(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := s.Probe(ctxT(t)); err != nil {
				t.Fatalf("Probe once writable again: %v", err)
			}
		})
	}
}
