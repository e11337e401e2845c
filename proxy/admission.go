package proxy

import (
	"errors"
	"io"
	"math/bits"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Admission: what a request may hold before it is a delivery. Its body is
// read against a memory budget (max_inflight × max_body, and a share of it
// per client address), growing with what arrived; a delivery whose body is
// in takes one of max_inflight slots. Refusals are 503s, logged at most a
// line a second.

// takeSlot takes one of max_inflight slots for a delivery whose body has
// arrived, or answers 503 and reports false. Each held delivery may keep
// max_body and the site's answer in memory; a request still sending its
// body holds only what it sent, and no slot, so sockets that send headers
// and nothing more cannot starve the senders (they end at body_timeout).
func (d *delivery) takeSlot() bool {
	p, c := d.p, d.c
	if n := p.slots.Add(1); c.MaxInflight > 0 && n > int64(c.MaxInflight) {
		p.slots.Add(-1)
		d.overloaded("every max_inflight slot is taken")
		return false
	}
	p.m.inflight.Inc()
	return true
}

// overloaded answers 503 to a delivery refused for memory or a slot:
// counted with sender="" (no sender was chosen), and logged at most a line
// a second for all of them, with why (the last refusal's reason).
func (d *delivery) overloaded(why string) {
	p := d.p
	p.m.countRequest("", OutcomeOverloaded)
	if n := p.refused.note(time.Now()); n > 0 {
		p.log.Warn("webhook", "sender", "", "path", d.rt.Path, "outcome", OutcomeOverloaded, "status", http.StatusServiceUnavailable,
			"reason", why, "max_inflight", d.c.MaxInflight, "refused", n)
	}
	answerOverloaded(d.w)
}

func (d *delivery) freeSlot() {
	d.p.slots.Add(-1)
	d.p.m.inflight.Dec()
}

// errBodyBudget: the bodies being received and held already take
// max_inflight × max_body.
var errBodyBudget = errors.New("the memory for request bodies (max_inflight × max_body) is taken")

// errPeerBudget: the bodies one client address is still sending already
// take its share of the budget (peerShare).
var errPeerBudget = errors.New("the bodies this client address is still sending take its share of max_inflight × max_body")

// peerShare is the part of the body budget the bodies one client address
// is still sending may hold (at least two max_body): a peer that opens
// sockets, sends part of each body and stalls holds at most this much,
// however many sockets it opens, and the rest stays for other senders. A
// body counts against its peer only until it has arrived. The client
// address is the one the site sees (ClientAddr: through trusted_proxies),
// so senders behind the operator's own proxy are told apart.
const peerShare = 4

// peerBytes are the body bytes each client address is still sending.
type peerBytes struct {
	mu sync.Mutex
	m  map[netip.Addr]int64
}

// add reserves n bytes for peer unless that takes it past limit.
func (pb *peerBytes) add(peer netip.Addr, n, limit int64) bool {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if pb.m[peer]+n > limit {
		return false
	}
	if pb.m == nil {
		pb.m = make(map[netip.Addr]int64)
	}
	pb.m[peer] += n
	return true
}

// sub gives back n bytes of peer's.
func (pb *peerBytes) sub(peer netip.Addr, n int64) {
	if n == 0 {
		return
	}
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if pb.m[peer] -= n; pb.m[peer] <= 0 {
		delete(pb.m, peer)
	}
}

// reserve accounts n more bytes of request body against max_inflight ×
// max_body and against the client address's share of it, or says which
// refused. What a delivery reserved is given back when it ends (serve);
// its peer's part when its body has arrived (receive).
func (d *delivery) reserve(n int64) error {
	c := d.c
	if c.MaxInflight <= 0 {
		return nil
	}
	budget := int64(c.MaxInflight) * c.MaxBody
	if d.p.bodyBytes.Add(n) > budget {
		d.p.bodyBytes.Add(-n)
		return errBodyBudget
	}
	if !d.p.peers.add(d.peer, n, max(budget/peerShare, 2*c.MaxBody)) {
		d.p.bodyBytes.Add(-n)
		return errPeerBudget
	}
	d.reserved += n
	d.arriving += n
	return nil
}

// receive reads the request's body (readBody) under the delivery's budget.
func (d *delivery) receive() ([]byte, error) {
	d.peer = d.c.ClientAddr(d.r.RemoteAddr, d.r.Header)
	defer func() { d.p.peers.sub(d.peer, d.arriving); d.arriving = 0 }()
	return readBody(d.r.Body, d.r.ContentLength, d.c.MaxBody, d.reserve)
}

// readBody reads a body of declared length cl (-1: chunked) up to max,
// reserving memory before allocating it: a body over 16 KiB starts with
// 16 KiB and doubles as it arrives, never past its declared length (a
// socket that sends headers and nothing more holds 16 KiB, one that
// stalls after n bytes at most about 2n, not max_body). Past max it
// returns what it read and an *http.MaxBytesError; when reserve refuses,
// its error.
func readBody(r io.Reader, cl, max int64, reserve func(int64) error) ([]byte, error) {
	const first = 16 << 10
	if cl > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	if cl >= 0 && cl <= first {
		if err := reserve(cl); err != nil {
			return nil, err
		}
		body := make([]byte, cl) // small: exactly, in one allocation
		_, err := io.ReadFull(r, body)
		return body, err
	}
	limit := max + 1 // chunked: one byte past the limit tells "too large"
	if cl >= 0 {
		limit = cl
	}
	if err := reserve(first); err != nil {
		return nil, err
	}
	body := bodyBuf(first)
	for int64(len(body)) < limit {
		if len(body) == cap(body) {
			// Doubling, for a declared length as for chunks: what a
			// delivery holds grows with what arrived, so a socket that
			// sends 16 KiB and a byte, then stalls, holds 32 KiB, not the
			// Content-Length it declared. The buffer it outgrew goes back
			// to a pool for the next body, not to the garbage.
			grow := min(int64(cap(body)), limit-int64(len(body)))
			if err := reserve(grow); err != nil {
				return body, err
			}
			next := append(bodyBuf(len(body)+int(grow)), body...)
			freeBodyBuf(body)
			body = next
		}
		n, err := r.Read(body[len(body):min(int64(cap(body)), limit)])
		body = body[:len(body)+n]
		if err == io.EOF {
			if cl >= 0 && int64(len(body)) < cl {
				return body, io.ErrUnexpectedEOF
			}
			break
		}
		if err != nil {
			return body, err
		}
	}
	if int64(len(body)) > max {
		return body, &http.MaxBytesError{Limit: max}
	}
	return body, nil
}

// bodyPools hold the buffers a growing body outgrew, by size: 16 KiB
// shifted left by the pool's index. Only exact sizes are pooled; a body's
// last buffer (its declared length) is the delivery's and never returns.
var bodyPools [10]sync.Pool

func bodyPool(size int) *sync.Pool {
	const first = 16 << 10
	if size < first || size&(size-1) != 0 {
		return nil
	}
	i := bits.Len(uint(size/first)) - 1
	if i >= len(bodyPools) {
		return nil
	}
	return &bodyPools[i]
}

// bodyBuf returns an empty buffer of capacity size, pooled when it can be.
func bodyBuf(size int) []byte {
	if p := bodyPool(size); p != nil {
		if b, ok := p.Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, size)
}

// freeBodyBuf gives back a buffer a body outgrew: nothing refers to it.
func freeBodyBuf(b []byte) {
	if p := bodyPool(cap(b)); p != nil {
		b = b[:0]
		p.Put(&b)
	}
}

// refusals counts requests refused past max_inflight for the log, which
// gets at most one line a second (the metric counts every one): a flood
// must not become a flood of log lines.
type refusals struct {
	mu      sync.Mutex
	next    time.Time // when the next line may be written
	pending int64     // refused since the last line
}

// note counts one refusal and answers how many the log line to write now
// covers, or 0 for no line.
func (r *refusals) note(now time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending++
	if now.Before(r.next) {
		return 0
	}
	n := r.pending
	r.pending, r.next = 0, now.Add(time.Second)
	return n
}

// unmatchedLine counts one request on path that no sender took, for the
// log, and answers how many requests the line to write now stands for
// (itself and those not logged since the last line), or 0 for no line.
// Each path gets unmatchedBurst lines at once, then one a second
// (unmatchedEvery), as refusals past max_inflight do: each line names the
// request's fields, which the client picks, and a flood of made-up
// requests must not become a flood of log lines. The metrics and the
// traffic counters count every request. Paths are the config's routes,
// so the map holds one entry per route a config ever had.
func (p *Proxy) unmatchedLine(path string) int64 { return p.logLine(path, OutcomeUnmatched) }

// logLine is unmatchedLine for any outcome an unverified request can
// cause (unmatched, and the refusals of unverifiedRefusal): one budget per
// route path and outcome, both from the config, so the map stays bounded.
func (p *Proxy) logLine(path, outcome string) int64 {
	k := lineKey{path, outcome}
	v, ok := p.unmatchedLog.Load(k)
	if !ok {
		v, _ = p.unmatchedLog.LoadOrStore(k, &lineBudget{})
	}
	return v.(*lineBudget).take(time.Now())
}

type lineKey struct{ path, outcome string }

// unverifiedRefusal are the refusals anyone who reaches the port can cause
// without a secret: their log lines are budgeted like unmatched ones, so a
// flood of forged requests is counted in full but logged at a bounded
// rate.
var unverifiedRefusal = map[string]bool{
	OutcomeRejectedSignature: true, OutcomeMissingKey: true, OutcomeBadRequest: true, OutcomeTooLarge: true,
}

// Log lines of unmatched requests per path: unmatchedBurst at once, then
// one per unmatchedEvery.
const (
	unmatchedBurst = 10
	unmatchedEvery = time.Second
)

// lineBudget is a token bucket of log lines (unmatchedLine).
type lineBudget struct {
	mu      sync.Mutex
	used    float64   // lines taken of the burst, at last
	last    time.Time // when used was last brought up to date
	pending int64     // requests not logged since the last line
}

func (b *lineBudget) take(now time.Time) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.used = max(0, b.used-float64(now.Sub(b.last))/float64(unmatchedEvery))
	}
	b.last = now
	b.pending++
	if b.used+1 > unmatchedBurst {
		return 0
	}
	b.used++
	n := b.pending
	b.pending = 0
	return n
}
