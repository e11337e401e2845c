package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"sync"

	"github.com/hookonce/hookonce/dedupe"
)

// OpenReadOnly opens the existing, migrated store at path for the
// operator's read-only commands. It creates, migrates and writes nothing:
// a missing file is an error (not a new empty store), and it reads a file
// that is read-only, in a read-only directory or on a full disk, beside a
// running serve or not. Every write of the returned Store fails with
// dedupe.ErrReadOnly, the object locks' too (dedupe.ReadOnly is a
// dedupe.ObjectLocker that refuses them).
//
// How it reads depends on what is on disk (the store is always in WAL
// mode, see Open):
//
//   - a -wal file beside the database: some connection has it open (or
//     crashed with it open). The file is read through SQLite's locks with
//     mode=ro, which sees what is committed in the WAL; SQLite reads a -shm
//     it may not write without writing it.
//   - no -wal file: nobody has the database open, since every connection
//     in WAL mode keeps the -wal and the last one to close checkpoints it
//     into the file and deletes it. The file is then complete, and is read
//     with immutable=1, which needs no lock, -wal or -shm (mode=ro would
//     create both, fail where it cannot, and leave them behind). Because a
//     server could start in the middle of the read, every read is followed
//     by a look at the file and the -wal: if either changed, what was read
//     is thrown away and read again, through the locks this time.
func OpenReadOnly(ctx context.Context, path string) (dedupe.Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("sqlite store %s does not exist (serve or hookonce migrate creates it)", path)
	case err != nil:
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	case fi.IsDir():
		return nil, fmt.Errorf("sqlite store %s is a directory, not a database file", path)
	}
	r := &reader{path: path}
	if err := r.open(); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	var v int
	err = r.read("open", func(db *sql.DB) error {
		return db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	})
	switch {
	case err != nil:
		err = fmt.Errorf("open sqlite %s: %w", path, err)
	case v == 0:
		err = fmt.Errorf("sqlite store %s is not migrated (schema version 0): serve or hookonce migrate migrates it", path)
	case v != schemaVersion:
		err = fmt.Errorf("sqlite store %s has schema version %d; this binary reads version %d", path, v, schemaVersion)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return dedupe.ReadOnly(r), nil
}

// maxReadAttempts bounds the reads of a file that keeps changing under an
// unlocked read.
const maxReadAttempts = 3

// reader is the dedupe.Reader of OpenReadOnly.
type reader struct {
	path string

	mu     sync.RWMutex // held for reading while a query runs; for writing to swap db
	db     *sql.DB
	snap   *fileState // non-nil while db reads the file as immutable
	closed bool
}

var _ dedupe.Reader = (*reader)(nil)

// fileState is what a writer would change: the database file and whether a
// -wal exists beside it.
type fileState struct {
	db  os.FileInfo
	wal bool
}

func statFiles(path string) (fileState, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileState{}, err
	}
	_, err = os.Stat(path + "-wal")
	switch {
	case err == nil:
		return fileState{db: fi, wal: true}, nil
	case errors.Is(err, fs.ErrNotExist):
		return fileState{db: fi}, nil
	default:
		return fileState{}, err
	}
}

// same reports whether nothing a writer does happened since s was taken.
func (s fileState) same(now fileState) bool {
	return !now.wal && os.SameFile(s.db, now.db) && s.db.Size() == now.db.Size() &&
		s.db.ModTime().Equal(now.db.ModTime())
}

// walHeader reports whether the database file is in WAL mode (file format
// bytes 18 and 19 are 2).
func walHeader(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		// Shorter than a header: empty, or not a database; mode=ro says which.
		return false, nil
	}
	if !bytes.HasPrefix(h[:], []byte("SQLite format 3\x00")) {
		return false, nil
	}
	return h[18] == 2 && h[19] == 2, nil
}

// open decides how to read the file as it is now, and opens it so. The
// caller holds mu for writing (or is OpenReadOnly).
func (r *reader) open() error {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(ON)")
	st, err := statFiles(r.path)
	if err != nil {
		return err
	}
	r.snap = nil
	if !st.wal {
		wal, err := walHeader(r.path)
		if err != nil {
			return err
		}
		if wal {
			q.Set("immutable", "1")
			r.snap = &st
		}
	}
	db, err := sql.Open("sqlite", fileURI(r.path, q))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(2)
	r.db = db
	return nil
}

// read runs fn on the current handle; after an unlocked (immutable) read it
// makes sure no writer came along, and reads again if one did.
func (r *reader) read(op string, fn func(db *sql.DB) error) error {
	for attempt := 1; ; attempt++ {
		r.mu.RLock()
		if r.closed {
			r.mu.RUnlock()
			return unavailable(op, errors.New("store closed"))
		}
		db, snap := r.db, r.snap
		err := fn(db)
		r.mu.RUnlock()
		if snap == nil {
			return err
		}
		now, serr := statFiles(r.path)
		if serr == nil && snap.same(now) {
			return err
		}
		if attempt == maxReadAttempts {
			return unavailable(op, errors.New("the database file kept changing while it was read; retry"))
		}
		if err := r.reopen(db); err != nil {
			return unavailable(op, err)
		}
	}
}

// reopen replaces old with a handle chosen for the file as it is now,
// unless another read did so already.
func (r *reader) reopen(old *sql.DB) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.db != old {
		return nil
	}
	old.Close()
	return r.open()
}

// Get implements dedupe.Reader.
func (r *reader) Get(ctx context.Context, sender, key string) (rec dedupe.Record, err error) {
	err = r.read("get "+sender+"/"+key, func(db *sql.DB) error {
		rec, err = getRecord(ctx, db, nil, sender, key)
		return err
	})
	return rec, err
}

// List implements dedupe.Reader.
func (r *reader) List(ctx context.Context, f dedupe.ListFilter) (recs []dedupe.Record, err error) {
	err = r.read("list", func(db *sql.DB) error {
		recs, err = listRecords(ctx, db, f)
		return err
	})
	return recs, err
}

// Conflicts implements dedupe.Reader.
func (r *reader) Conflicts(ctx context.Context, f dedupe.ListFilter) (cs []dedupe.Conflict, err error) {
	err = r.read("conflicts", func(db *sql.DB) error {
		cs, err = listConflicts(ctx, db, f)
		return err
	})
	return cs, err
}

// AcceptedConflict implements dedupe.Reader.
func (r *reader) AcceptedConflict(ctx context.Context, sender, key, hash string) (c dedupe.Conflict, err error) {
	err = r.read("accepted conflict", func(db *sql.DB) error {
		c, err = findAccepted(ctx, db, sender, key, hash)
		return err
	})
	return c, err
}

// Ping implements dedupe.Reader: the file reads as a database migrated to
// this binary's schema.
func (r *reader) Ping(ctx context.Context) error {
	return r.read("ping", func(db *sql.DB) error { return ping(ctx, db) })
}

// Close implements dedupe.Reader; safe to call twice.
func (r *reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return r.db.Close()
}
