package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"sync"
	"time"
)

// Defaults for the /ui sessions.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultMaxSessions = 1000
)

// sessions are the /ui sign-ins: a random id per login, kept here (only
// its SHA-256, so a lookup's timing tells nothing about stored ids) with
// its expiry. Logging out or expiring removes an id for good; a restart
// signs everybody out.
type sessions struct {
	mu  sync.Mutex
	ids map[[sha256.Size]byte]time.Time // SHA-256 of the id → expiry
	max int
}

func newSessions(max int) *sessions {
	return &sessions{ids: map[[sha256.Size]byte]time.Time{}, max: max}
}

// start makes a session that ends at expires and returns its id. When the
// table is full the session closest to its end goes.
func (s *sessions) start(now, expires time.Time) string {
	id := rand.Text() // 26 base32 characters: 130 random bits
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.ids {
		if !now.Before(exp) {
			delete(s.ids, k)
		}
	}
	for len(s.ids) >= s.max {
		var first [sha256.Size]byte
		var firstExp time.Time
		for k, exp := range s.ids {
			if firstExp.IsZero() || exp.Before(firstExp) {
				first, firstExp = k, exp
			}
		}
		delete(s.ids, first)
	}
	s.ids[key] = expires
	return id
}

// valid reports whether id is a session that has not ended by now.
func (s *sessions) valid(id string, now time.Time) bool {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.ids[key]
	if ok && !now.Before(exp) {
		delete(s.ids, key)
		return false
	}
	return ok
}

// end removes the session id, if there is one.
func (s *sessions) end(id string) {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	delete(s.ids, key)
	s.mu.Unlock()
}
