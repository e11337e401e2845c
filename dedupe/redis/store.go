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
// dedupe.MaxAttempts).
//
// This package never logs bodies or keys' payloads; it logs nothing at all.
package redis

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"strconv"
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

	claimScript    = goredis.NewScript(claimLua)
	finishScript   = goredis.NewScript(attemptsLua + finishLua)
	renewScript    = goredis.NewScript(renewLua)
	removeScript   = goredis.NewScript(removeLua)
	hitsScript     = goredis.NewScript(hitsLua)
	conflictScript = goredis.NewScript(conflictLua)
	freeScript     = goredis.NewScript(attemptsLua + freeLua)
	acceptScript   = goredis.NewScript(acceptLua)
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

// args are the arguments every record script starts with.
func (r ref) args(more ...any) []any {
	return append([]any{r.member, r.key, r.sender, r.channel()}, more...)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func msTime(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// Claim implements dedupe.Store.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return dedupe.ClaimResult{}, unavailable("claim", err)
	}
	ttl, lease := req.TTL, req.Lease
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	keep, body := "0", ""
	if req.RequestBody != nil {
		keep, body = "1", string(req.RequestBody)
	}
	keepHead, head := "0", ""
	if req.Request != nil {
		b, err := json.Marshal(storedRequest{Method: req.Request.Method, URI: req.Request.URI, Header: req.Request.Header})
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim %s/%s: encode request: %w", req.Sender, req.Key, err)
		}
		keepHead, head = "1", string(b)
	}
	r := newRef(req.Sender, req.Key)
	cmd, confirmed, err := s.run(ctx, claimScript, s.keys(r, 5),
		r.args(req.PayloadHash, req.Owner, ms(lease), ms(ttl), keep, body, keepHead, head)...)
	if err != nil {
		if s.wait.replicas > 0 && !isScriptError(err) {
			// The reply may be lost after the claim was applied (the WAIT
			// makes that more likely when the deadline is short): give it
			// back by its owner token, which is this attempt's alone, so
			// the retry does not wait for its lease.
			s.releaseUnconfirmed(ctx, req.Sender, req.Key, req.Owner)
		}
		return dedupe.ClaimResult{}, unavailable(fmt.Sprintf("claim %s/%s", req.Sender, req.Key), err)
	}
	res, err := cmd.StringSlice()
	if err != nil {
		return dedupe.ClaimResult{}, unavailable(fmt.Sprintf("claim %s/%s", req.Sender, req.Key), err)
	}
	if confirmed != nil && len(res) > 0 && (res[0] == "claimed" || res[0] == "taken_over") {
		// Not forwarded on: a failover may lose this claim (wait.go).
		s.releaseUnconfirmed(ctx, req.Sender, req.Key, req.Owner)
		return dedupe.ClaimResult{}, notConfirmed(fmt.Sprintf("claim %s/%s", req.Sender, req.Key), confirmed)
	}
	if len(res) == 0 {
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim %s/%s: empty script reply", req.Sender, req.Key)
	}
	rec := decodeRecord(r, res[1:])
	var out dedupe.Outcome
	switch res[0] {
	case "claimed":
		out = dedupe.Claimed
		if s.cluster {
			if err := s.indexCluster(ctx, r, rec); err != nil {
				return dedupe.ClaimResult{}, unavailable(fmt.Sprintf("index %s/%s", req.Sender, req.Key), err)
			}
		}
	case "taken_over":
		out = dedupe.TakenOver
	case "duplicate":
		out = dedupe.Duplicate
	case "conflict":
		out = dedupe.Conflicting
	case "in_progress":
		out = dedupe.InProgress
	case "held":
		out = dedupe.Held
	default:
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim %s/%s: unknown outcome %q", req.Sender, req.Key, res[0])
	}
	return dedupe.ClaimResult{Outcome: out, Record: rec}, nil
}

// indexCluster adds a new (or re-claimed) record to the indexes, which on
// Cluster live in other slots than the record.
func (s *Store) indexCluster(ctx context.Context, r ref, rec dedupe.Record) error {
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZAdd(ctx, senderIndex(r.sender), goredis.Z{Score: float64(rec.ReceivedAt.UnixMilli()), Member: r.key})
		p.ZAdd(ctx, globalIndex, goredis.Z{Score: float64(rec.ReceivedAt.UnixMilli()), Member: r.member})
		p.ZAdd(ctx, expiryIndex, goredis.Z{Score: float64(rec.ExpiresAt.UnixMilli()), Member: r.member})
		p.SAdd(ctx, sendersSet, r.sender)
		return nil
	})
	return err
}

func (s *Store) unindexCluster(ctx context.Context, r ref) error {
	if !s.cluster {
		return nil
	}
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZRem(ctx, senderIndex(r.sender), r.key)
		p.ZRem(ctx, globalIndex, r.member)
		p.ZRem(ctx, expiryIndex, r.member)
		return nil
	})
	return err
}

// Complete implements dedupe.Store.
func (s *Store) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	hdr := ""
	if len(resp.Header) > 0 {
		b, err := json.Marshal(resp.Header)
		if err != nil {
			return fmt.Errorf("redis complete %s/%s: encode headers: %w", sender, key, err)
		}
		hdr = string(b)
	}
	trunc := "0"
	if resp.Truncated {
		trunc = "1"
	}
	return s.finish(ctx, "complete", sender, key, owner, "done", att, resp.Status, hdr, string(resp.Body), trunc)
}

// Hold implements dedupe.Store.
func (s *Store) Hold(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.finish(ctx, "hold", sender, key, owner, "unknown", att, 0, "", "", "0")
}

// Release implements dedupe.Store: the record stays, released, until its
// ttl; a second release (even a retry of this one) answers ErrNotOwner.
func (s *Store) Release(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.finish(ctx, "release", sender, key, owner, "released", att, 0, "", "", "0")
}

// finish runs lua/finish.lua: owner's processing claim moves to state with
// att appended, all in one step.
func (s *Store) finish(ctx context.Context, op, sender, key, owner, state string, att dedupe.Attempt, status int, hdr, body, trunc string) error {
	if err := ctx.Err(); err != nil {
		return unavailable(op, err)
	}
	line, err := encodeAttempt(att)
	if err != nil {
		return fmt.Errorf("redis %s %s/%s: encode attempt: %w", op, sender, key, err)
	}
	r := newRef(sender, key)
	args := r.args(state, owner, status, hdr, body, trunc, line, dedupe.MaxAttempts)
	var cmd *goredis.Cmd
	var confirmed error
	if state == "released" {
		// Never waited for: a lost release only brings the claim back,
		// which frees itself at its lease (wait.go).
		cmd = finishScript.Run(ctx, s.client, s.keys(r, 1), args...)
		err = cmd.Err()
	} else {
		cmd, confirmed, err = s.run(ctx, finishScript, s.keys(r, 1), args...)
	}
	if err != nil {
		return unavailable(fmt.Sprintf("%s %s/%s", op, sender, key), err)
	}
	n, err := cmd.Int()
	if err != nil {
		return unavailable(fmt.Sprintf("%s %s/%s", op, sender, key), err)
	}
	if n != 1 {
		return fmt.Errorf("redis %s %s/%s: %w", op, sender, key, dedupe.ErrNotOwner)
	}
	if confirmed != nil {
		return notConfirmed(fmt.Sprintf("%s %s/%s", op, sender, key), confirmed)
	}
	return nil
}

// Renew implements dedupe.Store.
func (s *Store) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return unavailable("renew", err)
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	r := newRef(sender, key)
	cmd, confirmed, err := s.run(ctx, renewScript, s.keys(r, 1), r.args(owner, ms(lease))...)
	if err != nil {
		return unavailable(fmt.Sprintf("renew %s/%s", sender, key), err)
	}
	n, err := cmd.Int()
	if err != nil {
		return unavailable(fmt.Sprintf("renew %s/%s", sender, key), err)
	}
	if n != 1 {
		return fmt.Errorf("redis renew %s/%s: %w", sender, key, dedupe.ErrNotOwner)
	}
	if confirmed != nil {
		// The proxy keeps counting on the lease it had: a lost renewal
		// must not extend it.
		return notConfirmed(fmt.Sprintf("renew %s/%s", sender, key), confirmed)
	}
	return nil
}

// Free implements dedupe.Store (lua/free.lua).
func (s *Store) Free(ctx context.Context, sender, key string, att dedupe.Attempt) (dedupe.State, error) {
	if err := ctx.Err(); err != nil {
		return "", unavailable("free", err)
	}
	line, err := encodeAttempt(att)
	if err != nil {
		return "", fmt.Errorf("redis free %s/%s: encode attempt: %w", sender, key, err)
	}
	r := newRef(sender, key)
	was, err := freeScript.Run(ctx, s.client, s.keys(r, 1), r.args(line, dedupe.MaxAttempts)...).Text()
	if errors.Is(err, goredis.Nil) {
		return "", fmt.Errorf("redis free %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	if err != nil {
		return "", unavailable(fmt.Sprintf("free %s/%s", sender, key), err)
	}
	return dedupe.State(was), nil
}

// Forget implements dedupe.Store (lua/remove.lua, mode forget).
func (s *Store) Forget(ctx context.Context, sender, key string) error {
	if err := ctx.Err(); err != nil {
		return unavailable("forget", err)
	}
	r := newRef(sender, key)
	res, err := removeScript.Run(ctx, s.client, s.keys(r, 4), r.args("forget", "")...).Text()
	if err == nil && res == "removed" {
		err = s.unindexCluster(ctx, r)
	}
	if err != nil {
		return unavailable(fmt.Sprintf("forget %s/%s", sender, key), err)
	}
	if res != "removed" {
		return fmt.Errorf("redis forget %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	return nil
}

// AddHits implements dedupe.Store.
func (s *Store) AddHits(ctx context.Context, hits []dedupe.Hit) error {
	if err := ctx.Err(); err != nil {
		return unavailable("add hits", err)
	}
	// Sum per record first: one script call per record.
	sum := map[ref]int64{}
	var order []ref
	for _, h := range hits {
		if h.N == 0 {
			continue
		}
		r := newRef(h.Sender, h.Key)
		if _, ok := sum[r]; !ok {
			order = append(order, r)
		}
		sum[r] += h.N
	}
	if len(order) == 0 {
		return nil
	}
	// Make sure the script is cached, then send every call in one pipeline.
	if err := hitsScript.Load(ctx, s.client).Err(); err != nil {
		return unavailable("add hits", err)
	}
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, r := range order {
			hitsScript.EvalSha(ctx, p, []string{r.record()}, sum[r])
		}
		return nil
	})
	if err != nil {
		return unavailable("add hits", err)
	}
	return nil
}

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, sender, key string) (dedupe.Record, error) {
	if err := ctx.Err(); err != nil {
		return dedupe.Record{}, unavailable("get", err)
	}
	r := newRef(sender, key)
	m, err := s.client.HGetAll(ctx, r.record()).Result()
	if err != nil {
		return dedupe.Record{}, unavailable(fmt.Sprintf("get %s/%s", sender, key), err)
	}
	if len(m) == 0 {
		return dedupe.Record{}, fmt.Errorf("redis get %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	return recordFromMap(r, m), nil
}

// Ping implements dedupe.Store. Redis needs no migration; Ping checks that
// the server answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unavailable("ping", err)
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// probeKey is the key Probe writes: a plain string with a short expiry,
// outside every record's slot and every index.
const probeKey = prefix + "probe"

// Probe implements dedupe.Store: SET of probeKey with a 10s expiry, a
// write that the server refuses when it refuses the claims' writes (a
// replica, min-replicas-to-write unmet, maxmemory reached under
// noeviction, a failed RDB save with stop-writes-on-bgsave-error). On
// Cluster it probes the node that holds probeKey's slot.
func (s *Store) Probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unavailable("probe", err)
	}
	if err := s.client.Set(ctx, probeKey, rand.Text(), 10*time.Second).Err(); err != nil {
		return unavailable("probe", err)
	}
	return nil
}

// Close implements dedupe.Store; safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.notify.close()
		s.closeErr = s.client.Close()
	})
	return s.closeErr
}

// decodeRecord reads a flat HGETALL reply (field, value, …).
func decodeRecord(r ref, flat []string) dedupe.Record {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		m[flat[i]] = flat[i+1]
	}
	return recordFromMap(r, m)
}

func recordFromMap(r ref, m map[string]string) dedupe.Record {
	rec := dedupe.Record{
		Sender:      r.sender,
		Key:         r.key,
		State:       dedupe.State(m["st"]),
		PayloadHash: m["h"],
		Owner:       m["o"],
		LeaseUntil:  msTime(m["lu"]),
		ReceivedAt:  msTime(m["ra"]),
		CompletedAt: msTime(m["ca"]),
		ExpiresAt:   msTime(m["ea"]),
	}
	rec.Hits, _ = strconv.ParseInt(m["hi"], 10, 64)
	rec.Takeovers, _ = strconv.ParseInt(m["to"], 10, 64)
	if b, ok := m["qb"]; ok {
		rec.RequestBody = []byte(b)
	}
	if q := m["qm"]; q != "" {
		var sr storedRequest
		if json.Unmarshal([]byte(q), &sr) == nil { // written by Claim; never malformed
			rec.Request = &dedupe.StoredRequest{Method: sr.Method, URI: sr.URI, Header: sr.Header}
		}
	}
	rec.Attempts = decodeAttempts(m["at"])
	if rec.State == dedupe.StateDone {
		resp := &dedupe.Response{Header: http.Header{}, Truncated: m["rt"] == "1"}
		resp.Status, _ = strconv.Atoi(m["rs"])
		if h := m["rh"]; h != "" {
			_ = json.Unmarshal([]byte(h), &resp.Header) // written by Complete; never malformed
		}
		if b := m["rb"]; b != "" {
			resp.Body = []byte(b)
		}
		rec.Response = resp
	}
	return rec
}

// storedRequest is dedupe.StoredRequest as the qm field keeps it.
type storedRequest struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header,omitempty"`
}

// attempt is dedupe.Attempt as one line of the at field keeps it: At in Unix
// milliseconds (0 for the zero time), Duration in nanoseconds.
type attempt struct {
	At       int64  `json:"at"`
	By       string `json:"by,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Status   int    `json:"status,omitempty"`
	Duration int64  `json:"duration_ns,omitempty"`
	Replica  string `json:"replica,omitempty"`
	Wait     int64  `json:"wait_ns,omitempty"`
}

// encodeAttempt gives att as one line of JSON (encoding/json escapes every
// newline, so the line never splits).
func encodeAttempt(att dedupe.Attempt) (string, error) {
	a := attempt{By: att.By, Outcome: att.Outcome, Status: att.Status, Duration: int64(att.Duration), Replica: att.Replica, Wait: int64(att.Wait)}
	if !att.At.IsZero() {
		a.At = att.At.UnixMilli()
	}
	b, err := json.Marshal(a)
	return string(b), err
}

// decodeAttempts reads the at field; a line that does not parse is skipped.
func decodeAttempts(v string) []dedupe.Attempt {
	if v == "" {
		return nil
	}
	lines := strings.Split(v, "\n")
	out := make([]dedupe.Attempt, 0, len(lines))
	for _, l := range lines {
		var a attempt
		if l == "" || json.Unmarshal([]byte(l), &a) != nil {
			continue
		}
		att := dedupe.Attempt{By: a.By, Outcome: a.Outcome, Status: a.Status, Duration: time.Duration(a.Duration), Replica: a.Replica, Wait: time.Duration(a.Wait)}
		if a.At != 0 {
			att.At = time.UnixMilli(a.At)
		}
		out = append(out, att)
	}
	return out
}
