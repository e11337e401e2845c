package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLockID is the pg_advisory_xact_lock key that serialises
// migrations of replicas starting at the same moment ("hookonce" in ASCII).
const migrationLockID int64 = 0x686f6f6b6f6e6365

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version and '_'", base)
		}
		b, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

func latestVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate applies pending migrations in one transaction under a
// transaction-scoped advisory lock, so that replicas starting together
// apply each migration exactly once (the others wait, then find nothing to
// do), and a migration that fails leaves the schema as it was. The lock goes
// with the transaction: nothing can leak through the pool.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("postgres migrate: %w", err)
	}
	// Already current: nothing to lock and no DDL, so a role without CREATE
	// can serve a database migrated by a stronger one.
	if err := s.Ping(ctx); err == nil {
		return nil
	} else if errors.Is(err, dedupe.ErrUnavailable) {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fail("migrate", err)
	}
	defer func() {
		// After a commit this is a no-op; after a failure it must not hang
		// on a database that stopped answering.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	// Waiting for another replica's migration is expected; the caller's
	// context bounds it, not the claims' lock_timeout.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0`); err != nil {
		return fail("migrate", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockID); err != nil {
		return fail("migrate: lock", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS hookonce_schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return fail("migrate", err)
	}
	applied := map[int]bool{}
	rows, err := tx.Query(ctx, `SELECT version FROM hookonce_schema_migrations`)
	if err != nil {
		return fail("migrate", err)
	}
	for rows.Next() {
		var v int32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fail("migrate", err)
		}
		applied[int(v)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("migrate", err)
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fail("migrate "+m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO hookonce_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return fail("migrate "+m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fail("migrate: commit", err)
	}
	return nil
}
