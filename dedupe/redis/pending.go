package redis

// Durable deliveries (dedupe.Deferrer, a sender's `ack: durable`).
//
// The delivery lives in the record's hash (p_since, p_next, p_until,
// p_tries, p_owner, p_lease), so Defer, the take of one delivery, its
// renewal and its settle are each one script on the record key, judged by
// the server's clock and fenced by the owner inside the script, as every
// write of a claim is.
//
// Finding the due deliveries of a sender needs an index:
// hookonce:pending:{sender} (member the key, score when it may next be
// taken: NextAt, or LeaseUntil while held) and hookonce:pending-since:{sender}
// (score Since, for PendingCounts). Outside Cluster the record's scripts keep
// them in the same atomic step. On Cluster they live in the sender's slot,
// not the record's, so:
//
//   - Defer indexes the delivery BEFORE its script (lua/pendadd.lua): a
//     process dying in between leaves an entry whose record owes nothing,
//     which TakeDue drops, never an owed delivery no deliverer finds;
//   - a take, renewal or retry fixes the entry's score AFTER its script
//     (only if the entry is still there); a stale score only makes TakeDue
//     look at the record early, and the take script judges due and lease
//     itself and answers the right time, which then becomes the score;
//   - a settle that ends the delivery, or Free, drops the entries after its
//     script unless a newer Defer of the key has indexed it again.
//
// TakeDue reads the due entries lowest score first (lua/pendingdue.lua) and
// runs the take script on each: Redis runs one script at a time, so of any
// number of deliverers, in any number of processes, one finds the delivery
// free and sets its owner; the others find it held.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

var _ dedupe.Deferrer = (*Store)(nil)

func pendingIndex(sender string) string {
	return prefix + "pending:{" + escSender(sender) + "}"
}

func pendingSinceIndex(sender string) string {
	return prefix + "pending-since:{" + escSender(sender) + "}"
}

// pendingKeysOf are the pending indexes of r's sender (one slot).
func pendingKeysOf(r ref) []string {
	return []string{pendingIndex(r.sender), pendingSinceIndex(r.sender)}
}

// dropPending runs lua/pendingdrop.lua for r (Cluster only).
func (s *Store) dropPending(ctx context.Context, r ref, mode string, score float64) error {
	return pendingDropScript.Run(ctx, s.client, pendingKeysOf(r), r.key, mode,
		strconv.FormatFloat(score, 'f', -1, 64)).Err()
}

func encodeResponse(op, sender, key string, resp dedupe.Response) (hdr, trunc string, err error) {
	if len(resp.Header) > 0 {
		b, err := json.Marshal(resp.Header)
		if err != nil {
			return "", "", fmt.Errorf("redis %s %s/%s: encode headers: %w", op, sender, key, err)
		}
		hdr = string(b)
	}
	trunc = "0"
	if resp.Truncated {
		trunc = "1"
	}
	return hdr, trunc, nil
}

// Defer implements dedupe.Deferrer (lua/defer.lua). With wait_replicas
// it waits for the replicas as Complete does: the sender is answered on
// the strength of this write.
func (s *Store) Defer(ctx context.Context, sender, key, owner string, d dedupe.DeferRequest) error {
	if err := ctx.Err(); err != nil {
		return unavailable("defer", err)
	}
	hdr, trunc, err := encodeResponse("defer", sender, key, d.Ack)
	if err != nil {
		return err
	}
	op := fmt.Sprintf("defer %s/%s", sender, key)
	r := newRef(sender, key)
	keys := []string{r.record()}
	if s.cluster {
		if err := pendaddScript.Run(ctx, s.client, pendingKeysOf(r), key).Err(); err != nil {
			return unavailable(op, err)
		}
	} else {
		keys = append(keys, pendingIndex(sender), pendingSinceIndex(sender), expiryIndex)
	}
	cmd, confirmed, err := s.run(ctx, deferScript, keys,
		r.args(owner, d.Ack.Status, hdr, string(d.Ack.Body), trunc, ms(max(d.RetryFor, 0)), ms(max(d.Lease, 0)))...)
	if err != nil {
		return unavailable(op, err)
	}
	n, err := cmd.Int()
	if err != nil {
		return unavailable(op, err)
	}
	if n != 1 {
		// On Cluster the entry indexed first is now stale; TakeDue drops it.
		return fmt.Errorf("redis %s: %w", op, dedupe.ErrNotOwner)
	}
	if confirmed != nil {
		return notConfirmed(op, confirmed)
	}
	return nil
}

// takeRounds bounds TakeDue's reads of the index: each round takes what it
// can of one page and fixes the scores of what it could not take, so that a
// later round reads further entries.
const takeRounds = 32

// TakeDue implements dedupe.Deferrer (lua/pendingdue.lua, lua/take.lua).
// With wait_replicas each take waits for the replicas as a claim does; one
// they do not confirm is given back at once and ends the call (with the
// deliveries taken before it, or ErrNotConfirmed when there are none).
func (s *Store) TakeDue(ctx context.Context, sender, owner string, lease time.Duration, n int) ([]dedupe.Record, error) {
	op := fmt.Sprintf("take due %s", sender)
	if err := ctx.Err(); err != nil {
		return nil, unavailable(op, err)
	}
	if n <= 0 || owner == "" {
		return nil, nil
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	if err := takeScript.Load(ctx, s.client).Err(); err != nil {
		return nil, unavailable(op, err)
	}
	var out []dedupe.Record
	var busy int64 // entries left in place (claims under way on Cluster): skipped
	for round := 0; round < takeRounds && len(out) < n; round++ {
		want := n - len(out)
		flat, err := pendingDueScript.Run(ctx, s.client, []string{pendingIndex(sender)}, busy, want).StringSlice()
		if err != nil {
			return out, unavailable(op, err)
		}
		type cand struct {
			r     ref
			score float64
		}
		cands := make([]cand, 0, len(flat)/2)
		for i := 0; i+1 < len(flat); i += 2 {
			sc, _ := strconv.ParseFloat(flat[i+1], 64)
			cands = append(cands, cand{newRef(sender, flat[i]), sc})
		}
		if len(cands) == 0 {
			break
		}
		cmds := make([]*goredis.Cmd, len(cands))
		if s.wait.replicas > 0 {
			// A take is a claim of the delivery: one a failover loses lets
			// a second deliverer send it while the first still does, so
			// each waits for its replicas like a claim (one at a time: the
			// WAIT must follow its own write on its own connection).
			for i, c := range cands {
				cmd, confirmed, err := s.run(ctx, takeScript, s.pendingKeys(c.r, 3), c.r.args(owner, ms(lease))...)
				if err != nil && !isScriptError(err) {
					s.giveBack(ctx, c.r, owner) // the take may have been applied
				}
				if err == nil && confirmed != nil {
					if res, _ := cmd.StringSlice(); len(res) > 0 && res[0] == "taken" {
						s.giveBack(ctx, c.r, owner)
						if len(out) > 0 {
							return out, nil // the next call reports it
						}
						return nil, notConfirmed(op, confirmed)
					}
				}
				if err != nil {
					return out, unavailable(op, err)
				}
				cmds[i] = cmd
			}
		} else {
			_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, c := range cands {
					cmds[i] = takeScript.EvalSha(ctx, p, s.pendingKeys(c.r, 3), c.r.args(owner, ms(lease))...)
				}
				return nil
			})
			if err != nil {
				return out, unavailable(op, err)
			}
		}
		for i, c := range cands {
			res, err := cmds[i].StringSlice()
			if err != nil || len(res) == 0 {
				return out, unavailable(op, fmt.Errorf("take %s: %v %w", c.r.key, res, err))
			}
			// On Cluster the index is fixed after the take script; an error
			// there is not the take's (which stands, and is handed out): the
			// entry keeps an early score or stays stale, and the next
			// TakeDue fixes it.
			switch res[0] {
			case "taken":
				rec := decodeRecord(c.r, res[1:])
				out = append(out, rec)
				if s.cluster && rec.Pending != nil {
					_ = s.dropPending(ctx, c.r, "set", float64(rec.Pending.LeaseUntil.UnixMilli()))
				}
			case "later":
				if s.cluster && len(res) > 1 {
					at, _ := strconv.ParseFloat(res[1], 64)
					_ = s.dropPending(ctx, c.r, "set", at)
				}
			case "none":
				if s.cluster {
					_ = s.dropPending(ctx, c.r, "eq", c.score)
				}
			case "busy":
				if s.cluster {
					busy++
				}
			default:
				return out, fmt.Errorf("redis %s: %s: unknown outcome %q", op, c.r.key, res[0])
			}
		}
		if len(cands) < want {
			break
		}
	}
	return out, nil
}

// giveBack returns a delivery owner took but whose take was not confirmed
// (lua/pgiveback.lua): best effort and not waited for, like an
// unconfirmed claim's release; if it is lost, the take's lease runs out.
func (s *Store) giveBack(ctx context.Context, r ref, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
	defer cancel()
	if pgivebackScript.Run(ctx, s.client, s.pendingKeys(r, 2), r.args(owner)...).Err() == nil && s.cluster {
		_ = s.dropPending(ctx, r, "set", 0)
	}
}

// RenewPending implements dedupe.Deferrer (lua/prenew.lua).
func (s *Store) RenewPending(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	op := fmt.Sprintf("renew pending %s/%s", sender, key)
	if err := ctx.Err(); err != nil {
		return unavailable(op, err)
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	r := newRef(sender, key)
	cmd, confirmed, err := s.run(ctx, prenewScript, s.pendingKeys(r, 2), r.args(owner, ms(lease))...)
	if err != nil {
		return unavailable(op, err)
	}
	lu, err := cmd.Int64()
	if err != nil {
		return unavailable(op, err)
	}
	if lu == 0 {
		return fmt.Errorf("redis %s: %w", op, dedupe.ErrNotOwner)
	}
	if s.cluster {
		// Best effort, as every index fix after a script (TakeDue).
		_ = s.dropPending(ctx, r, "set", float64(lu))
	}
	if confirmed != nil {
		return notConfirmed(op, confirmed)
	}
	return nil
}

// SettlePending implements dedupe.Deferrer (lua/settle.lua). With
// wait_replicas it waits for the replicas as Complete does.
func (s *Store) SettlePending(ctx context.Context, sender, key, owner string, st dedupe.PendingSettle) error {
	op := fmt.Sprintf("settle pending %s/%s", sender, key)
	if err := ctx.Err(); err != nil {
		return unavailable(op, err)
	}
	var outcome string
	switch st.Outcome {
	case dedupe.SettleDelivered:
		outcome = "delivered"
	case dedupe.SettleRetry:
		outcome = "retry"
	case dedupe.SettleGiveUp:
		outcome = "giveup"
	case dedupe.SettleHold:
		outcome = "hold"
	default:
		return fmt.Errorf("redis %s: unknown outcome %d", op, st.Outcome)
	}
	line, err := encodeAttempt(st.Attempt)
	if err != nil {
		return fmt.Errorf("redis %s: encode attempt: %w", op, err)
	}
	replace, status, hdr, body, trunc := "0", 0, "", "", "0"
	if st.Outcome == dedupe.SettleDelivered && st.Response != nil {
		if hdr, trunc, err = encodeResponse("settle pending", sender, key, *st.Response); err != nil {
			return err
		}
		replace, status, body = "1", st.Response.Status, string(st.Response.Body)
	}
	r := newRef(sender, key)
	cmd, confirmed, err := s.run(ctx, settleScript, s.pendingKeys(r, 3),
		r.args(owner, outcome, line, dedupe.MaxAttempts, ms(max(st.RetryIn, 0)), replace, status, hdr, body, trunc)...)
	if err != nil {
		return unavailable(op, err)
	}
	res, err := cmd.Int64()
	if err != nil {
		return unavailable(op, err)
	}
	if res == 0 {
		return fmt.Errorf("redis %s: %w", op, dedupe.ErrNotOwner)
	}
	if s.cluster {
		// Best effort: the settle stands (a retry of it would be refused),
		// and an entry left behind is fixed or dropped by TakeDue.
		if res > 0 {
			_ = s.dropPending(ctx, r, "set", float64(res))
		} else {
			_ = s.dropPending(ctx, r, "settled", 0)
		}
	}
	if confirmed != nil {
		return notConfirmed(op, confirmed)
	}
	return nil
}

// stalePasses bounds how many stale oldest entries PendingCounts drops per
// sender in one call (TakeDue drops the rest as it meets them).
const stalePasses = 16

// PendingCounts implements dedupe.Deferrer: per known sender, the size of
// its pending-since index and the Since of its oldest delivery, whose
// record is read to check it (a stale oldest entry is dropped and the next
// one read). Entries further in are counted as they stand: they go stale
// only when a process dies between a record's script and its index update
// on Cluster, or when a claim took a record past its ttl as new, and
// TakeDue drops them as it meets them. Round trips: two, plus one per
// stale oldest entry.
func (s *Store) PendingCounts(ctx context.Context) ([]dedupe.PendingCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, unavailable("pending counts", err)
	}
	senders, err := s.client.SMembers(ctx, sendersSet).Result()
	if err != nil {
		return nil, unavailable("pending counts", err)
	}
	counts := make([]dedupe.PendingCount, len(senders))
	todo := make([]int, len(senders)) // indexes into counts still to settle
	for i, sender := range senders {
		counts[i].Sender = sender
		todo[i] = i
	}
	for pass := 0; pass < stalePasses && len(todo) > 0; pass++ {
		if todo, err = s.countPass(ctx, counts, todo); err != nil {
			return nil, unavailable("pending counts", err)
		}
	}
	var out []dedupe.PendingCount
	for _, c := range counts {
		if c.N > 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// countPass reads the count and oldest entry of each sender in todo (one
// pipeline), checks those oldest entries' records (another), and returns
// the senders whose oldest entry was stale and is now dropped.
func (s *Store) countPass(ctx context.Context, counts []dedupe.PendingCount, todo []int) ([]int, error) {
	cards := make([]*goredis.IntCmd, len(todo))
	firsts := make([]*goredis.ZSliceCmd, len(todo))
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for j, i := range todo {
			idx := pendingSinceIndex(counts[i].Sender)
			cards[j] = p.ZCard(ctx, idx)
			firsts[j] = p.ZRangeWithScores(ctx, idx, 0, 0)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	type oldest struct {
		i int
		r ref
		z goredis.Z
	}
	var check []oldest
	for j, i := range todo {
		counts[i].N = cards[j].Val()
		if counts[i].N == 0 || len(firsts[j].Val()) == 0 {
			counts[i].N = 0
			continue
		}
		z := firsts[j].Val()[0]
		key, _ := z.Member.(string)
		check = append(check, oldest{i, newRef(counts[i].Sender, key), z})
	}
	if len(check) == 0 {
		return nil, nil
	}
	recs := make([]*goredis.SliceCmd, len(check))
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for j, o := range check {
			recs[j] = p.HMGet(ctx, o.r.record(), "st", "p_since")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var again []int
	for j, o := range check {
		vals := recs[j].Val()
		st, _ := vals[0].(string)
		since, _ := vals[1].(string)
		if t := msTime(since); !t.IsZero() {
			counts[o.i].Oldest = t
			continue
		}
		if st == "processing" {
			// Perhaps a Defer under way (Cluster indexes first): counted,
			// its index time standing for its Since.
			counts[o.i].Oldest = time.UnixMilli(int64(o.z.Score))
			continue
		}
		// Owes nothing: dropped unless a Defer has indexed it again since
		// (with a newer score).
		if err := s.dropPending(ctx, o.r, "since-eq", o.z.Score); err != nil {
			return nil, err
		}
		// Until the next pass reads the next oldest (or if none is left
		// to do so): the rest, no younger than this entry.
		counts[o.i].N--
		counts[o.i].Oldest = time.UnixMilli(int64(o.z.Score))
		again = append(again, o.i)
	}
	return again, nil
}
