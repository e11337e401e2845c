package sqlite

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// The file's integrity, checked once in the background after Open.
//
// Open reads the file's header and schema, so a file that is not a
// database, or whose first pages are damaged, is refused at once. Damage
// further in shows only when a delivery touches it (the store then fails
// closed: 503). PRAGMA quick_check reads every page once, on a reader
// connection beside the serving ones; hookonce's files are small (records
// live for their ttl), so this takes well under a second in practice. What
// it finds makes Probe, and so /readyz, fail with the reason, so a damaged
// file is reported at start rather than by the first unlucky delivery.

// integrity is the background check's state.
type integrity struct {
	wg     sync.WaitGroup
	cancel context.CancelFunc

	mu   sync.Mutex
	done bool
	bad  string // quick_check's first complaints; "" when ok or not done
}

// startCheck runs quick_check in the background until it ends or Close.
func (s *Store) startCheck() {
	ctx, cancel := context.WithCancel(context.Background())
	s.check.cancel = cancel
	s.check.wg.Add(1)
	go func() {
		defer s.check.wg.Done()
		bad, err := quickCheck(ctx, s)
		s.check.mu.Lock()
		defer s.check.mu.Unlock()
		if err == nil { // else Close ended it, and nothing is claimed
			s.check.done, s.check.bad = true, bad
		}
	}()
}

func (s *Store) stopCheck() {
	if s.check.cancel != nil {
		s.check.cancel()
	}
	s.check.wg.Wait()
}

// quickCheck answers quick_check's complaints joined, "" for a sound file.
// quick_check failing outright (a page it cannot even read) is a complaint
// too; only the end of ctx (Close) is not.
func quickCheck(ctx context.Context, s *Store) (string, error) {
	var out []string
	err := func() error {
		rows, err := s.r.QueryContext(ctx, "PRAGMA quick_check(5)")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			if line != "ok" {
				out = append(out, strings.Join(strings.Fields(line), " "))
			}
		}
		return rows.Err()
	}()
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		out = append(out, err.Error())
	}
	return strings.Join(out, "; "), nil
}

// corruption is the background check's finding, for Probe: nil while the
// check runs or when it found the file sound.
func (s *Store) corruption() error {
	s.check.mu.Lock()
	defer s.check.mu.Unlock()
	if !s.check.done || s.check.bad == "" {
		return nil
	}
	return fmt.Errorf("the database file %s is damaged (PRAGMA quick_check: %s): stop hookonce, keep a copy of the file, and restore it or start from a new one", s.path, s.check.bad)
}
