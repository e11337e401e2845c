//go:build benchcompare

package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookonce/hookonce/dedupe/postgres"
)

// The PostgreSQL floor: the statements hookonce's store runs for a new
// event (postgres.NewEventStatements: the delivery's first try, which
// inserts a new key, then Complete's fenced UPDATE), each in a transaction
// of its own, run by real pgbench (-M prepared) and by pgx, writing rows
// the size of hookonce's: every value but the key and the owner comes from
// a record hookonce stored earlier in the same run on the same cluster.
// hookonce sends the same statements group-committed (one commit per
// batch); the floor pays one commit per statement, two per event.

// pgSettings are the PostgreSQL settings of the run, docs/stores.md's
// "Settings for production" scaled to a 24 GiB machine that other servers
// share (shared_buffers below a quarter of it).
var pgSettings = [][2]string{
	{"fsync", "on"},
	{"full_page_writes", "on"},
	{"synchronous_commit", "on"},
	{"shared_buffers", "2GB"},
	{"effective_cache_size", "8GB"},
	{"maintenance_work_mem", "512MB"},
	{"checkpoint_timeout", "15min"},
	{"checkpoint_completion_target", "0.9"},
	{"max_wal_size", "8GB"},
	{"min_wal_size", "1GB"},
	{"wal_compression", "lz4"},
	{"autovacuum", "on"},
	{"log_checkpoints", "on"},
}

func pgSettingsMap() map[string]string {
	m := map[string]string{}
	for _, kv := range pgSettings {
		m[kv[0]] = kv[1]
	}
	return m
}

func pgSettingsText() string {
	var parts []string
	for _, kv := range pgSettings {
		parts = append(parts, kv[0]+"="+kv[1])
	}
	return strings.Join(parts, ", ")
}

// eventSample is one new event as hookonce's PostgreSQL store wrote it:
// the values of its first try and its completion, but the sender, the key
// and the owner.
type eventSample struct {
	hash        string
	lease, ttl  time.Duration
	reqBody     []byte    // nil for NULL
	reqHead     jsonBytes // nil for NULL
	status      int32
	respHeaders jsonBytes // nil for NULL
	respBody    []byte
	truncated   bool
	attempt     string // JSON: the record's one attempt
}

// jsonBytes is a JSON value the store passes as []byte (to a jsonb
// parameter), told apart from bytea values when written as a literal.
type jsonBytes []byte

// readSample reads the record of (sender, key), which must be a done
// event with one attempt; lease and ttl are the sender's (a done record no
// longer holds its lease).
func readSample(ctx context.Context, pool *pgxpool.Pool, sender, key string, lease, ttl time.Duration) (eventSample, error) {
	s := eventSample{lease: lease, ttl: ttl}
	var head, headers *string
	var status *int32
	var n int
	err := pool.QueryRow(ctx, `
		SELECT payload_hash, request_body, request_head::text, resp_status, resp_headers::text,
			resp_body, resp_truncated, jsonb_array_length(attempts), COALESCE((attempts->0)::text, '')
		FROM hookonce_records WHERE sender = $1 AND key = $2 AND state = 'done'`, sender, key).
		Scan(&s.hash, &s.reqBody, &head, &status, &headers, &s.respBody, &s.truncated, &n, &s.attempt)
	if err != nil {
		return s, fmt.Errorf("the sample event %s/%s: %w", sender, key, err)
	}
	if n != 1 || status == nil {
		return s, fmt.Errorf("the sample event %s/%s: %d attempts, status %v; want a done event with one attempt", sender, key, n, status)
	}
	s.status = *status
	if head != nil {
		s.reqHead = jsonBytes(*head)
	}
	if headers != nil {
		s.respHeaders = jsonBytes(*headers)
	}
	return s, nil
}

// first and complete are the statements' parameters, in the order
// postgres.NewEventStatements documents; pgxArgs passes them as the store
// does.
func (s eventSample) first(sender, key, owner string) []any {
	return []any{sender, key, s.hash, owner, s.lease.Microseconds(), s.ttl.Microseconds(), s.reqBody, s.reqHead, []byte(nil)}
}

func (s eventSample) complete(sender, key, owner string) []any {
	return []any{sender, key, owner, s.status, s.respHeaders, s.respBody, s.truncated, s.attempt}
}

// pgxArgs answers vals as the store passes them to pgx: JSON as []byte.
func pgxArgs(vals []any) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		if j, ok := v.(jsonBytes); ok {
			v = []byte(j)
		}
		out[i] = v
	}
	return out
}

func (s eventSample) String() string {
	req := "request not kept (NULL: store_request_body is off by default)"
	if s.reqBody != nil || s.reqHead != nil {
		req = fmt.Sprintf("request body %d B, request head %d B", len(s.reqBody), len(s.reqHead))
	}
	return fmt.Sprintf("%s, response %d with headers %d B and body %d B, attempt %d B",
		req, s.status, len(s.respHeaders), len(s.respBody), len(s.attempt))
}

// floorScript is the pgbench script: the two statements with their
// parameters replaced by pgbench variables (:k, :o, a fresh random key and
// owner per transaction) and by the sample's values as literals.
func floorScript(sender string, s eventSample) (string, error) {
	first, complete := postgres.NewEventStatements()
	const key, owner = ":k", ":o"
	firstSQL, err := substitute(first, sqlLiterals(s.first(sender, "", "")), map[int]string{2: key, 4: owner})
	if err != nil {
		return "", fmt.Errorf("first try: %w", err)
	}
	completeSQL, err := substitute(complete, sqlLiterals(s.complete(sender, "", "")), map[int]string{2: key, 3: owner})
	if err != nil {
		return "", fmt.Errorf("completion: %w", err)
	}
	script := `\set k random(1, 999999999999999)` + "\n" + `\set o random(1, 999999999999999)` + "\n" +
		strings.TrimSpace(firstSQL) + ";\n" + strings.TrimSpace(completeSQL) + ";\n"
	if err := checkPgbenchVars(script, "k", "o"); err != nil {
		return "", err
	}
	return script, nil
}

var paramRe = regexp.MustCompile(`\$[0-9]+`)

// substitute replaces each positional parameter of sql ($N, as a whole
// token: $1 never matches the start of $10) by vars[N] when set, else by
// lits[N-1]; every parameter must have a value.
func substitute(sql string, lits []string, vars map[int]string) (string, error) {
	var err error
	out := paramRe.ReplaceAllStringFunc(sql, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		if v, ok := vars[n]; ok {
			return v
		}
		if n < 1 || n > len(lits) {
			err = fmt.Errorf("parameter %s has no value", m)
			return m
		}
		return lits[n-1]
	})
	return out, err
}

// sqlLiterals writes each value as an SQL literal of the type the
// statement gives its parameter.
func sqlLiterals(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = sqlText(v)
		case jsonBytes:
			if v == nil {
				out[i] = "NULL"
			} else {
				out[i] = sqlText(string(v))
			}
		case []byte:
			if v == nil {
				out[i] = "NULL"
			} else {
				out[i] = sqlText(`\x` + hex.EncodeToString(v)) // bytea's hex input
			}
		case int32, int64:
			out[i] = fmt.Sprint(v)
		case bool:
			out[i] = strconv.FormatBool(v)
		default:
			panic(fmt.Sprintf("sqlLiterals: %T", a))
		}
	}
	return out
}

// sqlText is s as an escape string literal (E'…'). pgbench reads
// ":name" anywhere in a command, inside a literal too, as one of its
// variables (JSON's "a":1 would be variable 1), so colons are written as
// the escape \x3a: the value is the same, the text has none.
func sqlText(s string) string {
	var b strings.Builder
	b.WriteString("E'")
	for _, c := range []byte(s) {
		switch c {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`''`)
		case ':':
			b.WriteString(`\x3a`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("'")
	return b.String()
}

// checkPgbenchVars reads script as pgbench does (":name" is a variable,
// "::" a cast) and fails on any variable but allowed.
func checkPgbenchVars(script string, allowed ...string) error {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for i := 0; i < len(script); i++ {
		if script[i] != ':' {
			continue
		}
		if i+1 < len(script) && script[i+1] == ':' {
			i++
			continue
		}
		j := i + 1
		for j < len(script) && (script[j] == '_' || script[j] >= 0x80 ||
			'a' <= script[j] && script[j] <= 'z' || 'A' <= script[j] && script[j] <= 'Z' || '0' <= script[j] && script[j] <= '9') {
			j++
		}
		if name := script[i+1 : j]; name != "" && !ok[name] {
			return fmt.Errorf("pgbench script: :%s would be read as a variable", name)
		}
	}
	return nil
}

// checkpoint runs CHECKPOINT, so that no checkpoint the server would start
// by itself falls in the measured window that follows.
func checkpoint(pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("CHECKPOINT: %w", err)
	}
	return nil
}

var ownCheckpointRe = regexp.MustCompile(`checkpoint starting:.*\b(time|wal)\b`)

// serverCheckpoints counts the checkpoints the server started by itself
// (for time or WAL volume, not ours), from its log (log_checkpoints on).
func serverCheckpoints(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postgres.log"))
	if err != nil {
		return 0, err
	}
	return len(ownCheckpointRe.FindAll(b, -1)), nil
}
