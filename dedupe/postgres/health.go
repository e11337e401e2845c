package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Warnings implements what serve logs at start: with pooler=transaction,
// the RoleSettings that the sessions lack (0, the server's default: no
// limit), with the ALTER ROLE that sets them. A read that fails is left
// to the store's first real use to report.
func (s *Store) Warnings(ctx context.Context) []string {
	if !s.pooler {
		return nil
	}
	var role string
	var missing []string
	err := s.db.QueryRow(ctx, `SELECT current_user, COALESCE(array_agg(name ORDER BY name) FILTER (WHERE setting = '0'), '{}')
		FROM pg_settings WHERE name = ANY($1::text[])`, RoleSettings).Scan(&role, &missing)
	if err != nil || len(missing) == 0 {
		return nil
	}
	var set []string
	for _, name := range missing {
		set = append(set, fmt.Sprintf("ALTER ROLE %s SET %s = '%s';", pgx.Identifier{role}.Sanitize(), name, defaultRuntimeParams[name]))
	}
	return []string{fmt.Sprintf("postgres store: with pooler=transaction hookonce sends no session settings, and the role %s has no %s: "+
		"nothing on the server bounds a stuck lock, statement or idle transaction (store_timeout still ends hookonce's wait); set them on the role (docs/stores.md, PgBouncer): %s",
		role, strings.Join(missing, ", "), strings.Join(set, " "))}
}

// Ping implements dedupe.Store: the database answers and the schema is at
// the version this binary expects.
func (s *Store) Ping(ctx context.Context) error {
	var v *int32
	err := s.db.QueryRow(ctx, `SELECT max(version) FROM hookonce_schema_migrations`).Scan(&v)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return errors.New("postgres ping: schema not migrated (run hookonce migrate)")
		}
		return fail("ping", err)
	}
	want := latestVersion()
	if v == nil || int(*v) < want {
		return fmt.Errorf("postgres ping: schema at version %v, want %d (run hookonce migrate)", derefOr(v), want)
	}
	return nil
}

// Probe implements dedupe.Store: a record of dedupe.ProbeSender inserted
// and deleted in one transaction, committed as a claim is. It needs only
// what claims need (INSERT and DELETE on hookonce_records), never shows to
// another transaction, and fails, wrapping dedupe.ErrUnavailable, where a
// claim would: a read-only transaction mode, a standby, a full disk, a
// stopped server.
func (s *Store) Probe(ctx context.Context) error {
	key := rand.Text()
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, expires_at)
			VALUES ($1, $2, 'processing', '', clock_timestamp(), clock_timestamp())`, dedupe.ProbeSender, key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM hookonce_records WHERE sender = $1 AND key = $2`, dedupe.ProbeSender, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres probe: %w: %w", dedupe.ErrUnavailable, err)
	}
	return nil
}

func derefOr(v *int32) int32 {
	if v == nil {
		return 0
	}
	return *v
}
