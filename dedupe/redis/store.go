// Package redis is the dedupe.Store on Redis (github.com/redis/go-redis/v9),
// for teams that run Redis and not Postgres.
//
// Every decision is one Lua script on one record key, so it is atomic on the
// server and judged by the server's clock (TIME), never the caller's. A record
// is a hash whose Redis expiry is its ttl (or its live lease, when that runs
// longer), so Redis forgets expired events by itself. Writes after a claim
// (complete, hold, release, renew) check the owner token inside the script, so
// a stale owner whose lease was taken over can never overwrite the new owner's
// record.
//
// A release keeps the record in state released (owner and lease cleared,
// payload hash, request and attempts kept) until its ttl. The next claim of
// it is a new claim whatever its payload: the record is re-owned, its hash,
// request and request body become the new claim's, and its received time and
// expiry are set as for a new record (received now, kept ttl from now), so
// the dedupe window runs from the delivery that may complete it and List
// shows it among the newest; its attempts, hits and takeovers stay.
//
// Key layout (prefix "hookonce:"; sender names are escaped so ":" and braces
// cannot collide):
//
//	hookonce:{sender:key}            record hash (one Cluster slot per event)
//	hookonce:n:{sender:key}          Pub/Sub channel announcing changes of the record
//	                                 (an object's unlock: sender dedupe.ObjectSender(scope))
//	hookonce:obj:{scope:object}      object lock hash: o owner, lu lease until (objects.go)
//	hookonce:idx:{sender}            sorted set of keys by received time (List)
//	hookonce:idx                     sorted set of "sender:key" by received time (List, Purge)
//	hookonce:exp                     sorted set of "sender:key" by expiry time (Purge)
//	hookonce:senders                 set of sender names (Conflicts across senders)
//	hookonce:conflicts:{sender}      capped stream of conflicts (fields: k key, sh/rh hashes,
//	                                 ra received, ea expires, cp changed paths JSON, dk diff kind,
//	                                 sw "1" in shadow mode, qm/qb/qt the refused request's head,
//	                                 body and "1" when cut; qm absent when not kept)
//	hookonce:accepted:{sender}       hash: stream id of an accepted conflict → "<ms> <by>"
//	hookonce:pending:{sender}        sorted set of keys with a durable delivery owed, by when
//	                                 it may next be taken: NextAt, or LeaseUntil while held
//	                                 (pending.go)
//	hookonce:pending-since:{sender}  sorted set of the same keys by Since (PendingCounts)
//
// On a single node or Sentinel the scripts keep the indexes in the same atomic
// step. On Cluster the indexes live in other slots, so the scripts touch only
// the record and the store updates the indexes right after (an index entry can
// then be missing if the process dies in between; the record and its
// guarantees are unaffected).
//
// Record hash fields: st state, h payload hash, o owner, lo last owner (the
// owner that completed, held or released it; a retried complete or hold is
// recognised by it), lu lease until, ra received, ca completed, ea expires (times
// in Unix ms), hi hits, to takeovers, rs/rh/rb/rt the stored response
// (status, JSON headers, body, truncated), qb request body, qm request head
// (JSON), at attempts (one JSON object per line, oldest first, at most
// dedupe.MaxAttempts); a durable delivery still owed (pending.go): p_since,
// p_next, p_until (ms), p_tries, p_owner, p_lease (ms; 0 when not held).
//
// This package never logs bodies or keys' payloads; it logs nothing at all.
package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

var (
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/finish.lua
	finishLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/remove.lua
	removeLua string
	//go:embed lua/hits.lua
	hitsLua string
	//go:embed lua/conflict.lua
	conflictLua string
	//go:embed lua/accept.lua
	acceptLua string
	//go:embed lua/free.lua
	freeLua string
	//go:embed lua/attempts.lua
	attemptsLua string
	//go:embed lua/defer.lua
	deferLua string
	//go:embed lua/take.lua
	takeLua string
	//go:embed lua/prenew.lua
	prenewLua string
	//go:embed lua/settle.lua
	settleLua string
	//go:embed lua/pgiveback.lua
	pgivebackLua string
	//go:embed lua/pendadd.lua
	pendaddLua string
	//go:embed lua/pendingdue.lua
	pendingDueLua string
	//go:embed lua/pendingdrop.lua
	pendingDropLua string

	claimScript    = goredis.NewScript(claimLua)
	finishScript   = goredis.NewScript(attemptsLua + finishLua)
	renewScript    = goredis.NewScript(renewLua)
	removeScript   = goredis.NewScript(removeLua)
	hitsScript     = goredis.NewScript(hitsLua)
	conflictScript = goredis.NewScript(conflictLua)
	freeScript     = goredis.NewScript(attemptsLua + freeLua)
	acceptScript   = goredis.NewScript(acceptLua)

	deferScript       = goredis.NewScript(deferLua)
	takeScript        = goredis.NewScript(takeLua)
	prenewScript      = goredis.NewScript(prenewLua)
	settleScript      = goredis.NewScript(attemptsLua + settleLua)
	pgivebackScript   = goredis.NewScript(pgivebackLua)
	pendaddScript     = goredis.NewScript(pendaddLua)
	pendingDueScript  = goredis.NewScript(pendingDueLua)
	pendingDropScript = goredis.NewScript(pendingDropLua)
)

const (
	prefix = "hookonce:"
	// DefaultTTL and DefaultLease apply when a ClaimRequest leaves them zero.
	DefaultTTL   = 72 * time.Hour
	DefaultLease = 30 * time.Second
	// ConflictStreamLen caps each sender's conflict stream (approximately,
	// XADD MAXLEN ~).
	ConflictStreamLen = 10000
	defaultLimit      = 100
)

var _ dedupe.Store = (*Store)(nil)
var _ dedupe.Notifier = (*Store)(nil)

// Store is a dedupe.Store on one Redis deployment (single node, Sentinel or
// Cluster). It is safe for concurrent use; any number of Stores, in any
// number of processes, may share one Redis.
type Store struct {
	client  goredis.UniversalClient
	cluster bool        // indexes are updated outside the scripts
	wait    waitOptions // the durability option (wait.go); zero: off

	notify *hub

	closeOnce sync.Once
	closeErr  error
}

// Open connects to the Redis the URL names and checks that it answers.
// Redis has no schema, so there is nothing to migrate (it is no
// dedupe.Migrator).
//
//	redis://[user:pass@]host:port[/db][?options]      one server (rediss:// for TLS)
//	unix:///path/to/redis.sock                         one server on a Unix socket
//	redis+sentinel://host:port?master_name=NAME[&addr=host2:port2…]   Sentinel (rediss+sentinel:// for TLS)
//	redis+cluster://host:port[?addr=host2:port2…]      Cluster (rediss+cluster:// for TLS)
//
// Options are go-redis's URL options (dial_timeout, read_timeout, pool_size,
// …), and hookonce's durability option: wait_replicas=N (with
// wait_replicas_timeout, default DefaultWaitTimeout) has every claim and
// completion wait for N replicas, failing closed when they do not answer
// (wait.go). Every call is bounded by its context's deadline as well.
func Open(ctx context.Context, url string) (*Store, error) {
	// go-redis logs dial failures to stderr through a process-wide logger,
	// once per attempt during an outage; every such error also reaches the
	// caller (as ErrUnavailable), who logs it once, structured.
	quietDriver.Do(func() { goredis.SetLogger(discardLogger{}) })
	client, cluster, wait, err := newClient(url)
	if err != nil {
		return nil, fmt.Errorf("open redis store: %w", err)
	}
	s := &Store{client: client, cluster: cluster, wait: wait}
	s.notify = newHub(s)
	if err := s.Ping(ctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("open redis store: %w", err)
	}
	return s, nil
}

// OpenReadOnly opens the store for the operator's read-only commands, as
// the other backends' OpenReadOnly do: Redis has no schema to migrate, so
// it is Open, checking that the server answers, with every write of the
// returned Store failing with dedupe.ErrReadOnly.
func OpenReadOnly(ctx context.Context, url string) (dedupe.Store, error) {
	s, err := Open(ctx, url)
	if err != nil {
		return nil, err
	}
	return dedupe.ReadOnly(s), nil
}

var quietDriver sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

func newClient(url string) (goredis.UniversalClient, bool, waitOptions, error) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return nil, false, waitOptions{}, fmt.Errorf("redis URL %q has no scheme", dedupe.RedactDSN(url))
	}
	rest, wait, err := splitWait(rest)
	if err != nil {
		return nil, false, wait, fmt.Errorf("redis URL %q: %w", dedupe.RedactDSN(url), err)
	}
	client, cluster, err := newDriver(url, scheme, rest)
	if err == nil {
		err = wait.fits(client)
		if err != nil {
			_ = client.Close()
			client = nil
			err = fmt.Errorf("redis URL %q: %w", dedupe.RedactDSN(url), err)
		}
	}
	return client, cluster, wait, err
}

func newDriver(url, scheme, rest string) (goredis.UniversalClient, bool, error) {
	base, kind, _ := strings.Cut(scheme, "+")
	if base != "redis" && base != "rediss" && base != "unix" {
		return nil, false, fmt.Errorf("redis URL scheme %q: want redis, rediss or unix", scheme)
	}
	plain := base + "://" + rest
	switch kind {
	case "":
		o, err := goredis.ParseURL(plain)
		if err != nil {
			return nil, false, fmt.Errorf("parse redis URL %q: %w", dedupe.RedactDSN(url), parseError(err))
		}
		o.ContextTimeoutEnabled = true
		return goredis.NewClient(o), false, nil
	case "sentinel":
		o, err := goredis.ParseFailoverURL(plain)
		if err != nil {
			return nil, false, fmt.Errorf("parse redis sentinel URL %q: %w", dedupe.RedactDSN(url), parseError(err))
		}
		o.ContextTimeoutEnabled = true
		return goredis.NewFailoverClient(o), false, nil
	case "cluster":
		o, err := goredis.ParseClusterURL(plain)
		if err != nil {
			return nil, false, fmt.Errorf("parse redis cluster URL %q: %w", dedupe.RedactDSN(url), parseError(err))
		}
		o.ContextTimeoutEnabled = true
		return goredis.NewClusterClient(o), true, nil
	default:
		return nil, false, fmt.Errorf("redis URL scheme %q: want redis, redis+sentinel or redis+cluster", scheme)
	}
}

// parseError is a URL parser's error without the URL: net/url quotes
// the URL whole, password and all.
func parseError(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return errors.New(ue.Err.Error())
	}
	return err
}

// unavailable wraps a driver error (connection refused, timeout, cancelled
// context, a server that is loading or read-only) as dedupe.ErrUnavailable.
func unavailable(op string, err error) error {
	return fmt.Errorf("redis %s: %w: %w", op, dedupe.ErrUnavailable, err)
}

func escSender(s string) string {
	if !strings.ContainsAny(s, "%:{}") {
		return s
	}
	r := strings.NewReplacer("%", "%25", ":", "%3A", "{", "%7B", "}", "%7D")
	return r.Replace(s)
}

func unescSender(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	r := strings.NewReplacer("%3A", ":", "%7B", "{", "%7D", "}", "%25", "%")
	return r.Replace(s)
}

// ref names one record and everything that indexes it.
type ref struct {
	sender, key string
	member      string // escaped sender + ":" + key
}

func newRef(sender, key string) ref {
	return ref{sender: sender, key: key, member: escSender(sender) + ":" + key}
}

func refFromMember(m string) ref {
	es, key, _ := strings.Cut(m, ":")
	return ref{sender: unescSender(es), key: key, member: m}
}

func (r ref) record() string  { return prefix + "{" + r.member + "}" }
func (r ref) channel() string { return prefix + "n:{" + r.member + "}" }
func senderIndex(sender string) string {
	return prefix + "idx:{" + escSender(sender) + "}"
}
func conflictStream(sender string) string {
	return prefix + "conflicts:{" + escSender(sender) + "}"
}

// acceptedHash holds the accepted conflicts of a sender: field the stream
// id, value "<ms> <by>"; in the stream's slot.
func acceptedHash(sender string) string {
	return prefix + "accepted:{" + escSender(sender) + "}"
}

const (
	globalIndex = prefix + "idx"
	expiryIndex = prefix + "exp"
	sendersSet  = prefix + "senders"
)

// keys lists the record key and, outside Cluster, the index keys n of them
// (claim: 5, remove: 4).
func (s *Store) keys(r ref, n int) []string {
	all := []string{r.record(), senderIndex(r.sender), globalIndex, expiryIndex, sendersSet}
	if s.cluster {
		return all[:1]
	}
	return all[:n]
}

// pendingKeys lists the record key and, outside Cluster, the sender's
// pending index and then (n 3) its pending-since index; on Cluster the
// scripts leave those to pending.go.
func (s *Store) pendingKeys(r ref, n int) []string {
	if s.cluster {
		return []string{r.record()}
	}
	return []string{r.record(), pendingIndex(r.sender), pendingSinceIndex(r.sender)}[:n]
}

// removeKeys are lua/remove.lua's keys: the record and, outside Cluster,
// every index that may name it.
func (s *Store) removeKeys(r ref) []string {
	if s.cluster {
		return []string{r.record()}
	}
	return []string{r.record(), senderIndex(r.sender), globalIndex, expiryIndex,
		pendingIndex(r.sender), pendingSinceIndex(r.sender)}
}

// args are the arguments every record script starts with.
func (r ref) args(more ...any) []any {
	return append([]any{r.member, r.key, r.sender, r.channel()}, more...)
}

// Close implements dedupe.Store; safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.notify.close()
		s.closeErr = s.client.Close()
	})
	return s.closeErr
}
