package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

// The unix:// form redis.Open documents reaches Redis over its socket,
// for serve and for the read-only commands.
func TestOpenStoreRoutesUnixRedis(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	dsn := "unix://" + sock
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := openStore(ctx, dsn, readWrite)
	if err != nil {
		t.Fatalf("openStore %s: %v", dsn, err)
	}
	defer s.Close()
	if _, ok := s.(dedupe.Migrator); ok {
		t.Error("the redis store claims a schema to migrate")
	}
	ro, err := openStore(ctx, dsn, readOnly)
	if err != nil {
		t.Fatalf("openStore %s read-only: %v", dsn, err)
	}
	defer ro.Close()
	if _, err := ro.Get(ctx, "shop", "none"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Get over the socket: %v, want ErrNotFound", err)
	}
	if _, errOut, code := hookonce(t, "purge", "--store", dsn); code != exitOK {
		t.Fatalf("purge --store %s: exit %d %s", dsn, code, errOut)
	}
}

// Open means connect and migrate for every backend that has a schema.
func TestOpenStoreMigrates(t *testing.T) {
	ctx := context.Background()
	s, err := openStore(ctx, "sqlite:"+filepath.Join(t.TempDir(), "h.db"), readWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping right after Open: %v", err)
	}
	if m, ok := s.(dedupe.Migrator); !ok {
		t.Fatal("the sqlite store is no dedupe.Migrator")
	} else if err := m.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after Open: %v", err)
	}
	if _, err := openStore(ctx, "mysql://db/x", readWrite); err == nil || !strings.Contains(err.Error(), "unknown store") {
		t.Fatalf("mysql://: %v, want unknown store", err)
	}
}

// sqlite:PATH?synchronous=normal opens PATH itself (not a file named with
// the parameter), for serve and for the read-only commands, and a
// misspelt parameter is refused before any file is made.
func TestOpenStoreSQLiteSynchronous(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "h.db")
	s, err := openStore(ctx, "sqlite:"+path+"?synchronous=normal", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the store's file: %v", err)
	}
	ro, err := openStore(ctx, "sqlite:"+path+"?synchronous=normal", readOnly)
	if err != nil {
		t.Fatalf("read-only: %v", err)
	}
	ro.Close()
	bad := filepath.Join(dir, "other.db")
	if _, err := openStore(ctx, "sqlite:"+bad+"?synchronus=normal", readWrite); err == nil || !strings.Contains(err.Error(), "unknown parameter") {
		t.Fatalf("a misspelt parameter: %v, want unknown parameter", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "other*")); len(names) != 0 {
		t.Errorf("a refused DSN made files: %v", names)
	}
}
