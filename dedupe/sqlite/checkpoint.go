package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Checkpoints off the writer, under synchronous=normal only (the opt-out;
// see the end of this comment for why not under full). SQLite's automatic
// checkpoint runs inside
// the commit that takes the WAL past 1,000 pages: that commit copies the
// WAL's pages into the file and syncs it while every claim queued behind it
// waits (at 1,000 new events/s offered: p99 21 ms against a p50 of
// 0.8 ms). The writer connection runs with wal_autocheckpoint off instead,
// and a connection of its own (checkpointer) runs a PASSIVE checkpoint
// after commits, at most one per checkpointEvery: it copies what is
// committed while the writer goes on, and never waits for the writer's
// lock. A WAL restarts (is written again from its start) only at a write
// transaction that finds every frame copied, which a writer that never
// pauses seldom gives it, so when the last checkpoint saw the WAL past
// walLimitFrames the writer checkpoints it itself between two batches
// (nothing new is committed meanwhile, so that one copies everything and
// the next transaction restarts the WAL). While a purge runs, the writer
// has SQLite's own automatic checkpoint back (purgeAutoCheckpoint): the
// purge's deletions touch pages all over the file, and a WAL left to the
// background then grows until the writer's own catch-up stalls claims for
// far longer than the commits that would have checkpointed on the way.
//
// Under synchronous=full (the default) every commit already waits for
// an fsync of the WAL, and the checkpointer's syncs of the database file
// compete with those on the same disk: at 1 M records and 1,000 new
// events/s offered it measured worse than SQLite's own checkpoint (p99
// 557 and 128 ms against 84 and 31 ms, two runs each on a loaded 2-core
// VM; docs/performance.md), so a FULL store keeps SQLite's automatic
// checkpoint. Under normal the checkpoint's sync is the only one a commit
// ever waits for, and moving it off the writer took the p99 at 1,000/s
// from 21 to 1.9 ms.
//
// On a full disk a WAL that restarted is written over in place, into
// blocks the file already has: a commit then needs no new space and
// succeeds where one appending to the WAL fails (faults/diskfull_test.go).

const (
	// checkpointEvery bounds the background checkpoints to 20 a second.
	checkpointEvery = 50 * time.Millisecond
	// walLimitFrames (~62 MiB of 4 KiB pages): past it the writer
	// checkpoints between two batches.
	walLimitFrames = 16000
	// purgeAutoCheckpoint is SQLite's default wal_autocheckpoint, given
	// back to the writer while a purge runs.
	purgeAutoCheckpoint = 1000
)

// startCheckpointer opens the checkpointer's connection and runs it until
// Close.
func (s *Store) startCheckpointer(dsn string) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	s.ckpt, s.ckptKick, s.ckptDone = db, make(chan struct{}, 1), make(chan struct{})
	go s.checkpointer()
	return nil
}

// kickCheckpoint tells the checkpointer (if any) that a transaction
// committed.
func (s *Store) kickCheckpoint() {
	select {
	case s.ckptKick <- struct{}{}:
	default:
	}
}

func (s *Store) checkpointer() {
	defer close(s.ckptDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.ckptKick:
		case <-s.quit:
			return
		}
		if _, frames, err := walCheckpoint(s.ckpt.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)); err == nil {
			s.walFrames.Store(frames)
		}
		t.Reset(checkpointEvery)
		select {
		case <-t.C:
		case <-s.quit:
			return
		}
	}
}

// writerCheckpoint runs on the writer between two batches: a checkpoint of
// the whole WAL when the last one saw it past walLimitFrames (and no purge
// has the automatic one on).
func (s *Store) writerCheckpoint() {
	if s.walFrames.Load() <= walLimitFrames || s.purging.Load() > 0 {
		return
	}
	if _, frames, err := walCheckpoint(s.w.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)); err == nil {
		s.walFrames.Store(frames)
	}
}

// walCheckpoint reads PRAGMA wal_checkpoint's row: busy, the WAL's
// frames, the frames copied.
func walCheckpoint(row *sql.Row) (busy bool, frames int64, err error) {
	var b, log, done int64
	err = row.Scan(&b, &log, &done)
	return b != 0, log, err
}

// purgeStart gives the writer SQLite's automatic checkpoint while a purge
// runs; the func it returns takes it back once the last purge ends.
func (s *Store) purgeStart(ctx context.Context) func() {
	if s.ckpt == nil {
		return func() {} // SQLite's own checkpoint throughout
	}
	if s.purging.Add(1) == 1 {
		_, _ = s.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA wal_autocheckpoint = %d`, purgeAutoCheckpoint))
	}
	return func() {
		if s.purging.Add(-1) == 0 {
			_, _ = s.w.ExecContext(context.Background(), `PRAGMA wal_autocheckpoint = 0`)
		}
	}
}
