// Package sqlite is the embedded dedupe.Store: one file, no server, one host.
//
// Writes go through a single connection (SQLite has one writer anyway) in
// BEGIN IMMEDIATE transactions, so a claim never upgrades a read lock and
// never sees SQLITE_BUSY without waiting for busy_timeout. The writes of the
// hot path (claims, completions, releases, holds, renewals, conflicts) are
// group-committed: those waiting at once share one transaction (batch.go). Reads use a small
// pool of their own, which WAL lets run beside the writer. The file must sit
// on a local disk: WAL does not work over a network filesystem.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hookonce/hookonce/dedupe"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

var _ dedupe.Store = (*Store)(nil)
var _ dedupe.Migrator = (*Store)(nil)
var _ dedupe.ObjectLocker = (*Store)(nil)

// migrations take the schema from one version to the next:
// migrations/NNNN_*.sql moves a database at PRAGMA user_version NNNN-1 to
// NNNN, in file name order, as PostgreSQL's migrations do. A released step
// is never edited; a change of schema is a new file at the end, applied in
// place by Open to every existing file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the steps' SQL, migrations[i] taking version i to i+1.
var migrations = loadMigrations()

// schemaVersion is stored in PRAGMA user_version once migrated.
var schemaVersion = len(migrations)

func loadMigrations() []string {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, name := range names {
		if want := fmt.Sprintf("migrations/%04d_", i+1); !strings.HasPrefix(name, want) {
			panic(fmt.Sprintf("sqlite migrations: %s is step %d, want a name starting %s", name, i+1, want))
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		out[i] = string(b)
	}
	return out
}

// Store is a dedupe.Store in one SQLite file.
type Store struct {
	path string
	w, r *sql.DB // w: the single writer connection; r: readers
	// ws, rs: the statements of every delivery, prepared on w and r (stmts.go).
	ws, rs *stmts

	// Group commit (batch.go): reqs carries the writes to the writer
	// goroutine, which stops when quit is closed and then closes writerDone.
	reqs       chan *writeReq
	quit       chan struct{}
	writerDone chan struct{}
	queued     atomic.Int64 // writes sent and not yet taken by the writer
	commits    atomic.Int64 // transactions the writer committed

	// syncNormal: opened with synchronous=normal; a batch holding a
	// synced item (writeReq.synced) then commits under FULL, counted in
	// syncedBatches.
	syncNormal    bool
	syncedBatches atomic.Int64

	// Checkpoints off the writer (checkpoint.go; synchronous=normal only,
	// else ckpt is nil): the checkpointer's own connection, its wake-up
	// after commits, closed when it has stopped; the WAL's frames at its
	// last checkpoint; purges running.
	ckpt      *sql.DB
	ckptKick  chan struct{}
	ckptDone  chan struct{}
	walFrames atomic.Int64
	purging   atomic.Int32

	// check is the file's integrity, checked in the background (check.go).
	check integrity

	closeOnce sync.Once
	closeErr  error
}

// Synchronous is SQLite's synchronous setting for the store's writes: when
// a commit counts as done.
type Synchronous string

const (
	// SyncFull (the default): every commit is synced to the disk before it
	// is acknowledged (in WAL mode, the WAL file is fsynced at each commit),
	// so an acknowledged claim or answer survives a power loss. Group
	// commit shares one sync among the writes waiting at once.
	SyncFull Synchronous = "full"
	// SyncNormal: the WAL is synced only at checkpoints. A commit survives
	// a crash of hookonce, but a power loss or a kernel crash can undo the
	// last commits before the next checkpoint (the file stays consistent).
	SyncNormal Synchronous = "normal"
)

// Options are the settings of a store a DSN may carry (ParseDSN).
type Options struct {
	// Synchronous is SyncFull when empty.
	Synchronous Synchronous
}

// ParseDSN splits the text after "sqlite:" into the file's path and the
// store's options: sqlite:PATH, or sqlite:PATH?synchronous=normal. The
// text after the last '?' is read as parameters when it has the form
// name=value[&name=value…] (lowercase names), and an unknown name or value
// is an error, so that a misspelt option never becomes part of a file
// name; any other '?' stays in the path.
func ParseDSN(s string) (string, Options, error) {
	var o Options
	i := strings.LastIndexByte(s, '?')
	if i < 0 || !paramsLike(s[i+1:]) {
		return s, o, nil
	}
	path, params := s[:i], s[i+1:]
	for _, kv := range strings.Split(params, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "synchronous":
			switch Synchronous(strings.ToLower(v)) {
			case SyncFull, SyncNormal:
				o.Synchronous = Synchronous(strings.ToLower(v))
			default:
				return "", o, fmt.Errorf("sqlite store: synchronous=%s: want full or normal", v)
			}
		default:
			return "", o, fmt.Errorf("sqlite store: unknown parameter %q (known: synchronous=full|normal)", k)
		}
	}
	return path, o, nil
}

// paramsLike reports whether s reads as name=value[&name=value…].
func paramsLike(s string) bool {
	if s == "" {
		return false
	}
	for _, kv := range strings.Split(s, "&") {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return false
		}
		for _, c := range k {
			if (c < 'a' || c > 'z') && c != '_' {
				return false
			}
		}
	}
	return true
}

// Open opens the database at path for serving with the default options
// (OpenWith).
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith opens the database at path for serving: it creates the file if
// needed and migrates it, as every backend's Open does. Read-only tools use
// OpenReadOnly, which creates, migrates and writes nothing.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	sync := "synchronous(FULL)"
	switch o.Synchronous {
	case "", SyncFull:
	case SyncNormal:
		sync = "synchronous(NORMAL)"
	default:
		return nil, fmt.Errorf("open sqlite %s: synchronous=%s: want full or normal", path, o.Synchronous)
	}
	dsn := func(extra string) string {
		q := url.Values{}
		for _, p := range []string{"busy_timeout(5000)", "journal_mode(WAL)", sync, "foreign_keys(ON)"} {
			q.Add("_pragma", p)
		}
		if extra != "" {
			q.Add("_pragma", extra)
		}
		q.Set("_txlock", "immediate")
		return fileURI(path, q)
	}
	offWriter := sync == "synchronous(NORMAL)" // checkpoints off the writer (checkpoint.go)
	writerExtra := ""
	if offWriter {
		writerExtra = "wal_autocheckpoint(0)"
	}
	w, err := sql.Open("sqlite", dsn(writerExtra))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate sqlite %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn("query_only(ON)"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4) // the default keeps 2: under load the others were reopened for every read
	ws, err := prepareAll(ctx, w, writerQueries)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	rs, err := prepareAll(ctx, r, readerQueries)
	if err != nil {
		ws.close()
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	s := &Store{path: path, w: w, r: r, ws: ws, rs: rs, syncNormal: offWriter,
		reqs: make(chan *writeReq), quit: make(chan struct{}), writerDone: make(chan struct{})}
	if offWriter {
		if err := s.startCheckpointer(dsn("")); err != nil {
			rs.close()
			ws.close()
			r.Close()
			w.Close()
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
	}
	go s.writer()
	s.startCheck()
	return s, nil
}

// fileURI is the SQLite URI filename of path with the driver's and
// SQLite's parameters q. Characters that a URI gives a meaning to are
// escaped, so the path names the same file in every mode it is opened in.
func fileURI(path string, q url.Values) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	return "file:" + esc + "?" + q.Encode()
}

// Migrate applies pending migrations (Open already has): nothing to do on
// a current file.
func (s *Store) Migrate(ctx context.Context) error {
	if err := migrate(ctx, s.w); err != nil {
		return fmt.Errorf("migrate sqlite %s: %w", s.path, err)
	}
	return nil
}

// migrate applies the pending steps in one BEGIN IMMEDIATE transaction, so
// two processes opening one file at once take turns: the second reads the
// version the first committed and has nothing left to do.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("database schema version %d is newer than this binary's %d", v, schemaVersion)
	}
	for i := v; i < schemaVersion; i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("schema version %d to %d: %w", i, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// Close stops the writer, once the batch it is running is answered, then
// closes both pools; safe to call twice. Writes after Close fail with
// dedupe.ErrUnavailable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.writerDone
		var ckptErr error
		if s.ckpt != nil {
			<-s.ckptDone
			ckptErr = s.ckpt.Close()
		}
		s.stopCheck()
		s.closeErr = errors.Join(s.rs.close(), s.ws.close(), s.r.Close(), ckptErr, s.w.Close())
	})
	return s.closeErr
}

// unavailable wraps a driver error so callers can tell "store down" apart.
func unavailable(op string, err error) error {
	return fmt.Errorf("sqlite %s: %w: %w", op, dedupe.ErrUnavailable, err)
}
